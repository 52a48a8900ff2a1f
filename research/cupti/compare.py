"""The CUPTI comparison's steps (research/cupti_compare.py): the machine and cupti-python, the source alone, the
suite with each profiling source, a watch of another process's GEMM through CUPTI, two readers at once, the
overhead on a bf16 GEMM, and the packing of what it found."""

from __future__ import annotations

import json
import os
import shutil
import signal
import tarfile
import time
from pathlib import Path

from research.cupti import shell
from research.cupti.shell import LOAD, OVERHEAD, PY, SELFCHECK, finish, last_json, log, sh, start

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
        from research.cupti import sampling
        from research.cupti.readers import Driver

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
            probe = Driver(self.work, self.wheels, self.left())
            sampling.LOG = shell.LOG
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
            from research.cupti.readers import Driver

            probe = Driver(self.work, self.wheels or self.work, 60)
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
