"""A pytest-benchmark timer that reads GPU time from CUDA events instead of the host's clock.

pytest-benchmark calls its timer right before and right after each round (in pedantic mode: one round
= `iterations` calls of the target, and it divides by `iterations`). The first call records a start
event on the current stream; the second records an end event, waits for it (the round's only
synchronize) and advances this clock by the GPU time between the two events. So the statistics are
per-call GPU time of kernels launched back to back. Each round also includes the latency of its
first launch (a few microseconds); rounds are sized to tens of milliseconds to keep that below 0.1%.

A round whose target raised never makes its second call: reset() before each benchmark drops that
stale start, and a round of zero or negative GPU time is an error, never a result.
"""

from __future__ import annotations


class ClockError(RuntimeError):
    pass


class CudaEventClock:
    __name__ = "cuda_event_clock"  # how pytest-benchmark names the timer in its JSON

    def __init__(self):
        self.total_s = 0.0
        self._start = None

    def reset(self) -> None:
        self._start = None

    def __call__(self) -> float:
        import torch

        event = torch.cuda.Event(enable_timing=True)
        event.record()
        if self._start is None:
            self._start = event
            return self.total_s
        event.synchronize()
        elapsed_s = self._start.elapsed_time(event) / 1e3
        self._start = None
        if not elapsed_s > 0:
            raise ClockError(f"a round measured {elapsed_s * 1e3:.4g} ms of GPU time: no round takes none")
        self.total_s += elapsed_s
        return self.total_s


CLOCK = CudaEventClock()  # one clock for every benchmark: pytest-benchmark keys timer precision by timer
