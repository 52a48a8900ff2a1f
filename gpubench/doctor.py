"""`gpubench doctor`: which GPUs are here and, for every metric source, whether it works and why not."""

from __future__ import annotations

import shutil
from importlib import metadata

from gpubench import nvml
from gpubench.sources import SourceUnavailable, build_sources


def _torch_cuda() -> tuple[bool, str]:
    try:
        import torch
    except ImportError:
        return False, "PyTorch is not installed"
    if torch.version.cuda is None:
        return False, f"this PyTorch ({torch.__version__}) was built without CUDA"
    if not torch.cuda.is_available():
        return False, "PyTorch sees no usable CUDA device"
    return True, f"PyTorch {torch.__version__} with CUDA {torch.version.cuda}"


def _cupy() -> tuple[bool, str]:
    for dist in ("cupy-cuda13x", "cupy-cuda12x", "cupy"):
        try:
            return True, f"{dist} {metadata.version(dist)}"
        except metadata.PackageNotFoundError:
            continue
    return False, "CuPy is not installed: pip install 'gpubench[cu13]' (or [cu12] for CUDA 12 drivers)"


def _triton() -> tuple[bool, str]:
    try:
        return True, f"Triton {metadata.version('triton')}"
    except metadata.PackageNotFoundError:
        return False, "Triton is not installed"


def diagnose() -> tuple[int, list[str]]:
    """Exit code and lines: 0 when the GPU could be described, 2 when there is no GPU at all."""
    lines = []
    try:
        count = nvml.device_count()
    except nvml.GpuUnavailable as err:
        count, why = 0, str(err)
    else:
        why = "NVML found no GPU"
    torch_ok, torch_note = _torch_cuda()
    if count == 0:
        lines.append(f"no GPU: {why}")
    for i in range(count):
        info = nvml.device_info(i)
        sms = "? SMs"
        if torch_ok:
            import torch

            sms = f"{torch.cuda.get_device_properties(i).multi_processor_count} SMs"
        mem = f"{info['memory_mib'] / 1024:.0f} GiB" if info["memory_mib"] else "? GiB"
        lines.append(f"GPU {i}: {info['name']}, {sms}, {mem}, driver {info['driver']}, CUDA {info['cuda_driver']}")
    lines.append("metric sources:")
    gpus = list(range(count))
    for source in build_sources(["nvml", "gpm", "dcgm", "smi"]):
        if source.name == "dcgm" and not shutil.which("dcgmi"):
            status = "unavailable: `dcgmi` is not on PATH (install DCGM to read its profiling fields)"
        elif not gpus and source.name != "dcgm":
            status = f"unavailable: {why}"
        else:
            try:
                source.open(gpus or [0])
                source.read()
                status = "available"
            except SourceUnavailable as err:
                status = f"unavailable: {err}"
            except Exception as err:  # a source that opens but cannot read is as good as absent
                status = f"unavailable: {type(err).__name__}: {err}"
            finally:
                source.close()
        lines.append(f"  {source.name:<5} {status}  [{', '.join(source.columns)}]")
    lines.append("kernels:")
    for name, (ok, note) in {"torch": (torch_ok, torch_note), "triton": _triton(), "cupy": _cupy()}.items():
        lines.append(f"  {name:<6} {'available' if ok else 'unavailable'}: {note}")
    return (0 if count else 2), lines
