"""A step's values as gpubench.step() takes them, and the steps of one interval gathered
(gpubench.inside.markwriter)."""

from __future__ import annotations

import math

from .text import visible


def number(value) -> tuple[float | None, bool]:
    """(value as a float, usable): None where not given; unusable where not a finite number of 0 or more
    (10**400 overflows a float; an object's __float__ may raise anything)."""
    if value is None:
        return None, True
    try:
        x = float(value)
    except Exception:  # noqa: BLE001 -- OverflowError, TypeError, ValueError, or the object's own
        return None, False
    return (x, True) if math.isfinite(x) and x >= 0 else (None, False)


class Bucket:
    """Steps gathered over one interval: how many, their first and last stamps, and their sums; `origin` is
    the line's letter (gpubench.inside.markline): S the job's step(), A and C its optimizer's steps."""

    __slots__ = ("n", "t_first", "t_last", "flops", "hw_flops", "bytes", "tokens", "counted", "bad", "lead_s", "origin")

    def __init__(self, t: float, origin: str = "S"):
        self.n, self.t_first, self.t_last, self.origin = 0, t, t, origin
        self.flops = self.hw_flops = self.bytes = self.tokens = self.lead_s = 0.0
        self.counted = self.bad = 0  # steps that gave usable FLOPs; steps whose values were not usable

    def add(self, t: float, flops, hw_flops, nbytes, tokens, bad: bool, lead_s: float, n: int = 1) -> None:
        """n steps ending at t, each with these values."""
        self.n += n
        self.t_last = t
        if flops is not None:
            self.counted += n
            self.flops += flops * n
            self.hw_flops += (hw_flops if hw_flops is not None else flops) * n
        self.bytes += (nbytes or 0.0) * n
        self.tokens += (tokens or 0.0) * n
        self.bad += bad * n
        self.lead_s += lead_s * n


def shown(value) -> str:
    """A value as a warning names it: short (10**400 has 401 digits), and never raising."""
    try:
        big = isinstance(value, int) and value.bit_length() > 100
        text = f"an integer of about {int(value.bit_length() * 0.30103) + 1} digits" if big else repr(value)
    except Exception:  # noqa: BLE001 -- a __repr__ that raises
        text = f"a value of type {type(value).__name__}"
    return visible(text if len(text) <= 80 else text[:77] + "...")
