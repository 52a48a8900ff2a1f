"""The one door to NVML: every NVML call in gpubench goes through here.

"Not supported" (and its kin) becomes a missing value (NaN or None); a missing library or driver
becomes one clear GpuUnavailable error with a hint. Tests patch `gpubench.nvml.pynvml`.
"""

from __future__ import annotations

import math
import threading

import pynvml

# Captured at import so a test that replaces the module with an autospec mock still catches the
# real exception class (a mock is not an exception type).
NVMLError = pynvml.NVMLError

NOT_SUPPORTED = 3
MISSING_CODES = frozenset({
    3,   # NVML_ERROR_NOT_SUPPORTED
    4,   # NVML_ERROR_NO_PERMISSION
    13,  # NVML_ERROR_FUNCTION_NOT_FOUND (older driver)
    19,  # NVML_ERROR_NO_DATA
})
NO_DRIVER_CODES = frozenset({
    9,   # NVML_ERROR_DRIVER_NOT_LOADED
    12,  # NVML_ERROR_LIBRARY_NOT_FOUND
})
ARCH_HOPPER = 9  # NVML_DEVICE_ARCH_HOPPER; GPM needs Hopper or newer

NO_DRIVER_HINT = ("no NVIDIA driver found (the NVML library libnvidia-ml.so could not be loaded); "
                  "run on a machine with an NVIDIA GPU and driver")

_lock = threading.Lock()
_initialized = False


class GpuUnavailable(RuntimeError):
    """NVML cannot be used at all on this machine; the message is one sentence for the user."""


def _code(err: Exception) -> int | None:
    return getattr(err, "value", None)


def init() -> None:
    """Initialise NVML once per process; raise GpuUnavailable with a hint when there is no driver."""
    global _initialized
    with _lock:
        if _initialized:
            return
        try:
            pynvml.nvmlInit()
        except NVMLError as err:
            if _code(err) in NO_DRIVER_CODES:
                raise GpuUnavailable(NO_DRIVER_HINT) from None
            raise GpuUnavailable(f"NVML failed to start: {err}") from None
        except OSError:
            raise GpuUnavailable(NO_DRIVER_HINT) from None
        _initialized = True


def shutdown() -> None:
    global _initialized
    with _lock:
        if _initialized:
            try:
                pynvml.nvmlShutdown()
            except NVMLError:
                pass
            _initialized = False


def reset_for_tests() -> None:
    global _initialized
    _initialized = False


def call(fn, *args, default=None):
    """Call an NVML function; a value this GPU or driver cannot give comes back as `default`."""
    try:
        return fn(*args)
    except NVMLError as err:
        if _code(err) in MISSING_CODES:
            return default
        raise


def _text(value) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def device_count() -> int:
    init()
    return int(pynvml.nvmlDeviceGetCount())


def handle(index: int):
    init()
    return pynvml.nvmlDeviceGetHandleByIndex(index)


def read_basic(h) -> dict[str, float]:
    """What `nvidia-smi` shows: utilization, power, SM clock, memory used. Missing values are NaN."""
    nan = math.nan
    util = call(pynvml.nvmlDeviceGetUtilizationRates, h)
    power_mw = call(pynvml.nvmlDeviceGetPowerUsage, h)
    clock = call(pynvml.nvmlDeviceGetClockInfo, h, pynvml.NVML_CLOCK_SM)
    mem = call(pynvml.nvmlDeviceGetMemoryInfo, h)
    return {
        "gpu_util_pct": float(util.gpu) if util is not None else nan,
        "mem_util_pct": float(util.memory) if util is not None else nan,
        "power_w": power_mw / 1000.0 if power_mw is not None else nan,
        "sm_clock_mhz": float(clock) if clock is not None else nan,
        "mem_used_mib": mem.used / 2**20 if mem is not None else nan,
    }


def gpm_supported(h) -> bool:
    support = call(pynvml.nvmlGpmQueryDeviceSupport, h)
    return bool(support is not None and support.isSupportedDevice)


def gpm_sample_alloc():
    return pynvml.nvmlGpmSampleAlloc()


def gpm_sample_free(sample) -> None:
    call(pynvml.nvmlGpmSampleFree, sample)


def gpm_sample_get(h, sample) -> None:
    pynvml.nvmlGpmSampleGet(h, sample)


def gpm_metrics(sample1, sample2, metric_ids: list[int]) -> list[float]:
    """Metrics over the interval between two GPM samples; NaN for any the GPU cannot give."""
    request = pynvml.c_nvmlGpmMetricsGet_t()
    request.version = pynvml.NVML_GPM_METRICS_GET_VERSION
    request.numMetrics = len(metric_ids)
    request.sample1 = sample1
    request.sample2 = sample2
    for i, metric_id in enumerate(metric_ids):
        request.metrics[i].metricId = metric_id
    result = pynvml.nvmlGpmMetricsGet(request)
    return [float(m.value) if m.nvmlReturn == 0 else math.nan
            for m in list(result.metrics)[: len(metric_ids)]]


def device_info(index: int) -> dict:
    """Name, memory, driver, CUDA version, architecture and GPM support of one GPU."""
    h = handle(index)
    mem = call(pynvml.nvmlDeviceGetMemoryInfo, h)
    cuda = call(pynvml.nvmlSystemGetCudaDriverVersion)
    arch = call(pynvml.nvmlDeviceGetArchitecture, h)
    return {
        "index": index,
        "name": _text(pynvml.nvmlDeviceGetName(h)),
        "uuid": _text(call(pynvml.nvmlDeviceGetUUID, h, default="")),
        "memory_mib": mem.total / 2**20 if mem is not None else None,
        "driver": _text(call(pynvml.nvmlSystemGetDriverVersion, default="")),
        "cuda_driver": f"{cuda // 1000}.{cuda % 1000 // 10}" if cuda else None,
        "architecture": arch,
        "gpm_supported": gpm_supported(h),
    }


def compute_processes(index: int) -> list[int]:
    """PIDs of compute processes on a GPU (to warn when another job shares it)."""
    procs = call(pynvml.nvmlDeviceGetComputeRunningProcesses, handle(index), default=[]) or []
    return [int(p.pid) for p in procs]
