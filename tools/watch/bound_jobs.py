"""Training jobs written as their users write them, each watched with no code change on one GPU, and every
steady row's HFU held to the tensor ceiling's limit (the bound no FLOP count that ran may pass).

    python3 -m tools.watch.bound_jobs                     # every job: 6 to 8 minutes on an H200 (never past --budget-s)
    python3 -m tools.watch.bound_jobs --jobs convnext_timm,vit_fp16_scaler   # some of them
    python3 -m tools.watch.bound_jobs --dry-run           # on a CPU: tiny sizes, a stand-in for the GPU's counters

The jobs are the files of examples/unmodified/ but jax_mlp.py (no optimizer: no steps, no HFU to hold), each
run as `python -m gpubench watch --out results/bound-<job>-<gpu>/ -- python <job> --seconds N` (ViT, which runs
in fp16, with --dtype fp16), what it printed in job.log and the watch's output (the job's errors too) in
watch.log beside the run. A job starts only if the time left (--budget-s) holds what it is expected to take.

Then, for each row of a phase: steps/s from the watch and from the job's own count (its "own count: ..." line),
MFU, HFU (gpubench's count of one step at the optimizer's rate; where the verdict withheld it, the value it
had, marked *), the tensor ceiling, its limit, whether HFU is at or below the limit, and the verdict's rules.
Steady rows are the phases of the job's work: not `warmup` (the steps up to the counted one, compilation), nor
a row too short to measure. The last line: "N of M steady rows at or below the ceiling; K flops-above-ceiling
verdicts" (M: the steady rows with an HFU and a limit; K counts gpubench-count-above-ceiling too, the same bound
broken by gpubench's own count). Writes results/logs/bound-jobs-<gpu>.log and .json and, where $OUT is set,
packs the run directories and both into $OUT/bound-jobs-<gpu>.tar.gz (unpack at the repository root).
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
import tempfile
import time
from pathlib import Path

from gpubench.record.gpus import Gpu
from tools.watch.auto import gpu_slug
from tools.watch.bound_rows import own_count, rows_of, table, tally

ROOT = Path(__file__).resolve().parents[2]

JOBS = ROOT / "examples" / "unmodified"
PY = sys.executable
FORWARDS = "no optimizer: its steps are its model's forwards, watched by tools/watch/forward_jobs.sh"
LEFT_OUT = {
    "jax_mlp": "no optimizer: no steps, so no HFU to hold",
    "bert_inference": FORWARDS,
    "vision_inference": FORWARDS,
    "generate_kv": FORWARDS,
    "forward_heavy": FORWARDS,
}
ORDER = [
    "convnext_timm",
    "gpt2_accelerate",
    "grad_accum",
    "gan_two_optimizers",
    "vit_fp16_scaler",
    "long_context",
    "train_eval",
    "llama_compiled",
    "hf_trainer",
    "lightning_gpt",
    "resnet50",
]  # those measured before last
SECONDS = {
    "train_eval": 18,  # three turns of training and evaluation; the others 10 s of training
    "convnext_timm": 40,
}  # its first step (cuDNN trying algorithms) took over 10 s on an H200
# a job's whole watch on an H200 host, imports to report: the Trainer's took 31 s for 12 s of training (watch_auto)
EXPECT_S = {
    "convnext_timm": 75,
    "gpt2_accelerate": 40,
    "grad_accum": 35,
    "gan_two_optimizers": 35,
    "vit_fp16_scaler": 38,
    "long_context": 40,
    "train_eval": 55,
    "llama_compiled": 100,
    "hf_trainer": 35,
    "lightning_gpt": 35,
    "resnet50": 28,
}
WATCH_ARGS = {"vit_fp16_scaler": ["--dtype", "fp16"]}  # what its peak and ceiling are of: the unit that ran
DRY_GPU = Gpu(0, "GPU-00000000-0000-0000-0000-000000000000", "NVIDIA H100 80GB HBM3", 0)  # calibrated


def jobs(names: list[str] | None = None) -> list[str]:
    """The jobs to run, in order: those of ORDER first, then any other file of examples/unmodified/."""
    found = {p.stem for p in JOBS.glob("*.py")} - set(LEFT_OUT)
    chosen = [j for j in ORDER if j in found] + sorted(found - set(ORDER))
    if names:
        unknown = set(names) - set(chosen)
        if unknown:
            raise SystemExit(f"no such job in {JOBS}: {', '.join(sorted(unknown))} (jobs: {', '.join(chosen)})")
        chosen = [j for j in chosen if j in names]
    return chosen


def command(job: str, out: Path, dry: bool) -> list[str]:
    """The watch of one job, its command after `--`; a dry run's watch is this script's --dry-watch."""
    head = (
        [PY, "-m", "tools.watch.bound_jobs", "--dry-watch", str(out)]
        if dry
        else [PY, "-m", "gpubench", "watch", "--out", str(out)]
    )
    seconds = 6 if dry else SECONDS.get(job, 10)  # a dry run: enough tiny steps on a CPU for the counted one
    return (
        head
        + WATCH_ARGS.get(job, [])
        + ["--", PY, str(JOBS / f"{job}.py"), "--seconds", str(seconds)]
        + (["--tiny"] if dry else [])
    )


def watch(argv: list[str], out: Path, limit_s: float) -> dict:
    """Runs one watch into out, the job's output in out/job.log and the watch's in out/watch.log. Past limit_s
    the watch gets a SIGINT (it ends the job and finishes the run directory), 30 s on its group a SIGKILL."""
    t0 = time.monotonic()
    with tempfile.TemporaryDirectory() as tmp:
        logs = Path(tmp, "job.log"), Path(tmp, "watch.log")
        with open(logs[0], "w") as stdout, open(logs[1], "w") as stderr:
            proc = subprocess.Popen(argv, stdout=stdout, stderr=stderr, cwd=ROOT, start_new_session=True)
            for sig, wait_s in ((None, max(1.0, limit_s)), (signal.SIGINT, 30.0), (signal.SIGKILL, None)):
                try:
                    if sig is not None:
                        os.killpg(proc.pid, sig)
                    proc.wait(timeout=wait_s)
                    break
                except (subprocess.TimeoutExpired, ProcessLookupError):
                    continue
        printed, said = (log.read_text(errors="replace") for log in logs)
        if out.is_dir():
            for log in logs:
                shutil.copy(log, out / log.name)
        return {"code": proc.returncode, "seconds": time.monotonic() - t0, "stdout": printed, "stderr": said}


def main(argv: list[str]) -> int:
    if argv[:1] == ["--dry-watch"]:  # the watch of one job in a dry run (command())
        return dry_watch(argv[1:])
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--jobs", help="comma-separated job names (files of examples/unmodified/ without .py)")
    p.add_argument(
        "--budget-s",
        type=float,
        default=540.0,
        help="seconds the whole run may take: a job whose expected time no longer fits is left out",
    )
    p.add_argument(
        "--dry-run",
        action="store_true",
        help="on a CPU: the jobs at their --tiny sizes, each watch with a stand-in for the GPU's counters",
    )
    p.add_argument(
        "--results",
        type=Path,
        help="the folder of the run directories and logs/ (default results/; a dry run's: a new temporary folder)",
    )
    args = p.parse_args(argv)
    start = time.monotonic()
    chosen = jobs(args.jobs.split(",") if args.jobs else None)
    results = args.results or (Path(tempfile.mkdtemp(prefix="bound-jobs-dry-")) if args.dry_run else ROOT / "results")
    gpu = gpu_slug(args.dry_run)
    logs = results / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    stem = f"bound-jobs-{gpu}"
    log = open(logs / f"{stem}.log", "w", buffering=1)  # line-buffered: the log keeps up with the jobs

    def say(text: str = "") -> None:
        for stream in (sys.stdout, log):
            print(text, file=stream, flush=True)

    say(f"bound_jobs: {gpu}, {len(chosen)} jobs, budget {args.budget_s:.0f} s{' (dry run)' if args.dry_run else ''}")
    say(f"left out by design: {', '.join(f'{j} ({why})' for j, why in LEFT_OUT.items())}")
    say(calibration(args.dry_run))
    made, skipped, rows, runs = [], [], [], []
    for job in chosen:
        left = args.budget_s - (time.monotonic() - start)
        expect = 40 if args.dry_run else EXPECT_S.get(job, 45)
        if left < expect:
            skipped.append(job)
            say(f"--- {job}: left out, {left:.0f} s left of the budget and it takes about {expect} s")
            continue
        out = results / f"bound-{job}-{gpu}"
        shutil.rmtree(out, ignore_errors=True)
        cmd = command(job, out, args.dry_run)
        shown = " ".join(Path(a).name if "/" in a else a for a in cmd)
        say(f"\n=== {job} ({time.monotonic() - start:.0f} s in): {shown}")
        done = watch(cmd, out, min(left - 5, 3 * expect))
        log.write(done["stderr"][-3000:] + "\n")
        mine = rows_of(job, out, done["stdout"]) if out.is_dir() else []
        rows += mine
        runs.append(
            {
                "job": job,
                "code": done["code"],
                "seconds": round(done["seconds"], 1),
                "dir": out.name,
                "own_count": own_count(done["stdout"]),
                "command": cmd,
            }
        )
        say(
            f"--- {job}: exit {done['code']} in {done['seconds']:.0f} s, {len(mine)} phase rows"
            + ("" if done["code"] == 0 else f"; its last words: {done['stderr'].strip()[-300:]}")
        )
        if out.is_dir():
            made.append(out)
    if skipped:
        say(
            f"\nleft out for the time budget ({args.budget_s:.0f} s): {', '.join(skipped)}; run --jobs "
            f"{','.join(skipped)} for them"
        )
    (logs / f"{stem}.json").write_text(
        json.dumps(
            {"gpu": gpu, "runs": runs, "rows": rows, "tally": tally(rows), "left_out": skipped}, indent=1, default=str
        )
    )
    lines = ["", "=== every phase row, HFU against the tensor ceiling's limit", ""] + table(rows)
    log.write("\n".join(lines) + "\n")
    log.close()
    if os.environ.get("OUT"):  # the log whole first: the table, the closing count last, stays the last said
        out_dir = Path(os.environ["OUT"])
        out_dir.mkdir(parents=True, exist_ok=True)
        with tarfile.open(out_dir / f"{stem}.tar.gz", "w:gz") as tar:
            for path in made + [logs / f"{stem}.log", logs / f"{stem}.json"]:
                tar.add(path, arcname=str(path.relative_to(results.parent)))
        print(f"{out_dir}/{stem}.tar.gz holds them and the log (unpack at the repository root)", flush=True)
    print(f"\ndone in {time.monotonic() - start:.0f} s: {len(made)} runs under {results}", flush=True)
    print("\n".join(lines), flush=True)
    return 0


def calibration(dry: bool) -> str:
    """The tensor ceiling's calibration the watches will use on this GPU: without one no row has a limit."""
    from gpubench.record import nvml
    from gpubench.truth.ceiling import load_calibrations

    name = DRY_GPU.name if dry else nvml.device_info(0)["name"]
    found = load_calibrations(name)
    said = ", ".join(f"{d} {c.factor:.3f} ± {100 * c.error:.1f}% ({c.file})" for d, c in found.items())
    return (
        f"{name}'s calibration: {said}"
        if found
        else f"NO tensor-ceiling calibration for {name} (results/calibration/ missing?): no row has a limit to judge"
    )


def dry_watch(argv: list[str]) -> int:
    """`gpubench watch` on a CPU: a stand-in source for the GPU's counters, busy at a fixed SM clock with a third
    of its cycles on the tensor pipes, so that each row has a tensor ceiling and a limit to hold HFU to."""
    from gpubench.job import watchcmd
    from gpubench.job.watcher import WatchOptions
    from gpubench.record.config import RecordingConfig
    from gpubench.record.sources import Source
    from gpubench.show.console import make_console

    class Counters(Source):
        name, values = (
            "dry",
            {
                "gpu_util_pct": 100.0,
                "sm_active_pct": 80.0,
                "tensor_active_pct": 33.0,
                "sm_clock_mhz": 1755.0,
                "power_w": 400.0,
            },
        )
        columns, gpus = tuple(values), []

        def open(self, gpus):
            self.gpus = list(gpus)

        def read(self):
            return {g: dict(self.values) for g in self.gpus}

        def close(self):
            self.gpus = []

    out, rest = Path(argv[0]), argv[1:]
    dtype = rest[rest.index("--dtype") + 1] if "--dtype" in rest[: rest.index("--")] else "bf16"
    opts = WatchOptions(
        out, [DRY_GPU], {"name": DRY_GPU.name}, RecordingConfig(interval_s=0.1, sources=[Counters()]), dtype=dtype
    )
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    code, finished = watchcmd.run(opts, rest[rest.index("--") + 1 :])
    watchcmd.show(finished, make_console(stderr=True))
    return code


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
