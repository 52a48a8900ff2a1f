"""`gpu_util_pct` and friends: exactly the NVML counters `nvidia-smi` prints."""

from __future__ import annotations

from gpubench import nvml

from . import Source, SourceUnavailable


class NvmlSource(Source):
    name = "nvml"
    columns = ("gpu_util_pct", "mem_util_pct", "power_w", "sm_clock_mhz", "mem_used_mib")

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
