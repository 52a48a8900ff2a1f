"""What nvidia-smi shows, read through NVML directly: utilization, power, SM clock, memory, energy."""

from __future__ import annotations

from gpubench.record import nvml

from . import Source, SourceUnavailable


class NvmlSource(Source):
    name = "nvml"
    columns = ("gpu_util_pct", "mem_util_pct", "power_w", "sm_clock_mhz", "mem_used_mib", "energy_j")
    resolution = {
        "gpu_util_pct": "1 percentage point; NVML's own window (1/6 s to 1 s by GPU) trails the reading",
        "mem_util_pct": "1 percentage point, same window as gpu_util_pct",
        "power_w": "1 mW; averaged over the last second on Ampere and newer",
        "sm_clock_mhz": "1 MHz, instantaneous",
        "mem_used_mib": "1 byte, instantaneous",
        "energy_j": "1 mJ, cumulative since the driver loaded",
    }

    def __init__(self):
        self._handles: dict[int, object] = {}

    def open(self, gpus):
        try:
            self._handles = {g: nvml.handle(g) for g in gpus}
        except nvml.GpuUnavailable as err:
            raise SourceUnavailable(str(err)) from None

    def read(self):
        return {g: nvml.read_basic(h) for g, h in self._handles.items()}

    def close(self):
        self._handles = {}
