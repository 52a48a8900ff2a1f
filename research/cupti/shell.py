"""What the CUPTI comparison (research/cupti_compare.py) runs in other processes: commands run to their end or
their deadline with their output in its log, processes started and finished, the JSON a helper printed, and
the code its helper processes run (python -c), so that each measures from a clean process."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PY = sys.executable
LOG = None


def log(text: str = "") -> None:
    print(text, flush=True)
    LOG.write(text + "\n")
    LOG.flush()


def sh(cmd: list[str] | str, timeout: float, env: dict | None = None) -> tuple[int | None, str]:
    """Run a command to its end or its deadline; its output goes to the log, and comes back."""
    shown = cmd if isinstance(cmd, str) else " ".join(c.splitlines()[1] + " ..." if "\n" in c else c for c in cmd)
    log(f"$ {shown}")
    try:
        r = subprocess.run(
            cmd, shell=isinstance(cmd, str), capture_output=True, text=True, timeout=timeout, env=env, cwd=ROOT
        )
        code, text = r.returncode, r.stdout + r.stderr
    except subprocess.TimeoutExpired as err:
        code, text = None, f"{err.stdout or ''}{err.stderr or ''}\n(stopped at its deadline of {timeout:.0f} s)"
        text = text if isinstance(text, str) else text.decode(errors="replace")
    for line in text.strip().splitlines()[-60:]:
        log("  | " + line)
    return code, text


def start(cmd: list[str]) -> subprocess.Popen:
    log(f"$ {' '.join(cmd)} &")
    return subprocess.Popen(
        cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True
    )


def finish(proc: subprocess.Popen, timeout: float) -> str:
    try:
        text, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        text, _ = proc.communicate()
        text += "\n(killed at its deadline)"
    for line in (text or "").strip().splitlines()[-40:]:
        log("  | " + line)
    return text or ""


def last_json(text: str, tag: str) -> dict:
    """The JSON a helper printed on its line starting with `tag`."""
    for line in reversed(text.splitlines()):
        if line.startswith(tag + " "):
            return json.loads(line[len(tag) + 1 :])
    return {}


# --- code run in helper processes (python -c), so that each measures from a clean process -------------

SELFCHECK = r"""
import json, os, time
from gpubench.record import nvml
from gpubench.record.sources.policy import open_sources
def mine():
    h = nvml.handle(0)
    procs = nvml.pynvml.nvmlDeviceGetComputeRunningProcesses(h)
    used = nvml.pynvml.nvmlDeviceGetMemoryInfo(h).used / 2**20
    return used, {p.pid: (p.usedGpuMemory or 0) / 2**20 for p in procs}.get(os.getpid())
before, _ = mine()
t = time.monotonic()
got = open_sources([0], profiling="cupti", smi=False)
open_s = time.monotonic() - t
after, process_mib = mine()
src = [s for s in got.sources if s.name == "cupti"]
reads = []
for _ in range(4):
    time.sleep(0.25)
    reads.append(src[0].read() if src else {})
for s in got.sources:
    s.close()
closed, _ = mine()
print("SELFCHECK " + json.dumps({"used": [s.name for s in got.sources], "unavailable": got.unavailable,
    "notes": got.notes, "columns": list(src[0].columns) if src else [],
    "resolution": src[0].resolution if src else {}, "open_s": open_s, "device_used_mib_delta": after - before,
    "in_compute_processes": process_mib is not None, "process_mib": process_mib,
    "device_used_mib_after_close_delta": closed - before, "idle_reads": reads}, default=str))
"""

LOAD = r"""
import sys, time, torch
a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16); b = torch.randn_like(a)
torch.matmul(a, b); torch.cuda.synchronize()
t0 = time.monotonic(); end = t0 + float(sys.argv[1])
print("LOAD " + '{"t0": %f}' % t0, flush=True)
while time.monotonic() < end:
    for _ in range(10):
        torch.matmul(a, b)
    torch.cuda.synchronize()
print("LOAD " + '{"t0": %f, "t1": %f}' % (t0, time.monotonic()), flush=True)
"""

OVERHEAD = r"""
import json, statistics, threading, time
from gpubench.kernels import gemm
from gpubench.record import nvml
from gpubench.record.sampler import Sampler
from gpubench.record.sources.policy import open_sources
from gpubench.truth.timing import time_loop
p = gemm.prepare("torch")
time_loop(p.run, calls_per_timing=10, groups=3)
time_loop(p.run, calls_per_timing=10, duration_s=1.0)  # the clock settles at the power limit first
h = nvml.handle(0)
def window(profiling):
    clocks, stop = [], threading.Event()
    def poll():
        while not stop.wait(0.1):
            clocks.append(nvml.pynvml.nvmlDeviceGetClockInfo(h, nvml.pynvml.NVML_CLOCK_SM))
    t = threading.Thread(target=poll); t.start()
    opened = open_sources([0], profiling=profiling, smi=False) if profiling else None
    used = [s.name for s in opened.sources] if opened else []
    if opened:
        with Sampler(opened.sources, [0], opened.interval_s):
            ms = time_loop(p.run, calls_per_timing=10, duration_s=0.8).median_ms
        for s in opened.sources:
            s.close()
    else:
        ms = time_loop(p.run, calls_per_timing=10, duration_s=0.8).median_ms
    stop.set(); t.join()
    return {"ms": ms, "clock_mhz": statistics.median(clocks) if clocks else None, "used": used}
rows = []
for i in range(6):
    order = ["none", "cupti", "gpm"] if i % 2 == 0 else ["gpm", "cupti", "none"]
    row = {k: window(None if k == "none" else k) for k in order}
    rows.append(row)
    print("PAIR " + json.dumps(row), flush=True)
def slow(k):
    return 100 * (statistics.median(r[k]["ms"] / r["none"]["ms"] for r in rows) - 1)
def clock(k):
    return statistics.median(r[k]["clock_mhz"] for r in rows if r[k]["clock_mhz"])
print("OVERHEAD " + json.dumps({"pairs": len(rows), "cupti_pct": slow("cupti"), "gpm_pct": slow("gpm"),
    "clock_off_mhz": clock("none"), "clock_cupti_mhz": clock("cupti"), "clock_gpm_mhz": clock("gpm"),
    "cupti_used": rows[0]["cupti"]["used"], "gpm_used": rows[0]["gpm"]["used"], "windows": rows}))
"""
