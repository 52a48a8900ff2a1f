"""What the CUPTI probe's processes share (research/cupti_probe.py): its log and the file a step process writes
its result to, an exception in one line, and the calls of PM sampling used inside the step processes (cuInit,
a collector configured and decoded) with NVML's view of the machine beside them."""

from __future__ import annotations

import json
import time
from pathlib import Path

INTERVAL_NS = 10_000_000  # one PM sample every 10 ms; the sampler reads ten at a time
BUFFER_MIB = 64

LOG = None
RESULT: Path | None = None  # where a step process writes its result; saved at checkpoints too


def save(res: dict) -> None:
    if RESULT is not None:
        RESULT.write_text(json.dumps(res, default=str))


def log(*parts):
    line = " ".join(str(p) for p in parts)
    print(line, flush=True)
    if LOG is not None:
        LOG.write(line + "\n")
        LOG.flush()


def err(e) -> str:
    """One line for an exception, with CUPTI's status name where it has one."""
    status = getattr(e, "status", None)
    if status is not None:
        try:
            import cupti.cupti as C

            return f"{type(e).__name__} {C.Result(status).name} ({int(status)}): {e}"
        except Exception:
            return f"{type(e).__name__} status {status}: {e}"
    return f"{type(e).__name__}: {e}"


# --- helpers used inside the step processes ---------------------------------------------------------


def nvml_state() -> dict:
    import pynvml

    pynvml.nvmlInit()
    h = pynvml.nvmlDeviceGetHandleByIndex(0)
    mem = pynvml.nvmlDeviceGetMemoryInfo(h)
    procs = [
        {"pid": p.pid, "used_mib": (p.usedGpuMemory or 0) / 2**20}
        for p in pynvml.nvmlDeviceGetComputeRunningProcesses(h)
    ]
    return {
        "t": time.monotonic(),
        "used_mib": mem.used / 2**20,
        "procs": procs,
        "sm_clock_mhz": pynvml.nvmlDeviceGetClockInfo(h, pynvml.NVML_CLOCK_SM),
        "mem_clock_mhz": pynvml.nvmlDeviceGetClockInfo(h, pynvml.NVML_CLOCK_MEM),
    }


def libcupti_info() -> dict:
    """Which libcupti this process loaded, and its API version (cuptiGetVersion)."""
    import ctypes

    paths = sorted({line.split()[-1] for line in open("/proc/self/maps") if "libcupti" in line})
    out = {"loaded": paths}
    for p in paths:
        try:
            v = ctypes.c_uint32()
            ctypes.CDLL(p).cuptiGetVersion(ctypes.byref(v))
            out.setdefault("api_version", {})[p] = v.value
        except Exception as e:  # noqa: BLE001
            out.setdefault("api_version", {})[p] = err(e)
    return out


def cuda_init() -> int:
    """cuInit in this process: CUPTI cannot name a device's chip before it (the first try of this probe, on an
    H100 with driver 580, got ERROR_INVALID_PARAMETER from libcupti 13.4 and ERROR_UNKNOWN from 13.0)."""
    import ctypes

    return ctypes.CDLL("libcuda.so.1").cuInit(0)


def patch_host_struct(size: int | None):
    """libcupti 13.0's cuptiProfilerHostInitialize takes a 48-byte struct; cupti-python 13.4 passes 56."""
    if size:
        import cupti.cupti as C

        C.PROFILER_HOST_INITIALIZE_PARAMS_STRUCT_SIZE = size


def configure(col, metrics, buffer_mib=BUFFER_MIB, interval_ns=INTERVAL_NS):
    from cupti import pm_sampling as pm

    tries = [(pm.TriggerMode.GPU_TIME_INTERVAL, interval_ns), (pm.TriggerMode.GPU_SYSCLK_INTERVAL, interval_ns)]
    last = None
    for mode, interval in tries:
        try:
            col.configure(
                metrics=metrics,
                hardware_buffer_size=buffer_mib * 2**20,
                sampling_interval=interval,
                trigger_mode=mode,
                hw_buffer_append_mode=pm.HardwareBufferAppendMode.KEEP_LATEST,
            )
            return mode.name
        except Exception as e:  # noqa: BLE001
            last = e
            log(f"  configure with {mode.name} failed: {err(e)}")
    raise last


def decode(col, out: list, t_decode: list):
    t0 = time.perf_counter()
    data = col.decode(max_samples=2000)
    rows = [(s.start_timestamp, s.end_timestamp, [round(v, 5) for v in s.metric_values]) for s in data]
    out.extend(rows)
    t_decode.append(
        {
            "mono_ns": time.monotonic_ns(),
            "real_ns": time.time_ns(),
            "n": len(rows),
            "last_end": rows[-1][1] if rows else None,
            "decode_ms": 1000 * (time.perf_counter() - t0),
        }
    )
    return len(rows)
