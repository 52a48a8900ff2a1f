"""The CUPTI probe's steps other than the query (research/cupti_probe.py), each run in its own process with a
deadline: a CUPTI collector, an NVML GPM reader, known kernels in phases, and the overhead of a collector on a
bf16 GEMM; STEPS names every step, the query included."""

from __future__ import annotations

import os
import statistics
import threading
import time
from pathlib import Path

from research.cupti.metrics import step_query
from research.cupti.sampling import configure, cuda_init, decode, err, libcupti_info, log, nvml_state, save

LOAD_PLAN = "idle:1.5,spin-1thread:1.5,spin-1warp-per-sm:1.5,copy:1.5,gemm-bf16:1.5,gemm-fp32:1.5"


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
