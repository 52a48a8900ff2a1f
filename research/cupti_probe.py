"""Does CUPTI PM sampling work on this GPU, and what does it cost? One command, everything logged.

    python -m research.cupti_probe --wheels DIR --out DIR

DIR of wheels: cupti-python, nvidia-cuda-cupti (the libcupti cupti-python needs), pyelftools, and
cuda-pathfinder / cuda-bindings (installed only where the machine's are older than cupti-python asks).
Run as root on a machine where nothing else profiles the GPU. Each step runs in its own process with a
deadline, so a crash or a hang costs that step only. What it finds, in order:

1. the machine: driver, libcupti that PyTorch ships, the profiling permission (RmProfilingAdminOnly);
2. cupti-python against the libcupti PyTorch ships (without upgrading it), then against the newer one:
   which works, and where the older one fails;
3. which metrics PM sampling offers on this chip (the profiler host API's own lists) and which of the
   candidates for SM active, occupancy, tensor/FP pipes and DRAM build a one-pass configuration;
4. a collector in this process sampling while ANOTHER process runs known kernels (idle, one spinning
   thread, one warp per SM, a copy, a bf16 GEMM, an fp32 GEMM), and NVML GPM over the same kernels;
5. what a CUDA context and the hardware buffer cost (NVML: memory, processes);
6. two readers at once (GPM and CUPTI, CUPTI and CUPTI, Nsight Compute and CUPTI): who gets refused,
   with which error, and what the other then reads;
7. the overhead on a bf16 GEMM, timed with CUDA events in windows with the collector on and off.

Writes probe.log (all output), probe.json (every result, raw samples included) and metrics.txt (the
chip's PM-sampling metrics) under --out.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

from gpubench.record.sources.cupti_metrics import CANDIDATES, NOT_SHIPPED

HERE = Path(__file__).resolve()
INTERVAL_NS = 10_000_000  # one PM sample every 10 ms; the sampler reads ten at a time
BUFFER_MIB = 64

# Candidates per column, best first: the ones the CUPTI source ships (gpubench.record.sources.cupti_metrics.CANDIDATES),
# so that the probe tries what the source would choose; a ratio's two counters are tried among RAW below.
# Columns the source ships no counter for (NOT_SHIPPED) keep the probe's own candidates, DCGM's definitions as
# Nsight Compute names them: the probe is where a match for them is looked for.
SEARCHED = {
    "dram_active_pct": [
        "dram__throughput.avg.pct_of_peak_sustained_elapsed",
        "gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed",
        "dramc__throughput.avg.pct_of_peak_sustained_elapsed",
        "dram__cycles_active.avg.pct_of_peak_sustained_elapsed",
        "dramc__read_throughput.avg.pct_of_peak_sustained_elapsed",
    ]
}
ROLES: dict[str, list[str]] = {}
for _column, _readings in CANDIDATES.items():
    ROLES[_column] = [r.metrics[0] for r in _readings if len(r.metrics) == 1]
    if _column == "tensor_active_pct":  # DRAM after the tensor pipes, its rung on the ladder
        ROLES |= {c: SEARCHED[c] for c in NOT_SHIPPED}
# Raw counters to fall back on where a percentage is not offered (ratios computed afterwards).
RAW = [
    "sm__cycles_active.avg",
    "sm__cycles_elapsed.avg",
    "sm__warps_active.avg",
    "sm__warps_active.sum",
    "gpc__cycles_elapsed.max",
    "sys__cycles_elapsed.max",
    "gr__cycles_elapsed.max",
    "dram__bytes.sum",
    "dram__bytes_read.sum",
    "dram__bytes_write.sum",
    "sm__pipe_tensor_cycles_active.avg",
    "sm__inst_executed_pipe_tensor.sum",
    "gpu__time_duration.sum",
]
RAW += [
    m for readings in CANDIDATES.values() for r in readings if len(r.metrics) > 1 for m in r.metrics if m not in RAW
]
INTERESTING = (
    "sm__cycles",
    "sm__warps",
    "sm__pipe",
    "sm__inst_executed_pipe",
    "dram",
    "gpu__dram",
    "gr__",
    "gpc__cycles",
    "sys__cycles",
    "gpu__time",
    "sm__throughput",
    "gpu__compute_memory",
    "fbpa",
    "pcie",
    "nvl",
    "lts__t_bytes",
    "sm__maximum_warps",
    "tpc__",
)
# Where none of ROLES' names is offered, base metrics matching these are tried with their sub-metrics.
AUTO = {
    "sm_active_pct": ("sm__cycles_active",),
    "sm_occupancy_pct": ("sm__warps_active",),
    "tensor_active_pct": ("sm__pipe_tensor", "sm__inst_executed_pipe_tensor", "sm__pipe_shared"),
    "dram_active_pct": (
        "dram__throughput",
        "gpu__dram_throughput",
        "dramc__",
        "dram__cycles_active",
        "fbpa__dram",
        "dram__bytes",
    ),
    "fp32_active_pct": ("sm__pipe_fma", "sm__inst_executed_pipe_fma"),
    "fp64_active_pct": ("sm__pipe_fp64", "sm__inst_executed_pipe_fp64"),
    "fp16_active_pct": ("sm__pipe_fp16", "sm__inst_executed_pipe_fp16"),
    "graphics_active_pct": ("gr__cycles_active", "gpu__time_active"),
}
LOAD_PLAN = "idle:1.5,spin-1thread:1.5,spin-1warp-per-sm:1.5,copy:1.5,gemm-bf16:1.5,gemm-fp32:1.5"

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


# --- steps (each runs in its own process) -----------------------------------------------------------


def step_query(args) -> dict:
    res = {"errors": {}, "cuinit": cuda_init()}
    patch_host_struct(args.patch_host_struct)
    import cupti.cupti as C
    from cupti import pm_sampling as pm
    from cupti import profiler_host as ph

    try:
        res["supported_chips"] = ph.get_supported_chips()
    except Exception as e:  # noqa: BLE001
        res["errors"]["supported_chips"] = err(e)
    res["libcupti"] = libcupti_info()
    chip = None
    try:
        p = C.ProfilerInitializeParams()
        p.struct_size = C.PROFILER_INITIALIZE_PARAMS_STRUCT_SIZE
        C.profiler_initialize(p.ptr)
        q = C.DeviceGetChipNameParams()
        q.struct_size = C.DEVICE_GET_CHIP_NAME_PARAMS_STRUCT_SIZE
        q.device_index = 0
        C.device_get_chip_name(q.ptr)
        chip = q.p_chip_name
    except Exception as e:  # noqa: BLE001
        res["errors"]["chip_name"] = err(e)
    res["chip"] = chip
    log(f"  chip {chip}; libcupti {res['libcupti']}")
    metrics = list(args.metrics.split(",")) if args.metrics else None
    if chip and not args.quick:
        try:
            res["max_hw_metrics_per_pass"] = ph.get_max_num_hardware_metrics_per_pass(chip, ph.ProfilerType.PM_SAMPLING)
        except Exception as e:  # noqa: BLE001
            res["errors"]["max_hw"] = err(e)
        try:
            sets = ph.get_single_pass_sets(chip)
            res["single_pass_sets"] = {s: ph.get_metrics_in_single_pass_set(chip, s) for s in sets}
        except Exception as e:  # noqa: BLE001
            res["errors"]["single_pass_sets"] = err(e)
        base = {}
        try:
            host = ph.ProfilerHost(chip, ph.ProfilerType.PM_SAMPLING)
            host.initialize()
            for t in (C.MetricType.COUNTER, C.MetricType.RATIO, C.MetricType.THROUGHPUT):
                base[t.name] = host.get_base_metrics(t)
            res["base_metrics"] = base
            props, subs = {}, {}
            for tname, names in base.items():
                for b in [n for n in names if n.startswith(INTERESTING)][:300]:
                    if True:
                        try:
                            subs[b] = host.get_sub_metrics(b, C.MetricType[tname])
                        except Exception as e:  # noqa: BLE001
                            subs[b] = err(e)
                        try:
                            mp = host.get_metric_properties(b)
                            props[b] = {
                                "description": mp.description,
                                "hw_unit": mp.hw_unit,
                                "dim_unit": mp.dim_unit,
                                "scope": mp.metric_collection_scope.name,
                            }
                        except Exception as e:  # noqa: BLE001
                            props[b] = err(e)
            res["sub_metrics"], res["properties"] = subs, props
            host.deinitialize()
        except Exception as e:  # noqa: BLE001
            res["errors"]["base_metrics"] = err(e)
        auto = {}
        for role, prefixes in AUTO.items():
            for b, subs in (res.get("sub_metrics") or {}).items():
                if not b.startswith(prefixes) or not isinstance(subs, list):
                    continue
                full = [x if x.startswith(b) else b + ("" if x.startswith(".") else ".") + x for x in subs]
                best = [f for f in full if f.endswith("pct_of_peak_sustained_elapsed")] or [
                    f for f in full if f.endswith((".avg", ".sum"))
                ]
                auto.setdefault(role, []).extend(best[:2])
        res["auto_candidates"] = auto
        valid = {}
        tried = [m for ms in ROLES.values() for m in ms] + RAW + [m for ms in auto.values() for m in ms][:80]
        for name in dict.fromkeys(tried):
            try:
                host = ph.ProfilerHost(chip, ph.ProfilerType.PM_SAMPLING)
                host.initialize()
                image = host.create_config_image([name])
                valid[name] = ph.get_num_of_passes(image)
                host.deinitialize()
            except Exception as e:  # noqa: BLE001
                valid[name] = err(e)
        res["candidates"] = valid
        log("  candidates: " + ", ".join(f"{k}={v if isinstance(v, int) else 'no'}" for k, v in valid.items()))
        chosen, alternates = {}, {}
        for role, names in ROLES.items():
            ok = [n for n in dict.fromkeys(names + auto.get(role, [])) if valid.get(n) == 1]
            if ok:
                chosen[role] = ok[0]
                alternates[role] = ok[1:]

        def one_pass(names: list[str]) -> list[str]:
            """The longest prefix of names that one pass collects."""
            names = list(names)
            while names:
                try:
                    host = ph.ProfilerHost(chip, ph.ProfilerType.PM_SAMPLING)
                    host.initialize()
                    passes = ph.get_num_of_passes(host.create_config_image(names))
                    host.deinitialize()
                except Exception as e:  # noqa: BLE001
                    passes = err(e)
                if passes == 1:
                    return names
                log(f"  a set of {len(names)} needs {passes} passes; dropping {names[-1]}")
                names.pop()
            return names

        kept = one_pass([chosen[r] for r in chosen])
        res["set_a"] = {r: m for r, m in chosen.items() if m in kept}
        rest = [a for r in ROLES for a in alternates.get(r, [])] + [r for r in RAW if valid.get(r) == 1]
        res["set_b"] = one_pass(rest)
        metrics = metrics or list(res["set_a"].values())
    # A minimal collection in this process: enable, configure, start, decode, stop, disable.
    metrics = metrics or ["sm__cycles_active.avg", "sm__cycles_elapsed.avg"]
    col = pm.Collector(0)
    stage = "enable"
    try:
        col.enable()
        stage = "configure"
        res["trigger"] = configure(col, metrics)
        stage = "start"
        col.start()
        time.sleep(0.5)
        stage = "decode"
        samples, td = [], []
        decode(col, samples, td)
        res["mini_collect"] = {
            "metrics": metrics,
            "samples": len(samples),
            "first": samples[:3],
            "decode_ms": td[-1]["decode_ms"],
        }
        stage = "stop"
        col.stop()
        res["mini_collect"]["ok"] = True
    except Exception as e:  # noqa: BLE001
        res["mini_collect"] = {"metrics": metrics, "ok": False, "failed_at": stage, "error": err(e)}
    finally:
        try:
            col.disable()
        except Exception as e:  # noqa: BLE001
            res["errors"]["disable"] = err(e)
    log(f"  mini collect: {json.dumps(res['mini_collect'])[:400]}")
    return res


def step_collect(args) -> dict:
    """A CUPTI reader: waits until --start-at, samples for --seconds, logs every error with its stage."""
    from cupti import pm_sampling as pm

    res = {"nvml": [nvml_state()], "pid": os.getpid(), "events": [], "cuinit": cuda_init()}
    if args.start_at:
        time.sleep(max(0.0, args.start_at - time.monotonic()))
    metrics = args.metrics.split(",")
    col = pm.Collector(0)
    samples, td = [], []
    stage = "enable"
    t_enable = time.monotonic()
    try:
        try:
            col.enable()
        except Exception as e:  # noqa: BLE001
            # Does PM sampling need a CUDA context in the reading process? Try once with one.
            res["enable_without_context"] = err(e)
            res["nvml"].append(nvml_state() | {"after": "failed enable"})
            save(res)
            from cuda.bindings import driver as cu

            cu.cuInit(0)
            ctx = cu.cuDevicePrimaryCtxRetain(cu.cuDeviceGet(0)[1])[1]
            cu.cuCtxSetCurrent(ctx)
            res["context_created"] = True
            col = pm.Collector(0)
            col.enable()
        res["enable_s"] = time.monotonic() - t_enable
        res["nvml"].append(nvml_state() | {"after": "enable"})
        res["libcupti"] = libcupti_info()
        stage = "configure"
        res["trigger"] = configure(col, metrics, buffer_mib=args.buffer_mib)
        res["nvml"].append(nvml_state() | {"after": "configure"})
        stage = "start"
        col.start()
        res["t_start"] = time.monotonic()
        res["nvml"].append(nvml_state() | {"after": "start"})
        stage = "decode"
        deadline = time.monotonic() + args.seconds
        nxt = time.monotonic()
        while time.monotonic() < deadline and not (args.stop_file and Path(args.stop_file).exists()):
            nxt += 0.1
            time.sleep(max(0.0, nxt - time.monotonic()))
            try:
                decode(col, samples, td)
            except Exception as e:  # noqa: BLE001
                res["events"].append({"t": time.monotonic(), "error": err(e)})
                if len(res["events"]) > 20:
                    raise
            if len(td) % 10 == 1:
                res["nvml"].append(nvml_state() | {"after": "decode"})
        stage = "stop"
        col.stop()
        res["ok"] = True
    except Exception as e:  # noqa: BLE001
        res["ok"] = False
        res["failed_at"] = stage
        res["error"] = err(e)
        res["t_error"] = time.monotonic()
    finally:
        res["metrics"], res["samples"], res["decodes"] = metrics, samples, td
        save(res)
        try:
            col.disable()
        except Exception as e:  # noqa: BLE001
            res["disable_error"] = err(e)
    res["t_end"] = time.monotonic()
    res["nvml"].append(nvml_state() | {"after": "disable"})
    return res


def step_gpm(args) -> dict:
    """An NVML GPM reader through gpubench's own source, every 100 ms, every value and error kept."""
    from gpubench.record.sources.gpm import GpmSource

    if args.start_at:
        time.sleep(max(0.0, args.start_at - time.monotonic()))
    src = GpmSource()
    res = {"pid": os.getpid(), "reads": []}
    try:
        src.open([0])
    except Exception as e:  # noqa: BLE001
        return res | {"ok": False, "failed_at": "open", "error": err(e), "t_error": time.monotonic()}
    t_prev = time.monotonic()
    deadline = t_prev + args.seconds
    nxt = t_prev
    while time.monotonic() < deadline and not (args.stop_file and Path(args.stop_file).exists()):
        nxt += 0.1
        time.sleep(max(0.0, nxt - time.monotonic()))
        t = time.monotonic()
        try:
            values = src.read().get(0, {})
            res["reads"].append({"t0": t_prev, "t1": t, "values": {k: round(v, 4) for k, v in values.items()}})
        except Exception as e:  # noqa: BLE001
            res["reads"].append({"t0": t_prev, "t1": t, "error": err(e)})
        t_prev = t
    src.close()
    return res | {"ok": True}


def step_load(args) -> dict:
    """Known kernels in phases, each long enough to read; boundaries on the monotonic and wall clocks."""
    import torch
    from gpubench.kernels.spin import cupy_spin, sm_count

    torch.backends.cuda.matmul.allow_tf32 = False
    sms = sm_count()
    n = 2**27  # 512 MiB of fp32 each side: a 1 GiB copy counting read and write
    src = torch.randn(n, device="cuda")
    dst = torch.empty_like(src)
    a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    af, bf = torch.randn(4096, 4096, device="cuda"), torch.randn(4096, 4096, device="cuda")
    work = {  # (one call, calls between synchronizations: about 20 ms of GPU time)
        "idle": (None, 0),
        "spin-1thread": (lambda: cupy_spin(5_000_000, 1, 1), 4),
        "spin-1warp-per-sm": (lambda: cupy_spin(5_000_000, sms, 32), 4),
        "copy": (lambda: dst.copy_(src), 50),
        "gemm-bf16": (lambda: torch.matmul(a, b), 12),
        "gemm-fp32": (lambda: torch.matmul(af, bf), 8),
    }
    for fn, _ in work.values():  # compile and warm up outside the phases
        if fn:
            fn()
    torch.cuda.synchronize()
    phases = []
    Path(args.ready).write_text("ready") if args.ready else None
    for item in args.plan.split(","):
        name, seconds = item.split(":")
        fn, calls = work[name]
        t0, r0 = time.monotonic(), time.time_ns()
        end = t0 + float(seconds)
        while time.monotonic() < end:
            if fn is None:
                time.sleep(0.01)
                continue
            for _ in range(calls):
                fn()
            torch.cuda.synchronize()
        torch.cuda.synchronize()
        phases.append({"phase": name, "t0": t0, "t1": time.monotonic(), "real0_ns": r0, "real1_ns": time.time_ns()})
    return {"phases": phases, "pid": os.getpid()}


def step_overhead(args) -> dict:
    """A bf16 GEMM timed with CUDA events in windows, the collector on and off in turns, in this process.

    "On" is what a source does: enable, configure, start, decode every 100 ms from a thread, stop,
    disable; "off" is no collector at all. The pairs alternate so that the clock's drift at the power
    limit falls on both sides alike (as tests/record/test_gpu_metrics.py measures the sampler's overhead).
    """
    import cupti.cupti as C
    import torch
    from cuda.bindings import driver as cu
    from cupti import pm_sampling as pm
    from gpubench.kernels import gemm

    from gpubench.truth.timing import time_loop

    res = {"pairs": [], "libcupti_after_torch": libcupti_info()}
    p = gemm.prepare("torch")
    time_loop(p.run, calls_per_timing=10, groups=3)
    time_loop(p.run, calls_per_timing=10, duration_s=1.0)  # settle the clock at the power limit
    metrics = args.metrics.split(",")
    ctx = cu.cuCtxGetCurrent()[1]

    def clock_status():
        try:
            return C.ClockControlStatus(C.clock_control_get_status(int(ctx))).name
        except Exception as e:  # noqa: BLE001
            return err(e)

    res["clock_status_before"] = clock_status()

    def window(on: bool) -> dict:
        samples, td, stop, clocks = [], [], threading.Event(), []
        col, extra = None, {}
        if on:
            free0 = torch.cuda.mem_get_info()[0]
            t = time.perf_counter()
            col = pm.Collector(torch.cuda.current_device())
            col.enable()
            configure(col, metrics)
            col.start()
            extra = {
                "open_ms": 1000 * (time.perf_counter() - t),
                "clock_status": clock_status(),
                "device_mib_taken": (free0 - torch.cuda.mem_get_info()[0]) / 2**20,
            }

        def reader():
            while not stop.wait(0.1):
                if on:
                    decode(col, samples, td)
                clocks.append(nvml_state()["sm_clock_mhz"])

        th = threading.Thread(target=reader)
        th.start()
        ms = time_loop(p.run, calls_per_timing=10, duration_s=0.8).median_ms
        stop.set()
        th.join()
        if on:
            col.stop()
            col.disable()
            extra["means"] = [statistics.mean(v[2][i] for v in samples) for i in range(len(metrics))] if samples else []
        return {
            "ms": ms,
            "sm_clock_mhz": statistics.median(clocks) if clocks else None,
            "samples": len(samples),
            "decode_ms": statistics.median([d["decode_ms"] for d in td]) if td else None,
        } | extra

    for i in range(args.pairs):
        off, on = window(False), window(True)
        pair = {"off": off, "on": on, "ratio": on["ms"] / off["ms"]}
        res["pairs"].append(pair)
        ratios = [x["ratio"] for x in res["pairs"]]
        res["median_slowdown_pct"] = 100 * (statistics.median(ratios) - 1)
        save(res)
        log(
            f"  pair {i}: off {off['ms']:.4f} ms at {off['sm_clock_mhz']} MHz, on {on['ms']:.4f} ms at "
            f"{on['sm_clock_mhz']} MHz, ratio {pair['ratio']:.4f}; opened in {on['open_ms']:.0f} ms, "
            f"{on['device_mib_taken']:.0f} MiB, clock {on['clock_status']}, in-process means {on['means']}"
        )
    res["clock_status_after"] = clock_status()
    return res


STEPS = {"query": step_query, "collect": step_collect, "gpm": step_gpm, "load": step_load, "overhead": step_overhead}


# --- the driver -------------------------------------------------------------------------------------


class Driver:
    def __init__(self, out: Path, wheels: Path, budget_s: float):
        self.out, self.wheels = out, wheels
        self.deadline = time.monotonic() + budget_s
        self.results: dict = {"t0_real": time.time()}
        self.tmp = Path("/tmp/cupti-probe")  # step results; only what main() writes goes under --out
        self.tmp.mkdir(parents=True, exist_ok=True)
        os.chmod(self.tmp, 0o777)  # a step run as another user writes its result here too

    def checkpoint(self) -> None:
        (self.out / "probe.json").write_text(json.dumps(self.results, default=str))

    def left(self) -> float:
        return self.deadline - time.monotonic()

    def sh(self, cmd: str, timeout: float = 30) -> str:
        try:
            r = subprocess.run(cmd, shell=True, capture_output=True, text=True, timeout=timeout)
            return (r.stdout + r.stderr).strip()
        except subprocess.TimeoutExpired:
            return f"(timed out after {timeout} s)"

    def spawn(self, step: str, *extra: str, user: str | None = None):
        out = self.tmp / f"{step}-{time.monotonic_ns()}.json"
        cmd = [sys.executable, str(HERE), "--step", step, "--result", str(out), *extra]
        if user:
            cmd = ["setpriv", f"--reuid={user}", f"--regid={user}", "--clear-groups", *cmd]
        env = dict(os.environ, HOME="/tmp") if user else None
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
        return proc, out

    def finish(self, proc, out: Path, timeout: float) -> dict:
        try:
            text, _ = proc.communicate(timeout=max(1.0, min(timeout, self.left())))
        except subprocess.TimeoutExpired:
            proc.kill()
            text, _ = proc.communicate()
            text += "\n(killed at its deadline)"
        for line in text.strip().splitlines()[-40:]:
            log("    | " + line)
        res = {"returncode": proc.returncode}
        if out.exists():
            res |= json.loads(out.read_text())
        return res

    def run(self, step: str, *extra: str, timeout: float = 60, user: str | None = None) -> dict:
        return self.finish(*self.spawn(step, *extra, user=user), timeout)

    def pip(self, *args: str) -> str:
        cmd = [sys.executable, "-m", "pip", "install", "-q", "--no-index", "--no-deps", "--no-cache-dir", *args]
        r = subprocess.run(cmd, capture_output=True, text=True)
        return f"pip {' '.join(args)} -> {r.returncode} {r.stdout.strip()} {r.stderr.strip()[-600:]}"

    def wheel(self, name: str) -> list[str]:
        return [str(p) for p in sorted(self.wheels.glob(f"{name}-*.whl"))]

    # --- the steps in order ---

    def environment(self):
        from importlib import metadata

        env = {}
        for pkg in (
            "torch",
            "nvidia-cuda-cupti",
            "cuda-bindings",
            "cuda-pathfinder",
            "cupti-python",
            "numpy",
            "nvidia-ml-py",
            "cupy-cuda13x",
        ):
            try:
                env[pkg] = metadata.version(pkg)
            except metadata.PackageNotFoundError:
                env[pkg] = None
        env["nvidia_smi"] = self.sh(
            "nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,"
            "clocks.applications.graphics,power.limit --format=csv"
        )
        env["profiling_params"] = self.sh("grep -iE 'Profil|Restrict' /proc/driver/nvidia/params")
        env["whoami"] = self.sh("id")
        import importlib.util

        torch_dir = Path(importlib.util.find_spec("torch").origin).parent
        site = torch_dir.parent
        env["torch_cupti_link"] = self.sh(
            f"ldd {torch_dir}/lib/libtorch_cuda.so | grep -i cupti; readelf -d "
            f"{torch_dir}/lib/libtorch_cuda.so | grep -iE 'rpath|runpath|cupti'"
        )
        env["cupti_libs"] = self.sh(f"ls -la {site}/nvidia/cu13/lib | grep -iE 'cupti|nvperf'")
        env["tools"] = self.sh(
            "which dcgmi nv-hostengine ncu nsys nvcc; ls -d /opt/nvidia/nsight-compute/* 2>/dev/null"
        )
        env["ncu_pm_sections"] = self.sh(
            "grep -rhoE 'pmsampling:[a-zA-Z0-9_.]+' /opt/nvidia/nsight-compute/*/sections "
            "2>/dev/null | sort | uniq -c | sort -rn | head -80"
        )
        self.results["environment"] = env
        for k, v in env.items():
            log(f"{k}: {v}")

    def install_bindings(self):
        from importlib import metadata

        lines = [self.pip(*self.wheel("cupti_python"), *self.wheel("pyelftools"))]

        def older(pkg, floor):
            try:
                have = tuple(int(x) for x in metadata.version(pkg).split(".")[:3])
            except Exception:  # noqa: BLE001
                return True
            return have < floor

        if older("cuda-pathfinder", (1, 4, 1)):
            lines.append(self.pip(*self.wheel("cuda_pathfinder")))
        if older("cuda-bindings", (13, 0, 2)):
            lines.append(self.pip(*self.wheel("cuda_bindings")))
        self.results["install_bindings"] = lines
        log("\n".join(lines))

    def upgrade_libcupti(self):
        line = self.pip("--upgrade", *self.wheel("nvidia_cuda_cupti"))
        self.results["install_libcupti"] = line
        log(line)

    def write_metrics(self, q: dict):
        lines = [
            f"# PM sampling metrics of {q.get('chip')} as the CUPTI profiler host lists them "
            f"(libcupti {q.get('libcupti')})"
        ]
        for t, names in (q.get("base_metrics") or {}).items():
            for n in names:
                sub = (q.get("sub_metrics") or {}).get(n)
                prop = (q.get("properties") or {}).get(n)
                desc = prop.get("description") if isinstance(prop, dict) else ""
                lines.append(f"{t:<10} {n:<60} {desc}" + (f"\n{'':10} subs: {sub}" if sub else ""))
        for s, ms in (q.get("single_pass_sets") or {}).items():
            lines.append(f"single-pass set {s}: {', '.join(ms)}")
        (self.out / "metrics.txt").write_text("\n".join(lines) + "\n")

    def cross_process(self, label: str, metrics: list[str]):
        """A CUPTI collector here, the kernels in another process."""
        stop = self.tmp / f"stop-{label}"
        col = self.spawn("collect", "--metrics", ",".join(metrics), "--seconds", "50", "--stop-file", str(stop))
        time.sleep(1.0)
        load = self.run("load", "--plan", LOAD_PLAN, timeout=50)
        stop.write_text("stop")
        res = self.finish(*col, timeout=30)
        self.results[f"cross_{label}"] = {"collect": res, "load": load}
        self.summarize_cupti(label, res, load, metrics)

    def gpm_reference(self):
        stop = self.tmp / "stop-gpm"
        g = self.spawn("gpm", "--seconds", "50", "--stop-file", str(stop))
        time.sleep(0.5)
        load = self.run("load", "--plan", LOAD_PLAN, timeout=50)
        stop.write_text("stop")
        res = self.finish(*g, timeout=30)
        self.results["gpm_reference"] = {"gpm": res, "load": load}
        log("  GPM per phase (reads whose interval lies in the phase, first 0.3 s dropped):")
        for ph in load.get("phases", []):
            rows = [
                r["values"]
                for r in res.get("reads", [])
                if "values" in r and r["t0"] >= ph["t0"] + 0.3 and r["t1"] <= ph["t1"]
            ]
            means = {
                k: statistics.mean(r[k] for r in rows if not math.isnan(r[k]))
                for k in (rows[0] if rows else {})
                if any(not math.isnan(r[k]) for r in rows)
            }
            log(f"    {ph['phase']:<18} n={len(rows):<3} " + " ".join(f"{k}={v:.3g}" for k, v in means.items()))

    def summarize_cupti(self, label, res, load, metrics):
        if not res.get("ok"):
            log(f"  CUPTI collector ({label}) failed at {res.get('failed_at')}: {res.get('error')}")
        samples, td = res.get("samples", []), res.get("decodes", [])
        if not samples:
            log(f"  no CUPTI samples ({label})")
            return
        # GPU timestamps -> wall clock: the smallest (decode time - last sample end) bounds the offset.
        offs = [d["real_ns"] - d["last_end"] for d in td if d["last_end"]]
        off = min(offs) if offs else 0
        mono_minus_real = statistics.median(d["mono_ns"] - d["real_ns"] for d in td) if td else 0
        durs = [e - s for s, e, _ in samples]
        log(
            f"  {label}: {len(samples)} samples, duration median {statistics.median(durs) / 1e6:.3f} ms; GPU clock "
            f"- wall clock ~ {-off / 1e6:.1f} ms (decode latency included); decode "
            f"{statistics.median(d['decode_ms'] for d in td):.2f} ms median"
        )
        for ph in load.get("phases", []):
            lo, hi = ph["t0"] + 0.3, ph["t1"] - 0.05
            rows = [
                v
                for s, e, v in samples
                if lo <= (s + off + mono_minus_real) / 1e9 and (e + off + mono_minus_real) / 1e9 <= hi
            ]
            if not rows:
                log(f"    {ph['phase']:<18} n=0")
                continue
            means = [statistics.mean(r[i] for r in rows) for i in range(len(metrics))]
            log(
                f"    {ph['phase']:<18} n={len(rows):<3} "
                + " ".join(f"{m.split('.')[0]}={v:.4g}" for m, v in zip(metrics, means))
            )

    def two_readers(self, metrics: list[str]):
        """GPM and CUPTI, CUPTI and CUPTI, GPM and GPM, at once, while a GEMM runs in a third process."""
        ready = self.tmp / "load-ready"
        load = self.spawn("load", "--plan", "gemm-bf16:40", "--ready", str(ready))
        t = time.monotonic()
        while not ready.exists() and time.monotonic() - t < 30:
            time.sleep(0.1)
        m = ",".join(metrics)
        out = {}
        for name, first, second in (
            ("gpm_then_cupti", ("gpm",), ("collect", "--metrics", m)),
            ("cupti_then_gpm", ("collect", "--metrics", m), ("gpm",)),
            ("cupti_then_cupti", ("collect", "--metrics", m), ("collect", "--metrics", m)),
            ("gpm_then_gpm", ("gpm",), ("gpm",)),
        ):
            if self.left() < 25:
                break
            now = time.monotonic()
            a = self.spawn(first[0], *first[1:], "--seconds", "5", "--start-at", str(now + 2.0))
            b = self.spawn(second[0], *second[1:], "--seconds", "2", "--start-at", str(now + 3.5))
            ra, rb = self.finish(*a, timeout=20), self.finish(*b, timeout=20)
            out[name] = {"first": self.brief(ra, now + 3.5, now + 5.5), "second": self.brief(rb, now + 3.5, now + 5.5)}
            log(f"  {name}: first -> {json.dumps(out[name]['first'])}")
            log(f"  {name}: second -> {json.dumps(out[name]['second'])}")
        load[0].kill()
        self.finish(*load, timeout=5)
        self.results["two_readers"] = out

    @staticmethod
    def brief(r: dict, t_b0: float, t_b1: float) -> dict:
        """What a reader reported before, while and after the second reader ran."""
        b = {k: r.get(k) for k in ("ok", "failed_at", "error", "disable_error", "events") if r.get(k) is not None}
        if "reads" in r:  # GPM

            def mean(rows, key="sm_active_pct"):
                vals = [x["values"].get(key) for x in rows if "values" in x and x["values"].get(key) is not None]
                vals = [v for v in vals if not math.isnan(v)]
                return round(statistics.mean(vals), 2) if vals else None

            parts = {
                "before": [x for x in r["reads"] if x["t1"] < t_b0],
                "during": [x for x in r["reads"] if x["t0"] >= t_b0 and x["t1"] <= t_b1],
                "after": [x for x in r["reads"] if x["t0"] > t_b1],
            }
            b["sm_active"] = {k: mean(v) for k, v in parts.items()}
            b["read_errors"] = sorted({x["error"] for x in r["reads"] if "error" in x})[:3]
        if "samples" in r:  # CUPTI
            b["samples"] = len(r["samples"])
            vals = [v[0] for _, _, v in r["samples"]]
            b["first_metric_mean"] = round(statistics.mean(vals), 2) if vals else None
            b["decodes"] = len(r.get("decodes", []))
        return b

    def ncu(self, metrics: list[str]):
        ncu = shutil.which("ncu") or next(iter(sorted(Path("/opt/nvidia/nsight-compute").glob("*/ncu"))), None)
        nvcc = shutil.which("nvcc") or "/usr/local/cuda/bin/nvcc"
        if not ncu:
            log("  no ncu here")
            return
        src = self.tmp / "tiny.cu"
        src.write_text(
            "__global__ void k(float* x){int i=blockIdx.x*blockDim.x+threadIdx.x; for(int j=0;j<20000;j++)"
            " x[i]=x[i]*0.999f+1.0f;}\nint main(){float* x; cudaMalloc(&x, 1<<24); for(int r=0;r<20;r++)"
            " k<<<4096,1024>>>(x); cudaDeviceSynchronize(); return 0;}\n"
        )
        exe = self.tmp / "tiny"
        log("  nvcc: " + self.sh(f"{nvcc} -o {exe} {src}", timeout=60)[-300:])
        res = {"alone": self.sh(f"{ncu} --metrics sm__cycles_active.avg --launch-count 2 {exe}", timeout=60)[-1500:]}
        log("  ncu alone:\n" + res["alone"])
        if self.left() > 30:
            now = time.monotonic()
            c = self.spawn("collect", "--metrics", ",".join(metrics), "--seconds", "8", "--start-at", str(now + 1))
            time.sleep(3.0)
            res["during_cupti"] = self.sh(f"{ncu} --metrics sm__cycles_active.avg --launch-count 2 {exe}", timeout=40)[
                -1500:
            ]
            log("  ncu while a CUPTI collector runs:\n" + res["during_cupti"])
            r = self.finish(*c, timeout=20)
            res["cupti_during_ncu"] = self.brief(r, 0, 0)
            log("  the CUPTI collector meanwhile: " + json.dumps(res["cupti_during_ncu"]))
        if self.left() > 25:
            now = time.monotonic()
            g = self.spawn("gpm", "--seconds", "8", "--start-at", str(now + 1))
            time.sleep(3.0)
            res["during_gpm"] = self.sh(f"{ncu} --metrics sm__cycles_active.avg --launch-count 2 {exe}", timeout=40)[
                -1500:
            ]
            log("  ncu while GPM reads:\n" + res["during_gpm"])
            r = self.finish(*g, timeout=20)
            res["gpm_during_ncu"] = {
                "errors": sorted({x["error"] for x in r.get("reads", []) if "error" in x})[:3],
                "reads": len(r.get("reads", [])),
            }
            log("  GPM meanwhile: " + json.dumps(res["gpm_during_ncu"]))
        self.results["ncu"] = res

    def dcgm(self, metrics: list[str]):
        if not shutil.which("nv-hostengine"):
            log("  no DCGM host engine here")
            return
        res = {"start": self.sh("nv-hostengine", timeout=15)}
        time.sleep(2)
        res["dmon"] = self.sh("dcgmi dmon -e 1002 -c 5 -d 200", timeout=20)
        res["cupti"] = self.brief(
            self.run("collect", "--metrics", ",".join(metrics), "--seconds", "2", timeout=30), 0, 0
        )
        res["pause"] = self.sh("dcgmi profile --pause", timeout=15)
        res["cupti_paused"] = self.brief(
            self.run("collect", "--metrics", ",".join(metrics), "--seconds", "2", timeout=30), 0, 0
        )
        res["resume"] = self.sh("dcgmi profile --resume", timeout=15)
        res["stop"] = self.sh("nv-hostengine --term", timeout=15)
        self.results["dcgm"] = res
        log(json.dumps(res, indent=1)[:3000])


def main() -> int:
    global LOG, RESULT
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--wheels", type=Path)
    p.add_argument("--out", type=Path)
    p.add_argument("--budget", type=float, default=270.0, help="seconds the whole probe may take")
    p.add_argument("--step", choices=STEPS)
    p.add_argument("--result", type=Path)
    p.add_argument("--metrics", default="")
    p.add_argument("--seconds", type=float, default=5.0)
    p.add_argument("--start-at", type=float, default=0.0)
    p.add_argument("--plan", default=LOAD_PLAN)
    p.add_argument("--ready", default="")
    p.add_argument("--stop-file", default="")
    p.add_argument("--quick", action="store_true")
    p.add_argument("--patch-host-struct", type=int, default=0)
    p.add_argument("--buffer-mib", type=int, default=BUFFER_MIB)
    p.add_argument("--pairs", type=int, default=5)
    args = p.parse_args()
    if args.step:
        RESULT = args.result
        try:
            res = STEPS[args.step](args)
        except Exception as e:  # noqa: BLE001
            import traceback

            traceback.print_exc()
            res = {"step_error": err(e)}
        args.result.write_text(json.dumps(res, default=str))
        return 0
    if not (args.wheels and args.out):
        p.error("--wheels and --out are needed")
    args.out.mkdir(parents=True, exist_ok=True)
    LOG = open(args.out / "probe.log", "a")
    d = Driver(args.out, args.wheels, args.budget)
    try:
        log("== 1. the machine")
        d.environment()
        log("== 2a. cupti-python 13.4 against the libcupti PyTorch ships")
        d.install_bindings()
        d.results["old_lib"] = d.run("query", "--quick", timeout=40)
        d.results["old_lib_patched"] = d.run("query", "--quick", "--patch-host-struct", "48", timeout=40)
        log("== 2b. the same against libcupti 13.4 (nvidia-cuda-cupti upgraded in place, as pip would)")
        d.upgrade_libcupti()
        q = d.run("query", timeout=60)
        d.results["query"] = q
        d.write_metrics(q)
        set_a = list((q.get("set_a") or {}).values())
        set_b = q.get("set_b") or []
        log(f"  set A: {q.get('set_a')}\n  set B: {set_b}")
        if not set_a or not (q.get("mini_collect") or {}).get("ok"):
            log("PM sampling did not collect here: see the errors above; stopping.")
            return 0
        d.checkpoint()
        log("== 3. a collector here, the kernels in another process")
        d.cross_process("set_a", set_a)
        log("== 3b. NVML GPM over the same kernels")
        d.gpm_reference()
        d.checkpoint()
        log("== 4. two readers at once")
        d.two_readers(set_a[:2])
        d.checkpoint()
        log("== 5. overhead on a bf16 GEMM, collector in the same process as torch")
        r = d.run("overhead", "--metrics", ",".join(set_a), timeout=70)
        d.results["overhead"] = {k: v for k, v in r.items()}
        log(
            f"  median slowdown {r.get('median_slowdown_pct')}%; clock status before {r.get('clock_status_before')}, "
            f"after {r.get('clock_status_after')}; libcupti {r.get('libcupti_after_torch')}"
        )
        d.checkpoint()
        log("== 6. hardware buffer of 512 MiB (the default) against 64 MiB, and a non-root user")
        big = d.run("collect", "--metrics", ",".join(set_a), "--seconds", "1", "--buffer-mib", "512", timeout=30)
        d.results["buffer_512"] = {"nvml": big.get("nvml"), "ok": big.get("ok"), "error": big.get("error")}
        log("  512 MiB buffer nvml: " + json.dumps(big.get("nvml"))[:1500])
        nobody = d.run("collect", "--metrics", ",".join(set_a), "--seconds", "1", timeout=30, user="65534")
        d.results["nobody_cupti"] = Driver.brief(nobody, 0, 0) | {"step_error": nobody.get("step_error")}
        nob_g = d.run("gpm", "--seconds", "1", timeout=30, user="65534")
        d.results["nobody_gpm"] = Driver.brief(nob_g, 0, 0) | {"step_error": nob_g.get("step_error")}
        log(f"  as nobody: CUPTI {d.results['nobody_cupti']}; GPM {d.results['nobody_gpm']}")
        d.checkpoint()
        log("== 7. Nsight Compute beside a reader")
        if d.left() > 40:
            d.ncu(set_a[:2])
        d.checkpoint()
        log("== 8. DCGM host engine, where installed")
        if d.left() > 30:
            d.dcgm(set_a[:2])
        if set_b and d.left() > 30:
            log("== 9. the alternates (set B) over the same kernels")
            d.cross_process("set_b", set_b)
        log(
            "== after: "
            + d.sh(
                "nvidia-smi --query-gpu=clocks.sm,clocks.max.sm,clocks.applications.graphics,power.draw --format=csv"
            )
        )
    finally:
        d.checkpoint()
        log(f"probe done, {d.left():.0f} s of its budget left")
    return 0


if __name__ == "__main__":
    sys.exit(main())
