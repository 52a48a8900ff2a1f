"""GPU time with CUDA events: the kernels' own time, never the host's launch time.

Calls are launched back to back with a pair of events around each group of `calls_per_timing`
calls. The host waits only on the oldest group still in flight, so the GPU's queue never drains
while it measures, and there is no synchronize after every call.
"""

from __future__ import annotations

import statistics
import time
from collections import deque
from dataclasses import dataclass
from typing import Callable

import torch

IN_FLIGHT = 4  # groups queued ahead of the one the host waits on


def quantile(values: list[float], q: float) -> float:
    """Linear-interpolated quantile (q in [0, 1]) of a non-empty list."""
    data = sorted(values)
    pos = q * (len(data) - 1)
    lo = int(pos)
    hi = min(lo + 1, len(data) - 1)
    return data[lo] + (data[hi] - data[lo]) * (pos - lo)


@dataclass
class Timings:
    """Per-call GPU milliseconds, one value per timed group."""

    per_call_ms: list[float]
    calls: int

    @property
    def median_ms(self) -> float:
        return statistics.median(self.per_call_ms)

    @property
    def p10_ms(self) -> float:
        return quantile(self.per_call_ms, 0.10)

    @property
    def p90_ms(self) -> float:
        return quantile(self.per_call_ms, 0.90)


def time_loop(run: Callable[[], None], calls_per_timing: int = 1, duration_s: float | None = None,
              groups: int | None = None, should_stop: Callable[[], bool] = lambda: False) -> Timings:
    """Run `run` in groups until duration_s has passed (or `groups` groups are done)."""
    if duration_s is None and groups is None:
        raise ValueError("give a duration or a number of groups")
    pending: deque = deque()
    per_call: list[float] = []
    done = 0
    deadline = time.monotonic() + duration_s if duration_s is not None else None

    def collect():
        start, end = pending.popleft()
        end.synchronize()
        per_call.append(start.elapsed_time(end) / calls_per_timing)

    while not should_stop():
        if deadline is not None and time.monotonic() >= deadline:
            break
        if groups is not None and done >= groups:
            break
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(calls_per_timing):
            run()
        end.record()
        pending.append((start, end))
        done += 1
        if len(pending) > IN_FLIGHT:
            collect()
    while pending:
        collect()
    return Timings(per_call, done * calls_per_timing)


def calls_for(call_ms: float, target_ms: float = 20.0) -> int:
    """How many calls make one timed group of about target_ms (at least one)."""
    return max(1, int(target_ms / max(call_ms, 1e-6)))
