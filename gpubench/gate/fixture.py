"""What the gpu_benchmark fixture does with a call: warm it up, decide on the L2 flush and how the calls are
launched, settle the GPU's clocks, time it in GPU time through pytest-benchmark's pedantic mode, and record
beside the timing what the GPU did meanwhile, round by round.

A call whose working set fits in L2 finds its data there when it runs again at once, so back-to-back
calls would time the cache, not the memory a real workload reads. With the flush, each round is one call
after a write of at least twice the L2 size, outside the timed events (pytest-benchmark runs `setup`
before every round, and only with one call per round). Without the flush (a working set larger than L2,
or --gpu-no-flush-l2) a round is about 20 ms of calls back to back, at most QUEUE_CALLS of them.

Every round starts behind a blocking kernel (the clock's lead) that lasts twice the time the host takes to
launch the round's calls, and LEAD_MARGIN_US more for the host's hiccups: the GPU reaches the start event
only once the round is queued, so a launch gap is never timed (without it, a flushed 1 ms spin read up to
6% long in the rounds where the host was late). A call shorter than 50 us of GPU time is timed from a CUDA
graph instead, each round one replay (gpubench.gate.graph says when and why); extra_info says which, and
why a call that short could not be captured; graph=False asks for the host's launches, graph=True insists
on the graph.

Before the rounds the GPU runs the call back to back for settle_s (1 s, as timing.interleaved settles):
a GPU at its power limit lowers its clock within a second of heavy work, and rounds timed from idle
would catch the higher clock first and the lower one later. A GPU still held by its power limit (or a
thermal one) after settling keeps swaying its clock (an H100 GEMM: 1230 to 1590 MHz and back within a
second), so its rounds go on for SWAY_FACTOR times the minimum time: one second holds about two swings,
and the median of one run then moved 8% from another's. After each round the device reads the SM
clock and NVML's clock-event reasons, so a verdict can say when a baseline and a run ran at other clocks.

The metrics sampled while single calls alternate with flushes would describe the flush, so with the
flush on they come from a second window of back-to-back calls (at most METRICS_WINDOW_S); so do those of
tiny calls, whose rounds spend more time behind their lead kernel (one spinning thread) than running.

Python's garbage collector is off during the rounds (collected once before them): a collection inside a
round holds the host for milliseconds, longer than any lead. The clock marks the rounds the host was late for
anyway (extra_info's rounds_host_late); the verdict leaves them out (gpubench.gate.rounds).

Nothing here imports torch or NVML: the device (gpubench.gate.device, or a fake in tests) does the GPU work.
"""

from __future__ import annotations

import gc
import math
import time
from dataclasses import dataclass
from functools import partial

from gpubench.gate.clock import CLOCK
from gpubench.gate.graph import graph_or_not
from gpubench.gate.rounds import timer_step
from gpubench.metrics import finite
from gpubench.read.summary import derive
from gpubench.record.rundir import json_safe
from gpubench.stats import quantile
from gpubench.truth import peaks
from gpubench.truth.timing import GROUP_MS, calls_for

MIN_ROUNDS = 10
MAX_FLUSHED_ROUNDS = 10_000  # each flushed round also costs ~0.1 ms of host time and a synchronize
FLUSH_MIN_BYTES = 256 * 2**20  # about 0.1 ms of writes on an H100
MIN_TIME_S = 1.0
SETTLE_S = 1.0
METRICS_WINDOW_S = 0.5  # the window of back-to-back calls for the metrics: five of NVML's 0.1 s samples
WARMUP_ROUNDS = 1
# Calls queued behind the lead kernel at most: CUDA's launch queue holds on the order of a thousand
# launches, and once it is full the host waits for the GPU to free a slot, which is the launch rate again.
QUEUE_CALLS = 256
LEAD_FACTOR = 2.0  # the lead kernel lasts this many times the host's time to launch the round's calls
LEAD_MARGIN_US = 200.0  # and this much more: the start event, and the host's hiccups (up to 64 us seen)
MAX_LEAD_US = 50_000.0  # a call that waits on the GPU itself gains nothing from a longer lead
LEAD_SHARE = 0.1  # rounds whose lead is longer than this share of them: their metrics come from a window apart
SWAY_FACTOR = 4  # rounds go on this many times longer while a limit sways the clock
SWAYING = ("power cap", "power brake", "thermal (software)", "thermal (hardware)", "hardware slowdown")
IGNORED_EVENTS = ("idle",)  # read right after a round completed, the GPU is idle: not a reason of the round
TIMER = "CUDA events, GPU time per call"
UNITS = tuple(peaks.UNITS.values())  # the compute peaks of peaks.DATASHEET that MFU divides by
TIMED_WINDOW = "the timed rounds"
BACK_TO_BACK_WINDOW = "calls back to back after the timed rounds (L2 warm)"


def estimate_working_set(args: tuple, kwargs: dict, work_bytes: float | None = None) -> int | None:
    """The bytes a call touches, at least: its array arguments (anything with an integer .nbytes) and its
    useful bytes; None where neither is known."""
    arrays = [a.nbytes for a in (*args, *kwargs.values()) if isinstance(getattr(a, "nbytes", None), int)]
    known = ([sum(arrays)] if arrays else []) + ([int(work_bytes)] if finite(work_bytes) else [])
    return max(known) if known else None


def needs_flush(working_set: int | None, l2_bytes: int, enabled: bool = True) -> bool:
    """Flush L2 between rounds when it is on, L2's size is known and the working set may fit in it
    (an unknown working set may)."""
    return enabled and l2_bytes > 0 and (working_set is None or working_set < l2_bytes)


def flush_bytes(l2_bytes: int) -> int:
    """How much the flush writes: twice L2, and at least FLUSH_MIN_BYTES."""
    return max(2 * l2_bytes, FLUSH_MIN_BYTES)


@dataclass(frozen=True)
class Plan:
    rounds: int
    iterations: int  # calls per round
    flush: bool
    lead_us: float = 0.0  # the blocking kernel ahead of each round's start event
    graph_calls: int = 0  # calls in the CUDA graph one round replays; 0: the host launches every call


def lead_for(launches: int, launch_us: float) -> float:
    """How long the blocking kernel ahead of a round lasts, in us, for `launches` launches of launch_us each."""
    return min(MAX_LEAD_US, LEAD_FACTOR * launches * max(launch_us, 0.0) + LEAD_MARGIN_US)


def plan(call_ms: float, min_time_s: float, flush: bool, flush_ms: float = 0.0, launch_us: float = 0.0,
         graph_calls: int = 0) -> Plan:
    """Rounds and calls per round for about min_time_s of GPU time (and never fewer than MIN_ROUNDS rounds),
    and the lead kernel that covers the host's launches of a round (launch_us each; a graph's replay is one
    launch). call_ms is one call's GPU time (in a graph, when graph_calls is given)."""
    call_ms = max(call_ms, 1e-6)
    if flush:
        lead_us = lead_for(1, launch_us)
        rounds = math.ceil(min_time_s * 1e3 / (call_ms + flush_ms + lead_us / 1e3))
        return Plan(min(max(rounds, MIN_ROUNDS), MAX_FLUSHED_ROUNDS), 1, True, lead_us)
    if graph_calls:
        rounds = math.ceil(min_time_s * 1e3 / (graph_calls * call_ms))
        return Plan(max(MIN_ROUNDS, rounds), 1, False, lead_for(1, launch_us), graph_calls)
    iterations = min(calls_for(call_ms, GROUP_MS), QUEUE_CALLS)
    lead_us = lead_for(iterations, launch_us)
    return Plan(max(MIN_ROUNDS, math.ceil(min_time_s * 1e3 / (iterations * call_ms))), iterations, False, lead_us)


def round_start(p: Plan) -> str:
    """How a round starts and how its calls are launched, in words for extra_info."""
    lead = f"a blocking kernel of {p.lead_us:.0f} µs"
    if p.flush:
        return f"behind the L2 flush and {lead}"
    if p.graph_calls:
        return f"one replay of a CUDA graph of {p.graph_calls} calls, behind {lead}"
    return f"behind {lead}, {p.iterations} calls launched by the host"


def limits_swaying(mask: int | None, event_names) -> list[str]:
    """The clock-event reasons in mask that keep the clock swaying while they hold (a limit, not idleness)."""
    return [n for n in event_names(mask) if n in SWAYING] if mask is not None else []


def round_facts(states: list, event_names) -> dict:
    """What the GPU's clocks did round by round: each round's SM clock and clock-event reasons (a bitmask), their
    median, and the share of rounds in which each reason held (event_names turns a bitmask into names)."""
    clocks = [c for c, _ in states]
    masks = [m for _, m in states]
    facts = {"rounds_sm_clock_mhz": clocks, "rounds_clock_events": masks}
    measured = [c for c in clocks if finite(c)]
    if measured:
        facts["sm_clock_mhz_rounds"] = quantile(measured, 0.5)
    known = [m for m in masks if m is not None]
    if known:
        names = [n for m in known for n in event_names(m) if n not in IGNORED_EVENTS]
        facts["clock_events_rounds"] = {n: names.count(n) / len(known) for n in dict.fromkeys(names)}
    return facts


def work_facts(median_ms: float, flops, nbytes, unit, bound, peaks: dict) -> dict:
    """Work per call and what it achieved (TFLOP/s, GB/s, MFU, MBU): only the numbers that exist."""
    # summary.derive gives MBU for DRAM-bound work only: work with bytes counts as such, so a caller who
    # gives both FLOPs and bytes gets MFU and MBU
    bound = bound or ("dram" if nbytes else "compute")
    result = {"kernel_ms": median_ms, "flops_per_call": flops or 0.0, "bytes_per_call": nbytes or 0.0,
              "link_bytes_per_call": 0.0, "unit": unit, "bound": bound}
    facts = {"flops_per_call": flops, "bytes_per_call": nbytes, "unit": unit}
    derived = derive(result, peaks)
    wanted = {"tflops": flops is not None, "mfu_pct": flops is not None, "gbps": nbytes is not None,
              "mbu_pct": nbytes is not None, "link_gbps": True}
    facts.update({k: v for k, v in derived.items() if wanted.get(k) and finite(v)})
    return {k: v for k, v in facts.items() if v is not None}


class GpuBenchmark:
    """gpu_benchmark(fn, *args, flops=None, bytes=None, unit=None, ...): see the fixture's docstring."""

    def __init__(self, benchmark, device, min_time_s: float = MIN_TIME_S, flush_l2: bool = True,
                 settle_s: float = SETTLE_S, graph_before: bool | None = None):
        self.benchmark = benchmark
        self.device = device
        self.graph_before = graph_before  # how the baseline timed this benchmark: from a graph, or None: no baseline
        self.min_time_s = min_time_s
        self.flush_l2 = flush_l2
        self.settle_s = settle_s
        self.rounds_s: list[float] = []  # GPU time per call of each timed round, once it ran

    @property
    def extra_info(self) -> dict:
        return self.benchmark.extra_info

    @property
    def stats(self):
        return self.benchmark.stats

    def __call__(self, fn, *args, flops: float | None = None, bytes: float | None = None,  # noqa: A002
                 unit: str | None = None, bound: str | None = None, flush_l2: bool | None = None,
                 working_set_bytes: int | None = None, graph: bool | None = None, **kwargs):
        if unit is not None and unit not in UNITS:
            raise ValueError(f"gpu_benchmark: unit must be one of {', '.join(UNITS)}, got {unit!r}")
        if graph not in (None, True, False):
            raise ValueError(f"gpu_benchmark: graph must be None, True or False, got {graph!r}")
        if not self.benchmark.enabled:  # --benchmark-disable: run once, as pytest-benchmark does
            return fn(*args, **kwargs)
        dev = self.device
        run = partial(fn, *args, **kwargs)
        call_ms = dev.warm_up(run)
        ws = working_set_bytes if working_set_bytes is not None else estimate_working_set(args, kwargs, bytes)
        flush = needs_flush(ws, dev.l2_bytes, self.flush_l2 if flush_l2 is None else flush_l2)
        if graph is True and flush:
            raise ValueError("gpu_benchmark: graph=True runs calls back to back, which the L2 flush forbids: "
                             "pass flush_l2=False as well")
        launch_us = dev.launch_us(run, call_ms)
        timed, call_ms, graph_calls, refused = graph_or_not(dev, run, call_ms, flush, graph, self.graph_before)
        per_target = max(graph_calls, 1)  # calls in one call of `timed`
        dev.settle(timed, call_ms * per_target, self.settle_s)
        min_time_s, swaying = self.min_time_s, limits_swaying(dev.round_state()[1], dev.event_names)
        if swaying:
            min_time_s *= SWAY_FACTOR
        p = plan(call_ms, min_time_s, flush, dev.flush_ms() if flush else 0.0, launch_us, graph_calls)
        CLOCK.attach(lead=partial(dev.hold, p.lead_us), on_round=dev.round_state, calls=per_target,
                     lead_us=p.lead_us)
        collecting = gc.isenabled()
        gc.collect()
        gc.disable()
        t0 = time.monotonic()
        try:
            result = self.benchmark.pedantic(timed, setup=dev.flush_l2 if flush else None, rounds=p.rounds,
                                             iterations=p.iterations, warmup_rounds=WARMUP_ROUNDS)
        finally:
            if collecting:
                gc.enable()
            late = CLOCK.late[WARMUP_ROUNDS:]
            states = CLOCK.detach()[WARMUP_ROUNDS:]
        t1 = time.monotonic()
        self.rounds_s = list(self.benchmark.stats.stats.data)
        window = TIMED_WINDOW
        if flush or p.lead_us / 1e3 > LEAD_SHARE * call_ms * per_target * p.iterations:
            t0, t1 = dev.back_to_back(timed, call_ms * per_target, min(self.min_time_s, METRICS_WINDOW_S))
            window = BACK_TO_BACK_WINDOW
        if graph_calls:
            result = run()  # the caller gets what a call returns, not what a replay does (None)
        median_ms = self.benchmark.stats["median"] * 1e3
        info = {"kernel_ms": median_ms, "timer": TIMER, "calls_per_round": graph_calls or p.iterations,
                "rounds": p.rounds, "l2_flush": flush, "working_set_bytes": ws, "l2_bytes": dev.l2_bytes,
                "settle_s": self.settle_s, "round_start": round_start(p), "launch_us": launch_us,
                "cuda_graph_calls": graph_calls, "min_time_s": min_time_s,
                "rounds_host_late": [i for i, x in enumerate(late) if x],
                "timer_step_us": timer_step(self.rounds_s, graph_calls or p.iterations) * 1e6}
        if swaying:
            info["min_time_why"] = f"{' and '.join(swaying)} after settling: {SWAY_FACTOR}x --gpu-min-time"
        if refused:
            info["cuda_graph_refused"] = refused
        if graph is None and self.graph_before is not None:
            info["cuda_graph_as_baseline"] = self.graph_before  # followed, not decided afresh
        info.update(round_facts(states, dev.event_names))
        info.update(work_facts(median_ms, flops, bytes, unit, bound, dev.peaks))
        info.update(dev.metrics(t0, t1), metrics_window=window)
        fp = dev.fingerprint
        info.update(gpu=fp["name"], gpu_uuid=fp["uuid"], driver=fp["driver"], cuda_driver=fp["cuda_driver"],
                    power_limit_w=fp["power_limit_w"], mig_mode=fp["mig_mode"], ecc=fp.get("ecc"),
                    app_sm_clock_mhz=fp.get("app_sm_clock_mhz"), app_mem_clock_mhz=fp.get("app_mem_clock_mhz"),
                    **dev.versions)
        self.extra_info.update(json_safe(info))
        return result
