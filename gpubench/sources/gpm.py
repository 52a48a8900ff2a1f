"""DCGM's profiling metrics (SM active, occupancy, pipes, DRAM) through NVML GPM, Hopper and newer.

GPM values are differences of counters between two samples. Each read takes one new sample and
pairs it with the previous one, so consecutive intervals chain with no gap. The driver refreshes
the counters about every 100 ms; a read sooner than that returns the last interval again instead
of dividing noise by a tiny interval.
"""

from __future__ import annotations

import math
import time

import pynvml

from gpubench import nvml

from . import Source, SourceUnavailable

METRIC_IDS = {
    "graphics_active_pct": pynvml.NVML_GPM_METRIC_GRAPHICS_UTIL,
    "sm_active_pct": pynvml.NVML_GPM_METRIC_SM_UTIL,
    "sm_occupancy_pct": pynvml.NVML_GPM_METRIC_SM_OCCUPANCY,
    "tensor_active_pct": pynvml.NVML_GPM_METRIC_ANY_TENSOR_UTIL,
    "dram_active_pct": pynvml.NVML_GPM_METRIC_DRAM_BW_UTIL,
    "fp64_active_pct": pynvml.NVML_GPM_METRIC_FP64_UTIL,
    "fp32_active_pct": pynvml.NVML_GPM_METRIC_FP32_UTIL,
    "fp16_active_pct": pynvml.NVML_GPM_METRIC_FP16_UTIL,
}


class GpmSource(Source):
    name = "gpm"
    columns = tuple(METRIC_IDS)
    min_interval_s = 0.1

    def __init__(self, clock=time.monotonic):
        self._clock = clock
        self._state: dict[int, dict] = {}

    def open(self, gpus):
        try:
            for g in gpus:
                h = nvml.handle(g)
                if not nvml.gpm_supported(h):
                    raise SourceUnavailable(
                        f"GPU {g} does not support NVML GPM, which needs a Hopper or newer "
                        "data-centre GPU; install DCGM to read these metrics")
                prev, spare = nvml.gpm_sample_alloc(), nvml.gpm_sample_alloc()
                nvml.gpm_sample_get(h, prev)
                self._state[g] = {"handle": h, "prev": prev, "spare": spare, "t": self._clock(),
                                  "last": {c: math.nan for c in self.columns}}
        except nvml.GpuUnavailable as err:
            self.close()
            raise SourceUnavailable(str(err)) from None
        except SourceUnavailable:
            self.close()
            raise

    def read(self):
        out = {}
        ids = list(METRIC_IDS.values())
        for g, st in self._state.items():
            now = self._clock()
            if now - st["t"] >= self.min_interval_s:
                nvml.gpm_sample_get(st["handle"], st["spare"])
                values = nvml.gpm_metrics(st["prev"], st["spare"], ids)
                st["last"] = dict(zip(self.columns, values))
                # The new sample starts the next interval: no gap between intervals.
                st["prev"], st["spare"], st["t"] = st["spare"], st["prev"], now
            out[g] = dict(st["last"])
        return out

    def close(self):
        for st in self._state.values():
            nvml.gpm_sample_free(st["prev"])
            nvml.gpm_sample_free(st["spare"])
        self._state = {}
