"""What the gate promises with adaptive effort and its counters, shown on this GPU in one command of at most
9 minutes (an H100 or an H200):

  1-baseline         the README's recipe as it stands, no timing option: pytest tests/gate_benchmarks
                     --gpu-save-baseline=DIR (nine calls, 5 us to 50 ms)  -> its wall time, every process of it,
                     at most 120 s; each benchmark's floor from as few processes as it needs
  c-rerun-1..N       unchanged runs against it                 -> no `slower`, no `faster`, none fails
  a-more-work-5pct   every call does 5% more work              -> `slower` for every call of 100 us or more; the
                                                                  memory-bound calls' lines say "more bytes"
  a-more-work-10pct  10% more                                  -> `slower` or `unsure` from 10 us, never `same`
  s-fp32             the bf16 matmuls run in fp32              -> `slower`, naming the tensor cores it left
  s-grid             the 1 ms FMA chains on half the blocks    -> `slower`, naming SM active or occupancy
  b-part-of-calls    30% more work in 40% of the calls of the two calls timed back to back, a second of rounds
                                                               -> `slower` (as tools/gate/baseline.sh)
  e-no-gpu, e-another-model: the refusals (exit 4), first, since neither times anything and a short budget
                     must not cost them (the other model's baseline is a file of one benchmark made here)

Every step is a pytest session (or command) of its own, logged with its command, exit status and seconds; the
script keeps its own clock and skips, and says, a step that would end past the budget (BUDGET_S, default 500 s),
keeping what it measured; tools/gate/effort_check.py then checks what the steps left. Into OUT:

  gate-effort.log          everything, in order    -> commit as results/logs/gate-effort-<gpu>.log
  gate-effort-checks.json  the checks and numbers  -> results/logs/gate-effort-<gpu>.json
  steps.tar.gz             the baseline (baseline/<gpu>.json), each step's verdicts, rounds, counters and output

Run from the repository root on a GPU machine:  OUT=DIR python -m tools.gate.effort
In two calls where one command may run for less:   --steps e-,1-,c- first, then --resume ITS/steps.tar.gz
  (the second call unpacks the first's steps, baseline and log, runs only the steps not yet run, checks all)
Check it without a GPU:                         OUT=DIR python -m tools.gate.effort --dry-run
  (every pytest command only collects its tests, so options and test ids are checked; nothing is timed)
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
BENCHES = "tests/gate_benchmarks"
PYTEST = [
    sys.executable,
    "-m",
    "pytest",
    "-p",
    "no:cacheprovider",
    "-p",
    "pytest_benchmark.plugin",
    "-p",
    "gpubench.pytest_plugin",
    "--benchmark-columns=min,median,max,iqr,rounds",
]
RESERVE_S = 15  # kept for the checks and the packing
FIRST_SESSION_S = 20  # what a session of the nine calls is taken to cost until one has run here


class Steps:
    """Runs the steps in order, each with its output in WORK/NAME.out and a line in WORK/exits.tsv (name, exit
    status or "skipped", seconds), within a budget measured from the start."""

    def __init__(
        self,
        work: Path,
        log: Path,
        budget_s: float,
        dry: bool,
        run=None,
        only: tuple = (),
        done: frozenset = frozenset(),
    ):
        self.work, self.log, self.budget_s, self.dry = work, log, budget_s, dry
        self.only, self.done = only, done  # step-name prefixes to run (all where empty); steps an earlier call ran
        self.run = run or self._subprocess
        self.started = time.monotonic()
        self.session_s = FIRST_SESSION_S
        self.background: list[tuple[str, subprocess.Popen, float]] = []

    def say(self, line: str) -> None:
        print(f"== {line}", flush=True)
        with open(self.log, "a") as f:
            f.write(f"== {line}\n")

    def elapsed(self) -> float:
        return time.monotonic() - self.started

    def left(self) -> float:
        return self.budget_s - RESERVE_S - self.elapsed()

    def record(self, name: str, rc, seconds: float) -> None:
        with open(self.work / "exits.tsv", "a") as f:
            f.write(f"{name}\t{rc}\t{round(seconds)}\n")

    def _subprocess(self, argv: list[str], out: Path, env: dict, timeout: float) -> int:
        with open(out, "w") as f:
            try:
                return subprocess.run(
                    argv, cwd=ROOT, env=env, stdout=f, stderr=subprocess.STDOUT, timeout=timeout
                ).returncode
            except subprocess.TimeoutExpired:
                f.write(f"\n(stopped: past the budget, {timeout:.0f} s)\n")
                return 124

    def step(self, name: str, argv: list[str], sessions: float = 1.0, env: dict | None = None) -> None:
        if name in self.done or (self.only and not name.startswith(self.only)):
            return  # run by the earlier call, or left for a later one
        need = sessions * self.session_s
        if not self.dry and self.left() < need:
            self.say(f"{name}: skipped, {self.left():.0f} s of the budget left and it needs about {need:.0f} s")
            self.record(name, "skipped", 0)
            return
        if self.dry:
            argv = [a for a in argv if a != "--gpu-fail-slower" or name == "e-no-gpu"] + ["--collect-only"]
        self.say(f"{name}: {' '.join(argv)} (+{self.elapsed():.0f} s)")
        t0 = time.monotonic()
        out = self.work / f"{name}.out"
        rc = self.run(argv, out, {**os.environ, **(env or {})}, max(self.left() + RESERVE_S / 2, 1.0))
        seconds = time.monotonic() - t0
        with open(self.log, "a") as f:
            f.write(out.read_text() if out.is_file() else "")
        if self.dry and name == "e-no-gpu":
            rc = 0 if rc == 4 else 1  # refused without a GPU, as it must be
        self.record(name, rc, 0 if self.dry else seconds)
        self.say(f"{name}: exit {rc} ({seconds:.0f} s)")
        if name.startswith(("c-", "a-")):
            self.session_s = seconds + 1  # the next session of the nine calls takes about as long


def install(log: Path) -> None:
    """gpubench as this checkout, installed in place where it is not yet (gpubench.kernels comes from kernels/)."""
    r = subprocess.run(
        [
            sys.executable,
            "-c",
            "import gpubench, gpubench.kernels.gemm, pathlib; "
            "print(pathlib.Path(gpubench.__file__).resolve().parents[1])",
        ],
        cwd="/",
        capture_output=True,
        text=True,
    )
    if r.returncode == 0 and Path(r.stdout.strip()) == ROOT:
        line = "gpubench is installed from here: no pip install\n"
    else:
        p = subprocess.run(
            [sys.executable, "-m", "pip", "install", "--no-deps", "--no-build-isolation", "-e", str(ROOT)],
            capture_output=True,
            text=True,
        )
        line = p.stdout[-2000:] + p.stderr[-2000:] + ("" if p.returncode == 0 else "pip install -e . failed\n")
    with open(log, "a") as f:
        f.write(line)


def identify() -> tuple[str, str]:
    """This GPU's baseline slug, and a model it is not (for the refusal of another model's baseline)."""
    from gpubench.gate.device import identify as gpu
    from gpubench.record.rundir import slug

    name = gpu()["name"]
    return slug(name), ("NVIDIA H100 80GB HBM3" if "H200" in name else "NVIDIA H200")


def another_model(folder: Path, slug: str, name: str) -> None:
    """A baseline of this GPU model's file name, claiming to come from another GPU model."""
    import json

    t = 6e-4  # every statistic pytest-benchmark reads of a saved run
    stats = {
        "min": t,
        "max": t,
        "mean": t,
        "stddev": 0.0,
        "median": t,
        "iqr": 0.0,
        "q1": t,
        "q3": t,
        "rounds": 10,
        "iqr_outliers": 0,
        "stddev_outliers": 0,
        "outliers": "0;0",
        "ld15iqr": t,
        "hd15iqr": t,
        "ops": 1 / t,
        "total": 10 * t,
        "iterations": 1,
        "data": [t] * 10,
    }
    data = {
        "machine_info": {"gpu": {"name": name}},
        "benchmarks": [{"name": "test_saxpy", "fullname": f"{BENCHES}/test_gate_set.py::test_saxpy", "stats": stats}],
    }
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{slug}.json").write_text(json.dumps(data))


def plan(steps: Steps, reruns: int, slug: str, other: str) -> None:
    """The steps, in order: the refusals, the baseline, half the unchanged runs, the slowdowns, the other half."""
    work = steps.work
    base = work / "baseline"

    def against(name: str) -> list[str]:
        return [f"--gpu-baseline={base}", "--gpu-fail-slower", f"--gpu-verdict-json={work / name}.json"]

    another_model(work / "other", slug, other)
    steps.step(
        "e-no-gpu",
        [*PYTEST, BENCHES, f"--gpu-baseline={base}", "--gpu-fail-slower"],
        sessions=0.3,
        env={"CUDA_VISIBLE_DEVICES": ""},
    )
    steps.step("e-another-model", [*PYTEST, BENCHES, "-k", "saxpy", f"--gpu-baseline={work / 'other'}"], sessions=0.3)
    steps.step(
        "1-baseline",
        [*PYTEST, BENCHES, f"--gpu-save-baseline={base}", f"--gpu-verdict-json={work / '1-baseline.json'}"],
        sessions=6,
    )
    half = reruns // 2
    for i in range(1, half + 1):
        steps.step(f"c-rerun-{i}", [*PYTEST, BENCHES, *against(f"c-rerun-{i}")])
    for pct in (5, 10):
        name = f"a-more-work-{pct}pct"
        steps.step(name, [*PYTEST, BENCHES, *against(name), f"--more-work={pct}"])
    steps.step("s-fp32", [*PYTEST, BENCHES, "-k", "matmul", *against("s-fp32"), "--slowdown=fp32"], sessions=0.6)
    steps.step("s-grid", [*PYTEST, BENCHES, "-k", "fma_1ms", *against("s-grid"), "--slowdown=grid"], sessions=0.5)
    # a second of rounds: 40% of the calls slowed in stretches shows only over several stretches
    steps.step(
        "b-part-of-calls",
        [
            *PYTEST,
            BENCHES,
            "-k",
            "saxpy or sum_large",
            *against("b-part-of-calls"),
            "--gpu-min-time=1",
            "--more-work=30",
            "--slow-share=0.4",
        ],
        sessions=0.7,
    )
    for i in range(half + 1, reruns + 1):
        steps.step(f"c-rerun-{i}", [*PYTEST, BENCHES, *against(f"c-rerun-{i}")])


def resume(tar: Path, work: Path) -> frozenset:
    """An earlier call's steps unpacked into work: the names it ran (its skipped steps are dropped, to run now)."""
    with tarfile.open(tar) as t:
        t.extractall(work, filter="data")
    exits = work / "exits.tsv"
    lines = [line.split("\t") for line in exits.read_text().splitlines()] if exits.is_file() else []
    kept = [line for line in lines if len(line) == 3 and line[1] != "skipped"]
    exits.write_text("".join("\t".join(line) + "\n" for line in kept))
    return frozenset(line[0] for line in kept)


def main(argv: list[str] | None = None, run=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default=os.environ.get("OUT"), help="the folder for the log, checks and steps")
    parser.add_argument("--dry-run", action="store_true", help="only collect every step's tests (no GPU)")
    parser.add_argument("--reruns", type=int, default=int(os.environ.get("RERUNS", 20)))
    parser.add_argument("--budget", type=float, default=float(os.environ.get("BUDGET_S", 500)))
    parser.add_argument("--steps", default="", help="only the steps whose names start so (comma-separated)")
    parser.add_argument("--resume", type=Path, help="an earlier call's steps.tar.gz: its steps stand, the rest run")
    args = parser.parse_args(argv)
    if not args.out:
        parser.error("give --out DIR or set OUT")
    if args.resume and not args.resume.is_file():
        parser.error(f"--resume: no file {args.resume}")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    log = out / "gate-effort.log"
    work = Path(tempfile.mkdtemp(prefix="gate-effort-"))
    done = resume(args.resume, work) if args.resume else frozenset()
    log.write_text((work / "gate-effort.log").read_text() if args.resume else "")
    (work / "baseline").mkdir(exist_ok=True)
    os.environ.update(PYTHONUNBUFFERED="1", PYTEST_DISABLE_PLUGIN_AUTOLOAD="1")
    only = tuple(x for x in args.steps.split(",") if x)
    steps = Steps(work, log, args.budget, args.dry_run, run, only, done)
    if done:
        steps.say(f"resumed: {len(done)} steps of {args.resume} stand")
    try:
        if not args.dry_run:
            install(log)
        slug, other = ("dry-run", "NVIDIA H200") if args.dry_run else identify()
        steps.say(f"GPU model: {slug}; budget {args.budget:.0f} s; {args.reruns} unchanged runs")
        if not args.dry_run:
            smi = shutil.which("nvidia-smi")
            if smi:
                r = subprocess.run(
                    [smi, "--query-gpu=name,uuid,driver_version,power.limit,clocks.max.sm", "--format=csv"],
                    capture_output=True,
                    text=True,
                )
                with open(log, "a") as f:
                    f.write(r.stdout + r.stderr)
        plan(steps, args.reruns, slug, other)
        if args.dry_run:
            lines = [line.split("\t") for line in (work / "exits.tsv").read_text().splitlines()]
            bad = [n for n, rc, _ in lines if rc != "0"]
            steps.say(
                f"dry run: {len(bad)} of {len(lines)} pytest commands could not collect their tests"
                + (f": {', '.join(bad)}" if bad else "")
            )
            return 1 if bad else 0
        steps.say(f"the checks (+{steps.elapsed():.0f} s):")
        check = subprocess.run(
            [
                sys.executable,
                "-m",
                "tools.gate.effort_check",
                str(work),
                str(work / "baseline" / f"{slug}.json"),
                str(out / "gate-effort-checks.json"),
            ],
            cwd=ROOT,
            capture_output=True,
            text=True,
            env={**os.environ, "RERUNS": str(args.reruns)},
        )
        with open(log, "a") as f:
            f.write(check.stdout + check.stderr)
        print(check.stdout + check.stderr, end="")
        steps.say(
            f"checks: {out / 'gate-effort-checks.json'}; steps and baseline: {out / 'steps.tar.gz'}; "
            f"{steps.elapsed():.0f} s in all"
        )
        return check.returncode
    finally:
        shutil.copy(log, work / "gate-effort.log")
        with tarfile.open(out / "steps.tar.gz", "w:gz") as tar:
            tar.add(work, arcname=".")
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    raise SystemExit(main())
