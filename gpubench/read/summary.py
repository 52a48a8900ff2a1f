"""Per-window summary: medians and spread of every sampled metric over a window's steady rows, beside
the ground truth (achieved TFLOP/s and useful GB/s, MFU, MBU, link share, tokens/s), the mean power that
the energy counter gives, and the useful work per joule.

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


def energy_used_j(window) -> float:
    """What the energy counter rose by from the window's first row to its last (Samples, or row dicts)."""
    import numpy as np

    from gpubench.read.samples import as_samples

    window = as_samples(window)
    if not len(window) or not window.has("energy_j"):
        return math.nan
    energy = window.col("energy_j")
    known = energy[np.isfinite(energy)]
    return float(known[-1] - known[0]) if len(known) >= 2 else math.nan


def per_joule(row: dict) -> dict:
    """Energy per call and useful work per joule, from the window's mean power and the time per call.

    The calls run back to back, so a call's energy is the mean power times its GPU time (idle power
    included: it is what the GPU drew to do the work). Work per joule follows the ground truth's rules:
    useful GB per joule where MBU or the link share applies, TFLOP per kJ where MFU does.
    """
    nan = math.nan
    power, ms = row.get("power_w_energy", nan), row.get("kernel_ms", nan)
    j = power * ms / 1e3 if finite(power) and finite(ms) and ms > 0 else nan
    bound, tokens = row.get("bound"), row.get("tokens_per_call", nan)

    def per_j(amount, applies):
        return amount / j if applies and finite(amount) and finite(j) and j > 0 else nan

    return {"j_per_call": j,
            "gb_per_j": per_j(row.get("bytes_per_call", nan) / 1e9, bound in ("dram", "both", "link")),
            "tflop_per_kj": per_j(row.get("flops_per_call", nan) / 1e9, bool(row.get("unit")) and bound != "link"),
            "tokens_per_j": per_j(tokens, finite(tokens) and tokens > 0),
            "j_per_token": j / tokens if finite(tokens) and tokens > 0 else nan}


def joules(row: dict) -> dict:
    """The row's energy columns as its summary holds them, or computed from its power and time per call
    where the run was summarized before these columns existed."""
    return {k: row[k] if k in row else v for k, v in per_joule(row).items()}


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
    dram = "dram" if bound in ("dram", "both") else None  # decode ("both") is judged by MBU and MFU alike
    # kernels that read and write little (read, decode: their "roof" is "read") against the read peak too
    read_roof = "dram_read" if dram and result.get("roof") == "read" else None
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
        "mbu_pct": frac(nbytes, dram, "datasheet"),
        "mbu_measured_pct": frac(nbytes, dram, "measured"),
        "mbu_read_pct": frac(nbytes, read_roof, "measured"),
        "tokens_per_s": per_s(result.get("tokens_per_call", nan)),
        "link_pct": frac(link, "link" if bound == "link" else None, "datasheet"),
        "algbw_gbps": link / 1e9 if coll else nan,
        "busbw_gbps": busbw / 1e9,
        "nvlink_pct": frac(busbw, "nvlink" if coll else None, "datasheet"),
    }


def ridge_flop_per_byte(peaks: dict, which: str | None = None, unit: str = "bf16_tensor") -> float | None:
    """The arithmetic intensity where the compute roof meets the DRAM roof: peak FLOP/s over bandwidth.

    which: "datasheet" or "measured"; None takes each peak as the roofline draws it, measured where known.
    """
    sheet, meas = peaks.get("datasheet") or {}, peaks.get("measured") or {}
    pick = (lambda k: meas.get(k) or sheet.get(k)) if which is None else (peaks.get(which) or {}).get
    flops, bw = pick(unit), pick("dram")
    return flops / bw if flops and bw else None


def batch_at(rows: list[dict], intensity: float) -> float:
    """The batch (tokens per call) at which a sweep's arithmetic intensity reaches `intensity`, interpolated
    between its points on log scales; NaN outside the sweep."""
    pts = sorted((r["tokens_per_call"], r["flops_per_call"] / r["bytes_per_call"]) for r in rows
                 if finite(r.get("tokens_per_call")) and r.get("bytes_per_call"))
    for (b0, i0), (b1, i1) in zip(pts, pts[1:]):
        if i0 <= intensity <= i1 and i1 > i0:
            f = math.log(intensity / i0) / math.log(i1 / i0)
            return math.exp(math.log(b0) + f * math.log(b1 / b0))
    return math.nan


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
        row["energy_used_j"] = energy_used_j(window)
        row.update(derive(res, peaks))
        row.update(per_joule(row))
        summary.append(row)
    compare_to_baselines(summary)
    return summary
