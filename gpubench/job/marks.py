"""Phases and steps from the user's own code: `gpubench.mark("eval")`, `gpubench.step(flops=...)`.

Outside a watch both return at once (a global test, well under a microsecond). Under `gpubench watch`
the environment variable GPUBENCH_MARKS names a file, and each call appends one short line to it:

    <time.monotonic()>\t<rank>\t<pid>\tmark\t<phase name>
    <time.monotonic()>\t<rank>\t<pid>\tstep\t<flops or empty>

Linux's monotonic clock is one clock for every process of the machine, so lines from the child, its
workers and every rank of a `torchrun` job share the recorder's time axis. Each line is written with a
single write() on a file opened with O_APPEND, which the kernel appends whole: lines from several
processes never tear or overwrite each other. The rank is torchrun's RANK (0 where it is not set).
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass

ENV = "GPUBENCH_MARKS"

_path: str | None = os.environ.get(ENV) or None
_fd: int | None = None
_fd_pid = 0
_rank = 0


def mark(name: str) -> None:
    """Start the phase `name` (e.g. "train", "eval"); it lasts until the next mark."""
    if _path is None:
        return
    _write("mark", " ".join(str(name).split()) or "?")


def step(flops: float | None = None) -> None:
    """One step done, and the FLOPs it did where known (see gpubench.count_flops)."""
    if _path is None:
        return
    _write("step", "" if flops is None else repr(float(flops)))


def _write(kind: str, value: str) -> None:
    global _fd, _fd_pid, _rank
    if _fd is None or _fd_pid != os.getpid():  # a forked worker opens its own
        _fd = os.open(_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o644)
        _fd_pid = os.getpid()
        _rank = _env_rank()
    os.write(_fd, f"{time.monotonic():.6f}\t{_rank}\t{_fd_pid}\t{kind}\t{value}\n".encode())


def _env_rank() -> int:
    try:
        return int(os.environ.get("RANK", "0"))
    except ValueError:
        return 0


def target(path: str | os.PathLike | None) -> str | None:
    """Send this process's marks to `path` (None: nowhere); returns the previous target.

    For the in-process recording; a watched command finds its file in GPUBENCH_MARKS instead.
    """
    global _path, _fd
    previous = _path
    if _fd is not None and _fd_pid == os.getpid():
        os.close(_fd)
    _fd = None
    _path = os.fspath(path) if path is not None else None
    return previous


# --- reading ---------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Event:
    t: float  # time.monotonic() of the process that wrote it
    rank: int
    pid: int
    kind: str  # "mark" or "step"
    value: str  # the phase name, or the step's FLOPs ("" where not given)

    @property
    def flops(self) -> float | None:
        return float(self.value) if self.kind == "step" and self.value else None


def parse(line: str) -> Event | None:
    """One line of a marks file; None for a line that is not one (it is skipped, never fatal)."""
    parts = line.rstrip("\n").split("\t")
    if len(parts) != 5 or parts[3] not in ("mark", "step"):
        return None
    try:
        event = Event(float(parts[0]), int(parts[1]), int(parts[2]), parts[3], parts[4])
        event.flops  # noqa: B018 -- a step whose FLOPs are not a number is not a line of ours
    except ValueError:
        return None
    return event


class Reader:
    """Reads a marks file as it grows: each poll() returns the events of the lines completed since."""

    def __init__(self, path: str | os.PathLike):
        self.path = path
        self.offset = 0
        self._partial = b""

    def poll(self) -> list[Event]:
        try:
            with open(self.path, "rb") as f:
                f.seek(self.offset)
                data = f.read()
        except FileNotFoundError:
            return []
        self.offset += len(data)
        lines = (self._partial + data).split(b"\n")
        self._partial = lines.pop()  # an unfinished last line waits for its end
        return [e for e in (parse(raw.decode(errors="replace")) for raw in lines) if e is not None]


def read_all(path: str | os.PathLike) -> list[Event]:
    return Reader(path).poll()
