"""The tensor-pipe ceiling: the FLOP rate the tensor pipes could have delivered in the time they were active.

    ceiling = tensor active / 100 × SM clock / peak clock × dense datasheet peak of the dtype × calibration

Tensor active is the share of cycles a tensor pipe was busy (GPM's ANY_TENSOR_UTIL, DCGM field 1004); the
peak clock is the one the datasheet's dense peak assumes (H100 SXM and H200: 132 SMs × 4 tensor cores × 512
dense bf16 multiply-adds × 2 FLOPs × 1830 MHz = 989.4 TFLOP/s). The calibration is the highest FLOP rate per
active cycle that any kernel measured on that GPU model reached in that dtype (highest(): GEMMs of every shape,
batched and skinny ones, attention forward and backward, convolutions, fused optimizers, fp8 products),
committed under results/calibration/ with every point, the kernel that set it, their median and spread. A
bound must hold for every kernel, so it takes the highest, not the typical: against the median of large GEMMs
(0.911 of the datasheet rate on an H200 in bf16) real training jobs ran up to 4% above it, with kernels outside
that set (attention, a 1x1 convolution) reaching 1.014. What that costs in tightness is the highest over the
median, said in docs/ceiling.md per job. Its error is the farthest the suite's own GEMMs lie from their median
(a GEMM measured sustained and in bursts, on several days): how far one measurement of a kernel may stray. A
calibration file without the broad set gives the highest of its GEMMs. A dtype a GPU model has no calibration
for gets no ceiling, except bf16, which gets the bare rule (calibration 1, no error known) and says so: it
bounds nothing, so no FLOP count is judged by it.

A row's ceiling averages tensor active × SM clock over its sample rows: the tensor pipes' active cycles per
second, whatever the clock did meanwhile. The FLOPs that ran (HFU) cannot be above its limit: the same average
with each row's highest SM clock over the time its counter value may cover, times 1 + the calibration's error.
The clock is read at a row's end while GPM's value ends 0.03 to 0.17 s before it (gpubench.read.summary.TRAIL_S),
so where the clock moves (a power cap pulling it down for a few tenths of a second) the row's own reading may be
of another moment than its activity. Where the FLOPs that ran are above the limit, the FLOP count is too large
(the global batch counted on one rank, a step counted twice) or the dtype names a slower unit than the one that
ran. It is a ceiling for any job, with no FLOP count at all.
"""

from __future__ import annotations

import json
import math
import statistics
from dataclasses import dataclass, field
from pathlib import Path

from gpubench.metrics import finite

# the summary columns made here that their names do not tell (gpubench.record.columns.DECLARERS names this)
SUMMARY_COLUMNS = {"tensor_ceiling_dtype": "text", "tensor_ceiling_basis": "text"}

# The clock each GPU's dense tensor peak assumes, by exact NVML name (as the datasheet table matches them).
PEAK_CLOCK_MHZ = {"NVIDIA H100 80GB HBM3": 1830.0, "NVIDIA H200": 1830.0}
TENSOR_DTYPES = ("bf16", "fp16", "tf32", "fp8")
UNIT_OF = {d: f"{d}_tensor" for d in TENSOR_DTYPES}
DTYPE_OF = {u: d for d, u in UNIT_OF.items()}
UNCALIBRATED = "bf16"  # the one dtype whose bare rule (calibration 1) may be shown without a calibration
COLUMNS = (
    "tensor_ceiling_tflops",
    "tensor_ceiling_pct",
    "tensor_ceiling_limit_pct",
    "tensor_ceiling_dtype",
    "tensor_ceiling_basis",
    "ran_over_ceiling",
)
CALIBRATION_DIR = Path(__file__).resolve().parents[2] / "results" / "calibration"


@dataclass(frozen=True)
class Calibration:
    """One GPU model's FLOPs per active tensor cycle for one dtype, as a share of its datasheet rate."""

    dtype: str
    factor: float  # the highest over the kernels measured
    error: float  # the farthest one of the suite's GEMMs lies from their median, relative: one measurement's stray
    n: int  # kernels measured
    file: str  # where it is committed, with its measurements
    what: str = ""  # the kernel that set the factor
    median: float = math.nan  # of the kernels measured: factor / median is what the bound gives up in tightness


@dataclass
class Ceiling:
    """What a GPU's ceiling needs: its name, peak clock, dense tensor peaks and calibrations by dtype."""

    gpu: str
    peak_clock_mhz: float
    peaks: dict  # unit ("bf16_tensor", ...) -> dense datasheet FLOP/s
    calibrations: dict = field(default_factory=dict)  # dtype -> Calibration

    def basis(self, dtype: str) -> tuple[float, float | None, str] | None:
        """(factor, error or None, how it is known) for a dtype; None where no ceiling may be claimed."""
        if UNIT_OF.get(dtype) not in self.peaks:
            return None
        cal = self.calibrations.get(dtype)
        if cal is not None:
            return (
                cal.factor,
                cal.error,
                (
                    f"calibrated: {cal.factor:.3f} of the datasheet rate per active cycle "
                    f"± {100 * cal.error:.1f}%, the highest of {cal.n} kernels ({cal.file})"
                ),
            )
        if dtype == UNCALIBRATED:
            return (
                1.0,
                None,
                (
                    "uncalibrated: tensor active × SM clock ÷ the peak's clock × the datasheet peak; "
                    "no calibration of this GPU model, so it judges no FLOP count"
                ),
            )
        return None


def _calibration_files(where: Path | None = None) -> list[Path]:
    """The committed calibrations: installed as gpubench.calibration, or in a checkout's results/calibration/."""
    if where is not None:
        return sorted(Path(where).glob("tensor-*.json"))
    try:
        from importlib import resources

        found = [
            Path(str(p))
            for p in resources.files("gpubench.calibration").iterdir()
            if p.name.startswith("tensor-") and p.name.endswith(".json")
        ]
        if found:
            return sorted(found)
    except (ModuleNotFoundError, FileNotFoundError, NotADirectoryError, TypeError):
        pass
    return sorted(CALIBRATION_DIR.glob("tensor-*.json"))


def load_calibrations(gpu: str, where: Path | None = None) -> dict:
    """dtype -> Calibration for the GPU NVML calls `gpu`, from the committed files (none where unreadable)."""
    out = {}
    for path in _calibration_files(where):
        try:
            data = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        if not isinstance(data, dict) or data.get("gpu") != gpu:
            continue
        tops = ((data.get("highest") or {}).get("dtypes") or {}) if isinstance(data.get("highest"), dict) else {}
        for dtype, d in (data.get("dtypes") or {}).items():
            if dtype in TENSOR_DTYPES and isinstance(d, dict) and finite(d.get("factor")) and finite(d.get("error")):
                top = tops.get(dtype) if isinstance(tops.get(dtype), dict) else {}
                if finite(top.get("factor")):  # the broad set: every kernel measured
                    high, n, what, mid = top["factor"], top.get("n"), top.get("what"), top.get("median")
                else:  # the suite's GEMMs alone
                    high, n, what, mid = d.get("highest", d["factor"]), d.get("n"), d.get("highest_what"), d["factor"]
                out[dtype] = Calibration(
                    dtype,
                    float(max(high, d["factor"])),
                    float(d["error"]),
                    int(n or 0),
                    f"results/calibration/{path.name}",
                    str(what or ""),
                    float(mid) if finite(mid) else math.nan,
                )
    return out


def ceiling_for(gpu: str, sheet: dict | None, where: Path | None = None) -> Ceiling | None:
    """The ceiling of the GPU NVML calls `gpu`, given its datasheet peaks; None where its peak clock or its
    tensor peaks are not known."""
    clock = PEAK_CLOCK_MHZ.get((gpu or "").strip())
    peaks = {u: v for u, v in (sheet or {}).items() if u in DTYPE_OF and finite(v) and v > 0}
    if clock is None or not peaks:
        return None
    return Ceiling(gpu.strip(), clock, peaks, load_calibrations(gpu.strip(), where))


def active_cycles_mhz(window, clock=None) -> tuple[float, int]:
    """Mean over the rows of tensor active × SM clock (MHz of tensor-active cycles), and how many rows had both;
    clock: each row's clock to use instead of its own reading (highest_clock_mhz)."""
    import numpy as np

    from gpubench.read.samples import as_samples

    window = as_samples(window)
    if not (window.has("tensor_active_pct") and window.has("sm_clock_mhz")):
        return math.nan, 0
    mhz = window.col("sm_clock_mhz") if clock is None else np.asarray(clock, dtype=float)
    product = window.col("tensor_active_pct") / 100.0 * mhz
    product = product[np.isfinite(product)]
    return (float(np.mean(product)), int(len(product))) if len(product) else (math.nan, 0)


def highest_clock_mhz(window, clocks=None):
    """Each row's highest SM clock over the time its tensor activity may cover: the readings from the last one at
    or before TRAIL_S before the row's start to the row's own (the clock is read at each row's end; GPM's value
    reaches back up to TRAIL_S before its row). clocks: the GPU's rows around the window (its own rows where
    None), whose readings before the window count too. NaN where the row has no reading of its own."""
    import numpy as np

    from gpubench.read.samples import as_samples
    from gpubench.read.summary import TRAIL_S

    window = as_samples(window)
    around = as_samples(clocks) if clocks is not None else window
    if not (len(window) and window.has("sm_clock_mhz") and around.has("sm_clock_mhz")):
        return np.full(len(window), math.nan)
    ends, mhz = around.col("t_end_s"), around.col("sm_clock_mhz")
    order = np.argsort(ends, kind="stable")
    ends, mhz = ends[order], mhz[order]
    first = np.maximum(np.searchsorted(ends, window.col("t_start_s") - TRAIL_S["tensor_active_pct"], "right") - 1, 0)
    last = np.searchsorted(ends, window.col("t_end_s") + 1e-9, "right")
    out = np.full(len(window), math.nan)
    for i, (a, b, own) in enumerate(zip(first, last, window.col("sm_clock_mhz"))):
        seen = mhz[a:b][np.isfinite(mhz[a:b])]
        if len(seen) and math.isfinite(own):
            out[i] = max(seen.max(), own)
    return out


def ceiling_dtype(dtype: str | None) -> str:
    """The dtype a row's ceiling is given in: its own where it runs on tensor cores, else bf16's (the share of
    the bf16 peak that ran on the tensor pipes, at most)."""
    return dtype if dtype in TENSOR_DTYPES else UNCALIBRATED


def columns(window, ceiling: Ceiling | None, dtype: str | None, ran_pct: float = math.nan, clocks=None) -> dict:
    """A summary row's ceiling columns from its window's sample rows; empty where no ceiling may be claimed.

    ran_pct: the FLOPs that ran, as a share of the dtype's dense peak (HFU; MFU where the count is of what ran);
    ran_over_ceiling is it over the calibrated limit: above 1, more ran than the pipes could deliver (NaN
    without a calibration). clocks: the GPU's rows around the window, for the limit's highest clocks."""
    if ceiling is None:
        return {}
    shown = ceiling_dtype(dtype)
    basis = ceiling.basis(shown)
    mhz, n = active_cycles_mhz(window)
    if basis is None or not n:
        return {}
    factor, error, said = basis
    peak = ceiling.peaks[UNIT_OF[shown]]
    flops = mhz / ceiling.peak_clock_mhz * peak * factor
    pct = 100.0 * flops / peak
    highest, _ = active_cycles_mhz(window, highest_clock_mhz(window, clocks))
    limit = 100.0 * highest / ceiling.peak_clock_mhz * factor * (1.0 + error) if error is not None else math.nan
    judged = dtype in TENSOR_DTYPES and finite(limit) and finite(ran_pct)
    return {
        "tensor_ceiling_tflops": flops / 1e12,
        "tensor_ceiling_pct": pct,
        "tensor_ceiling_limit_pct": limit,
        "tensor_ceiling_dtype": shown,
        "tensor_ceiling_basis": said,
        "ran_over_ceiling": over(ran_pct, limit) if judged else math.nan,
    }


def over(ran_pct: float, limit_pct: float) -> float:
    """The FLOPs that ran over the calibrated limit (above 1: more than the pipes could deliver)."""
    if not (finite(ran_pct) and finite(limit_pct)):
        return math.nan
    if limit_pct <= 0:
        return math.inf if ran_pct > 0 else 0.0
    return round(ran_pct / limit_pct, 9)  # a calibration's own GEMM sits on its limit: 1, not 1 + 1e-16


# --- calibration -------------------------------------------------------------------------------------


def factor(flops_per_s: float, mhz: float, peak_clock_mhz: float, peak: float) -> float:
    """A GEMM's FLOPs per active tensor cycle as a share of the datasheet's: achieved over the bare ceiling."""
    bare = mhz / peak_clock_mhz * peak
    return flops_per_s / bare if finite(flops_per_s) and finite(bare) and bare > 0 else math.nan


def calibrate(points: list[dict]) -> dict:
    """dtype -> {factor, error, n, highest, highest_what, lowest, spread} from measured points ({dtype, factor,
    what, ...}): the median, the farthest point from it, and the extremes with the kernel that set the highest.
    The error is the farthest point from the median, how far one measurement strays; the factor in force is the
    highest over every kernel measured (highest(), load_calibrations), since a bound must hold for every kernel."""
    out = {}
    for dtype in TENSOR_DTYPES:
        mine = [p for p in points if p.get("dtype") == dtype and finite(p.get("factor"))]
        if not mine:
            continue
        fs = [p["factor"] for p in mine]
        mid, top = statistics.median(fs), max(mine, key=lambda p: p["factor"])
        out[dtype] = {
            "factor": mid,
            "error": max(abs(f / mid - 1.0) for f in fs),
            "n": len(fs),
            "highest": top["factor"],
            "highest_what": str(top.get("what", "")),
            "lowest": min(fs),
            "spread": max(fs) / min(fs) - 1.0 if min(fs) > 0 else math.nan,
        }
    return out


def on_tensor_pipes(point: dict) -> bool:
    """Whether a point's FLOPs ran on the tensor pipes: its tensor pipes busier than its FP32 pipes (a point
    without those counters, a suite GEMM, did). A depthwise convolution runs on the FP32 pipes with its tensor
    pipes near idle: its FLOPs over its few tensor cycles read 5 to 17 times the datasheet rate on an H200, a
    rate no tensor pipe has, so it sets no rate per active tensor cycle."""
    fp32 = point.get("fp32_active_pct", (point.get("counters") or {}).get("fp32_active_pct"))
    tensor = point.get("tensor_active_pct")
    return not (finite(tensor) and finite(fp32) and fp32 > tensor)


def highest(points: list[dict]) -> dict:
    """dtype -> {factor, what, n, median, lowest, spread, beside} over every kernel measured: the highest rate
    per active cycle of the points whose FLOPs ran on the tensor pipes (a bound that holds for every kernel
    measured takes it; factor over median is what it gives up in tightness against a typical kernel), and
    `beside`, the points left out as work beside the tensor pipes."""
    out = {}
    for dtype in TENSOR_DTYPES:
        mine = [p for p in points if p.get("dtype") == dtype and finite(p.get("factor"))]
        kept = [p for p in mine if on_tensor_pipes(p)]
        if not kept:
            continue
        fs = [p["factor"] for p in kept]
        top = max(kept, key=lambda p: p["factor"])
        out[dtype] = {
            "factor": top["factor"],
            "what": str(top.get("what", "")),
            "n": len(fs),
            "median": statistics.median(fs),
            "lowest": min(fs),
            "spread": max(fs) / min(fs) - 1.0 if min(fs) > 0 else math.nan,
            "beside": [str(p.get("what", "")) for p in mine if not on_tensor_pipes(p)],
        }
    return out


def for_suite(gpu: str, sheet: dict | None, where: Path | None = None):
    """gpubench.read.summary.summarize's ceiling for a suite run's rows on this GPU: each kernel's FLOPs are
    what ran, so its MFU (of its unit's peak) is held to the ceiling of its unit's dtype."""
    found = ceiling_for(gpu, sheet, where)

    def hook(window, row: dict, clocks=None) -> dict:
        dtype = DTYPE_OF.get(row.get("unit") or "")
        return columns(window, found, dtype, row.get("mfu_pct", math.nan) if dtype else math.nan, clocks)

    return hook
