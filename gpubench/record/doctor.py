"""`gpubench doctor`: which GPUs are here and, for every metric source, whether it works and why not."""

from __future__ import annotations

import shutil
from importlib import metadata

from gpubench.install import CUPY_HINT, TORCH_HINT, TRITON_HINT, cupy_version
from gpubench.record import nvml
from gpubench.record.sources import SourceUnavailable, source_class
from gpubench.record.sources.policy import profiling_order


def _version_tuple(text: str | None) -> tuple[int, ...]:
    try:
        return tuple(int(x) for x in (text or "").split(".")[:2])
    except ValueError:
        return ()


def torch_cuda(driver_cuda: str | None = None) -> tuple[bool, str]:
    try:
        import torch
    except ImportError:
        return False, f"PyTorch is not installed: {TORCH_HINT}"
    if torch.version.cuda is None:
        return False, f"this PyTorch ({torch.__version__}) was built without CUDA: {TORCH_HINT}"
    built, driver = _version_tuple(torch.version.cuda), _version_tuple(driver_cuda)
    if built and driver and built[0] > driver[0]:
        return False, (
            f"this PyTorch ({torch.__version__}) is built for CUDA {torch.version.cuda}, newer than "
            f"the driver supports (CUDA {driver_cuda}): {TORCH_HINT}"
        )
    if not torch.cuda.is_available():
        return False, f"PyTorch {torch.__version__} sees no usable CUDA device"
    return True, f"PyTorch {torch.__version__} with CUDA {torch.version.cuda}"


def _cupy() -> tuple[bool, str]:
    v = cupy_version()
    return (True, f"CuPy {v}") if v else (False, f"CuPy is not installed: {CUPY_HINT}")


def _triton() -> tuple[bool, str]:
    try:
        return True, f"Triton {metadata.version('triton')}"
    except metadata.PackageNotFoundError:
        return False, TRITON_HINT


def source_status(name: str, gpus: list[int], why_no_gpu: str) -> str:
    cls = source_class(name)
    if name == "dcgm" and not shutil.which("dcgmi"):
        return "unavailable: `dcgmi` is not on PATH (install DCGM to read its profiling fields)"
    if not gpus and name != "dcgm":
        return f"unavailable: {why_no_gpu}"
    source = cls()
    try:
        source.open(gpus or [0])
        source.read()
        return "available"
    except SourceUnavailable as err:
        return f"unavailable: {err}"
    except Exception as err:  # a source that opens but cannot read is as good as absent
        return f"unavailable: {type(err).__name__}: {err}"
    finally:
        source.close()


def diagnose() -> tuple[int, list[str]]:
    """Exit code and lines: 0 when the GPU could be described, 2 when there is no GPU at all."""
    lines = []
    try:
        count = nvml.device_count()
    except nvml.GpuUnavailable as err:
        count, why = 0, str(err)
    else:
        why = "NVML found no GPU"
    infos = [nvml.device_info(i) for i in range(count)]
    torch_ok, torch_note = torch_cuda(infos[0]["cuda_driver"] if infos else None)
    if count == 0:
        lines.append(f"no GPU: {why}")
    for info in infos:
        mem = f"{info['memory_mib'] / 1024:.0f} GiB" if info["memory_mib"] else "? GiB"
        lines.append(
            f"GPU {info['nvml_index']} (NVML numbering): {info['name']}, {mem}, driver {info['driver']}, "
            f"CUDA {info['cuda_driver']}, {info['uuid']}"
        )
    gpus = list(range(count))
    order, _ = profiling_order("auto", gpus)
    statuses = {name: source_status(name, gpus, why) for name in ("nvml", "gpm", "dcgm", "cupti", "smi")}
    if count == 0:  # said once, on the first line: each source only points back to it
        statuses = {
            name: "unavailable: no GPU (above)" if status == f"unavailable: {why}" else status
            for name, status in statuses.items()
        }
    default = next((n for n in order if statuses[n] == "available"), "none") if gpus else "none"
    lines.append(f"metric sources (profiling metrics by default from: {default}):")
    for name, status in statuses.items():
        cls = source_class(name)
        floor = f", refreshes every {cls.min_interval_s:g} s" if cls.min_interval_s else ""
        lines.append(f"  {name:<5} {status}  [{', '.join(cls.columns)}{floor}]")
    lines.append("kernels:")
    for name, (ok, note) in {"torch": (torch_ok, torch_note), "triton": _triton(), "cupy": _cupy()}.items():
        if ok and name != "torch" and not count:  # installed is not runnable: its kernels need a GPU
            ok, note = False, f"{note} is installed, but there is no GPU here to run its kernels on"
        lines.append(f"  {name:<6} {'available' if ok else 'unavailable'}: {note}")
    return (0 if count else 2), lines


def cmd() -> int:
    """`gpubench doctor`."""
    code, lines = diagnose()
    print("\n".join(lines))
    return code
