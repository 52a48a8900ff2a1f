"""What gpu_benchmark records beside its rounds (gate.fixture): the GPU's clocks round by round, with their
median and the share of rounds each clock-event reason held, and the work per call with what it achieved.
"""

from __future__ import annotations

from gpubench.metrics import finite
from gpubench.read.summary import derive
from gpubench.stats import quantile

IGNORED_EVENTS = ("idle",)  # read right after a round completed, the GPU is idle: not a reason of the round


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
    result = {
        "kernel_ms": median_ms,
        "flops_per_call": flops or 0.0,
        "bytes_per_call": nbytes or 0.0,
        "link_bytes_per_call": 0.0,
        "unit": unit,
        "bound": bound,
    }
    facts = {"flops_per_call": flops, "bytes_per_call": nbytes, "unit": unit}
    derived = derive(result, peaks)
    wanted = {
        "tflops": flops is not None,
        "mfu_pct": flops is not None,
        "gbps": nbytes is not None,
        "mbu_pct": nbytes is not None,
        "link_gbps": True,
    }
    facts.update({k: v for k, v in derived.items() if wanted.get(k) and finite(v)})
    return {k: v for k, v in facts.items() if v is not None}
