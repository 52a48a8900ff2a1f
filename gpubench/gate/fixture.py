"""What the gpu_benchmark fixture does with a call: warm it up, decide on the L2 flush and how the calls are
launched, settle the GPU's clocks, time it in GPU time until its interval is narrow enough, hand the rounds to
pytest-benchmark's pedantic mode, and record beside them what the GPU did, round by round, and its counters.

A call whose working set fits in L2 finds its data there when it runs again at once, so back-to-back
calls would time the cache, not the memory a real workload reads. With the flush, each round is one call
after a write of at least twice the L2 size, outside the timed events. Without the flush (a working set larger
than L2, or --gpu-no-flush-l2) a round is about 20 ms of calls back to back, at most QUEUE_CALLS of them.

Every round starts behind a blocking kernel (the clock's lead) that lasts twice the time the host takes to
launch the round's calls, and LEAD_MARGIN_US more for the host's hiccups: the GPU reaches the start event
only once the round is queued, so a launch gap is never timed (without it, a flushed 1 ms spin read up to
6% long in the rounds where the host was late). A call shorter than 50 us of GPU time is timed from a CUDA
graph instead, each round one replay (gpubench.gate.graph says when and why); extra_info says which, and
why a call that short could not be captured; graph=False asks for the host's launches, graph=True insists
on the graph.

Before the rounds the GPU runs the call back to back: SETTLE_MIN_S, and on to --gpu-settle (1 s) where a
limit that sways the clock holds by then. A GPU at its power limit lowers its clock within a second of heavy
work, and rounds timed from idle would catch the higher clock first and the lower one later; a call that
leaves the GPU below its limits runs at the clock it boosted to, and a tenth of a second settles it (the gate
set's runs on an H100 and an H200 settled every call so). A GPU still held by a limit after settling, or in
its rounds, keeps swaying its clock (an H100 GEMM: 1230 to 1590 MHz and back within a second), so its rounds
run SWAY_FACTOR times longer, at least and at most. After each round the device reads the SM clock and
NVML's clock-event reasons, so a verdict can say when a baseline and a run ran at other clocks.

The rounds stop once the median's and the quartiles' intervals are within their target (gate.effort: a
quarter of the floor the run is held against), after at least --gpu-min-time (0.1 s) and at most
--gpu-max-time (1 s) of rounds.

The counters (gate.counters) come from a window of calls back to back after the rounds, COUNTER_WINDOW_S
long (flushed rounds would describe the flush), in every run but those that measure a floor, and in a run
against a baseline only where its verdict may not be `same`.

Python's garbage collector is off during the rounds (collected once before them): a collection inside a
round holds the host for milliseconds, longer than any lead. The clock marks the rounds the host was late for
anyway (extra_info's rounds_host_late); the verdict leaves them out (gpubench.gate.rounds).

Nothing here imports torch or NVML: the device (gpubench.gate.device, or a fake in tests) does the GPU work.
"""

from __future__ import annotations

import gc
from functools import partial

from gpubench.gate import counters, effort
from gpubench.gate.clock import CLOCK
from gpubench.gate.counters import SWAYING
from gpubench.gate.facts import round_facts, work_facts
from gpubench.gate.graph import graph_or_not
from gpubench.gate.judgement import LEAST_FLOOR_PCT
from gpubench.gate.plan import (  # noqa: F401 - the plan's pieces, as gate.fixture has long offered them
    FLUSH_MIN_BYTES,
    LEAD_MARGIN_US,
    MAX_FLUSHED_ROUNDS,
    MAX_LEAD_US,
    MIN_ROUNDS,
    QUEUE_CALLS,
    Plan,
    estimate_working_set,
    flush_bytes,
    lead_for,
    needs_flush,
    plan,
    round_start,
)
from gpubench.gate.rounds import timer_step
from gpubench.record.rundir import json_safe
from gpubench.truth import peaks

MIN_TIME_S = 0.1  # the least time of rounds (as the gate set's runs timed every call, and kept every promise)
MAX_TIME_S = 1.0  # the most, while the rounds' interval is wider than its target
SETTLE_S = 1.0  # the most settling, while a limit holds
SETTLE_MIN_S = 0.1
# calls back to back after the rounds for the counters: GPM's values trail their row by up to 0.2 s, so a row
# counts from 0.2 s into the window, and 0.6 s leaves three or four of its 0.1 s rows
COUNTER_WINDOW_S = 0.6
WARMUP_ROUNDS = 1
SWAY_FACTOR = 4  # rounds go on this many times longer while a limit sways the clock
TIMER = "CUDA events, GPU time per call"
UNITS = tuple(peaks.UNITS.values())  # the compute peaks of peaks.DATASHEET that MFU divides by
BACK_TO_BACK_WINDOW = "calls back to back after the timed rounds (L2 warm)"


def limits_swaying(mask: int | None, event_names) -> list[str]:
    """The clock-event reasons in mask that keep the clock swaying while they hold (a limit, not idleness)."""
    return [n for n in event_names(mask) if n in SWAYING] if mask is not None else []


def settle(dev, timed, call_ms: float, settle_s: float) -> tuple[float, str | None]:
    """Calls back to back before the rounds: SETTLE_MIN_S, and on to settle_s where a limit that sways the clock
    holds by then. The seconds settled, and the limit that kept it going."""
    first = min(settle_s, SETTLE_MIN_S)
    dev.settle(timed, call_ms, first)
    held = limits_swaying(dev.round_state()[1], dev.event_names)
    if held and settle_s > first:
        dev.settle(timed, call_ms, settle_s - first)
        return settle_s, " and ".join(held)
    return first, None


class Rounds:
    """How many rounds a benchmark runs, at least and at most: --gpu-min-time and --gpu-max-time of them, or
    SWAY_FACTOR times both once a limit sways the clock (after settling, or in a round)."""

    def __init__(self, plans: dict, swaying: bool, event_names):
        self.plans, self.swaying, self.event_names = plans, swaying, event_names
        self.read = WARMUP_ROUNDS  # the clock's rounds already looked at

    def bounds(self) -> tuple[int, int]:
        if not self.swaying:
            states = CLOCK.rounds[self.read :]
            self.read += len(states)
            self.swaying = any(limits_swaying(m, self.event_names) for _, m in states)
        least, most = self.plans[self.swaying]
        return least.rounds, most.rounds


class GpuBenchmark:
    """gpu_benchmark(fn, *args, flops=None, bytes=None, unit=None, ...): see the fixture's docstring.

    target: what the rounds' intervals must reach (gate.effort); counters: whether to read the counters after
    the rounds, or a function of the rounds and extra_info that says so (a run against a baseline)."""

    def __init__(
        self,
        benchmark,
        device,
        min_time_s: float = MIN_TIME_S,
        flush_l2: bool = True,
        settle_s: float = SETTLE_S,
        graph_before: bool | None = None,
        max_time_s: float = MAX_TIME_S,
        target: effort.Target | None = None,
        counters=True,
    ):
        self.benchmark = benchmark
        self.device = device
        self.graph_before = graph_before  # how the baseline timed this benchmark: from a graph, or None: no baseline
        self.min_time_s = min_time_s
        self.max_time_s = max(max_time_s, min_time_s)
        self.flush_l2 = flush_l2
        self.settle_s = settle_s
        self.target = target or effort.least_target(LEAST_FLOOR_PCT)
        self.counters = counters
        self.rounds_s: list[float] = []  # GPU time per call of each timed round, once it ran

    @property
    def extra_info(self) -> dict:
        return self.benchmark.extra_info

    @property
    def stats(self):
        return self.benchmark.stats

    def __call__(
        self,
        fn,
        *args,
        flops: float | None = None,
        bytes: float | None = None,  # noqa: A002
        unit: str | None = None,
        bound: str | None = None,
        flush_l2: bool | None = None,
        working_set_bytes: int | None = None,
        graph: bool | None = None,
        **kwargs,
    ):
        if unit is not None and unit not in UNITS:
            raise ValueError(f"gpu_benchmark: unit must be one of {', '.join(UNITS)}, got {unit!r}")
        if graph not in (None, True, False):
            raise ValueError(f"gpu_benchmark: graph must be None, True or False, got {graph!r}")
        if not self.benchmark.enabled:  # --benchmark-disable: run once, as pytest-benchmark does
            return fn(*args, **kwargs)
        dev = self.device
        run = partial(fn, *args, **kwargs)
        call_ms = dev.warm_up(run)
        self.target = self.target.at(call_ms / 1e3)
        ws = working_set_bytes if working_set_bytes is not None else estimate_working_set(args, kwargs, bytes)
        flush = needs_flush(ws, dev.l2_bytes, self.flush_l2 if flush_l2 is None else flush_l2)
        if graph is True and flush:
            raise ValueError(
                "gpu_benchmark: graph=True runs calls back to back, which the L2 flush forbids: "
                "pass flush_l2=False as well"
            )
        launch_us = dev.launch_us(run, call_ms)
        timed, call_ms, graph_calls, refused = graph_or_not(dev, run, call_ms, flush, graph, self.graph_before)
        per_target = max(graph_calls, 1)  # calls in one call of `timed`
        settled_s, held = settle(dev, timed, call_ms * per_target, self.settle_s)
        after = limits_swaying(dev.round_state()[1], dev.event_names)
        flush_ms = dev.flush_ms() if flush else 0.0
        plans = {
            sway: tuple(
                plan(call_ms, t * (SWAY_FACTOR if sway else 1), flush, flush_ms, launch_us, graph_calls)
                for t in (self.min_time_s, self.max_time_s)
            )
            for sway in (False, True)
        }
        p = plans[False][0]
        rounds = Rounds(plans, bool(after), dev.event_names)
        stopped = self._rounds(dev, timed, p, flush, per_target, rounds)
        late = CLOCK.late[WARMUP_ROUNDS:]
        states = CLOCK.detach()[WARMUP_ROUNDS:]
        self.rounds_s = list(self.benchmark.stats.stats.data)
        median_ms = self.benchmark.stats["median"] * 1e3
        least, most = plans[rounds.swaying]
        info = {
            "kernel_ms": median_ms,
            "timer": TIMER,
            "calls_per_round": graph_calls or p.iterations,
            "rounds": len(self.rounds_s),
            "l2_flush": flush,
            "working_set_bytes": ws,
            "l2_bytes": dev.l2_bytes,
            "settle_s": settled_s,
            "round_start": round_start(p),
            "launch_us": launch_us,
            "cuda_graph_calls": graph_calls,
            "rounds_least": least.rounds,
            "rounds_most": most.rounds,
            "min_time_s": self.min_time_s * (SWAY_FACTOR if rounds.swaying else 1),
            "max_time_s": self.max_time_s * (SWAY_FACTOR if rounds.swaying else 1),
            "rounds_stopped": stopped.why,
            "round_target_pct": dict(self.target.pct),
            "round_widths_pct": stopped.widths,
            "rounds_host_late": [i for i, x in enumerate(late) if x],
            "timer_step_us": timer_step(self.rounds_s, graph_calls or p.iterations) * 1e6,
        }
        if held:
            info["settle_why"] = f"{held} after {SETTLE_MIN_S:g} s: settled for --gpu-settle"
        if rounds.swaying:
            why = f"{' and '.join(after)} after settling" if after else "a limit in the rounds"
            info["min_time_why"] = f"{why}: {SWAY_FACTOR}x --gpu-min-time and --gpu-max-time"
        if refused:
            info["cuda_graph_refused"] = refused
        if graph is None and self.graph_before is not None:
            info["cuda_graph_as_baseline"] = self.graph_before  # followed, not decided afresh
        info.update(round_facts(states, dev.event_names))
        info.update(work_facts(median_ms, flops, bytes, unit, bound, dev.peaks))
        wanted = self.counters(self.rounds_s, info) if callable(self.counters) else self.counters
        if wanted:
            t0, t1, window_ms = dev.back_to_back(timed, call_ms * per_target, COUNTER_WINDOW_S)
            metrics = dev.metrics(t0, t1)
            info.update(metrics, metrics_window=BACK_TO_BACK_WINDOW)
            info["counters"] = counters.fingerprint(metrics, window_ms / per_target if window_ms else None)
        else:
            info["metrics_window"] = "not read: " + (
                "a run that measures a floor" if self.counters is False else "its verdict reads same"
            )
        fp = dev.fingerprint
        info.update(
            gpu=fp["name"],
            gpu_uuid=fp["uuid"],
            driver=fp["driver"],
            cuda_driver=fp["cuda_driver"],
            power_limit_w=fp["power_limit_w"],
            mig_mode=fp["mig_mode"],
            ecc=fp.get("ecc"),
            app_sm_clock_mhz=fp.get("app_sm_clock_mhz"),
            app_mem_clock_mhz=fp.get("app_mem_clock_mhz"),
            **dev.versions,
        )
        self.extra_info.update(json_safe(info))
        return run()  # the caller gets what a call returns (the rounds ran a replay, or a call long ago)

    def _rounds(self, dev, timed, p: Plan, flush: bool, per_target: int, rounds: Rounds) -> effort.Stopped:
        """The rounds, run here until their interval is narrow enough, then handed to pytest-benchmark's pedantic
        mode through the clock (replay), which runs nothing more."""
        iterations = p.iterations
        diffs: list[float] = []

        def one_round() -> float:
            if flush:
                dev.flush_l2()
            start = CLOCK()
            for _ in range(iterations):
                timed()
            diff = CLOCK() - start
            diffs.append(diff)
            return diff / iterations

        CLOCK.attach(lead=partial(dev.hold, p.lead_us), on_round=dev.round_state, calls=per_target, lead_us=p.lead_us)
        collecting = gc.isenabled()
        gc.collect()
        gc.disable()
        try:
            for _ in range(WARMUP_ROUNDS):
                one_round()
            del diffs[:]
            stopped = effort.run_rounds(one_round, self.target, rounds.bounds, late=lambda: CLOCK.late[WARMUP_ROUNDS:])
        except BaseException:
            CLOCK.detach()  # a call that raised leaves no hooks behind for the next benchmark
            raise
        finally:
            if collecting:
                gc.enable()
        CLOCK.replay(diffs)
        try:
            self.benchmark.pedantic(_nothing, rounds=len(diffs), iterations=iterations)
        finally:
            CLOCK.replay(None)
        return stopped


def _nothing() -> None:
    """What pedantic runs while the clock replays rounds that already ran."""
