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
import sys
from pathlib import Path

from research.cupti import sampling
from research.cupti.readers import Driver
from research.cupti.sampling import BUFFER_MIB, err, log
from research.cupti.steps import LOAD_PLAN, STEPS


def main() -> int:
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
        sampling.RESULT = args.result
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
    sampling.LOG = open(args.out / "probe.log", "a")
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
