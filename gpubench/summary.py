"""Per-scenario summary: medians and spread of every sampled metric over the scenario's steady window,
beside the ground truth (achieved TFLOP/s and GB/s, MFU and MBU)."""

from __future__ import annotations

import math

from gpubench.metrics import COLUMNS
from gpubench.timing import quantile

# NVML's utilization averages over a window of up to a second, and GPM's first interval may start
# before the kernel: the first half second of each scenario is not steady.
TRIM_S = 0.5


def finite(value) -> bool:
    """A number that exists: not None, not a bool, not NaN or infinite."""
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def fmt(value, pattern: str, missing: str = "n/a") -> str:
    """value formatted with pattern, or `missing` where the run has no such value."""
    return pattern.format(value) if finite(value) else missing


def metric_stats(rows: list[dict], columns) -> dict:
    """median, p10, p90 of each column over rows; NaN where no finite value exists."""
    out = {}
    for c in columns:
        vals = [v for v in (r.get(c) for r in rows) if finite(v)]
        out[c] = statistics_or_nan(vals, 0.5)
        out[f"{c}_p10"] = statistics_or_nan(vals, 0.1)
        out[f"{c}_p90"] = statistics_or_nan(vals, 0.9)
    return out


def statistics_or_nan(values: list[float], q: float) -> float:
    return quantile(values, q) if values else math.nan


def steady_rows(rows: list[dict], gpu: int, t_start: float, t_end: float, trim_s: float = TRIM_S) -> list[dict]:
    return [r for r in rows if r["gpu"] == gpu and t_start + trim_s <= r["t_mono_s"] <= t_end]


def derive(result: dict, peaks: dict) -> dict:
    """Achieved rates and fractions of peak from a scenario's timing and work model.

    peaks: {"datasheet": {...} | None, "measured": {...} | None} with bf16_tensor / fp16_tensor /
    fp32 FLOP/s and dram bytes/s. A fraction whose peak is unknown is NaN.
    """
    nan = math.nan
    ms = result.get("kernel_ms", nan)
    seconds = ms / 1e3 if ms and math.isfinite(ms) else nan
    flops = result.get("flops_per_call", 0.0)
    nbytes = result.get("bytes_per_call", 0.0)
    tflops = flops / seconds / 1e12 if seconds == seconds else nan
    gbps = nbytes / seconds / 1e9 if seconds == seconds else nan

    def frac(achieved_per_s, key, which):
        table = peaks.get(which) or {}
        peak = table.get(key) if key else None
        return 100.0 * achieved_per_s / peak if peak and achieved_per_s == achieved_per_s else nan

    unit = result.get("unit")
    dram = result.get("dram_bound", False)
    return {
        "tflops": tflops,
        "gbps": gbps,
        "mfu_pct": frac(tflops * 1e12, unit, "datasheet"),
        "mfu_measured_pct": frac(tflops * 1e12, unit, "measured"),
        "mbu_pct": frac(gbps * 1e9, "dram" if dram else None, "datasheet"),
        "mbu_measured_pct": frac(gbps * 1e9, "dram" if dram else None, "measured"),
    }


def summarize(rows: list[dict], results: list[dict], peaks: dict, gpu: int, columns=COLUMNS,
              trim_s: float = TRIM_S) -> list[dict]:
    """One row per scenario result: its facts, its metric statistics, and what it achieved."""
    present = [c for c in columns if any(c in r for r in rows)]
    summary = []
    for res in results:
        window = steady_rows(rows, gpu, res["t_start"], res["t_end"], trim_s)
        row = dict(res)
        row["n_samples"] = len(window)
        row.update(metric_stats(window, present))
        row.update(derive(res, peaks))
        summary.append(row)
    return summary
