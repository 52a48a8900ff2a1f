"""The GPU side of a run: which GPU a CUDA device is, its facts, peaks, CUDA-event timing, clean-up.

The loop reaches the GPU only through this object, so tests replace it with a fake and run the whole
loop on a CPU.
"""

from __future__ import annotations

import os
import platform
import time

from gpubench.install import DIST, cupy_version, version
from gpubench.record import gpus, nvml
from gpubench.truth import peaks
from gpubench.truth.timing import Timings, calls_for, time_loop, warm_up


class CudaBackend:
    def resolve(self, cuda_index: int, all_gpus: bool) -> tuple[gpus.Gpu, list[gpus.Gpu]]:
        """The GPU that CUDA device `cuda_index` is, and the GPUs to sample (it, or every GPU)."""
        return gpus.resolve(cuda_index, all_gpus)

    def other_processes(self, gpu: gpus.Gpu) -> list[int]:
        return [p for p in nvml.compute_processes(gpu.nvml_index) if p != os.getpid()]

    def device_info(self, gpu: gpus.Gpu) -> dict:
        import torch

        info = nvml.device_info(gpu.nvml_index)
        props = torch.cuda.get_device_properties(gpu.cuda_index)
        info.update(
            cuda_index=gpu.cuda_index,
            sm_count=props.multi_processor_count,
            compute_capability=f"{props.major}.{props.minor}",
            l2_cache_mib=getattr(props, "L2_cache_size", 0) / 2**20,
        )
        return info

    def versions(self) -> dict:
        import torch

        return {
            "gpubench": version(DIST),
            "python": platform.python_version(),
            "torch": torch.__version__,
            "torch_cuda": torch.version.cuda,
            "triton": version("triton"),
            "cupy": cupy_version(),
            "nvidia-ml-py": version("nvidia-ml-py"),
        }

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
        return time_loop(prepared.run, calls_per_timing=calls_per_timing, duration_s=duration_s, stamped=True)

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
