"""A benchmark's timing plan: whether its rounds flush L2, how many calls a round holds, the blocking kernel
ahead of each round, and how many rounds make a given time (gate.fixture runs them; gate.effort says when
enough have run)."""

from __future__ import annotations

import math
from dataclasses import dataclass

from gpubench.metrics import finite
from gpubench.truth.timing import GROUP_MS, calls_for

MIN_ROUNDS = 10
MAX_FLUSHED_ROUNDS = 10_000  # each flushed round also costs ~0.1 ms of host time and a synchronize
FLUSH_MIN_BYTES = 256 * 2**20  # about 0.1 ms of writes on an H100
# Calls queued behind the lead kernel at most: CUDA's launch queue holds on the order of a thousand
# launches, and once it is full the host waits for the GPU to free a slot, which is the launch rate again.
QUEUE_CALLS = 256
LEAD_FACTOR = 2.0  # the lead kernel lasts this many times the host's time to launch the round's calls
LEAD_MARGIN_US = 200.0  # and this much more: the start event, and the host's hiccups (up to 64 us seen)
MAX_LEAD_US = 50_000.0  # a call that waits on the GPU itself gains nothing from a longer lead


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


def plan(
    call_ms: float, min_time_s: float, flush: bool, flush_ms: float = 0.0, launch_us: float = 0.0, graph_calls: int = 0
) -> Plan:
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
