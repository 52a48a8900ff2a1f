"""`gpubench watch` run whole as a user runs it, in a process of its own, on a CPU: tests/top/fakenvml.py puts a fake
pynvml behind gpubench's NVML door (one H100 that reads as the reference run's gemm-torch did), and the command
is a small Python job. Shared by the tests of the live lines (no terminal) and of the status area (tmux)."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FAKENVML = ROOT / "tests" / "top" / "fakenvml.py"
GPU = {
    "name": "NVIDIA H100 80GB HBM3",
    "power_limit_w": 700,
    "memory_total_mib": 81559,
    "gpm": True,
    "values": {
        "gpu_util_pct": 100,
        "sm_active_pct": 96.6,
        "sm_occupancy_pct": 14.3,
        "tensor_active_pct": 93.8,
        "dram_active_pct": 25.9,
        "power_w": 697,
        "sm_clock_mhz": 1755,
        "mem_used_mib": 70_000,
    },
    "processes": [],
}
FLOPS = 1e13
PEAK = 989.4e12  # the H100's bf16 datasheet peak: MFU = steps/s x FLOPS / PEAK
# steps with their FLOPs until the file named by its argument exists (a hang guard ends it after 10 min)
STEPPING = f"""
import sys, time, gpubench
from pathlib import Path
gpubench.mark("train")
deadline = time.monotonic() + 600
while not Path(sys.argv[1]).exists() and time.monotonic() < deadline:
    time.sleep(0.05)
    gpubench.step(flops={FLOPS!r})
"""


def spec(tmp_path: Path) -> Path:
    path = tmp_path / "spec.json"
    path.write_text(json.dumps({"gpus": [GPU]}))
    return path


def watch_argv(tmp_path: Path, run_dir: Path, options: list[str], job: list[str]) -> list[str]:
    """gpubench watch [options] -- job, behind the fake NVML, sampling every 0.1 s."""
    return [
        sys.executable,
        str(FAKENVML),
        str(spec(tmp_path)),
        "watch",
        "--no-smi",
        "--interval",
        "0.1",
        "--out",
        str(run_dir),
        *options,
        "--",
        *job,
    ]


def environment(**more) -> dict:
    """This environment with this checkout first on the path, no marks file of an outer watch, and no CI."""
    env = {k: v for k, v in os.environ.items() if k not in ("GPUBENCH_MARKS", "CI")}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    env.update(more)
    return env
