"""The one door to NVML: every NVML call in gpubench goes through here.

A value this GPU or driver cannot give ("not supported", "no data yet") becomes a missing value (NaN
or None); a missing library or driver becomes one clear GpuUnavailable error with a hint. Error codes
come from pynvml's constants, never literals. Tests patch `gpubench.record.nvml.pynvml`.
"""

from __future__ import annotations

import math
import threading

import pynvml

# Captured at import so a test that replaces the module with an autospec mock still catches the
# real exception class (a mock is not an exception type).
NVMLError = pynvml.NVMLError

MISSING_CODES = frozenset(
    {
        pynvml.NVML_ERROR_NOT_SUPPORTED,
        pynvml.NVML_ERROR_NO_PERMISSION,
        pynvml.NVML_ERROR_FUNCTION_NOT_FOUND,  # an older driver
        pynvml.NVML_ERROR_NO_DATA,  # nothing recorded yet for this window: a gap, not a failure
    }
)
NO_DRIVER_CODES = frozenset({pynvml.NVML_ERROR_DRIVER_NOT_LOADED, pynvml.NVML_ERROR_LIBRARY_NOT_FOUND})

# No parentheses: the sentences that carry it (watch's "nothing can be recorded here (...)") add their own.
NO_DRIVER_HINT = (
    "no NVIDIA driver found, as the NVML library libnvidia-ml.so could not be loaded; "
    "run on a machine with an NVIDIA GPU and driver"
)

# PCIe bytes per second per lane and direction, after line coding (8b/10b to gen 2, 128b/130b from
# gen 3, FLIT mode's 242/256 at gen 6): the theoretical bandwidth a host-to-device copy can approach.
PCIE_LANE_BYTES_PER_S = {
    1: 2.5e9 * 8 / 10 / 8,
    2: 5e9 * 8 / 10 / 8,
    3: 8e9 * 128 / 130 / 8,
    4: 16e9 * 128 / 130 / 8,
    5: 32e9 * 128 / 130 / 8,
    6: 64e9 * 242 / 256 / 8,
}

_lock = threading.Lock()
_initialized = False


class GpuUnavailable(RuntimeError):
    """NVML cannot be used at all on this machine; the message is one sentence for the user."""


def code(err: Exception) -> int | None:
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
            if code(err) in NO_DRIVER_CODES:
                raise GpuUnavailable(NO_DRIVER_HINT) from None
            raise GpuUnavailable(f"NVML failed to start: {err}") from None
        except OSError:
            raise GpuUnavailable(NO_DRIVER_HINT) from None
        _initialized = True


def reset_for_tests() -> None:
    global _initialized
    _initialized = False


def call(fn, *args, default=None):
    """Call an NVML function; a value this GPU or driver cannot give comes back as `default`."""
    try:
        return fn(*args)
    except NVMLError as err:
        if code(err) in MISSING_CODES:
            return default
        raise


def _text(value) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def device_count() -> int:
    init()
    return int(pynvml.nvmlDeviceGetCount())


def handle(index: int):
    """The handle of NVML's GPU `index` (NVML's numbering, as nvidia-smi shows it)."""
    init()
    return pynvml.nvmlDeviceGetHandleByIndex(index)


def handle_by_uuid(uuid: str):
    init()
    return pynvml.nvmlDeviceGetHandleByUUID(uuid)


def index_of(h) -> int:
    return int(pynvml.nvmlDeviceGetIndex(h))


def name_of(h) -> str:
    return _text(pynvml.nvmlDeviceGetName(h))


def uuid_of(h) -> str:
    return _text(call(pynvml.nvmlDeviceGetUUID, h, default=""))


def read_basic(h) -> dict[str, float]:
    """What `nvidia-smi` shows, and the energy counter. Missing values are NaN."""
    nan = math.nan
    util = call(pynvml.nvmlDeviceGetUtilizationRates, h)
    power_mw = call(pynvml.nvmlDeviceGetPowerUsage, h)
    clock = call(pynvml.nvmlDeviceGetClockInfo, h, pynvml.NVML_CLOCK_SM)
    mem = call(pynvml.nvmlDeviceGetMemoryInfo, h)
    energy_mj = call(pynvml.nvmlDeviceGetTotalEnergyConsumption, h)
    return {
        "gpu_util_pct": float(util.gpu) if util is not None else nan,
        "mem_util_pct": float(util.memory) if util is not None else nan,
        "power_w": power_mw / 1000.0 if power_mw is not None else nan,
        "sm_clock_mhz": float(clock) if clock is not None else nan,
        "mem_used_mib": mem.used / 2**20 if mem is not None else nan,
        "energy_j": energy_mj / 1000.0 if energy_mj is not None else nan,
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
    return [
        float(m.value) if m.nvmlReturn == pynvml.NVML_SUCCESS else math.nan
        for m in list(result.metrics)[: len(metric_ids)]
    ]


def gpm_refused(sample1, sample2, metric_ids: list[int]) -> dict[int, str]:
    """The metric ids NVML refuses between two samples, each asked alone once, with its error. A driver that does
    not know an id refuses a whole request that holds it (NVML_ERROR_INVALID_ARGUMENT), where an id it knows but
    this GPU cannot give comes back as a value that is not there (NaN): only the first is refused here."""
    refused = {}
    for metric_id in metric_ids:
        try:
            gpm_metrics(sample1, sample2, [metric_id])
        except NVMLError as err:
            refused[metric_id] = str(err)
    return refused


def pcie_link(h) -> dict:
    """The PCIe link's maximum generation and width, and the theoretical bytes/s per direction."""
    gen = call(pynvml.nvmlDeviceGetMaxPcieLinkGeneration, h)
    width = call(pynvml.nvmlDeviceGetMaxPcieLinkWidth, h)
    cur_gen = call(pynvml.nvmlDeviceGetCurrPcieLinkGeneration, h)
    cur_width = call(pynvml.nvmlDeviceGetCurrPcieLinkWidth, h)
    per_lane = PCIE_LANE_BYTES_PER_S.get(gen) if gen else None
    return {
        "max_generation": gen,
        "max_width": width,
        "current_generation": cur_gen,
        "current_width": cur_width,
        "bytes_per_s": per_lane * width if per_lane and width else None,
    }


# nvmlValue_t's members in the order of NVML_VALUE_TYPE_* (double, uint, ulong, ulonglong, longlong, int, ushort).
_VALUE_MEMBERS = ("dVal", "uiVal", "ulVal", "ullVal", "sllVal", "siVal", "usVal")


def field_values(h, fields: list[tuple[int, int]]) -> list:
    """NVML field values for (field id, scope id) pairs; None for any this GPU or driver cannot give."""
    values = call(pynvml.nvmlDeviceGetFieldValues, h, fields)
    if values is None:
        return [None] * len(fields)
    return [
        getattr(v.value, _VALUE_MEMBERS[v.valueType])
        if v.nvmlReturn == pynvml.NVML_SUCCESS and 0 <= v.valueType < len(_VALUE_MEMBERS)
        else None
        for v in values
    ]


def nvlink(h) -> dict:
    """The GPU's NVLinks as NVML reports them: per link its state, version and speed, and their sum.

    The speed is NVML's field NVML_FI_DEV_NVLINK_GET_SPEED in MB/s (1e6 bytes) per direction: the
    link's raw rate, protocol overhead included, so a link moves somewhat less data than this.
    bytes_per_s sums the active links; None where NVML reports no link or no speed.
    """
    count = field_values(h, [(pynvml.NVML_FI_DEV_NVLINK_LINK_COUNT, 0)])[0] or 0
    speeds = field_values(h, [(pynvml.NVML_FI_DEV_NVLINK_GET_SPEED, link) for link in range(count)]) if count else []
    links = []
    for link, speed_mbps in enumerate(speeds):
        state = call(pynvml.nvmlDeviceGetNvLinkState, h, link)
        links.append(
            {
                "link": link,
                "active": None if state is None else state == pynvml.NVML_FEATURE_ENABLED,
                "version": call(pynvml.nvmlDeviceGetNvLinkVersion, h, link),
                "speed_mbps": speed_mbps,
                **_peer(h, link),
            }
        )
    active = [x for x in links if x["active"]]
    total = sum(x["speed_mbps"] or 0 for x in active) * 1e6
    return {"links": links, "active_links": len(active), "bytes_per_s": total or None}


# nvmlNvLinkDeviceType_t: what is at the other end of a link
PEER_TYPES = {getattr(pynvml, f"NVML_NVLINK_DEVICE_TYPE_{n}", None): n.lower() for n in ("GPU", "IBMNPU", "SWITCH")}


def _peer(h, link: int) -> dict:
    """What a link leads to: the peer's PCI bus id and kind (a GPU, an NVSwitch), where NVML says."""
    pci = call(pynvml.nvmlDeviceGetNvLinkRemotePciInfo, h, link)
    kind = call(getattr(pynvml, "nvmlDeviceGetNvLinkRemoteDeviceType", lambda *a: None), h, link)
    return {"peer_bus": _text(pci.busId) if pci is not None else None, "peer": PEER_TYPES.get(kind)}


def pci_bus_id(h) -> str | None:
    pci = call(pynvml.nvmlDeviceGetPciInfo, h)
    return _text(pci.busId) if pci is not None else None


def device_info(index: int) -> dict:
    """Name, UUID, memory, driver, CUDA version, architecture, GPM support, PCIe link, NVLinks, power limit,
    MIG mode."""
    h = handle(index)
    mem = call(pynvml.nvmlDeviceGetMemoryInfo, h)
    cuda = call(pynvml.nvmlSystemGetCudaDriverVersion)
    limit_mw = call(pynvml.nvmlDeviceGetPowerManagementLimit, h)
    mig = call(pynvml.nvmlDeviceGetMigMode, h)
    return {
        "nvml_index": index,
        "name": name_of(h),
        "pci_bus_id": pci_bus_id(h),
        "uuid": uuid_of(h),
        "memory_mib": mem.total / 2**20 if mem is not None else None,
        "driver": _text(call(pynvml.nvmlSystemGetDriverVersion, default="")),
        "cuda_driver": f"{cuda // 1000}.{cuda % 1000 // 10}" if cuda else None,
        "architecture": call(pynvml.nvmlDeviceGetArchitecture, h),
        "gpm_supported": gpm_supported(h),
        "pcie": pcie_link(h),
        "nvlink": nvlink(h),
        "power_limit_w": limit_mw / 1000 if limit_mw else None,
        "mig_mode": bool(mig[0]) if mig else None,
    }


def compute_processes(index: int) -> list[int]:
    """PIDs of compute processes on a GPU (to warn when another job shares it)."""
    procs = call(pynvml.nvmlDeviceGetComputeRunningProcesses, handle(index), default=[]) or []
    return [int(p.pid) for p in procs]


# NVML's clock-event ("throttle") reasons, by the names gpubench prints. The older Throttle constants
# exist in every nvidia-ml-py this project supports; the bits are the same as the ClocksEvent ones.
CLOCK_EVENT_REASONS = {
    pynvml.nvmlClocksThrottleReasonGpuIdle: "idle",
    pynvml.nvmlClocksThrottleReasonApplicationsClocksSetting: "application clocks",
    pynvml.nvmlClocksThrottleReasonSwPowerCap: "power cap",
    pynvml.nvmlClocksThrottleReasonHwSlowdown: "hardware slowdown",
    pynvml.nvmlClocksThrottleReasonSyncBoost: "sync boost",
    pynvml.nvmlClocksThrottleReasonSwThermalSlowdown: "thermal (software)",
    pynvml.nvmlClocksThrottleReasonHwThermalSlowdown: "thermal (hardware)",
    pynvml.nvmlClocksThrottleReasonHwPowerBrakeSlowdown: "power brake",
    pynvml.nvmlClocksThrottleReasonDisplayClockSetting: "display clock",
}


def clock_event_names(mask: int | None) -> list[str]:
    """The names of the reasons set in a clock-event bitmask (none for None)."""
    return [name for bit, name in CLOCK_EVENT_REASONS.items() if mask and mask & bit]


def clock_now(h) -> tuple[float, int | None]:
    """The SM clock (MHz, NaN where missing) and the clock-event reasons (a bitmask, None where missing) now."""
    events = (
        getattr(pynvml, "nvmlDeviceGetCurrentClocksEventReasons", None)
        or pynvml.nvmlDeviceGetCurrentClocksThrottleReasons
    )
    clock = call(pynvml.nvmlDeviceGetClockInfo, h, pynvml.NVML_CLOCK_SM)
    mask = call(events, h)
    return (float(clock) if clock is not None else math.nan), (int(mask) if mask is not None else None)


def speed_settings(index: int) -> dict:
    """What an administrator sets that changes a GPU's speed beside its power limit: the application clocks
    (SM and memory, MHz) and ECC (on or off); None for any this GPU cannot give."""
    h = handle(index)
    ecc = call(pynvml.nvmlDeviceGetEccMode, h)
    return {
        "app_sm_clock_mhz": call(pynvml.nvmlDeviceGetApplicationsClock, h, pynvml.NVML_CLOCK_SM),
        "app_mem_clock_mhz": call(pynvml.nvmlDeviceGetApplicationsClock, h, pynvml.NVML_CLOCK_MEM),
        "ecc": bool(ecc[0]) if ecc else None,
    }
