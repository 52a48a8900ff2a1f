"""CUPTI PM sampling beside NVML GPM on this GPU, and what CUPTI costs: one command, under six minutes.

    python -m research.cupti_compare --out DIR [--wheels DIR]

Where the GPU machine has no network, fetch the wheels on one that has (Python 3.12 there):

    python3 -m pip download --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
        --platform manylinux_2_28_x86_64 --platform manylinux_2_25_x86_64 -d WHEELS \
        cupti-python==13.4.0 nvidia-cuda-cupti==13.4.92 pyelftools==0.33

On a Hopper GPU, where both sources work. --wheels: a folder with cupti-python, nvidia-cuda-cupti (13.4 or
newer), pyelftools (and cuda-pathfinder, cuda-bindings where this machine's are older than cupti-python
asks), installed first without the network; without it cupti-python must already be installed. Steps,
each with a deadline so one failure costs only itself:

1. the machine, the wheels, `gpubench doctor`, and the chip's PM-sampling metrics (research/cupti_probe.py);
2. the source alone in a process without PyTorch: which metric each column got, and the device memory
   and CUDA context it costs (NVML's process list);
3. the suite's scenarios with --profiling cupti, then with --profiling gpm;
4. `gpubench watch --profiling cupti` attached while ANOTHER process runs a bf16 GEMM: the watched job's
   kernels, seen from outside;
5. two readers at once, a GEMM running meanwhile: GPM then CUPTI, CUPTI then GPM, CUPTI then CUPTI,
   `gpubench doctor` while CUPTI samples, Nsight Compute while CUPTI samples;
6. a bf16 GEMM timed with CUDA events in windows with no source, the CUPTI source and the GPM source in
   turns (as tests/record/test_gpu_metrics.py measures the sampler's overhead), with the SM clock in each;
7. tests/record/test_gpu_cupti.py, as time allows.

Writes under --out: cupti-<gpu>.log (everything), cupti-<gpu>.json (the findings the README is made
from), cupti-runs-<gpu>.tar.gz (run directories profiling-gpm-<gpu>, profiling-cupti-<gpu>,
profiling-cupti-watch-<gpu>) and cupti-metrics-<chip>.txt. To commit them:

    tar -xzf DIR/cupti-runs-<gpu>.tar.gz -C results/
    cp DIR/cupti-<gpu>.log DIR/cupti-<gpu>.json DIR/cupti-metrics-*.txt results/logs/
    python -m tools.readme.tables
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

from research.cupti import shell
from research.cupti.compare import Compare
from research.cupti.shell import PY, log, sh


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--wheels", type=Path)
    ap.add_argument("--budget", type=float, default=340.0, help="seconds the whole comparison may take")
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    os.environ["PYTHONUNBUFFERED"] = "1"
    shell.LOG = open(args.out / "cupti-log.tmp", "w")
    c = Compare(args.out, args.wheels, args.budget)
    t0 = time.monotonic()

    def step(title: str, fn) -> object:
        log(f"== {title}")
        try:
            return fn()
        except Exception:  # noqa: BLE001  (one step's failure is logged; the others still run)
            import traceback

            log(traceback.format_exc())
            c.found.setdefault("step_failures", []).append(title)
            return None

    try:
        step("1. the machine and cupti-python", c.setup)
        if not step("2. doctor, the chip's metrics, the source alone", c.discover):
            log(
                "The CUPTI source does not open here (see doctor and the self-check above): nothing to compare; "
                "the probe records what PM sampling itself does here instead."
            )
            sh(
                [
                    PY,
                    "-m",
                    "research.cupti_probe",
                    "--wheels",
                    str(args.wheels or c.work),
                    "--out",
                    str(args.out / "probe"),
                    "--budget",
                    f"{max(30.0, c.left() - 20):.0f}",
                ],
                timeout=max(40.0, c.left()),
            )
            return 1
        step("3. the suite with --profiling cupti, then gpm", c.suite)
        step("4. a watch through CUPTI of another process's GEMM", c.watch_another_process)
        step("5. two readers at once", c.two_readers)
        step("6. overhead on a bf16 GEMM: no source, CUPTI, GPM in turns", c.overhead)
        step(
            "7. the GPU tests of the CUPTI source",
            lambda: sh([PY, "-m", "pytest", "-q", "-rs", "-s", "tests/record/test_gpu_cupti.py"], timeout=c.t(90)),
        )
    finally:
        log(f"== done in {time.monotonic() - t0:.0f} s")
        step("packing", c.pack)
        shell.LOG.close()
        (args.out / "cupti-log.tmp").rename(args.out / f"cupti-{c.slug}.log")
    return 0


if __name__ == "__main__":
    sys.exit(main())
