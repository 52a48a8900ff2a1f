"""The metric columns every source writes, and where users find the same series in DCGM.

A column is named for what it measures, with its unit in the name. Profiling columns from NVML GPM
and from DCGM share names because they read the same hardware counters; the sampler records one of
the two, never both.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Metric:
    column: str
    label: str  # short label for tables and plots
    dcgm_id: int | None  # DCGM field id, for users' DCGM / Prometheus dashboards
    dcgm_name: str | None
    dcgm_short: str | None  # the header `dcgmi dmon` prints for this field
    meaning: str


METRICS: tuple[Metric, ...] = (
    Metric("gpu_util_pct", "GPU util (nvidia-smi)", 203, "DCGM_FI_DEV_GPU_UTIL", "GPUTL",
           "share of the sample window in which at least one kernel was running"),
    Metric("mem_util_pct", "memory util (nvidia-smi)", 204, "DCGM_FI_DEV_MEM_COPY_UTIL", "MCUTL",
           "share of the sample window in which device memory was being read or written"),
    Metric("power_w", "power", 155, "DCGM_FI_DEV_POWER_USAGE", "POWER", "board power draw in watts"),
    Metric("sm_clock_mhz", "SM clock", 100, "DCGM_FI_DEV_SM_CLOCK", "SMCLK", "SM clock in MHz"),
    Metric("mem_used_mib", "memory used", 252, "DCGM_FI_DEV_FB_USED", "FBUSD", "device memory in use, MiB"),
    Metric("graphics_active_pct", "graphics engine active", 1001, "DCGM_FI_PROF_GR_ENGINE_ACTIVE", "GRACT",
           "share of time the graphics/compute engine was busy"),
    Metric("sm_active_pct", "SM active", 1002, "DCGM_FI_PROF_SM_ACTIVE", "SMACT",
           "share of time an SM had at least one warp resident, averaged over all SMs"),
    Metric("sm_occupancy_pct", "SM occupancy", 1003, "DCGM_FI_PROF_SM_OCCUPANCY", "SMOCC",
           "resident warps over the SMs' maximum, averaged over time and SMs"),
    Metric("tensor_active_pct", "tensor active", 1004, "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", "TENSO",
           "share of cycles the tensor (matrix) pipes were busy"),
    Metric("dram_active_pct", "DRAM active", 1005, "DCGM_FI_PROF_DRAM_ACTIVE", "DRAMA",
           "share of cycles the device-memory interface was sending or receiving data"),
    Metric("fp64_active_pct", "FP64 active", 1006, "DCGM_FI_PROF_PIPE_FP64_ACTIVE", "FP64A",
           "share of cycles the FP64 pipe was busy"),
    Metric("fp32_active_pct", "FP32 active", 1007, "DCGM_FI_PROF_PIPE_FP32_ACTIVE", "FP32A",
           "share of cycles the FP32 pipe was busy"),
    Metric("fp16_active_pct", "FP16 active", 1008, "DCGM_FI_PROF_PIPE_FP16_ACTIVE", "FP16A",
           "share of cycles the FP16 pipe was busy"),
    Metric("dcgm_gpu_util_pct", "GPU util (DCGM)", 203, "DCGM_FI_DEV_GPU_UTIL", "GPUTL",
           "field 203 as dcgmi reports it: the same counter as nvidia-smi's GPU-Util"),
    # The same NVML counters read by the literal `nvidia-smi` process, kept apart so a user can
    # check that gpubench reports the very number they know.
    Metric("smi_gpu_util_pct", "GPU util (nvidia-smi process)", 203, "DCGM_FI_DEV_GPU_UTIL", None,
           "utilization.gpu as printed by the nvidia-smi command"),
    Metric("smi_mem_util_pct", "memory util (nvidia-smi process)", 204, "DCGM_FI_DEV_MEM_COPY_UTIL", None,
           "utilization.memory as printed by the nvidia-smi command"),
    Metric("smi_power_w", "power (nvidia-smi process)", 155, "DCGM_FI_DEV_POWER_USAGE", None,
           "power.draw as printed by the nvidia-smi command"),
    Metric("smi_sm_clock_mhz", "SM clock (nvidia-smi process)", 100, "DCGM_FI_DEV_SM_CLOCK", None,
           "clocks.sm as printed by the nvidia-smi command"),
)

BY_COLUMN = {m.column: m for m in METRICS}
COLUMNS = tuple(m.column for m in METRICS)

# dcgmi reports profiling fields (1001-1008) as ratios in [0, 1]; the columns are percent.
RATIO_FIELDS = frozenset(range(1001, 1009))

PROFILING_COLUMNS = (
    "graphics_active_pct", "sm_active_pct", "sm_occupancy_pct", "tensor_active_pct",
    "dram_active_pct", "fp64_active_pct", "fp32_active_pct", "fp16_active_pct",
)
