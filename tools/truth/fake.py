"""The dry run of tools/truth/gpu.py: CPU matmuls, and counters made from when they ran, read 0.13 s late (as
GPM's are)."""

from __future__ import annotations

import math
import time
from pathlib import Path

from gpubench.truth import ceiling
from tools.truth.device import Gpu
from tools.truth.probe import COUNTERS, ROOT


class FakeGpu(Gpu):
    """The dry run: CPU matmuls, and counters made from when they ran, read 0.13 s late (as GPM's are)."""

    LAG_S = 0.13
    device, shrink = "cpu", 16  # --broad: tools/truth/kernels.py's set on the CPU, each size divided by 16
    refused: dict = {}  # no NVML here: nothing refused (Gpu's comes from its GPM counters)

    def __init__(self):
        import torch

        from gpubench.truth.peaks import datasheet_for

        self.torch = torch
        self.name, self.slug = "NVIDIA H100 80GB HBM3", "dry-run"
        self.ceiling = ceiling.ceiling_for(self.name, datasheet_for(self.name))
        self.busy: list[tuple[float, float]] = []
        self._last, self._energy = time.monotonic(), 0.0

    def _busy(self, a: float, b: float) -> float:
        return sum(max(0.0, min(b, y) - max(a, x)) for x, y in self.busy) / (b - a) if b > a else 0.0

    def sample(self) -> dict:
        now = time.monotonic()
        f = self._busy(self._last - self.LAG_S, now - self.LAG_S)
        self._energy += (100 + 500 * f) * (now - self._last)
        self._last = now
        values = dict.fromkeys(COUNTERS, math.nan)
        values.update(sm_active_pct=97 * f, tensor_active_pct=95 * f, hmma_tensor_util_pct=95 * f, fp32_active_pct=1.0)
        return {
            "gpu_util_pct": 100.0 * self._busy(now - 0.3, now - 0.1),
            "power_w": 100 + 500 * f,
            "sm_clock_mhz": 1400.0 if f > 0.5 else 1980.0,
            "energy_j": self._energy,
            **values,
        }

    def gemms(self, say):
        torch = self.torch
        a, b = torch.randn(256, 256), torch.randn(256, 256)
        for label, dtype in (("cpu matmul as bf16", "bf16"), ("cpu matmul as fp16", "fp16")):
            yield label, dtype, ((lambda: a @ b), 2.0 * 256**3)

    def _bursts(self, run, calls: int, seconds: float, idle_s: float) -> list[tuple[float, float]]:
        spans, deadline = [], time.monotonic() + seconds
        while True:
            t0 = time.monotonic()
            for _ in range(calls):
                run()
            spans.append((t0, time.monotonic()))
            self.busy.append(spans[-1])
            if time.monotonic() >= deadline:
                return spans
            time.sleep(idle_s)

    def run_for(self, gemm, warm_s: float, timed_s: float, duty: float):
        run, flops = gemm
        self._bursts(run, 10, warm_s, 0.0)
        spans = self._bursts(run, 10, timed_s, 0.0 if duty >= 1 else 0.02 * (1 - duty) / duty)
        return (spans[0][0], spans[-1][1]), flops * 10 * len(spans)

    def square_wave(self, on_s: float, off_s: float, cycles: int) -> list[tuple[float, float]]:
        time.sleep(off_s)
        edges = []
        for _ in range(cycles):
            edges.append((time.monotonic(), time.monotonic() + on_s))
            self.busy.append(edges[-1])
            time.sleep(on_s + off_s)
        return edges

    def watch(self, run: Path, argv: list[str], seconds: float) -> int | None:
        """In this process, with counters faked; the dry run's jobs last seconds, so `seconds` is not needed."""
        import os

        from gpubench.job import watchcmd as watch
        from gpubench.job.watcher import WatchOptions
        from gpubench.record.config import RecordingConfig
        from gpubench.record.gpus import Gpu as NvmlGpu
        from gpubench.record.sources import Source

        class Counters(Source):  # what a GPU at a third of its tensor pipes would read, for the dry run
            name, columns = (
                "fake",
                ("gpu_util_pct", "sm_active_pct", "tensor_active_pct", "sm_clock_mhz", "power_w", "energy_j"),
            )

            def __init__(self):
                self.energy = 0.0

            def open(self, gpus):
                self.gpus = gpus

            def read(self):
                self.energy += 50.0
                return {
                    g: {
                        "gpu_util_pct": 90.0,
                        "sm_active_pct": 80.0,
                        "tensor_active_pct": 30.0,
                        "sm_clock_mhz": 1980.0,
                        "power_w": 500.0,
                        "energy_j": self.energy,
                    }
                    for g in self.gpus
                }

            def close(self):
                pass

        os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
        gpu = NvmlGpu(0, "GPU-00000000-0000-0000-0000-000000000000", self.name, None)
        opts = WatchOptions(run, [gpu], {"name": self.name}, RecordingConfig(interval_s=0.1, sources=[Counters()]))
        code, _ = watch.run(opts, argv)
        return code

    def release(self) -> None:
        pass

    def close(self) -> None:
        pass
