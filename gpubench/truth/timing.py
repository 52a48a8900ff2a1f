"""GPU time with CUDA events: the kernels' own time, never the host's launch time.

Calls are launched back to back with a pair of events around each group of `calls_per_timing`
calls. The host waits only on the oldest group still in flight, so the GPU's queue never drains
while it measures, and there is no synchronize after every call.

Comparing implementations: a GPU at its power limit lowers its clock within a tenth of a second
(measured on an H100 and an H200: a bf16 GEMM runs at ~790 TFLOP/s for 0.1 s, then ~660-700), so
whichever is timed first catches a higher clock. `interleaved` settles the clock first, then times
the implementations in turns (ABC, CBA, ...) and compares them window by window.
"""

from __future__ import annotations

import statistics
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Callable

from gpubench.stats import quantile

# the summary columns made here that their names do not tell (gpubench.record.columns.DECLARERS names this)
SUMMARY_COLUMNS = {"n_timings": "int", "n_calls": "int", "timed_s": "float"}

IN_FLIGHT = 4  # groups queued ahead of the one the host waits on
GROUP_MS = 20.0  # GPU time per timed group: long enough that one launch latency is noise
WARMUP_CALLS = 3


@dataclass
class Timings:
    """Per-call GPU milliseconds, one value per timed group; where stamped, when each group ran on the GPU, in
    time.monotonic() seconds (spans: [(start, end)], one a group)."""

    per_call_ms: list[float]
    calls: int
    spans: list[tuple[float, float]] = field(default_factory=list)

    def within(self, t_start: float, t_end: float) -> "Timings":
        """The groups that ran wholly inside [t_start, t_end]: the time a summary's window covers, so that a
        kernel's rate and the counters beside it come from the same seconds (the first half second of a
        phase runs at a higher clock than the rest)."""
        keep = [i for i, (a, b) in enumerate(self.spans) if t_start <= a and b <= t_end]
        calls = self.calls // max(1, len(self.per_call_ms))
        return Timings([self.per_call_ms[i] for i in keep], calls * len(keep), [self.spans[i] for i in keep])

    @property
    def timed_s(self) -> float:
        """The GPU seconds of every timed call together."""
        return sum(self.per_call_ms) * (self.calls // max(1, len(self.per_call_ms))) / 1e3

    @property
    def median_ms(self) -> float:
        return statistics.median(self.per_call_ms)

    @property
    def p10_ms(self) -> float:
        return quantile(self.per_call_ms, 0.10)

    @property
    def p90_ms(self) -> float:
        return quantile(self.per_call_ms, 0.90)


def time_loop(
    run: Callable[[], object],
    calls_per_timing: int = 1,
    duration_s: float | None = None,
    groups: int | None = None,
    stamped: bool = False,
) -> Timings:
    """Run `run` in groups until duration_s has passed (or `groups` groups are done). stamped: say when
    each group ran, on the host's monotonic clock: an event recorded once the GPU is idle marks a known
    time, and each group's events are placed by their GPU time from it."""
    import torch

    if duration_s is None and groups is None:
        raise ValueError("give a duration or a number of groups")
    pending: deque = deque()
    per_call: list[float] = []
    spans: list[tuple[float, float]] = []
    done = 0
    ref, t_ref = None, 0.0
    if stamped:
        torch.cuda.synchronize()
        ref = torch.cuda.Event(enable_timing=True)
        ref.record()
        ref.synchronize()
        t_ref = time.monotonic()  # the GPU reached ref a few microseconds before: idle, it runs at once
    deadline = time.monotonic() + duration_s if duration_s is not None else None

    def collect():
        start, end = pending.popleft()
        end.synchronize()
        per_call.append(start.elapsed_time(end) / calls_per_timing)
        if ref is not None:
            spans.append((t_ref + ref.elapsed_time(start) / 1e3, t_ref + ref.elapsed_time(end) / 1e3))

    while True:
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
    return Timings(per_call, done * calls_per_timing, spans)


def calls_for(call_ms: float, target_ms: float = GROUP_MS) -> int:
    """How many calls make one timed group of about target_ms (at least one)."""
    return max(1, int(target_ms / max(call_ms, 1e-6)))


def warm_up(run: Callable[[], object]) -> float:
    """Compile, autotune and allocate outside any measured window; return one call's GPU time in ms.

    The one warm-up recipe of the scenario loop, the bench script and the benchmarks.
    """
    import torch

    for _ in range(WARMUP_CALLS):
        run()
    torch.cuda.synchronize()
    return time_loop(run, calls_per_timing=3, groups=2).median_ms


@dataclass
class Comparison:
    """Window medians of each implementation, taken in turns: window k of every implementation ran
    within the same second, so their ratio is free of the clock's drift."""

    window_ms: dict[str, list[float]]

    def median_ms(self, name: str) -> float:
        return statistics.median(self.window_ms[name])

    def ratios(self, name: str, reference: str) -> list[float]:
        """reference time / name's time, window by window: above 1 means `name` is faster."""
        return [r / n for n, r in zip(self.window_ms[name], self.window_ms[reference])]

    def speed(self, name: str, reference: str) -> tuple[float, float, float]:
        """Median, p10 and p90 of the paired ratios."""
        r = self.ratios(name, reference)
        return statistics.median(r), quantile(r, 0.1), quantile(r, 0.9)


def interleaved(
    fns: dict[str, Callable[[], object]],
    rounds: int = 8,
    window_s: float = 0.15,
    settle_s: float = 1.0,
    group_ms: float = 10.0,
) -> Comparison:
    """Time each implementation in turns after settling the GPU at its sustained clock."""
    calls = {name: calls_for(warm_up(fn), group_ms) for name, fn in fns.items()}
    deadline = time.monotonic() + settle_s
    while time.monotonic() < deadline:
        for name, fn in fns.items():
            time_loop(fn, calls_per_timing=calls[name], groups=1)
    med: dict[str, list[float]] = {name: [] for name in fns}
    order = list(fns)
    for r in range(rounds):
        for name in order if r % 2 == 0 else order[::-1]:
            med[name].append(time_loop(fns[name], calls_per_timing=calls[name], duration_s=window_s).median_ms)
    return Comparison(med)
