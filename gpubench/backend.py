"""The GPU side of the runner: device facts, peaks, warm-up and CUDA-event timing, metric sources."""

from __future__ import annotations

import os
import platform
import shutil
import time
from importlib import metadata

from gpubench import nvml, peaks
from gpubench.sources import build_sources
from gpubench.timing import Timings, calls_for, time_loop


def _version(dist: str) -> str | None:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


class CudaBackend:
    def device_count(self) -> int:
        return nvml.device_count()

    def other_processes(self, device: int) -> list[int]:
        return [p for p in nvml.compute_processes(device) if p != os.getpid()]

    def device_info(self, device: int) -> dict:
        import torch

        info = nvml.device_info(device)
        props = torch.cuda.get_device_properties(device)
        info.update(sm_count=props.multi_processor_count, compute_capability=f"{props.major}.{props.minor}",
                    l2_cache_mib=getattr(props, "L2_cache_size", 0) / 2**20)
        return info

    def versions(self) -> dict:
        import torch

        cupy = _version("cupy-cuda13x") or _version("cupy-cuda12x") or _version("cupy")
        return {"gpubench": _version("gpubench"), "python": platform.python_version(), "torch": torch.__version__,
                "torch_cuda": torch.version.cuda, "triton": _version("triton"), "cupy": cupy,
                "nvidia-ml-py": _version("nvidia-ml-py")}

    def make_sources(self, opts):
        """NVML always; the profiling metrics from DCGM or GPM (never both: they share the counters);
        and the nvidia-smi process. Returns the sources and, for any left out, why."""
        names, reasons = ["nvml"], {}
        if opts.profiling == "auto":
            if shutil.which("dcgmi"):
                names.append("dcgm")
            else:
                reasons["dcgm"] = "`dcgmi` is not on PATH, so the profiling metrics come from NVML GPM"
                names.append("gpm")
        elif opts.profiling != "none":
            names.append(opts.profiling)
        if opts.smi:
            names.append("smi")
        return build_sources(names, smi={"interval_ms": int(opts.interval_s * 1000)},
                             dcgm={"interval_ms": max(100, int(opts.interval_s * 1000))}), reasons

    def prepare(self, device: int) -> None:
        import torch

        torch.cuda.set_device(device)
        try:
            import cupy

            cupy.cuda.Device(device).use()
        except ImportError:
            pass

    def measure_peaks(self) -> dict:
        return peaks.measure()

    def warmup(self, wl) -> float:
        """Compile and warm up outside the measured window; return one call's GPU time in ms."""
        import torch

        for _ in range(3):
            wl.run()
        torch.cuda.synchronize()
        return time_loop(wl.run, calls_per_timing=3, groups=2).median_ms

    calls_for = staticmethod(calls_for)

    def time(self, wl, duration_s: float, calls_per_timing: int) -> Timings:
        return time_loop(wl.run, calls_per_timing=calls_per_timing, duration_s=duration_s)

    def idle(self, duration_s: float):
        time.sleep(duration_s)
        return None

    def release(self) -> None:
        import torch

        torch.cuda.synchronize()
        torch.cuda.empty_cache()
        try:
            import cupy

            cupy.get_default_memory_pool().free_all_blocks()
            cupy.get_default_pinned_memory_pool().free_all_blocks()
        except ImportError:
            pass
