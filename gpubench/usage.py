"""Bad input, said once: UsageError carries one sentence for the user (exit 2), and the number parsers the
command line and the pytest plugin share."""

from __future__ import annotations

import argparse
import math
import sys


class UsageError(Exception):
    """Bad input: one sentence for the user, exit code 2."""


def say_error(command: str, err) -> None:
    print(f"gpubench {command}: error: {err}", file=sys.stderr)


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
