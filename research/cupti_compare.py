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
import json
import os
import shutil
import signal
import subprocess
import sys
import tarfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
PY = sys.executable
SCENARIOS = [
    "idle",
    "spin-1thread",
    "spin-1block",
    "spin-1warp-per-sm",
    "spin-half-sms",
    "copy-torch",
    "softmax-torch",
    "gemm-torch",
    "gemm-cupy",
]
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


# --- the steps -----------------------------------------------------------------------------------------


class Compare:
    def __init__(self, out: Path, wheels: Path | None, budget_s: float):
        self.out, self.wheels = out, wheels
        self.work = Path("/tmp/cupti-compare")
        shutil.rmtree(self.work, ignore_errors=True)
        self.work.mkdir(parents=True)
        self.deadline = time.monotonic() + budget_s
        self.found: dict = {}
        self.slug = "gpu"

    def left(self) -> float:
        return self.deadline - time.monotonic()

    def t(self, timeout: float) -> float:
        """A step's deadline, never past the whole comparison's."""
        return max(5.0, min(timeout, self.left()))

    def gpubench(self, *args: str, timeout: float) -> tuple[int | None, str]:
        return sh([PY, "-m", "gpubench", *args], timeout=self.t(timeout))

    def setup(self):
        # the same installs as the probe: cupti-python first, then the libcupti it needs
        from research import cupti_probe

        from gpubench.record import nvml
        from gpubench.record.rundir import slug

        self.slug = slug(nvml.name_of(nvml.handle(0)))
        self.found["gpu"] = nvml.name_of(nvml.handle(0))
        sh(
            "nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.limit --format=csv; "
            "grep -iE 'Profil|Restrict' /proc/driver/nvidia/params",
            timeout=20,
        )
        if self.wheels:
            probe = cupti_probe.Driver(self.work, self.wheels, self.left())
            cupti_probe.LOG = LOG
            probe.install_bindings()
            probe.upgrade_libcupti()
        sh(f"{PY} -m pip list 2>/dev/null | grep -iE 'cupti|cuda-bindings|cuda-pathfinder|^torch '", timeout=30)

    def discover(self):
        self.gpubench("doctor", timeout=60)
        result = self.work / "query.json"
        sh([PY, "-m", "research.cupti_probe", "--step", "query", "--result", str(result)], timeout=self.t(90))
        q = json.loads(result.read_text()) if result.exists() else {}
        self.found["libcupti"] = q.get("libcupti")
        self.found["chip"] = chip = q.get("chip")
        if chip:
            from research import cupti_probe

            probe = cupti_probe.Driver(self.work, self.wheels or self.work, 60)
            probe.write_metrics(q)
            shutil.move(self.work / "metrics.txt", self.out / f"cupti-metrics-{chip}.txt")
        code, text = sh([PY, "-c", SELFCHECK], timeout=self.t(60))
        self.found["selfcheck"] = check = last_json(text, "SELFCHECK")
        log(f"== the source alone: {json.dumps({k: v for k, v in check.items() if k != 'idle_reads'})}")
        # the same as an ordinary user (nobody): what the profiling permission means here
        code, text = sh(
            ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "env", "HOME=/tmp", PY, "-c", SELFCHECK],
            timeout=self.t(60),
        )
        nobody = last_json(text, "SELFCHECK")
        self.found["selfcheck_nobody"] = (
            {k: nobody.get(k) for k in ("used", "unavailable")}
            if nobody
            else {"error": text.strip().splitlines()[-1:] or ["no answer"]}
        )
        log(f"== the source as user nobody: {json.dumps(self.found['selfcheck_nobody'])}")
        return "cupti" in (check.get("used") or [])

    def suite(self):
        for profiling in ("cupti", "gpm"):
            run = self.work / f"profiling-{profiling}-{self.slug}"
            self.gpubench(
                "run",
                *SCENARIOS,
                "--profiling",
                profiling,
                "--no-peaks",
                "--duration",
                "3",
                "--out",
                str(run),
                timeout=150,
            )

    def watch_another_process(self):
        run = self.work / f"profiling-cupti-watch-{self.slug}"
        load = start([PY, "-c", LOAD, "10"])
        time.sleep(4.0)  # torch's start-up, then the GEMM runs
        watch = start(
            [PY, "-m", "gpubench", "watch", "--profiling", "cupti", "--duration", "5", "--no-smi", "--out", str(run)]
        )
        seen = []
        for _ in range(8):
            time.sleep(0.5)
            code, text = sh("nvidia-smi --query-compute-apps=pid,used_memory --format=csv,noheader", timeout=10)
            seen.append(text.strip())
        finish(watch, 30)
        finish(load, 20)
        summary = run / "summary.json"
        rows = json.loads(summary.read_text()) if summary.exists() else []
        rows = rows if isinstance(rows, list) else rows.get("rows", [])
        self.found["watch"] = {
            "pid": watch.pid,
            "compute_apps": seen,
            "summary": [
                {
                    k: r.get(k)
                    for k in (
                        "phase",
                        "gpu_util_pct",
                        "sm_active_pct",
                        "sm_occupancy_pct",
                        "tensor_active_pct",
                        "dram_active_pct",
                    )
                }
                for r in rows
            ],
        }
        log(f"== watch of another process's GEMM through CUPTI: {json.dumps(self.found['watch'])}")

    def overhead(self):
        code, text = sh([PY, "-c", OVERHEAD], timeout=self.t(120))
        self.found["overhead"] = found = last_json(text, "OVERHEAD")
        log(f"== overhead: {json.dumps({k: v for k, v in found.items() if k != 'windows'})}")

    def two_readers(self):
        """Each case: a first recording (8 s), a second reader started 2 s into it; a GEMM meanwhile."""
        load = start([PY, "-c", LOAD, "60"])
        time.sleep(4.0)
        cases, said = (
            [("gpm", "cupti"), ("cupti", "gpm"), ("cupti", "cupti"), ("cupti", "doctor"), ("cupti", "ncu")],
            [],
        )
        tiny = self.tiny_kernel()
        for first, second in cases:
            if self.left() < 30:
                log(f"(no time left for {first} then {second})")
                break
            a_dir, b_dir = self.work / f"two-{first}-{second}-a", self.work / f"two-{first}-{second}-b"
            a = start(
                [
                    PY,
                    "-m",
                    "gpubench",
                    "watch",
                    "--profiling",
                    first,
                    "--duration",
                    "8",
                    "--no-smi",
                    "--out",
                    str(a_dir),
                ]
            )
            time.sleep(2.5)
            if second == "doctor":
                code, text = sh([PY, "-m", "gpubench", "doctor"], timeout=60)
                b = {"doctor": [x.strip() for x in text.splitlines() if x.strip().startswith(("gpm", "cupti"))]}
            elif second == "ncu":
                ncu = shutil.which("ncu") or next(iter(sorted(Path("/opt/nvidia/nsight-compute").glob("*/ncu"))), "ncu")
                code, text = sh(f"{ncu} --metrics sm__cycles_active.avg --launch-count 1 {tiny}", timeout=40)
                b = {"ncu": [x for x in text.splitlines() if "==" in x or "sm__cycles_active" in x][-6:]}
            else:
                self.gpubench(
                    "watch", "--profiling", second, "--duration", "3", "--no-smi", "--out", str(b_dir), timeout=40
                )
                b = self.reader(b_dir)
            finish(a, 30)
            case = {"case": f"{first} then {second}", "first": self.reader(a_dir), "second": b}
            log(f"== two readers, {case['case']}: {json.dumps(case)}")
            said.append(case)
        os.killpg(load.pid, signal.SIGKILL)
        finish(load, 10)
        self.found["two_readers_raw"] = said
        self.found["two_readers"] = [{"case": c["case"], "said": self.tell(c)} for c in said]

    @staticmethod
    def reader(run: Path) -> dict:
        """Which source a watch used, why not the others, what failed mid-run, its SM activity by time."""
        try:
            m = json.loads((run / "manifest.json").read_text())
        except (OSError, ValueError):
            return {"missing": str(run)}
        rows = []
        try:
            import csv

            with open(run / "samples.csv", newline="") as f:
                rows = [(float(r["t_end_s"]), r.get("sm_active_pct", "")) for r in csv.DictReader(f)]
        except (OSError, ValueError, KeyError):
            pass
        return {
            "used": m.get("sources", {}).get("used"),
            "unavailable": m.get("sources", {}).get("unavailable"),
            "failures": m.get("source_failures"),
            "warnings": m.get("warnings"),
            "sm_active_by_row": [v for _, v in rows],
        }

    @staticmethod
    def tell(case: dict) -> str:
        """The case in a few words, for the README: what the second reader met, and what the first then read."""
        first, second = case["first"], case["second"]

        def what(r):
            if "doctor" in r:
                return "doctor said " + " / ".join(r["doctor"])
            if "ncu" in r:
                return "ncu said " + " / ".join(r["ncu"][-2:])
            prof = [s for s in (r.get("used") or []) if s not in ("nvml", "smi")]
            why = {k: v for k, v in (r.get("unavailable") or {}).items() if k not in ("smi",)}
            fails = r.get("failures") or []
            return (
                f"used {', '.join(prof) or 'no profiling source'}"
                + (f" ({'; '.join(f'{k}: {v}' for k, v in why.items())})" if not prof and why else "")
                + (f", failed mid-run: {fails[0].get('error')}" if fails else "")
            )

        return f"the second {what(second)}; the first {what(first)}"

    def tiny_kernel(self) -> Path:
        src, exe = self.work / "tiny.cu", self.work / "tiny"
        src.write_text(
            "__global__ void k(float* x){int i=blockIdx.x*blockDim.x+threadIdx.x; for(int j=0;j<20000;j++)"
            " x[i]=x[i]*0.999f+1.0f;}\nint main(){float* x; cudaMalloc(&x, 1<<24); for(int r=0;r<5;r++)"
            " k<<<4096,1024>>>(x); cudaDeviceSynchronize(); return 0;}\n"
        )
        nvcc = shutil.which("nvcc") or "/usr/local/cuda/bin/nvcc"
        sh([nvcc, "-o", str(exe), str(src)], timeout=60)
        return exe

    def pack(self):
        runs = [p for p in self.work.glob(f"profiling-*-{self.slug}") if p.is_dir()]
        with tarfile.open(self.out / f"cupti-runs-{self.slug}.tar.gz", "w:gz") as tar:
            for run in sorted(runs):
                tar.add(run, arcname=run.name)
        (self.out / f"cupti-{self.slug}.json").write_text(json.dumps(self.found, indent=1, default=str) + "\n")


def main() -> int:
    global LOG
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--wheels", type=Path)
    ap.add_argument("--budget", type=float, default=340.0, help="seconds the whole comparison may take")
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    os.environ["PYTHONUNBUFFERED"] = "1"
    LOG = open(args.out / "cupti-log.tmp", "w")
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
        LOG.close()
        (args.out / "cupti-log.tmp").rename(args.out / f"cupti-{c.slug}.log")
    return 0


if __name__ == "__main__":
    sys.exit(main())
