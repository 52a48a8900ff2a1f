"""The GPU side of a run: which GPU a CUDA device is, its facts, peaks, CUDA-event timing, clean-up.

The runner reaches the GPU only through this object, so tests replace it with a fake and run the whole
loop on a CPU.
"""

from __future__ import annotations

import os
import platform
import time
from importlib import metadata

from gpubench import gpus, nvml, peaks
from gpubench.hints import DIST
from gpubench.timing import Timings, calls_for, time_loop, warm_up


def version(dist: str) -> str | None:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


def cupy_version() -> str | None:
    return version("cupy-cuda13x") or version("cupy-cuda12x") or version("cupy")


class CudaBackend:
    def resolve(self, cuda_index: int, all_gpus: bool) -> tuple[gpus.Gpu, list[gpus.Gpu]]:
        """The GPU that CUDA device `cuda_index` is, and the GPUs to sample (it, or every GPU)."""
        uuids = gpus.cuda_uuids()
        if not 0 <= cuda_index < len(uuids):
            raise IndexError(f"CUDA device {cuda_index} does not exist: CUDA sees {len(uuids)} GPU(s)"
                             + (f" (CUDA_VISIBLE_DEVICES={os.environ['CUDA_VISIBLE_DEVICES']})"
                                if os.environ.get("CUDA_VISIBLE_DEVICES") else ""))
        gpu = gpus.by_cuda_index(cuda_index, uuids)
        return gpu, (gpus.every_gpu(uuids) if all_gpus else [gpu])

    def other_processes(self, gpu: gpus.Gpu) -> list[int]:
        return [p for p in nvml.compute_processes(gpu.nvml_index) if p != os.getpid()]

    def device_info(self, gpu: gpus.Gpu) -> dict:
        import torch

        info = nvml.device_info(gpu.nvml_index)
        props = torch.cuda.get_device_properties(gpu.cuda_index)
        info.update(cuda_index=gpu.cuda_index, sm_count=props.multi_processor_count,
                    compute_capability=f"{props.major}.{props.minor}",
                    l2_cache_mib=getattr(props, "L2_cache_size", 0) / 2**20)
        return info

    def versions(self) -> dict:
        import torch

        return {"gpubench": version(DIST), "python": platform.python_version(),
                "torch": torch.__version__, "torch_cuda": torch.version.cuda, "triton": version("triton"),
                "cupy": cupy_version(), "nvidia-ml-py": version("nvidia-ml-py")}

    def prepare(self, gpu: gpus.Gpu) -> None:
        import torch

        torch.cuda.set_device(gpu.cuda_index)
        try:
            import cupy

            cupy.cuda.Device(gpu.cuda_index).use()
        except ImportError:
            pass

    def measure_peaks(self, on_window=None) -> dict:
        return peaks.measure(on_window)

    def warmup(self, prepared) -> int:
        """Compile and warm up outside the measured window; return the calls per timed group."""
        call_ms = warm_up(prepared.run)
        return prepared.calls_per_timing or calls_for(call_ms)

    def time(self, prepared, duration_s: float, calls_per_timing: int) -> Timings:
        return time_loop(prepared.run, calls_per_timing=calls_per_timing, duration_s=duration_s)

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
