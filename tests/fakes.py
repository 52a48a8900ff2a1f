"""Fakes shared by the CPU tests: a metric source with scripted values, a backend with no GPU, scenarios
whose kernels do nothing."""

from __future__ import annotations

import time
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Callable

from gpubench.kernels.common import Prepared, Work

from gpubench.record.gpus import Gpu
from gpubench.record.sources import Source
from gpubench.suite.scenarios import Scenario
from gpubench.truth.timing import Timings

GPU = Gpu(nvml_index=0, uuid="GPU-00000000-1111-2222-3333-444444444444", name="NVIDIA H100 80GB HBM3", cuda_index=0)


class FakeSource(Source):
    """Returns values from a function of the read count, so tests know what each read says."""

    name = "fake"
    columns = ("gpu_util_pct", "sm_active_pct", "power_w")

    def __init__(self, values_for=None, fail_after: int | None = None):
        self.values_for = values_for or (lambda n: {"gpu_util_pct": 100.0, "sm_active_pct": 1.0, "power_w": 100.0})
        self.fail_after = fail_after
        self.reads = 0
        self.closed = 0
        self.gpus = []

    def open(self, gpus):
        self.gpus = gpus

    def read(self):
        self.reads += 1
        if self.fail_after is not None and self.reads > self.fail_after:
            raise RuntimeError("GPU is lost")
        return {g: self.values_for(self.reads) for g in self.gpus}

    def close(self):
        self.closed += 1


class FakeBackend:
    """Times nothing on a GPU: every call 'takes' call_ms."""

    def __init__(self, call_ms=2.0, interrupt_at: str | None = None, gpu: Gpu = GPU):
        self.call_ms = call_ms
        self.interrupt_at = interrupt_at
        self.gpu = gpu
        self.released = 0

    def resolve(self, cuda_index, all_gpus):
        return self.gpu, [self.gpu]

    def other_processes(self, gpu):
        return [4242]

    def device_info(self, gpu):
        return {
            "nvml_index": gpu.nvml_index,
            "cuda_index": gpu.cuda_index,
            "uuid": gpu.uuid,
            "name": gpu.name,
            "sm_count": 132,
            "memory_mib": 81559,
            "driver": "580.0",
            "cuda_driver": "13.0",
            "architecture": 9,
            "gpm_supported": True,
            "pcie": {"bytes_per_s": 63.0e9, "max_generation": 5, "max_width": 16},
        }

    def versions(self):
        return {"gpubench": "test"}

    def prepare(self, gpu):
        pass

    def measure_peaks(self, on_window=None):
        t0 = time.monotonic()
        time.sleep(0.3)
        if on_window:
            on_window("bf16_tensor", t0, time.monotonic())
        return {"dram": 3.0e12, "bf16_tensor": 800e12}

    def warmup(self, prepared):
        prepared.run()
        return prepared.calls_per_timing or 5

    def time(self, prepared, duration_s, calls):
        if self.interrupt_at and prepared.info.get("name") == self.interrupt_at:
            raise KeyboardInterrupt
        time.sleep(duration_s)
        groups = max(1, round(duration_s * 1e3 / (self.call_ms * calls * 10)))  # calls back to back, as on a GPU
        return Timings([self.call_ms] * 10, 10 * calls * groups)

    def idle(self, duration_s):
        time.sleep(duration_s)
        return None

    def release(self):
        self.released += 1


@dataclass(frozen=True)
class FakeScenario(Scenario):
    make: Callable[[], Prepared] | None = None

    def module(self):
        return SimpleNamespace(STORY=["{said} while {scenario} ran."])

    def prepare(self, **overrides):
        return self.make()


def scenario(
    name,
    flops=0.0,
    nbytes=0.0,
    unit=None,
    bound="none",
    check=lambda: {},
    run=lambda: None,
    traffic=None,
    baseline=None,
):
    def make():
        return Prepared(
            run=run,
            check=check,
            work=Work(flops, nbytes, traffic),
            unit=unit,
            bound=bound,
            launch="1 block x 1 thread",
            info={"name": name},
            sizes={"n": 1},
        )

    return FakeScenario(name, "fake", "fake", f"{name} story", baseline=baseline, make=make)
