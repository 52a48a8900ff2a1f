"""Phases and steps from the user's own code: `gpubench.mark("eval")`, `gpubench.step(flops=...)`.

Outside a watch both return at once (a global test, well under a microsecond). Under `gpubench watch`
the environment variable GPUBENCH_MARKS names a file, and this process appends to it: each mark as it
comes, and its steps gathered into intervals (gpubench.inside.markline says the lines), so a loop that
steps a thousand times a second writes about one line a second, not a thousand.

Steps are stamped on the GPU's timeline where this process runs CUDA through torch: step() records a
CUDA event on the current stream (nothing waits in the caller's thread) and a thread of this process
stamps time.monotonic() when the GPU reaches it (gpubench.inside.stamps). Elsewhere the host's clock stamps
them, and the lines say which. Linux's monotonic clock is one clock for every process of the machine,
so every process of a job shares the recorder's time axis. Lines are written with single write() calls
on a file opened with O_APPEND, which the kernel appends whole.

Whatever happens here stays here: a marks file that cannot be written, a FLOP count that is not a
number (10**400, an object whose float() raises), a CUDA call that fails: each is said once on stderr and
the job goes on. A bad value spoils that value alone: the step is recorded without it, and every later
step and mark is recorded as if it had not come. Only a marks file that cannot be opened turns marks off.
"""

from __future__ import annotations

import os
import sys
import threading

from . import MARKS
from .linewriter import _Writer
from .text import visible

ENV = MARKS
NAME_MAX = 200  # characters of a phase name: longer names are cut (a name is a label, not a payload)

_path: str | None = os.environ.get(ENV) or None
own_steps = False  # this process called step() itself: the optimizer's steps are not counted (gpubench.inside.autohook)
_state: "_Writer | None" = None
_lock = threading.Lock()


def mark(name) -> None:
    """Start the phase `name` (e.g. "train", "eval"); it lasts until the next mark."""
    if _path is None:
        return
    try:
        _writer().mark(clean_name(name))
    except Exception as err:  # noqa: BLE001 -- the job comes first: never raise into it
        _give_up(err)


def step(flops=None, bytes=None, tokens=None) -> None:  # noqa: A002 -- the name users read
    """One step done: the FLOPs it did (see gpubench.count_flops), the bytes it moved through device
    memory (for MBU: a decode step reads the weights once, its KV cache, and writes what it adds) and the
    tokens it processed (for tokens/s), where known."""
    global own_steps
    if _path is None:
        return
    own_steps = True
    try:
        _writer().step(flops, bytes, tokens)
    except Exception as err:  # noqa: BLE001
        _give_up(err)


def clean_name(name) -> str:
    """A phase name as it is recorded: one line of at most NAME_MAX characters, never empty, every control
    character written out as an escape (a NUL or an ESC in a name would reach a terminal or a report)."""
    try:
        text = name if isinstance(name, str) else str(name)
    except Exception:  # noqa: BLE001 -- a __str__ that raises: the mark still starts a phase
        text = "?"
    return visible(" ".join(text[: 4 * NAME_MAX].split()))[:NAME_MAX] or "?"


def target(path) -> str | None:
    """Send this process's marks to `path` (None: nowhere); returns the previous target. For the
    in-process recording; a watched command finds its file in GPUBENCH_MARKS instead."""
    global _path, _state
    previous = _path
    with _lock:
        if _state is not None:
            _state.close()
        _state = None
        _path = os.fspath(path) if path is not None else None
    return previous


def flush() -> None:
    """Write what this process has gathered so far (at exit this happens by itself)."""
    with _lock:
        if _state is not None:
            _state.flush()


def _writer() -> _Writer:
    global _state
    with _lock:
        if _state is None or _state.pid != os.getpid():  # a forked worker starts its own
            path = _path
            try:
                _state = _Writer(path)
            except OSError as err:
                _disable(
                    f"the marks file {path} cannot be written ({err.strerror or err}); this process "
                    "goes on without marks"
                )
                raise _Off from None
            _at_end(_state)
        return _state


class _Off(Exception):
    """Marks are off in this process; already said."""


def _at_end(state: _Writer) -> None:
    """Write state's last steps when its process ends: at exit, and where the process is multiprocessing's
    (a Pool's worker leaves through os._exit, which runs multiprocessing's finalizers and no atexit)."""
    import atexit

    atexit.register(_at_exit, state)
    mp = sys.modules.get("multiprocessing.util")
    if mp is not None:
        try:
            mp.Finalize(None, _at_exit, args=(state,), exitpriority=0)
        except Exception:  # noqa: BLE001 -- another multiprocessing: atexit alone
            pass


def _at_exit(state: _Writer) -> None:
    if state.pid != os.getpid():
        return  # a forked child's exit: its parent's steps are the parent's to write
    try:
        state.close()
    except Exception:  # noqa: BLE001 -- at exit nothing may be raised into the job
        pass


def _forked() -> None:
    """In a forked child: a writer of its own from its first step (the parent's open bucket stays the
    parent's), and locks that no thread of the parent may hold (only the forking thread is copied)."""
    global _state, _lock
    _state, _lock = None, threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forked)


def _disable(message: str) -> None:
    global _path
    _path = None
    print(f"gpubench: {message}", file=sys.stderr)


def _give_up(err: Exception) -> None:
    """Anything unexpected loses that one call, said once for each kind of error; the job never sees it, and
    the next mark or step is recorded as usual."""
    if isinstance(err, _Off):
        return
    kind = type(err).__name__
    if kind not in _said:
        _said.add(kind)
        try:
            why = str(err)
        except Exception:  # noqa: BLE001
            why = "?"
        print(
            f"gpubench: a mark or step was lost to an error ({kind}: {visible(why)[:200]}); the job goes on, and "
            "so do its marks",
            file=sys.stderr,
        )


_said: set[str] = set()
