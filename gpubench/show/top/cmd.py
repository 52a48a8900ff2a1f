"""`gpubench top`'s modes: the live view on a terminal, one frame (--once, or no terminal), a frame per refresh
(--loop), or JSON (--json: a document per refresh, one with --once).

Every mode waits one interval before its first reading: GPM's values are differences between two samples,
and NVML's GPU-Util covers a window of up to a second, so a reading taken at once would say little.
"""

from __future__ import annotations

import json
import sys
import time

from gpubench.usage import Terminated, UsageError

from . import render


def cmd(
    interval_s: float = 1.0, once: bool = False, as_json: bool = False, sort: str = "index", loop: bool = False
) -> int:
    try:
        from gpubench.record import nvml

        from .sampling import Machine
    except ImportError as err:  # nvidia-ml-py itself missing: the install is broken, not the machine
        raise UsageError(f"NVML's Python bindings cannot be loaded ({err}): pip install nvidia-ml-py") from None
    machine = Machine()
    try:
        machine.open()
    except nvml.GpuUnavailable as err:
        raise UsageError(f"nothing to show: {err}") from None
    try:
        if not machine.devices:
            raise UsageError("nothing to show: NVML finds no GPU on this machine")
        if not (once or as_json or loop) and _tty(sys.stdin) and _tty(sys.stdout):
            return live(machine, interval_s, sort)
        return stream(machine, interval_s, sort, as_json, forever=not once and (as_json or loop))
    except KeyboardInterrupt as err:
        if isinstance(err, Terminated):  # SIGTERM: the exit code says who ended it
            raise
        return 0  # Ctrl-C is how a repeating view ends
    finally:
        machine.close()


def _tty(stream) -> bool:
    try:
        return stream is not None and stream.isatty()
    except (AttributeError, ValueError):  # replaced by something without a file, or closed
        return False


def _next(due: float, interval_s: float) -> float:
    """The refresh after `due`; one that came late (a slow NVML call) moves the next a full interval on."""
    now = time.monotonic()
    return due + interval_s if due + interval_s > now else now + interval_s


def stream(machine, interval_s: float, sort: str, as_json: bool, forever: bool) -> int:
    """Plain output, no screen control: a frame (a blank line between frames) or a JSON line per refresh.
    Notes go to standard error, each once, so standard output holds only frames or documents."""
    said = 0
    due = time.monotonic() + interval_s
    while True:
        time.sleep(max(0.0, due - time.monotonic()))
        readings = machine.read()
        for note in machine.notes[said:]:
            print(f"gpubench top: {note}", file=sys.stderr)
        said = len(machine.notes)
        if as_json:
            print(json.dumps(render.document(readings, machine.notes, sort, interval_s), ensure_ascii=False))
        else:
            print("\n".join(render.frame(readings, [], sort, interval_s)))
        sys.stdout.flush()
        if not forever:
            return 0
        if not as_json:
            print()
        due = _next(due, interval_s)


def live(machine, interval_s: float, sort: str) -> int:
    """The frame redrawn in place each refresh; a sort key redraws at once, from the last readings."""
    from .keys import RESIZED, Screen

    readings = None
    with Screen() as screen:
        screen.draw([f"gpubench top: reading every GPU for {interval_s:g} s before the first frame (q quits)"])
        due = time.monotonic() + interval_s
        while True:
            key = screen.key(due - time.monotonic())
            if key is None:
                readings = machine.read()
                due = _next(due, interval_s)
            elif key in ("q", "Q"):
                return 0
            elif key.lower() in render.BY_KEY:
                sort = render.BY_KEY[key.lower()]
            elif key != RESIZED:
                continue
            if readings is not None:
                width, height = screen.size()
                screen.draw(
                    render.frame(readings, machine.notes, sort, interval_s, keys=True, width=width, height=height)
                )
