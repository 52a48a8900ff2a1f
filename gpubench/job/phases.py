"""A watched job's phases: where its marks cut the recording, and one summary row per phase and GPU.

The phases come from the marks of the lowest rank that wrote any (rank 0 of a torchrun job; a plain
process is rank 0): each mark starts a phase that lasts until the next mark of another name, and a
phase that recurs (train, eval, train, ...) gathers all its spans into one row. Before the first mark
the phase is "run". Sample rows are assigned to a phase by interval, as the suite's scenarios are: a
row counts where its whole interval lies inside one of the phase's spans, after the span's first
TRIM_S seconds (summary.steady_rows).

Steps are that rank's `gpubench.step()` stamps; its step rate and FLOP/s stand for each GPU's, as in
data-parallel training where every rank does the same work (torchtitan counts MFU per rank the same
way). The rate is taken between stamps, (steps - 1) over the time from the first to the last in each
span, so neither the phase's start-up nor its tail dilutes it.
"""

from __future__ import annotations

import math
from bisect import bisect_left, bisect_right
from dataclasses import dataclass, field

from gpubench.metrics import finite
from gpubench.read.summary import (
    TRIM_S,
    derive,
    energy_power_w,
    metric_stats,
    steady_rows,
)
from gpubench.read.verdict import verdict
from gpubench.stats import quantile
from gpubench.truth.peaks import UNITS

FIRST_PHASE = "run"

# Report sentences for each phase, filled from its summary row (gpubench.show.report.story): a sentence whose
# non-metric fields this row lacks (no steps, no FLOPs) is left out.
STORY = [
    "In {phase}, {said}: SM active {sm_active_pct:.0f}%, SM occupancy {sm_occupancy_pct:.0f}%, tensor active "
    "{tensor_active_pct:.0f}%, DRAM active {dram_active_pct:.0f}%.",
    "{steps} steps at {steps_per_s:.3g} per second ({step_ms:.4g} ms each, p10–p90 {step_ms_p10:.4g}–"
    "{step_ms_p90:.4g} ms).",
    "{flops_per_step:.3g} FLOPs per step: {tflops:.3g} TFLOP/s, MFU {mfu_pct:.2g}% of the {dtype} datasheet "
    "peak.",
    "Verdict: {verdict}",
]


@dataclass
class Phase:
    name: str
    spans: list[tuple[float, float]] = field(default_factory=list)


def lowest_rank(events) -> int | None:
    return min((e.rank for e in events), default=None)


def cut(events, t0: float, t1: float, first: str = FIRST_PHASE) -> list[Phase]:
    """The lowest rank's marks cut [t0, t1] into phases, in order of first appearance."""
    rank = lowest_rank(events)
    current, start, spans = first, t0, []
    for e in sorted((e for e in events if e.kind == "mark" and e.rank == rank), key=lambda e: e.t):
        if e.t >= t1:
            break
        if e.t <= t0:  # marked before the recording began (attach mode): the phase it is in
            current = e.value
        elif e.value != current:
            spans.append((current, start, e.t))
            current, start = e.value, e.t
    spans.append((current, start, t1))
    phases: dict[str, Phase] = {}
    for name, a, b in spans:
        if b > a:
            phases.setdefault(name, Phase(name)).spans.append((a, b))
    return list(phases.values())


def step_stats(events, spans) -> dict:
    """Steps, step rate, step time and FLOPs per step of the lowest rank over a phase's spans."""
    rank = lowest_rank(events)
    stamps = sorted((e for e in events if e.kind == "step" and e.rank == rank), key=lambda e: e.t)
    times = [e.t for e in stamps]
    n, busy_s, gaps, flops = 0, 0.0, [], []
    for a, b in spans:
        chunk = stamps[bisect_left(times, a):bisect_left(times, b)]
        n += len(chunk)
        if len(chunk) >= 2:
            busy_s += chunk[-1].t - chunk[0].t
            gaps += [1e3 * (y.t - x.t) for x, y in zip(chunk, chunk[1:])]
            flops += [e.flops for e in chunk[1:]]  # each stamp ends the step whose FLOPs it carries
    nan = math.nan
    rate = len(gaps) / busy_s if busy_s > 0 else nan
    known = bool(flops) and all(f is not None for f in flops)
    return {"steps": n, "steps_per_s": rate, "step_ms": 1e3 / rate if finite(rate) else nan,
            "step_ms_p10": quantile(gaps, 0.1) if gaps else nan, "step_ms_p90": quantile(gaps, 0.9) if gaps else nan,
            "flops_per_step": sum(flops) / len(flops) if known else nan}


def _mean_power_w(windows: list[list[dict]]) -> float:
    """Mean power from the energy counter over several spans, each weighted by its length."""
    num = den = 0.0
    for w in windows:
        p = energy_power_w(w)
        if finite(p):
            d = w[-1]["t_end_s"] - w[0]["t_end_s"]
            num, den = num + p * d, den + d
    return num / den if den > 0 else math.nan


def summarize(rows: list[dict], events, phases: list[Phase], gpus, peaks: dict, dtype: str, columns,
              trim_s: float = TRIM_S) -> list[dict]:
    """One row per phase and GPU: metric statistics over its steady rows, steps, TFLOP/s, MFU, verdict."""
    present = [c for c in columns if any(c in r for r in rows)]
    unit = UNITS[dtype]
    by_gpu = {g.nvml_index: [r for r in rows if r["gpu"] == g.nvml_index] for g in gpus}  # in time order
    starts = {g: [r["t_start_s"] for r in rs] for g, rs in by_gpu.items()}

    def steady(gpu: int, a: float, b: float) -> list[dict]:
        """steady_rows over the rows that can qualify: a long watch with many spans stays fast."""
        near = by_gpu[gpu][bisect_left(starts[gpu], a + trim_s):bisect_right(starts[gpu], b)]
        return steady_rows(near, gpu, a, b, trim_s)

    out = []
    for phase in phases:
        steps = step_stats(events, phase.spans)
        for gpu in gpus:
            windows = [steady(gpu.nvml_index, a, b) for a, b in phase.spans]
            window = [r for w in windows for r in w]
            if not window and not steps["steps"]:
                continue  # too short to hold a whole sample or a step: nothing to say
            row = {"scenario": phase.name if len(gpus) == 1 else f"{phase.name} · GPU {gpu.nvml_index}",
                   "phase": phase.name, "family": "watch", "gpu": gpu.nvml_index, "uuid": gpu.uuid,
                   "t_start": phase.spans[0][0], "t_end": phase.spans[-1][1],
                   "seconds": sum(b - a for a, b in phase.spans), "spans": len(phase.spans),
                   "n_samples": len(window), **metric_stats(window, present),
                   "power_w_energy": _mean_power_w([w for w in windows if w]), **steps,
                   "unit": unit, "bound": "compute"}
            achieved = derive({"kernel_ms": row["step_ms"], "flops_per_call": row["flops_per_step"],
                               "bytes_per_call": math.nan, "unit": unit, "bound": "compute"}, peaks)
            row.update({k: achieved[k] for k in ("tflops", "mfu_pct", "mfu_measured_pct")})
            row["verdict"], names = verdict(row, dtype)
            row["verdict_rules"] = ", ".join(names)
            out.append(row)
    return out
