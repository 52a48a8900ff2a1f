"""Per-window summary: medians and spread of every sampled metric over a window's steady rows, beside
the ground truth (achieved TFLOP/s and useful GB/s, MFU, MBU, link share, tokens/s), the energy the counter
gives between the window's two ends, and the useful work per joule.

Each column counts the rows whose value covers only time inside the window: a value can reach back before
its row's start (TRAIL_S), so a row counts for a column only from that far into the window.

Rows come column-wise (gpubench.read.samples.Samples, or a list of row dicts, turned into one): a window
is cut from one GPU's rows by binary search. numpy loads on the first summary, not with this module, so
that `gpubench list` stays light."""

from __future__ import annotations

import math

from gpubench.metrics import COLUMNS, finite, pct
from gpubench.read.energy import energy_between, energy_power_w, per_joule

# the summary columns made here that their names do not tell (gpubench.record.columns.DECLARERS names this)
SUMMARY_COLUMNS = {
    "windows": "text",
    "t_start": "time",
    "t_end": "time",
    "n_samples": "int",
    "speedup_vs_baseline": "float",
    "link_gbps": "float",
    "rate_withheld": "text",
}

# NVML's utilization and power average over a window of up to a second: the first half second of each
# window still carries what ran before it.
TRIM_S = 0.5

# How far before a sample row's start its value may reach, measured where the GPU stops at a known time (the
# last step a watched job stamped on the GPU's timeline, in the committed watch runs on an H100 and an H200):
# GPM's values are counters read at the driver's last refresh, 0.03 to 0.17 s before the row's end
# (constant within a run, not between runs); NVML's utilization, an average over its own window, still read
# the stopped GPU in a row that began 0.15 s after it, never in one 0.25 s after; the board power averages
# over the last second. Counted alike whichever source gave the column (CUPTI's trail is shorter): a row
# counts for a column only from this far into its window.
PROFILING = (
    "graphics_active_pct",
    "sm_active_pct",
    "sm_occupancy_pct",
    "tensor_active_pct",
    "dram_active_pct",
    "fp64_active_pct",
    "fp32_active_pct",
    "fp16_active_pct",
)
TRAIL_S = {
    **dict.fromkeys(PROFILING, 0.2),
    "gpu_util_pct": 0.4,
    "mem_util_pct": 0.4,
    "dcgm_gpu_util_pct": 0.4,
    "power_w": 1.0,
}
# the columns a row must have samples for, if the run recorded them, or it is too short to measure
NEEDED = ("gpu_util_pct", "sm_active_pct", "sm_occupancy_pct", "tensor_active_pct", "dram_active_pct")


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


def covering(window, starts, trail_s: float):
    """The rows of window (Samples) whose value covers only time inside their window: their start at least
    trail_s after it (starts: the window's start, or each row's window start)."""
    import numpy as np

    keep = window.col("t_start_s") - trail_s >= np.asarray(starts, dtype=float) - 1e-9
    return window if keep.all() else window.take(keep)


def aligned_stats(window, starts, columns) -> dict:
    """metric_stats of each column over the rows that cover only its window (covering, by TRAIL_S)."""
    out = {}
    by_trail: dict[float, list] = {}
    for c in columns:
        by_trail.setdefault(TRAIL_S.get(c, 0.0), []).append(c)
    for trail, cols in by_trail.items():
        out.update(metric_stats(covering(window, starts, trail), cols))
    return out


def whole_rows(window, starts, recorded) -> int:
    """How many rows cover only the window for every column a row needs (NEEDED) that the run recorded."""
    trail = max((TRAIL_S.get(c, 0.0) for c in NEEDED if c in recorded), default=0.0)
    return len(covering(window, starts, trail))


def peak_conditions(rows, gpu: int, t_start: float, t_end: float) -> dict:
    """The SM clock and power seen while a peak was measured, over the rows inside its window."""
    window = steady_rows(rows, gpu, t_start, t_end, trim_s=0.0)
    stats = metric_stats(window, ("sm_clock_mhz", "power_w"))
    return {
        "sm_clock_mhz": stats["sm_clock_mhz"],
        "power_w": stats["power_w"],
        "power_w_energy": energy_power_w(window),
        "n_samples": len(window),
        "t_start": t_start,
        "t_end": t_end,
    }


def derive(result: dict, peaks: dict) -> dict:
    """Achieved rates and fractions of peak from a window's timing and work model: the work of one call
    (flops_per_call, bytes_per_call, ...) over its time (kernel_ms), then derive_per_second.

    peaks: {"datasheet": {...} | None, "measured": {...} | None} with bf16_tensor / fp16_tensor / fp32
    FLOP/s, dram, link and nvlink bytes/s. A fraction whose peak or whose bound does not apply is NaN.
    """
    nan = math.nan
    ms = result.get("kernel_ms", nan)
    seconds = ms / 1e3 if finite(ms) and ms > 0 else nan

    def per_s(amount):
        return amount / seconds if finite(amount) and finite(seconds) else nan

    rates = {f"{k}_per_s": per_s(result.get(f"{k}_per_call", default)) for k, default in PER_CALL.items()}
    return derive_per_second({**rates, **{k: result.get(k) for k in WORK_MODEL if k in result}}, peaks)


# A suite row's FLOP and byte rates come from the calls timed wholly inside its window, its counters (tensor,
# DRAM) from the whole window: the two agree where the calls tile the window (95% and more of it in every
# committed row of a kernel). Calls of a second or more leave a share of the window to calls timed only in part,
# whose work may or may not have run inside it (two calls of 1.5 s cover 75% of a 4 s window, whose counters held
# two GEMM bursts where the rate claims 2.67), and gaps between short calls leave the counters idle time the rate
# never saw. Under COVERED_SHARE the row gives its calls' time, and no rate beside counters of other seconds. A
# collective's algbw and busbw stay: nccl-tests defines them per call, and no counter judges them.
COVERED_SHARE = 0.9
RATES = ("tflops", "gbps", "traffic_gbps", "mfu_pct", "mfu_measured_pct", "mbu_pct", "mbu_measured_pct", "mbu_read_pct")


def uncovered(result: dict, t_start: float, t_end: float) -> str:
    """Why the row gives no rate, where its timed calls cover under COVERED_SHARE of [t_start, t_end]; else ''."""
    timed = result.get("timed_s")
    if not finite(timed):  # runs recorded before timed_s: every timed call took about the median
        n, ms = result.get("n_calls"), result.get("kernel_ms")
        timed = n * ms / 1e3 if finite(n) and finite(ms) else math.nan
    if not (finite(timed) and timed > 0 and t_end > t_start) or timed >= COVERED_SHARE * (t_end - t_start):
        return ""
    return (
        f"its {result['n_calls']} timed calls cover {pct(100 * timed / (t_end - t_start))} of its "
        f"{t_end - t_start:.2f} s window, so their FLOP/s and bytes/s would not come from the seconds of the "
        f"counters beside them (a rate needs {pct(100 * COVERED_SHARE)})"
    )


PER_CALL = {"flops": 0.0, "bytes": 0.0, "link_bytes": 0.0, "traffic": math.nan, "tokens": math.nan}  # and if not given
WORK_MODEL = ("bound", "unit", "roof", "bus_factor")  # what the rates are judged by


def derive_per_second(rates: dict, peaks: dict) -> dict:
    """Achieved rates and fractions of peak from work done per second: flops_per_s, bytes_per_s,
    link_bytes_per_s, traffic_per_s, tokens_per_s (each NaN where it is not a number), judged by the work
    model's bound, unit, roof and bus_factor. A watched job's rows are seconds of it, with no call to time;
    a benchmark's come here through derive. peaks as derive takes them."""
    nan = math.nan

    def rate(key):
        value = rates.get(f"{key}_per_s", PER_CALL[key])
        return value if finite(value) else nan

    def frac(achieved_per_s, key, which):
        peak = (peaks.get(which) or {}).get(key) if key else None
        return 100.0 * achieved_per_s / peak if peak and finite(achieved_per_s) else nan

    flops, nbytes, link, traffic = rate("flops"), rate("bytes"), rate("link_bytes"), rate("traffic")
    bound = rates.get("bound")
    unit = rates.get("unit") or None
    dram = "dram" if bound in ("dram", "both") else None  # decode ("both") is judged by MBU and MFU alike
    # kernels that read and write little (read, decode: their "roof" is "read") against the read peak too
    read_roof = "dram_read" if dram and rates.get("roof") == "read" else None
    # A collective as nccl-tests measures it (NVIDIA/nccl-tests doc/PERFORMANCE.md): algbw = size / time,
    # busbw = algbw x the collective's factor (2(n-1)/n for all-reduce), comparable with the links' rate.
    coll = bound == "interconnect"
    busbw = link * rates.get("bus_factor", nan) if coll else nan
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
        "tokens_per_s": rate("tokens"),
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
    pts = sorted(
        (r["tokens_per_call"], r["flops_per_call"] / r["bytes_per_call"])
        for r in rows
        if finite(r.get("tokens_per_call")) and r.get("bytes_per_call")
    )
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


def summarize(
    rows, results: list[dict], peaks: dict, columns=COLUMNS, trim_s: float = TRIM_S, ceiling=None
) -> list[dict]:
    """One row per result (a scenario or a phase on one GPU): its facts, metric statistics, achievements.
    rows: Samples, or row dicts. Each result's window runs from trim_s after its start to its end; its
    kernel_ms must time that window. ceiling(window, row, the GPU's rows) -> the tensor-pipe ceiling's columns
    (gpubench.truth.ceiling), from the caller, which knows the GPU."""
    from gpubench.read.samples import as_samples

    rows = as_samples(rows)
    present = [c for c in columns if rows.has(c)]
    recorded = rows.valued(present)
    summary = []
    for res in results:
        ws, we = res["t_start"] + trim_s, res["t_end"]
        mine = rows.of("gpu", res["gpu"])
        window = mine.window(ws, we)
        row = dict(res)
        row["n_samples"] = whole_rows(window, ws, recorded)
        row.update(aligned_stats(window, ws, present))
        joules, covered = energy_between(mine, ws, we)
        row["energy_used_j"] = joules
        row["power_w_energy"] = joules / covered if covered > 0 else math.nan
        row["windows"] = window_text([(ws, we)])
        row.update(derive(res, peaks))
        withheld = uncovered(res, ws, we)
        if withheld:
            row.update({k: math.nan for k in RATES}, rate_withheld=withheld)
        row.update(per_joule(row))
        if ceiling is not None:
            row.update(ceiling(covering(window, ws, TRAIL_S["tensor_active_pct"]), row, mine))
        summary.append(row)
    compare_to_baselines(summary)
    return summary


def window_text(windows) -> str:
    """The row's windows as its summary writes them: 'a-b' seconds of the monotonic clock, ';' between spans."""
    return ";".join(f"{a:.6f}-{b:.6f}" for a, b in windows)


def windows_of(text) -> list[tuple[float, float]]:
    """window_text read back; [] for none."""
    out = []
    for part in str(text or "").split(";"):
        a, _, b = part.partition("-")
        try:
            out.append((float(a), float(b)))
        except ValueError:
            continue
    return out
