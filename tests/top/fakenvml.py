"""A fake pynvml for `gpubench top`: GPUs, their readings and their processes from a plain dict, GPM's samples
and metrics included, so that top's whole path from NVML's door (gpubench.record.nvml) up runs on a CPU.

Run as a script it installs itself and runs gpubench, as tests/suite/test_interrupts.py runs plot with a hook:

    python tests/top/fakenvml.py SPEC.json top --interval 0.2

SPEC holds {"gpus": [{"name", "power_limit_w", "memory_total_mib", "gpm": bool, "values": {column: value},
"processes": [{"pid", "mem_mib"}]}]}, with "no_driver": true for a machine without one. The tmux tests start
`gpubench top` this way; nothing in gpubench knows of it.
"""

from __future__ import annotations

import json
import sys
from types import SimpleNamespace

import pynvml as real

from gpubench.record import nvml
from gpubench.record.sources.gpm import METRIC_IDS

BY_ID = {i: c for c, i in METRIC_IDS.items()}


def _error(code):
    return real.NVMLError(code)


class Request:
    """c_nvmlGpmMetricsGet_t as plain attributes: the metrics a request asks for, filled in by the fake."""

    def __init__(self):
        self.version = self.numMetrics = 0
        self.sample1 = self.sample2 = None
        self.metrics = [SimpleNamespace(metricId=0, value=0.0, nvmlReturn=real.NVML_SUCCESS) for _ in range(32)]


class FakeNvml:
    """The pynvml functions gpubench.record.nvml calls for top; any other nvml* function answers "not supported"
    (a value this GPU cannot give), constants and classes are pynvml's own. A handle is the GPU's index."""

    c_nvmlGpmMetricsGet_t = Request

    def __init__(self, spec: dict):
        self.spec = spec
        self.samples = 0  # GPM samples taken: a test can see that the counters were read

    def __getattr__(self, name):
        value = getattr(real, name)
        if name.startswith("nvml") and callable(value):

            def unsupported(*args, **kwargs):
                raise _error(real.NVML_ERROR_NOT_SUPPORTED)

            return unsupported
        return value

    def _gpu(self, h) -> dict:
        return self.spec["gpus"][h]

    def _values(self, h) -> dict:
        gpu = self._gpu(h)
        if gpu.get("lost"):
            raise _error(real.NVML_ERROR_GPU_IS_LOST)
        return gpu["values"]

    def nvmlInit(self):
        if self.spec.get("no_driver"):
            raise _error(real.NVML_ERROR_LIBRARY_NOT_FOUND)

    def nvmlDeviceGetCount(self):
        return len(self.spec["gpus"])

    def nvmlDeviceGetHandleByIndex(self, index):
        if not 0 <= index < len(self.spec["gpus"]):
            raise _error(real.NVML_ERROR_INVALID_ARGUMENT)
        return index

    def nvmlDeviceGetName(self, h):
        return self._gpu(h)["name"]

    def nvmlDeviceGetUUID(self, h):
        return f"GPU-fake-{h}"

    def nvmlDeviceGetPowerManagementLimit(self, h):
        return int(self._gpu(h)["power_limit_w"] * 1000)

    def nvmlDeviceGetMemoryInfo(self, h):
        return SimpleNamespace(
            used=int(self._gpu(h)["values"]["mem_used_mib"] * 2**20),
            total=int(self._gpu(h)["memory_total_mib"] * 2**20),
        )

    def nvmlDeviceGetUtilizationRates(self, h):
        v = self._values(h)
        return SimpleNamespace(gpu=v["gpu_util_pct"], memory=v.get("mem_util_pct", 0))

    def nvmlDeviceGetPowerUsage(self, h):
        return int(self._values(h)["power_w"] * 1000)

    def nvmlDeviceGetClockInfo(self, h, clock):
        return self._values(h)["sm_clock_mhz"]

    def nvmlDeviceGetComputeRunningProcesses(self, h):
        return [
            SimpleNamespace(pid=p["pid"], usedGpuMemory=None if p.get("mem_mib") is None else int(p["mem_mib"] * 2**20))
            for p in self._gpu(h).get("processes", [])
        ]

    def nvmlDeviceGetGraphicsRunningProcesses(self, h):
        return []

    def nvmlGpmQueryDeviceSupport(self, h):
        return SimpleNamespace(isSupportedDevice=int(self._gpu(h).get("gpm", True)))

    def nvmlGpmSampleAlloc(self):
        return SimpleNamespace(gpu=None)

    def nvmlGpmSampleFree(self, sample):
        pass

    def nvmlGpmSampleGet(self, h, sample):
        if self._gpu(h).get("counters_busy"):
            raise _error(real.NVML_ERROR_IN_USE)
        self.samples += 1
        sample.gpu = h

    def nvmlGpmMetricsGet(self, request):
        values = self._gpu(request.sample2.gpu)["values"]
        for m in request.metrics[: request.numMetrics]:
            m.value, m.nvmlReturn = float(values.get(BY_ID[m.metricId], 0.0)), real.NVML_SUCCESS
        return request


def _h100(util, sm, occupancy, tensor, dram, power, clock, used_mib, processes=()):
    return {
        "name": "NVIDIA H100 80GB HBM3",
        "power_limit_w": 700,
        "memory_total_mib": 81559,
        "gpm": True,
        "values": {
            "gpu_util_pct": util,
            "sm_active_pct": sm,
            "sm_occupancy_pct": occupancy,
            "tensor_active_pct": tensor,
            "dram_active_pct": dram,
            "power_w": power,
            "sm_clock_mhz": clock,
            "mem_used_mib": used_mib,
        },
        "processes": [{"pid": pid, "mem_mib": mib} for pid, mib in processes],
    }


def machine(spinner: int, trainer: int) -> dict:
    """Five GPUs as the reference ladder read them on an H100 (results/h100-*/summary.csv), two processes: the
    spinner's on GPU 1, the trainer's on GPUs 2 and 3. By index 0-4; by SM active 4 2 1 0 3; by power 2 4 3 1 0."""
    return {
        "gpus": [
            _h100(0, 0, 0, 0, 0.0006, 70, 345, 512),  # idle (an idle GPU still moves a little DRAM)
            _h100(100, 0.757, 0.0118, 0, 0.0005, 124, 1980, 1024, [(spinner, 600)]),  # spin-1block: fake-busy
            _h100(100, 96.6, 14.3, 93.8, 25.9, 697, 1755, 70_000, [(trainer, 69_000)]),  # gemm-torch: compute-bound
            {
                "name": "NVIDIA A100-SXM4-80GB",
                "power_limit_w": 400,
                "memory_total_mib": 81920,
                "gpm": False,
                "values": {"gpu_util_pct": 30, "power_w": 150, "sm_clock_mhz": 1410, "mem_used_mib": 20_000},
                "processes": [{"pid": trainer, "mem_mib": 19_000}],
            },  # no GPM, GPU-Util 30%: host-bound
            _h100(100, 99.4, 78.0, 0, 90.1, 507, 1980, 4096),  # copy-triton: memory-bound
        ]
    }


def order(frame: str) -> list[int]:
    """The GPUs' indices in the order a frame lists them (a GPU's line starts with its index, right-aligned in 3)."""
    return [int(line[:3]) for line in frame.splitlines() if line[:3].strip().isdigit() and line[3:5] == "  "]


def install(spec: dict) -> FakeNvml:
    """Put a FakeNvml behind gpubench's NVML door, for this process."""
    fake = FakeNvml(spec)
    nvml.reset_for_tests()
    nvml.pynvml = fake
    return fake


if __name__ == "__main__":
    with open(sys.argv[1]) as f:
        install(json.load(f))
    from gpubench.cli import main

    sys.exit(main(sys.argv[2:]))
