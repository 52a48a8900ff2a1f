"""A pytest-benchmark timer that reads GPU time from CUDA events instead of the host's clock.

pytest-benchmark calls its timer right before and right after each round (in pedantic mode: one round
= `iterations` calls of the target, and it divides by `iterations`). The first call records a start
event on the current stream; the second records an end event, waits for it (the round's only
synchronize) and advances this clock by the GPU time between the two events. So the statistics are
per-call GPU time of kernels launched back to back.

A start event recorded on an idle GPU completes at once, and the GPU then waits for each launch: calls
shorter than their launch would be timed at the host's launch rate. So the fixture gives the clock a
`lead`, a blocking kernel it launches just before the start event, long enough for the host to queue the
whole round behind it; the GPU then runs the round's calls from a full queue. Where the round is one
replay of a CUDA graph of `calls` calls, the clock divides the round's GPU time by them, so the statistics
stay per call. After each round, `on_round` reads what the GPU's clocks were doing (outside the timed
events), and `rounds` keeps what it returned.

The lead covers the host only if the host keeps to it. The host clock is read before the lead is launched
and again after the end event is recorded: where more than the lead's length passed between them, the GPU
may have run out of queued work inside the timed events and waited for the host (a thread holding the GIL,
the OS), so `late` marks that round (gpubench.gate.rounds leaves such rounds out while they are few).

A round whose target raised never makes its second call: reset() before each benchmark drops that
stale start, and a round of zero or negative GPU time is an error, never a result.

The fixture runs its rounds itself, so that they stop once their interval is narrow enough (gate.effort), and
then hands them to pytest-benchmark's pedantic mode, which keeps its statistics and its JSON: replay() makes
the clock give back those rounds' times, one per pair of calls, while pedantic runs a target that does nothing.
"""

from __future__ import annotations

import time


class ClockError(RuntimeError):
    pass


class CudaEventClock:
    __name__ = "cuda_event_clock"  # how pytest-benchmark names the timer in its JSON

    def __init__(self):
        self.total_s = 0.0
        self._start = None
        self.lead = None  # called right before each start event (a blocking kernel), or None
        self.on_round = None  # called after each round's end event completed; what it returns goes to rounds
        self.calls = 1  # calls in one call of the target (a CUDA graph's replay runs many)
        self.rounds: list = []
        self.late: list[bool] = []  # per round: the host took longer than the lead to queue it
        self.lead_us = 0.0  # the lead's length; 0: no lead, no round is called late
        self.event = None  # makes a timing event; None: torch.cuda.Event (a seam for tests without a GPU)
        self.host_time = time.perf_counter  # the host's clock in seconds (a seam for tests)
        self._host_start = 0.0
        self._replay = None  # round times to give back instead of timing (replay())

    def reset(self) -> None:
        self._start = None
        self.rounds = []
        self.late = []

    def replay(self, durations) -> None:
        """Give back these round times (what the second call of each pair advances the clock by), timing
        nothing; None: time again."""
        self._replay = iter(list(durations)) if durations is not None else None
        self._start = None

    def attach(self, lead=None, on_round=None, calls: int = 1, lead_us: float = 0.0) -> None:
        """Set the hooks of the next benchmark and forget the last one's rounds."""
        if calls < 1:
            raise ValueError(f"a target runs one call or more, not {calls}")
        self.reset()
        self.lead, self.on_round, self.calls = lead, on_round, calls
        self.lead_us = lead_us if lead is not None else 0.0

    def detach(self) -> list:
        """Drop the hooks; what on_round returned for each round, warm-up rounds included."""
        self.lead = self.on_round = None
        self.calls = 1
        self.lead_us = 0.0
        return self.rounds

    def _event(self):
        if self.event is not None:
            return self.event()
        import torch

        return torch.cuda.Event(enable_timing=True)

    def __call__(self) -> float:
        if self._replay is not None:
            if self._start is None:
                self._start = "replayed"
                return self.total_s
            self._start = None
            self.total_s += next(self._replay)
            return self.total_s
        if self._start is None:
            self._host_start = self.host_time()
            if self.lead is not None:
                self.lead()
        event = self._event()
        event.record()
        if self._start is None:
            self._start = event
            return self.total_s
        host_us = (self.host_time() - self._host_start) * 1e6
        event.synchronize()
        elapsed_s = self._start.elapsed_time(event) / 1e3 / self.calls
        self._start = None
        if not elapsed_s > 0:
            raise ClockError(f"a round measured {elapsed_s * 1e3:.4g} ms of GPU time: no round takes none")
        self.total_s += elapsed_s
        self.late.append(bool(self.lead_us) and host_us > self.lead_us)
        if self.on_round is not None:
            self.rounds.append(self.on_round())
        return self.total_s


CLOCK = CudaEventClock()  # one clock for every benchmark: pytest-benchmark keys timer precision by timer
