"""DCGM's profiling metrics (SM active, occupancy, pipes, DRAM) through NVML GPM, Hopper and newer.

GPM values are differences of counters between two samples. Each read takes one new sample and pairs
it with the previous one, so consecutive intervals chain with no gap and every row is a fresh interval:
the sampler never reads faster than `min_interval_s`, the driver's refresh period of about 100 ms.

A driver that does not know one of the metric ids refuses the whole request. The eight asked for here are
GPM's first ones, so only a driver that dropped one would; should it, each id is asked alone once, the refused
ones read NaN from then on, and that read fails naming them (its row is left empty, the source is kept).

Read at that period, a pair now and then holds no refresh between its two samples: every activity reads
exactly 0 and DRAM 0 or nothing, idle or in the middle of busy work (GPU-Util 96-98%, steps stamped on the
GPU inside the interval; up to 6 rows of about 200 in a watch committed on an H200). An idle GPU still moves
DRAM (0.0002% and more in every other idle row committed), so such a pair is no reading: its row is left
empty, and the next pairs with the last sample that was one.
"""

from __future__ import annotations

import math

import pynvml

from gpubench.record import nvml

from . import Source, SourceUnavailable
from .holders import CountersBusy, busy_sentence

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
ACTIVITY = ("graphics_active_pct", "sm_active_pct", "sm_occupancy_pct", "tensor_active_pct")


class MetricsRefused(RuntimeError):
    """NVML refused some GPM metric ids on this driver: they are named, and read NaN from then on."""


UNSUPPORTED = (
    "does not support NVML GPM, which needs a Hopper or newer data-centre GPU; DCGM or CUPTI "
    "(pip install 'gpubench-ladder[cupti]') read these metrics on older GPUs"
)


def stale(values: dict) -> bool:
    """Whether a row's GPM values come from two samples with no refresh between them (see the docstring)."""
    dram = values.get("dram_active_pct", math.nan)
    return all(values.get(c) == 0.0 for c in ACTIVITY) and not (dram > 0)


class GpmSource(Source):
    name = "gpm"
    columns = tuple(METRIC_IDS)
    min_interval_s = 0.1
    resolution = {c: "continuous (counter differences over the row's interval)" for c in METRIC_IDS}

    def __init__(self):
        self._state: dict[int, dict] = {}
        self._ids = dict(METRIC_IDS)  # column -> id, less any the driver refused

    @staticmethod
    def supported(gpus: list[int]) -> bool:
        try:
            return all(nvml.gpm_supported(nvml.handle(g)) for g in gpus)
        except (nvml.GpuUnavailable, nvml.NVMLError):
            return False

    def open(self, gpus):
        try:
            for g in gpus:
                h = nvml.handle(g)
                if not nvml.gpm_supported(h):
                    raise SourceUnavailable(f"GPU {g} {UNSUPPORTED}")
                prev, spare = nvml.gpm_sample_alloc(), nvml.gpm_sample_alloc()
                self._state[g] = {"handle": h, "prev": prev, "spare": spare}
                nvml.gpm_sample_get(h, prev)
        except nvml.GpuUnavailable as err:
            self.close()
            raise SourceUnavailable(str(err)) from None
        except nvml.NVMLError as err:
            self.close()
            if nvml.code(err) == pynvml.NVML_ERROR_IN_USE:  # NVML's code for a resource another client holds
                raise CountersBusy(busy_sentence()) from None
            raise SourceUnavailable(f"NVML GPM could not start: {err}") from None
        except SourceUnavailable:
            self.close()
            raise

    def read(self):
        out, refused = {}, {}
        for g, st in self._state.items():
            try:
                nvml.gpm_sample_get(st["handle"], st["spare"])
            except nvml.NVMLError as err:
                if nvml.code(err) == pynvml.NVML_ERROR_IN_USE:  # taken by another reader mid-run: say who
                    raise CountersBusy(busy_sentence()) from None
                raise
            try:
                values = self._metrics(st)
            except nvml.NVMLError as err:
                refused.update(self._refuse(st, err))
                values = self._metrics(st)
            if stale(values):
                out[g] = dict.fromkeys(self.columns, math.nan)
                continue
            out[g] = {c: values.get(c, math.nan) for c in self.columns}
            # The new sample starts the next interval: no gap between intervals.
            st["prev"], st["spare"] = st["spare"], st["prev"]
        if refused:
            raise MetricsRefused(
                f"NVML GPM refused {', '.join(f'{c} (id {i})' for c, i in refused.items())} on "
                "this driver; they read NaN from here on"
            )
        return out

    def _metrics(self, st) -> dict:
        return dict(zip(self._ids, nvml.gpm_metrics(st["prev"], st["spare"], list(self._ids.values()))))

    def _refuse(self, st, err) -> dict:
        """Drop the ids NVML refuses when asked alone; re-raise where it refuses them all (not an id's fault)."""
        refused = nvml.gpm_refused(st["prev"], st["spare"], list(self._ids.values()))
        if len(refused) == len(self._ids):
            raise err
        dropped = {c: i for c, i in self._ids.items() if i in refused}
        self._ids = {c: i for c, i in self._ids.items() if i not in refused}
        return dropped

    def close(self):
        for st in self._state.values():
            nvml.gpm_sample_free(st["prev"])
            nvml.gpm_sample_free(st["spare"])
        self._state = {}
