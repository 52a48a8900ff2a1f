"""The steps of a watched job inside a summary row's window, and the work they did there.

Each process (a stream of steps) has its own rate, from its own stamps: (steps - 1) over the time from its
first to its last stamp inside the window. What several processes on one GPU did together is summed over
one window, never over each process's own stretch of it: each step runs from one stamp of its process to
the next, its work spread evenly over that time, so the steps between a process's stamps count whole and
the steps in progress at the window's two ends count by the share of them that lies inside it. Two
processes whose phases end at different times are then added over the same seconds (added rate by rate,
the one that ran on alone would count its solo rate over the time they shared).
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, field

from gpubench.job.markreader import Steps
from gpubench.metrics import finite
from gpubench.read.summary import derive_per_second

# the summary columns made here that their names do not tell (gpubench.record.columns.DECLARERS names this)
SUMMARY_COLUMNS = {"stream_rates": "text", "step_clock": "text", "hfu_unknown": "text"}

WORK = ("steps", "flops", "hw_flops", "bytes", "tokens", "counted")


def _per_step(g: Steps, key: str) -> float:
    """One step's share of a group's sums (each step counts 1 toward "steps")."""
    return 1.0 if key == "steps" else getattr(g, key) / g.n


@dataclass
class Tally:
    """One stream's steps inside the windows of a row."""

    stamps: int = 0
    intervals: int = 0  # steps with a start and an end inside the window
    seconds: float = 0.0  # from its first to its last stamp, summed over windows
    flops: float = 0.0  # FLOPs of the steps between its first and last stamp (its FLOPs per step)
    counted: float = 0.0  # of those steps, how many gave FLOPs
    bad: int = 0
    lead_s: float = 0.0
    work: dict = field(default_factory=lambda: dict.fromkeys(WORK, 0.0))  # inside the windows, ends in part
    gaps_ms: list = field(default_factory=list)  # mean step time of each group of steps, for the spread

    def add(self, groups: list[Steps], before: Steps | None, after: Steps | None, ws: float, we: float) -> None:
        """The stream's groups inside one window [ws, we], in time order, and its groups just before and
        just after the window (None where it has none)."""
        n = sum(g.n for g in groups)
        self.stamps += n
        self._ends(groups, before, after, ws, we)
        if n < 2:
            return
        inner = (n - 1) / n  # the first stamp's step began before the window: counted in part, by _ends
        self.intervals += n - 1
        self.seconds += groups[-1].t_last - groups[0].t_first
        for g in groups:
            self.flops += g.flops * inner
            self.counted += g.counted * inner
            self.bad += g.bad
            self.lead_s += g.lead_s * g.n
            for k in WORK:
                self.work[k] += _per_step(g, k) * g.n * inner
        for prev, g in zip([None] + groups, groups):
            start = prev.t_last if prev is not None else None
            steps = g.n - 1 if start is None else g.n
            span = g.t_last - (start if start is not None else g.t_first)
            if steps > 0 and span > 0:
                self.gaps_ms.append(1e3 * span / steps)

    def _ends(self, groups: list[Steps], before: Steps | None, after: Steps | None, ws: float, we: float) -> None:
        first = groups[0].t_first if groups else None
        last = max(g.t_last for g in groups) if groups else None
        if first is not None and before is not None and before.t_last < ws < first:
            self._part(groups[0], (first - ws) / (first - before.t_last))
        if last is not None and after is not None and last < we < after.t_first:
            self._part(after, (we - last) / (after.t_first - last))
        if first is None and before is not None and after is not None and before.t_last <= ws < we <= after.t_first:
            self._part(after, (we - ws) / (after.t_first - before.t_last))  # one step spans the whole window

    def _part(self, g: Steps, share: float) -> None:
        for k in WORK:
            self.work[k] += _per_step(g, k) * share

    @property
    def rate(self) -> float:
        return self.intervals / self.seconds if self.seconds > 0 else math.nan


def window(groups: list[Steps], a: float, b: float, trim_s: float) -> tuple[float, float, list[Steps]]:
    """The window of one span on one GPU, and the groups of steps inside it: first to last step after the
    trim where two steps or more give a rate; else the whole span after the trim, for the metrics alone."""
    kept = [g for g in groups if a + trim_s <= g.t_first and g.t_last <= b]
    if sum(g.n for g in kept) < 2:
        return a + trim_s, b, kept
    return kept[0].t_first, max(g.t_last for g in kept), kept


def around(groups: list[Steps], ws: float, we: float) -> tuple[Steps | None, Steps | None]:
    """A stream's last group that ended before ws and its first that began after we (its groups in order of
    their first step). A job that marks every epoch asks this once a phase: a scan of every group each time
    made its summary quadratic, so both ends are found by bisection on the first steps."""
    from bisect import bisect_left, bisect_right

    j = bisect_right(groups, we, key=lambda g: g.t_first)
    k = bisect_left(groups, ws, key=lambda g: g.t_first)  # a group that begins at ws or later ends there too
    before = next((groups[i] for i in range(k - 1, -1, -1) if groups[i].t_last < ws), None)
    return before, (groups[j] if j < len(groups) else None)


# Why a row of marks written before count_flops counted what the kernels run has no HFU (gpubench.inside.flops)
HFU_UNKNOWN = (
    "these marks were written before gpubench.count_flops counted what the kernels run: their hardware "
    "count takes causal attention's whole T×T score matrix, of which the kernels run the lower half, so "
    "the FLOPs that ran are not known and no FLOP count is held to the tensor ceiling"
)


def work_columns(
    tallies: dict, seconds: float, energy_j: float, clock_of, peaks: dict, unit: str, hardware: bool = True
) -> dict:
    """Steps, rates and work of the streams on one GPU over a row's windows (seconds long in all): rates per
    stream, work summed over them within the windows. clock_of(stream) says whose timeline stamped it.
    hardware: the marks' hardware FLOPs count what the kernels run; else no HFU, and hfu_unknown says why."""
    nan = math.nan
    live = {s: t for s, t in tallies.items() if t.stamps}
    rates = [t.rate for t in live.values() if finite(t.rate)]
    gaps = [g for t in live.values() for g in t.gaps_ms]
    ranks = sorted({s.rank for s in live if s.rank is not None})
    out = {
        "steps": sum(t.stamps for t in live.values()),
        "streams": len(live),
        "rank": ranks[0] if len(ranks) == 1 else None,
        "ranks": ",".join(map(str, ranks)),
        "stream_rates": "; ".join(f"{s.label}: {t.rate:.4g}/s" for s, t in live.items() if finite(t.rate)),
        "steps_per_s": statistics.median(rates) if rates else nan,
        "step_clock": " and ".join(sorted({clock_of(s) for s in live})),
        "flops_bad": sum(t.bad for t in live.values()),
    }
    out["step_ms"] = 1e3 / out["steps_per_s"] if finite(out["steps_per_s"]) else nan
    out["step_ms_p10"] = statistics.quantiles(gaps, n=10)[0] if len(gaps) > 1 else (gaps[0] if gaps else nan)
    out["step_ms_p90"] = statistics.quantiles(gaps, n=10)[-1] if len(gaps) > 1 else (gaps[0] if gaps else nan)
    counted = [t for t in live.values() if t.counted > 0]
    out["flops_per_step"] = (sum(t.flops / t.counted for t in counted) / len(counted)) if counted else nan
    timed = bool(rates) and seconds > 0  # a rate, and one window to divide the work by
    total = {k: sum(t.work[k] for t in tallies.values()) for k in WORK}

    def per_s(key, applies=True):
        return total[key] / seconds if timed and applies else nan

    flops_s = per_s("flops", total["counted"] > 0)
    derived = derive_per_second({"flops_per_s": flops_s, "bytes_per_s": 0.0, "unit": unit, "bound": "compute"}, peaks)
    hw = derive_per_second(
        {
            "flops_per_s": per_s("hw_flops", hardware and total["counted"] > 0),
            "bytes_per_s": 0.0,
            "unit": unit,
            "bound": "compute",
        },
        peaks,
    )
    dram = derive_per_second(
        {"flops_per_s": 0.0, "bytes_per_s": per_s("bytes", total["bytes"] > 0), "unit": None, "bound": "dram"}, peaks
    )
    out.update(
        tflops=derived["tflops"],
        mfu_pct=derived["mfu_pct"],
        mfu_measured_pct=derived["mfu_measured_pct"],
        hfu_pct=hw["mfu_pct"],
        gbps=dram["gbps"],
        mbu_pct=dram["mbu_pct"],
        mbu_measured_pct=dram["mbu_measured_pct"],
    )
    if not hardware and total["counted"] > 0:
        out["hfu_unknown"] = HFU_UNKNOWN
    tokens_s = per_s("tokens", total["tokens"] > 0)
    out["tokens_per_s"] = tokens_s
    on_gpu = [t for s, t in live.items() if clock_of(s) == "GPU"]
    out["lead_ms"] = 1e3 * sum(t.lead_s for t in on_gpu) / sum(t.stamps for t in on_gpu) if on_gpu else nan
    power = energy_j / seconds if finite(energy_j) and seconds > 0 else nan
    out["j_per_step"] = energy_j / total["steps"] if timed and finite(energy_j) and total["steps"] > 0 else nan
    out["j_per_token"] = energy_j / total["tokens"] if finite(tokens_s) and finite(energy_j) else nan
    out["tokens_per_j"] = tokens_s / power if finite(tokens_s) and finite(power) and power > 0 else nan
    out["tflop_per_kj"] = out["tflops"] / power * 1e3 if finite(out["tflops"]) and finite(power) and power > 0 else nan
    return out
