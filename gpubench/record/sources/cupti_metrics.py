"""Which counters CUPTI PM sampling reads for each column: the candidates, best first, and the choice of those
a chip offers that fit one pass (gpubench.record.sources.cupti reads them).

Metric names differ between chips and CUPTI versions, so nothing is hard-coded to one chip: each column
has candidates, best first (DCGM's definition as Nsight Compute names it, then a ratio of raw counters),
and CUPTI's profiler host API says which ones this chip offers for PM sampling; the columns are added in
order of importance while they still fit one pass.
"""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True)
class Reading:
    """How one column is read: a percentage metric averaged over samples, or 100 x num / den summed."""

    metrics: tuple[str, ...]

    @property
    def label(self) -> str:
        return self.metrics[0] if len(self.metrics) == 1 else f"100 x {self.metrics[0]} / {self.metrics[1]}"

    def value(self, sums: dict[str, float], weight: float) -> float:
        if len(self.metrics) == 1:
            return sums[self.metrics[0]] / weight if weight else math.nan
        den = sums[self.metrics[1]]
        return 100.0 * sums[self.metrics[0]] / den if den else math.nan


def _pct(name: str) -> Reading:
    return Reading((name,))


def _ratio(num: str, den: str) -> Reading:
    return Reading((num, den))


def _elapsed(base: str) -> Reading:
    return _pct(f"{base}.avg.pct_of_peak_sustained_elapsed")


# Columns in order of importance (the ladder first), each with its candidates, best first. The
# `_realtime` counters are those Nsight Compute's own PM-sampling sections read on recent chips.
# DRAM activity is left out: beside NVML GPM on an H100 and an H200, dramc__throughput read 1/80 to 1/95 of
# GPM's DRAM active in every busy scenario (results/logs/cupti-*.log), so no CUPTI counter is shipped for
# it until one matches (dram__cycles_active over dram__cycles_elapsed is offered there, not yet compared).
NOT_SHIPPED = {"dram_active_pct": "no PM-sampling counter has matched NVML GPM's DRAM activity"}
CANDIDATES: dict[str, list[Reading]] = {
    "sm_active_pct": [_elapsed("sm__cycles_active"), _ratio("sm__cycles_active.avg", "sm__cycles_elapsed.avg")],
    "sm_occupancy_pct": [
        _elapsed("sm__warps_active"),
        _elapsed("tpc__warps_active_realtime"),
        _elapsed("smsp__warps_active"),
    ],
    "tensor_active_pct": [
        _elapsed("sm__pipe_tensor_cycles_active_realtime"),
        _elapsed("sm__pipe_tensor_cycles_active"),
        _elapsed("sm__pipe_tensor_op_hmma_cycles_active"),
    ],
    "fp32_active_pct": [_elapsed("sm__pipe_fma_cycles_active_realtime"), _elapsed("sm__pipe_fma_cycles_active")],
    "fp16_active_pct": [_elapsed("sm__pipe_fp16_cycles_active_realtime"), _elapsed("sm__pipe_fp16_cycles_active")],
    "fp64_active_pct": [_elapsed("sm__pipe_fp64_cycles_active_realtime"), _elapsed("sm__pipe_fp64_cycles_active")],
    "graphics_active_pct": [_elapsed("gr__cycles_active"), _ratio("gr__cycles_active.avg", "gr__cycles_elapsed.max")],
}


def passes(ph, chip: str, metrics: list[str], refusals=(ValueError,)) -> int | None:
    """Passes PM sampling needs for these metrics on this chip; None where the host API refuses them
    (cupti-python raises ValueError for a metric the chip does not offer)."""
    host = ph.ProfilerHost(chip, ph.ProfilerType.PM_SAMPLING)
    try:
        host.initialize()
        return int(ph.get_num_of_passes(host.create_config_image(metrics)))
    except refusals:
        return None
    finally:
        host.deinitialize()


def choose(ph, chip: str, refusals=(ValueError,)) -> dict[str, Reading]:
    """Column -> reading: for each column in order, its first candidate this chip offers and that still
    fits one pass with the columns already chosen (PM sampling collects in one pass only)."""
    chosen: dict[str, Reading] = {}
    for column, candidates in CANDIDATES.items():
        taken = [m for r in chosen.values() for m in r.metrics]
        for reading in candidates:
            if passes(ph, chip, list(dict.fromkeys(taken + list(reading.metrics))), refusals) == 1:
                chosen[column] = reading
                break
    return chosen


def is_pct(name: str) -> bool:
    """A percentage metric (averaged over time), not a raw counter (summed for a ratio)."""
    return ".pct" in name
