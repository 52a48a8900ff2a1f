"""Who holds the GPU's performance counters, and the one sentence a source says when it is locked out.

The profiling counters serve one reader at a time, machine-wide: a DCGM host engine with its profiling
module, Nsight Compute or Systems, or another CUPTI reader each lock the others out (the driver takes
one lock for all GPUs). No API names the holder, so when a source is refused for that reason the
processes of the machine are searched for the usual holders, and the sentence names the one found
with what to do about it.
"""

from __future__ import annotations

import os
from pathlib import Path

from . import SourceUnavailable

# comm (the kernel's 15-character process name) -> (what it is, what to do while it holds the counters)
DCGM_TIP = (
    "pause its profiling with `dcgmi profile --pause` (and `dcgmi profile --resume` afterwards), "
    "or read the counters through it with --profiling dcgm"
)
KNOWN = {
    "nv-hostengine": ("the DCGM host engine", DCGM_TIP),
    "dcgm-exporter": ("dcgm-exporter's DCGM", DCGM_TIP),
    "ncu": ("Nsight Compute", "wait for it to finish, or stop it"),
    "nsys": ("Nsight Systems", "wait for it to finish, or stop it"),
    "dcgmproftester": ("dcgmproftester", "wait for it to finish, or stop it"),
}
SOMEONE = (
    "another reader (a DCGM host engine, Nsight Compute or Systems, or another CUPTI or GPM reader such "
    "as a second gpubench)"
)
SOMEONE_TIP = (
    "stop it; where a DCGM host engine runs, pause its profiling with `dcgmi profile --pause` or read "
    "through it with --profiling dcgm"
)
ADMIN_ONLY = (
    "the driver lets only administrators read the GPU's performance counters "
    "(NVreg_RestrictProfilingToAdminUsers=1): run as root, or have an administrator load the nvidia "
    "module with NVreg_RestrictProfilingToAdminUsers=0"
)


PROC = Path("/proc")  # tests point this at a fake process table


class CountersBusy(SourceUnavailable):
    """Another reader holds the GPU's performance counters; the message names it and what to do."""


def holders(proc: Path | None = None, me: int | None = None) -> list[tuple[int, str]]:
    """(pid, comm) of running processes known to hold the counters, and of other gpubench recordings."""
    proc = PROC if proc is None else proc
    me = os.getpid() if me is None else me
    found = []
    for d in proc.iterdir() if proc.is_dir() else ():
        if not d.name.isdigit() or int(d.name) == me:
            continue
        try:
            comm = (d / "comm").read_text().strip()
            argv = (d / "cmdline").read_bytes().split(b"\0")
        except OSError:  # gone meanwhile, or not ours to read
            continue
        words = [a.decode(errors="replace") for a in argv if a]
        if comm in KNOWN:
            found.append((int(d.name), comm))
        elif any(Path(w).name == "gpubench" for w in words) and ({"run", "watch"} & set(words)):
            found.append((int(d.name), "gpubench"))
    return sorted(found)


def busy_sentence(exclude: tuple[str, ...] = (), proc: Path | None = None) -> str:
    """What a source says when the counters are held: by whom, if a usual holder runs, and what to do.

    exclude: holders that cannot be the cause (DCGM's own processes, when DCGM is the one refused).
    """
    found = [(pid, comm) for pid, comm in holders(proc) if comm not in exclude]
    if not found:
        tip = "stop it, or wait for it to finish" if exclude else SOMEONE_TIP
        return f"the GPU's performance counters serve one reader at a time and {SOMEONE} holds them: {tip}"
    pid, comm = found[0]
    what, tip = KNOWN.get(comm, ("another gpubench recording", "wait for it to finish, or stop it"))
    others = f" (and {len(found) - 1} more)" if len(found) > 1 else ""
    return (
        f"the GPU's performance counters serve one reader at a time and {what} ({comm}, pid {pid}){others} "
        f"holds them: {tip}"
    )


def admin_only(params: Path = Path("/proc/driver/nvidia/params")) -> bool | None:
    """Whether the driver restricts the counters to administrators (RmProfilingAdminOnly); None if unknown."""
    try:
        for line in params.read_text().splitlines():
            if line.startswith("RmProfilingAdminOnly:"):
                return line.split(":", 1)[1].strip() == "1"
    except OSError:
        pass
    return None
