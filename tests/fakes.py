"""Fakes shared by the CPU tests: a metric source with scripted values and a backend with no GPU."""

from __future__ import annotations

from gpubench.sources import Source
from gpubench.suite import Scenario, Workload
from gpubench.kernels.common import Work
from gpubench.timing import Timings


class FakeSource(Source):
    """Returns values from a function of the current phase, so tests know what each scenario should read."""

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
    """Times nothing on a GPU: every call 'takes' call_ms; the sources are given by the test."""

    def __init__(self, sources, call_ms=2.0, interrupt_at: str | None = None):
        self.sources = sources
        self.call_ms = call_ms
        self.interrupt_at = interrupt_at
        self.released = 0

    def device_count(self):
        return 1

    def other_processes(self, device):
        return [4242]

    def device_info(self, device):
        return {"index": device, "name": "NVIDIA H100 80GB HBM3", "sm_count": 132, "memory_mib": 81559,
                "driver": "580.0", "cuda_driver": "13.0", "architecture": 9, "gpm_supported": True}

    def versions(self):
        return {"gpubench": "test"}

    def make_sources(self, opts):
        return self.sources, {"dcgm": "`dcgmi` is not on PATH"}

    def prepare(self, device):
        pass

    def measure_peaks(self):
        return {"dram": 3.0e12, "bf16_tensor": 800e12}

    def warmup(self, wl):
        wl.run()
        return self.call_ms

    @staticmethod
    def calls_for(call_ms):
        return 5

    def time(self, wl, duration_s, calls):
        import time

        if self.interrupt_at and wl.info.get("name") == self.interrupt_at:
            raise KeyboardInterrupt
        time.sleep(duration_s)
        return Timings([self.call_ms] * 10, 10 * calls)

    def idle(self, duration_s):
        import time

        time.sleep(duration_s)
        return None

    def release(self):
        self.released += 1


def scenario(name, flops=0.0, nbytes=0.0, unit=None, dram=False, check=lambda: None, run=lambda: None):
    def build():
        return Workload(run=run, check=check, work=Work(flops, nbytes), unit=unit, dram_bound=dram,
                        info={"name": name})
    return Scenario(name, "fake", "fake", f"{name} story", "1x1", "tiny", build)

