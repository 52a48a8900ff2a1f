"""Bad input, said once: UsageError carries one sentence for the user (exit 2); an interruption, said once:
SIGTERM raised as Ctrl-C is (Terminated) and the exit code of each; the number parsers the command line and
the pytest plugin share; words from outside (a path, a phase name, a command) made visible as text."""

from __future__ import annotations

import argparse
import math
import signal
import sys
import threading
from contextlib import contextmanager

from gpubench.inside.text import visible  # noqa: F401 -- shared with the code inside the job


class UsageError(Exception):
    """Bad input: one sentence for the user, exit code 2."""


def say_error(command: str, err) -> None:
    print(f"gpubench {command}: error: {visible(err)}", file=sys.stderr)


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised where Ctrl-C raises KeyboardInterrupt, so that the same cleanup runs for both."""


def interrupted_code(err: KeyboardInterrupt) -> int:
    """128 + the signal's number, as a shell reports a process that signal ended: 143 for SIGTERM, so that
    whoever sent it (a scheduler, `timeout`) sees its own signal, and 130 for Ctrl-C."""
    return 128 + (signal.SIGTERM if isinstance(err, Terminated) else signal.SIGINT)


def interruption(err: KeyboardInterrupt) -> str:
    return "SIGTERM" if isinstance(err, Terminated) else "Ctrl-C"


def _terminate(signum, frame):
    raise Terminated


@contextmanager
def sigterm_interrupts():
    """Inside the block SIGTERM raises Terminated in the main thread (elsewhere nothing changes); the
    handler before it comes back after."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGTERM, _terminate)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def number(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"must be a finite number, got {text}")
    return value


def positive(text: str) -> float:
    value = number(text)
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be greater than 0, got {text}")
    return value


def non_negative(text: str) -> float:
    value = number(text)
    if not value >= 0:
        raise argparse.ArgumentTypeError(f"must be 0 or more, got {text}")
    return value
