"""The hidden stage folder that plot and report write everything into before any file moves into place.

Its name carries the process that owns it (.gpubench-<pid>-XXXXXXXX): a stage whose process is gone (kill
-9, a lost machine) is debris and is removed before the next write, while one that a live gpubench
writes in is left to it. Stages made before names carried a pid (.gpubench-XXXXXXXX) are debris too: they
lived for the seconds a plot takes. SIGINT and SIGTERM wait while the files move into place, so an
interruption finds either the old files or the new ones.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import tempfile
import threading
from contextlib import contextmanager
from pathlib import Path

PREFIX = ".gpubench-"
STAGE = re.compile(r"\.gpubench-(?:(\d+)-)?[a-z0-9_]{8}")  # tempfile.mkdtemp's eight characters
HELD = {signal.SIGINT, signal.SIGTERM}


def alive(pid: int) -> bool:
    if pid <= 0 or pid == os.getpid():  # 0 would ask after this process's group; this process writes one at a time
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        return True
    except OverflowError:
        return False
    return True


def clear_debris(folder: Path) -> int | None:
    """Remove the stages in folder whose process is gone; the pid of a live one, where one is left."""
    try:
        entries = list(Path(folder).iterdir())
    except OSError:  # no such folder, or not one: nothing of ours in it
        return None
    busy = None
    for entry in entries:
        match = STAGE.fullmatch(entry.name)
        if not match or entry.is_symlink() or not entry.is_dir():
            continue
        pid = int(match.group(1)) if match.group(1) else None
        if pid is not None and alive(pid):
            busy = pid
        else:
            shutil.rmtree(entry, ignore_errors=True)
    return busy


@contextmanager
def staging(out: Path):
    """A new stage folder inside out (made, with its parents, where missing). On any exception, the stage is
    removed, and so is out where it was made here; the stage is removed in every case."""
    out = Path(out)
    made = not out.exists()
    stage = None
    try:
        out.mkdir(parents=True, exist_ok=True)
        stage = Path(tempfile.mkdtemp(prefix=f"{PREFIX}{os.getpid()}-", dir=out))
        yield stage
    except BaseException:
        if made:
            shutil.rmtree(out, ignore_errors=True)
        raise
    finally:
        if stage is not None:
            shutil.rmtree(stage, ignore_errors=True)


def commit(stage: Path, out: Path, names: list[str]) -> list[Path]:
    """Move each of names (paths relative to stage) to the same place under out. A SIGINT or SIGTERM that
    comes meanwhile waits until every file has moved, then reaches the handler it would have reached."""
    pending: list[int] = []
    held = {}
    if threading.current_thread() is threading.main_thread():
        held = {
            s: signal.signal(s, lambda signum, frame: pending.append(signum))
            for s in HELD
            if signal.getsignal(s) is not None
        }
    try:
        moved = []
        for name in names:
            target = Path(out) / name
            target.parent.mkdir(parents=True, exist_ok=True)
            os.replace(Path(stage) / name, target)
            moved.append(target)
        return moved
    finally:
        for s, handler in held.items():
            signal.signal(s, handler)
        if pending:
            signal.raise_signal(pending[0])


def stale(folder: Path, known: set[str], kept: set[str]) -> list[Path]:
    """Remove from folder the files of known names (the figures gpubench writes) that are not in kept (the
    ones just written): another run's figures, from a report written there before, would otherwise sit
    beside this run's. Nothing of another name is touched, nor a link or a folder of a known name."""
    removed = []
    for name in sorted(known - kept):
        path = Path(folder) / name
        if path.is_file() and not path.is_symlink():
            path.unlink()
            removed.append(path)
    return removed
