"""Every column gpubench shows, in one table: what it measures, its short header and format for tables
and figures, and where users find the same series in DCGM.

A column is named for what it measures, with its unit in the name. Profiling columns from NVML GPM
and from DCGM share names because they read the same hardware counters; a recording holds one of the
two, never both. Derived columns (what a kernel achieved) are listed here too, so the console, the
report and the figures format every number alike.
"""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True)
class Metric:
    column: str
    label: str  # for legends and prose
    header: str  # short, for tables
    fmt: str  # one value; a pattern ending in % is shown through pct(), alike for every percentage
    meaning: str
    dcgm_id: int | None = None  # DCGM field id, for users' DCGM / Prometheus dashboards
    dcgm_name: str | None = None
    dcgm_short: str | None = None  # the header `dcgmi dmon` prints for this field
    sampled: bool = True  # False: derived from a run's timing and work model, not read from the GPU


GPU_UTIL_MEANING = (
    "share of the sample window in which at least one kernel, or a copy, was running on the "
    "GPU: it says nothing about how much of the GPU was used"
)

# The two tables keep a record's fields together, in Metric's order, so the formatter leaves them as they are.
# fmt: off
METRICS: tuple[Metric, ...] = (
    Metric("gpu_util_pct", "nvidia-smi GPU util", "nvidia-smi util", "{:.0f}%", GPU_UTIL_MEANING,
           203, "DCGM_FI_DEV_GPU_UTIL", "GPUTL"),
    Metric("mem_util_pct", "memory util (nvidia-smi)", "mem util", "{:.0f}%",
           "share of the sample window in which device memory was being read or written",
           204, "DCGM_FI_DEV_MEM_COPY_UTIL", "MCUTL"),
    Metric("power_w", "power", "power", "{:.0f} W", "board power draw, NVML's one-second average",
           155, "DCGM_FI_DEV_POWER_USAGE", "POWER"),
    Metric("sm_clock_mhz", "SM clock", "SM clock", "{:.0f} MHz", "SM clock", 100, "DCGM_FI_DEV_SM_CLOCK", "SMCLK"),
    Metric("mem_used_mib", "memory used", "mem used", "{:.0f} MiB", "device memory in use",
           252, "DCGM_FI_DEV_FB_USED", "FBUSD"),
    Metric("energy_j", "energy", "energy", "{:.1f} J", "energy counter since the driver loaded",
           156, "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", "TOTEC"),
    Metric("graphics_active_pct", "graphics engine active", "GR active", "{:.3g}%",
           "share of time the graphics/compute engine was busy", 1001, "DCGM_FI_PROF_GR_ENGINE_ACTIVE", "GRACT"),
    Metric("sm_active_pct", "SM active", "SM active", "{:.3g}%",
           "share of time an SM had at least one warp resident, averaged over all SMs",
           1002, "DCGM_FI_PROF_SM_ACTIVE", "SMACT"),
    Metric("sm_occupancy_pct", "SM occupancy", "occupancy", "{:.3g}%",
           "resident warps over the SMs' maximum, averaged over time and SMs",
           1003, "DCGM_FI_PROF_SM_OCCUPANCY", "SMOCC"),
    Metric("tensor_active_pct", "tensor active", "tensor active", "{:.3g}%",
           "share of cycles the tensor (matrix) pipes were busy", 1004, "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", "TENSO"),
    Metric("dram_active_pct", "DRAM active", "DRAM active", "{:.0f}%",
           "share of cycles the device-memory interface was sending or receiving data",
           1005, "DCGM_FI_PROF_DRAM_ACTIVE", "DRAMA"),
    Metric("fp64_active_pct", "FP64 active", "FP64 active", "{:.3g}%", "share of cycles the FP64 pipe was busy",
           1006, "DCGM_FI_PROF_PIPE_FP64_ACTIVE", "FP64A"),
    Metric("fp32_active_pct", "FP32 active", "FP32 active", "{:.3g}%", "share of cycles the FP32 pipe was busy",
           1007, "DCGM_FI_PROF_PIPE_FP32_ACTIVE", "FP32A"),
    Metric("fp16_active_pct", "FP16 active", "FP16 active", "{:.3g}%", "share of cycles the FP16 pipe was busy",
           1008, "DCGM_FI_PROF_PIPE_FP16_ACTIVE", "FP16A"),
    Metric("dcgm_gpu_util_pct", "GPU util (DCGM)", "DCGM util", "{:.0f}%",
           "field 203 as dcgmi reports it: the same counter as nvidia-smi's GPU-Util",
           203, "DCGM_FI_DEV_GPU_UTIL", "GPUTL"),
    # The same NVML counters read by the literal `nvidia-smi` process, kept apart so a user can
    # check that gpubench reports the very number they know.
    Metric("smi_gpu_util_pct", "nvidia-smi process GPU util", "smi util", "{:.0f}%",
           "utilization.gpu as printed by the nvidia-smi command", 203, "DCGM_FI_DEV_GPU_UTIL"),
    Metric("smi_mem_util_pct", "nvidia-smi process memory util", "smi mem util", "{:.0f}%",
           "utilization.memory as printed by the nvidia-smi command", 204, "DCGM_FI_DEV_MEM_COPY_UTIL"),
    Metric("smi_power_w", "nvidia-smi process power", "smi power", "{:.0f} W",
           "power.draw as printed by the nvidia-smi command", 155, "DCGM_FI_DEV_POWER_USAGE"),
    Metric("smi_sm_clock_mhz", "nvidia-smi process SM clock", "smi SM clock", "{:.0f} MHz",
           "clocks.sm as printed by the nvidia-smi command", 100, "DCGM_FI_DEV_SM_CLOCK"),
)

DERIVED: tuple[Metric, ...] = (
    Metric("kernel_ms", "GPU time per call", "kernel ms", "{:.4g}", "median GPU time per call (CUDA events)",
           sampled=False),
    Metric("steps_per_s", "steps per second", "steps/s", "{:.3g}", "steps the job reported per second",
           sampled=False),
    Metric("tflops", "achieved TFLOP/s", "TFLOP/s", "{:.3g}", "FLOPs of the work model per second", sampled=False),
    Metric("mfu_pct", "MFU", "MFU", "{:.2g}%", "achieved FLOP/s over the datasheet dense peak of the unit used",
           sampled=False),
    Metric("hfu_pct", "HFU", "HFU", "{:.2g}%",
           "every FLOP that ran (recomputation included) per second over the same peak as MFU", sampled=False),
    Metric("tensor_ceiling_tflops", "tensor ceiling", "ceiling TFLOP/s", "{:.3g}",
           "the FLOP/s the tensor pipes could deliver in the time they were active (gpubench.truth.ceiling)",
           sampled=False),
    Metric("tensor_ceiling_pct", "tensor ceiling", "ceiling", "{:.2g}%",
           "the tensor ceiling over the dense datasheet peak of its dtype", sampled=False),
    Metric("tensor_ceiling_limit_pct", "tensor ceiling with its error", "ceiling limit", "{:.2g}%",
           "the tensor ceiling at the highest clock read while each row's activity ran, with its calibration's "
           "error: what ran can be no more", sampled=False),
    Metric("ran_over_ceiling", "FLOPs that ran over the ceiling's limit", "ran/ceiling", "{:.3g}",
           "HFU over the calibrated tensor ceiling: above 1, the FLOP count is too large", sampled=False),
    Metric("tokens_per_s", "tokens per second", "tokens/s", "{:.4g}", "tokens processed per second",
           sampled=False),
    Metric("gbps", "useful GB/s", "GB/s", "{:.4g}",
           "useful bytes per second: each input read once, each output written once", sampled=False),
    Metric("traffic_gbps", "GB/s moved", "moved GB/s", "{:.4g}",
           "bytes the implementation really moves per second, where known", sampled=False),
    Metric("mbu_pct", "MBU", "MBU", "{:.0f}%", "useful bytes/s over the datasheet DRAM bandwidth", sampled=False),
    Metric("mbu_read_pct", "MBU against the read peak", "MBU read", "{:.0f}%",
           "useful bytes/s over the read bandwidth measured at the start, for kernels that write little",
           sampled=False),
    Metric("link_pct", "link", "link", "{:.0f}%",
           "bytes/s over the host link (PCIe) over its theoretical bandwidth per direction", sampled=False),
    Metric("power_w_energy", "mean power (energy counter)", "power (energy)", "{:.0f} W",
           "energy used over the window divided by its length", sampled=False),
    Metric("energy_used_j", "energy used", "energy J", "{:.4g}", "energy the GPU used over the window (energy counter)",
           sampled=False),
    Metric("j_per_call", "energy per call", "J/call", "{:.3g}", "energy used per call of the kernel", sampled=False),
    Metric("j_per_step", "energy per step", "J/step", "{:.3g}", "energy used per step of the job", sampled=False),
    Metric("j_per_token", "energy per token", "J/token", "{:.3g}", "energy used per token", sampled=False),
    Metric("tokens_per_j", "tokens per joule", "tokens/J", "{:.4g}", "tokens processed per joule", sampled=False),
    Metric("gb_per_j", "useful GB per joule", "GB/J", "{:.3g}", "useful bytes moved per joule, in GB",
           sampled=False),
    Metric("tflop_per_kj", "TFLOP per kilojoule", "TFLOP/kJ", "{:.4g}", "useful FLOPs per kilojoule, in TFLOP",
           sampled=False),
    Metric("algbw_gbps", "algorithm bandwidth", "algbw GB/s", "{:.4g}",
           "a collective's message size per rank over its time (nccl-tests' algbw)", sampled=False),
    Metric("busbw_gbps", "bus bandwidth", "busbw GB/s", "{:.4g}",
           "algbw times the collective's factor, 2(n-1)/n for all-reduce (nccl-tests' busbw)", sampled=False),
    Metric("nvlink_pct", "NVLink", "NVLink", "{:.0f}%",
           "busbw over the GPU's active NVLinks' rate per direction, as NVML reports it", sampled=False),
    Metric("arrival_delay_ms", "arrival delay", "late ms", "{:.3g}",
           "median over steps of how long after the first rank this rank reached the collective", sampled=False),
    Metric("wait_ms", "wait in the collective", "wait ms", "{:.3g}",
           "median over steps of how long this rank waited in the collective for the last rank", sampled=False),
)
# fmt: on

BY_COLUMN = {m.column: m for m in METRICS + DERIVED}
COLUMNS = tuple(m.column for m in METRICS)

# dcgmi reports profiling fields (1001-1008) as ratios in [0, 1]; the columns are percent.
RATIO_FIELDS = frozenset(range(1001, 1009))

# The ladder's sampled rungs, bottom up; the summary tables the console and the report print, in order: what
# nvidia-smi said beside the work done (and, for a job, the tensor ceiling and its rate), then the rungs above
# GPU-Util that tell the rows apart.
LADDER = ("gpu_util_pct", "sm_active_pct", "sm_occupancy_pct", "tensor_active_pct", "dram_active_pct")
TABLE = ("gpu_util_pct", "mfu_pct", "mbu_pct", "link_pct", "tflops", "gbps") + LADDER[1:]
WATCH_TABLE = ("gpu_util_pct", "mfu_pct", "tensor_ceiling_pct", "steps_per_s", "tflops") + LADDER[1:]


# The values a file may hold where a number is read: a share of time or of cycles that the GPU reports is at
# most 100% (a point more for counters whose average rounds past it), and no column gpubench writes holds a
# negative number or one past HUGE. MFU and MBU may pass 100%: a FLOP count gone wrong shows so, as a number.
SHARE_MAX_PCT = 101.0
HUGE = 1e30


def valid_range(column: str) -> tuple[float, float]:
    """(lowest, highest) that column may hold; a column of no metric is any number from 0 to HUGE."""
    m = BY_COLUMN.get(column)
    return (0.0, SHARE_MAX_PCT if m is not None and m.sampled and column.endswith("_pct") else HUGE)


def in_range(column: str, value: float) -> bool:
    lo, hi = valid_range(column)
    return lo <= value <= hi  # False for NaN and the infinities too


def beyond(column: str, value: float) -> str:
    """Where value lies outside column's range, in words: "below 0", "above 100%", "not finite"."""
    lo, hi = valid_range(column)
    if not math.isfinite(value):
        return "not finite"
    if value < lo:
        return f"below {lo:g}"
    return "above 100%" if hi == SHARE_MAX_PCT else f"above {hi:g}"


class OutOfRange(float):
    """A value read from a file that no GPU or work model gives (GPU-Util -1000%, a negative time): NaN to
    every computation and check, written "out of range" wherever the value would be shown. raw holds it."""

    def __new__(cls, raw):
        value = super().__new__(cls, math.nan)
        value.raw = raw
        return value


OUT_OF_RANGE = "out of range"


def finite(value) -> bool:
    """A number that exists: not None, not a bool, not NaN or infinite."""
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def fmt(value, pattern: str, missing: str = "n/a") -> str:
    """value formatted with pattern, or `missing` where the run has no such value. A number too large for its
    pattern (a FLOP count gone wrong) is written in exponent form, so no table or figure grows with it."""
    if not finite(value):
        return OUT_OF_RANGE if isinstance(value, OutOfRange) else missing
    text = pattern.format(value)
    if len(text) > 16:
        text = f"{value:.3g}" + pattern[pattern.index("}") + 1 :]
    return text


def pct(value, missing: str = "n/a") -> str:
    """A percentage with the digits its size needs, alike everywhere: 100%, 89%, 3.1%, 0.76%, <0.01%, 0%;
    1e+03% and beyond in exponent form."""
    if not finite(value):
        return OUT_OF_RANGE if isinstance(value, OutOfRange) else missing
    if abs(value) >= 1e4:
        return f"{value:.2g}%"
    if value == 0 or abs(value) >= 9.5:
        return f"{value:.0f}%"
    return f"{value:.2g}%" if abs(value) >= 0.01 else "<0.01%"


def fmt_value(column: str, value, missing: str = "n/a") -> str:
    """value formatted as the table says for its column; every percentage column through pct()."""
    pattern = BY_COLUMN[column].fmt
    return pct(value, missing) if pattern.endswith("%") else fmt(value, pattern, missing)
