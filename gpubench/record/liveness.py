"""Whether the process that writes a run directory still runs. A watch's manifest, written as it starts, names the
process that watches (its pid, its machine, and when it started on the kernel's clock, so that a pid used again
by another process is not taken for it) and the watch's start on the monotonic clock: a report of a run whose
manifest still says running can then say whether its watch still runs or was killed."""

from __future__ import annotations

import os
import socket
from pathlib import Path

PROC = Path("/proc")


def started(pid: int, proc: Path = PROC) -> int | None:
    """When the process began, in clock ticks after boot (/proc/PID/stat's 22nd field); None where no such
    process is, or no /proc to ask."""
    try:
        text = (proc / str(pid) / "stat").read_text()
        return int(text[text.rindex(")") + 2 :].split()[19])
    except (OSError, ValueError, IndexError):
        return None


def watcher_facts(t_start: float | None = None, marks: str | None = None) -> dict:
    """For the manifest: who watches, from when, and the marks file (a name in the run directory, or a path)."""
    return {
        "pid": os.getpid(),
        "host": socket.gethostname(),
        "started": started(os.getpid()),
        "t_start": t_start,
        "marks": marks,
    }


def still_running(manifest: dict, proc: Path = PROC) -> bool | None:
    """True where the watch of this manifest still runs (on this machine), False where it is gone, None where
    that cannot be told: another machine, no /proc, a manifest that does not say, or a watch that finished."""
    facts = manifest.get("watcher")
    if manifest.get("status") != "running" or not isinstance(facts, dict):
        return None
    pid, host, began = facts.get("pid"), facts.get("host"), facts.get("started")
    if not _whole(pid) or pid <= 0 or host != socket.gethostname() or not (proc / "self" / "stat").exists():
        return None
    now = started(pid, proc)
    return now is not None and (not _whole(began) or now == began)


def _whole(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)
