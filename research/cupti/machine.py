"""The machine side of the CUPTI probe's driver (research/cupti_probe.py): the step processes it runs with
deadlines (as another user too), what the machine has (driver, libraries, tools, the profiling permission),
the installs of cupti-python and of the libcupti it needs from a folder of wheels, and the chip's metric
listing written out."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

from research.cupti.sampling import log

ROOT = Path(__file__).resolve().parents[2]


class Machine:
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
        cmd = [sys.executable, "-m", "research.cupti_probe", "--step", step, "--result", str(out), *extra]
        if user:
            cmd = ["setpriv", f"--reuid={user}", f"--regid={user}", "--clear-groups", *cmd]
        env = dict(os.environ, HOME="/tmp") if user else None
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env, cwd=ROOT)
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
