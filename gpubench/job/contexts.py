"""Which GPUs the watched command uses: NVML's list of compute processes on each sampled GPU, matched to the
command's process tree, polled while it runs (a process that exits takes its context with it).

A GPU on which no process of the command held a context, and to which no step was credited, did no work
of the job: the summary lists it as idle instead of giving it the job's numbers. Inside a container whose
PID namespace differs from the driver's, NVML's PIDs match no process here: then only the steps' GPU UUIDs
tell, and the manifest says so.
"""

from __future__ import annotations

import threading
from pathlib import Path

from gpubench.job.blind import inspect
from gpubench.record import nvml

EVERY_S = 1.0


def stats(proc: Path = Path("/proc")):
    """(pid, the fields of /proc/<pid>/stat after the command's closing parenthesis) of every process now;
    a process gone meanwhile is passed over."""
    for entry in proc.iterdir() if proc.is_dir() else ():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue  # gone meanwhile
        yield int(entry.name), stat[stat.rfind(")") + 2 :].split()


def parents(proc: Path = Path("/proc")) -> dict[int, int]:
    """Every process's parent (the second field after the command)."""
    return {pid: int(f[1]) for pid, f in stats(proc) if len(f) > 1 and f[1].isdigit()}


def tree(root: int, parent_of: dict[int, int]) -> set[int]:
    """root and every process below it."""
    children: dict[int, list[int]] = {}
    for pid, ppid in parent_of.items():
        children.setdefault(ppid, []).append(pid)
    found, todo = {root}, [root]
    while todo:
        for child in children.get(todo.pop(), ()):
            if child not in found:
                found.add(child)
                todo.append(child)
    return found


class Contexts(threading.Thread):
    """Polls, every EVERY_S, which sampled GPUs hold a context of a process under the process `root`."""

    def __init__(
        self, gpus: list, root: int, every_s: float = EVERY_S, compute_processes=None, proc: Path = Path("/proc")
    ):
        super().__init__(name="gpubench-contexts", daemon=True)
        self.gpus, self.root, self.every_s = gpus, root, every_s
        self.compute_processes, self.proc = compute_processes or nvml.compute_processes, proc
        self.used: dict[int, set[int]] = {}  # NVML index -> pids of the command seen on it
        self.foreign: dict[int, set[int]] = {}  # NVML index -> other processes seen on it
        self.seen: dict[int, dict] = {}  # pid of the command's -> its command line and hook variables (blind)
        self.polls = 0
        self._stop_event = threading.Event()

    def run(self) -> None:
        while True:
            self.poll()
            if self._stop_event.wait(self.every_s):
                return

    def poll(self) -> None:
        mine = tree(self.root, parents(self.proc))
        for gpu in self.gpus:
            try:
                pids = set(self.compute_processes(gpu.nvml_index))
            except Exception:  # noqa: BLE001 -- a read that fails tells nothing; the next may
                continue
            if pids & mine:
                self.used.setdefault(gpu.nvml_index, set()).update(pids & mine)
                for pid in pids & mine - self.seen.keys():
                    if (facts := inspect(pid, self.proc)) is not None:
                        self.seen[pid] = facts
            if pids - mine:
                self.foreign.setdefault(gpu.nvml_index, set()).update(pids - mine)
        self.polls += 1

    def stop(self) -> None:
        self._stop_event.set()
        if self.is_alive():
            self.join(timeout=2 * self.every_s + 1)
        self.poll()

    def facts(self) -> dict:
        return {
            "polls": self.polls,
            "used": {str(g): sorted(p) for g, p in sorted(self.used.items())},
            "other_processes": {str(g): sorted(p) for g, p in sorted(self.foreign.items())},
        }
