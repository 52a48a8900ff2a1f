"""Per-window summary: medians and spread of every sampled metric over a window's steady rows, beside
the ground truth (achieved TFLOP/s and useful GB/s, MFU, MBU, link share) and the mean power that the
energy counter gives.

Rows come column-wise (gpubench.read.samples.Samples, or a list of row dicts, turned into one): a window
is cut from one GPU's rows by binary search. numpy loads on the first summary, not with this module, so
that `gpubench list` stays light."""

from __future__ import annotations

import math

from gpubench.metrics import COLUMNS, finite

# NVML's utilization and power average over a window of up to a second: the first half second of each
# window still carries what ran before it.
TRIM_S = 0.5


def row_label(row: dict) -> str:
    """A summary row's name: its scenario, and its rank in a run under torchrun."""
    rank = row.get("rank")
    ranked = isinstance(rank, int) and not isinstance(rank, bool)
    return f"{row['scenario']} · rank {rank}" if ranked else row["scenario"]


def metric_stats(rows, columns) -> dict:
    """median, p10, p90 of each column over rows (Samples, or row dicts); NaN where no finite value exists."""
    from gpubench.read.samples import as_samples, finite_values, quantiles

    window, out = as_samples(rows), {}
    for c in columns:
        vals = finite_values(window, c)
        stats = quantiles(vals, (0.5, 0.1, 0.9)) if len(vals) else [math.nan] * 3
        out.update({f"{c}{suffix}": v for suffix, v in zip(("", "_p10", "_p90"), stats)})
    return out


def steady_rows(rows, gpu: int, t_start: float, t_end: float, trim_s: float = TRIM_S):
    """Rows of `gpu` whose whole interval lies inside [t_start + trim_s, t_end], as Samples."""
    from gpubench.read.samples import as_samples

    return as_samples(rows).of("gpu", gpu).window(t_start + trim_s, t_end)


def energy_power_w(window) -> float:
    """Mean power over the window from the energy counter: exact where the sampled power trails by a second."""
    import numpy as np

    from gpubench.read.samples import as_samples

    window = as_samples(window)
    energy, ends = window.col("energy_j"), window.col("t_end_s")
    known = np.flatnonzero(np.isfinite(energy))
    if len(known) < 2 or ends[known[-1]] <= ends[known[0]]:
        return math.nan
    first, last = known[0], known[-1]
    return float((energy[last] - energy[first]) / (ends[last] - ends[first]))


def peak_conditions(rows, gpu: int, t_start: float, t_end: float) -> dict:
    """The SM clock and power seen while a peak was measured, over the rows inside its window."""
    window = steady_rows(rows, gpu, t_start, t_end, trim_s=0.0)
    stats = metric_stats(window, ("sm_clock_mhz", "power_w"))
    return {"sm_clock_mhz": stats["sm_clock_mhz"], "power_w": stats["power_w"],
            "power_w_energy": energy_power_w(window), "n_samples": len(window), "t_start": t_start, "t_end": t_end}


def derive(result: dict, peaks: dict) -> dict:
    """Achieved rates and fractions of peak from a window's timing and work model.

    peaks: {"datasheet": {...} | None, "measured": {...} | None} with bf16_tensor / fp16_tensor / fp32
    FLOP/s, dram, link and nvlink bytes/s. A fraction whose peak or whose bound does not apply is NaN.
    """
    nan = math.nan
    ms = result.get("kernel_ms", nan)
    seconds = ms / 1e3 if finite(ms) and ms > 0 else nan

    def per_s(amount):
        return amount / seconds if finite(amount) and finite(seconds) else nan

    def frac(achieved_per_s, key, which):
        peak = (peaks.get(which) or {}).get(key) if key else None
        return 100.0 * achieved_per_s / peak if peak and finite(achieved_per_s) else nan

    flops, nbytes, link = (per_s(result.get(k, 0.0)) for k in ("flops_per_call", "bytes_per_call", "link_bytes_per_call"))
    traffic = per_s(result.get("traffic_per_call", nan))
    bound = result.get("bound")
    unit = result.get("unit") or None
    # A collective as nccl-tests measures it (NVIDIA/nccl-tests doc/PERFORMANCE.md): algbw = size / time,
    # busbw = algbw x the collective's factor (2(n-1)/n for all-reduce), comparable with the links' rate.
    coll = bound == "interconnect"
    busbw = link * result.get("bus_factor", nan) if coll else nan
    return {
        "tflops": flops / 1e12,
        "gbps": nbytes / 1e9,
        "traffic_gbps": traffic / 1e9,
        "link_gbps": link / 1e9 if bound == "link" else nan,
        "mfu_pct": frac(flops, unit, "datasheet") if bound != "link" else nan,
        "mfu_measured_pct": frac(flops, unit, "measured") if bound != "link" else nan,
        "mbu_pct": frac(nbytes, "dram" if bound == "dram" else None, "datasheet"),
        "mbu_measured_pct": frac(nbytes, "dram" if bound == "dram" else None, "measured"),
        "link_pct": frac(link, "link" if bound == "link" else None, "datasheet"),
        "algbw_gbps": link / 1e9 if coll else nan,
        "busbw_gbps": busbw / 1e9,
        "nvlink_pct": frac(busbw, "nvlink" if coll else None, "datasheet"),
    }


def compare_to_baselines(summary: list[dict]) -> None:
    """Each row that names a baseline gets how many times faster it ran than that baseline."""
    by_name = {r["scenario"]: r for r in summary if "scenario" in r}
    for row in summary:
        base = by_name.get(row.get("baseline") or "")
        if base and finite(base.get("kernel_ms")) and finite(row.get("kernel_ms")):
            row["speedup_vs_baseline"] = base["kernel_ms"] / row["kernel_ms"]


def summarize(rows, results: list[dict], peaks: dict, columns=COLUMNS,
              trim_s: float = TRIM_S) -> list[dict]:
    """One row per result (a scenario or a phase on one GPU): its facts, metric statistics, achievements.
    rows: Samples, or row dicts."""
    from gpubench.read.samples import as_samples

    rows = as_samples(rows)
    present = [c for c in columns if rows.has(c)]
    summary = []
    for res in results:
        window = steady_rows(rows, res["gpu"], res["t_start"], res["t_end"], trim_s)
        row = dict(res)
        row["n_samples"] = len(window)
        row.update(metric_stats(window, present))
        row["power_w_energy"] = energy_power_w(window)
        row.update(derive(res, peaks))
        summary.append(row)
    compare_to_baselines(summary)
    return summary
