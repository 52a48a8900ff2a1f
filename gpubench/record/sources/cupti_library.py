"""What CUPTI PM sampling stands on: cupti-python's modules (an optional dependency, imported only when the
source opens), the libcupti this process loaded and the version cupti-python needs, the chip's name, a CUDA
context through the driver where sampling will not start without one, and CUPTI's names for its errors."""

from __future__ import annotations

import ctypes
from importlib import metadata

from . import SourceUnavailable

HINT = "pip install 'gpubench-ladder[cupti]' (cupti-python and the libcupti it needs)"


def load():
    """cupti-python's modules: the bindings, the PM-sampling collector and the profiler host."""
    try:
        import cupti.cupti as bindings
        from cupti import pm_sampling, profiler_host
    except ImportError as err:
        raise SourceUnavailable(f"cupti-python is not installed ({err}): {HINT}") from None
    return bindings, pm_sampling, profiler_host


def libcupti_versions() -> dict[str, int]:
    """Every libcupti this process has loaded, with the API version it reports (130401 is 13.4 update 1)."""
    try:
        with open("/proc/self/maps") as f:
            paths = sorted({line.split()[-1] for line in f if "/libcupti.so" in line})
    except OSError:
        return {}
    found = {}
    for path in paths:
        version = ctypes.c_uint32()
        try:
            if ctypes.CDLL(path).cuptiGetVersion(ctypes.byref(version)) == 0:
                found[path] = version.value
        except (OSError, AttributeError):
            continue
    return found


def check_libcupti(versions: dict[str, int], wanted: str | None) -> None:
    """cupti-python X.Y needs libcupti X.Y or newer: an older one fails later with a bare INVALID_PARAMETER."""
    try:
        need = tuple(int(x) for x in (wanted or "").split(".")[:2])
    except ValueError:
        return
    if len(need) < 2:
        return
    for path, v in versions.items():
        have = (v // 10000, v // 100 % 100)
        if have < need:
            raise SourceUnavailable(
                f"cupti-python {wanted} needs libcupti {need[0]}.{need[1]} or newer, but this process loaded "
                f"libcupti {have[0]}.{have[1]} ({path}): pip install -U 'nvidia-cuda-cupti>={need[0]}.{need[1]}' "
                "(PyTorch's wheels pin an older one, so pip warns about the upgrade)"
            )


class Cuda:
    """The CUDA driver through ctypes: a primary context, only where PM sampling will not start without one."""

    def __init__(self):
        self.lib = ctypes.CDLL("libcuda.so.1")

    def retain(self, index: int) -> tuple[int, int]:
        dev, ctx = ctypes.c_int(), ctypes.c_void_p()
        if self.lib.cuDeviceGet(ctypes.byref(dev), index) or self.lib.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), dev):
            raise SourceUnavailable(f"the CUDA driver could not create a context on CUDA device {index}")
        self.lib.cuCtxSetCurrent(ctx)
        return ctx.value, dev.value

    def make_current(self, ctx: int) -> None:
        self.lib.cuCtxSetCurrent(ctypes.c_void_p(ctx))

    def release(self, dev: int) -> None:
        release = getattr(self.lib, "cuDevicePrimaryCtxRelease_v2", None) or self.lib.cuDevicePrimaryCtxRelease
        release(dev)


def version(dist: str) -> str | None:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


def result_name(bindings, err) -> str:
    status = getattr(err, "status", None)
    if status is None:
        return ""
    try:
        return bindings.Result(status).name
    except ValueError:
        return str(status)


def describe(err: Exception) -> str:
    text = str(err).strip()
    return f"{type(err).__name__}: {text}" if text else type(err).__name__


def chip_name(bindings, index: int) -> str:
    p = bindings.DeviceGetChipNameParams()
    p.struct_size = bindings.DEVICE_GET_CHIP_NAME_PARAMS_STRUCT_SIZE
    p.device_index = index
    bindings.device_get_chip_name(p.ptr)
    return p.p_chip_name
