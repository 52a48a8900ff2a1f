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
import math
import os
import shutil
import signal
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

from gpubench.metrics import finite
from gpubench.record.gpus import Gpu
from gpubench.record.rundir import load_run
from tools.watch.auto import gpu_slug
from tools.watch.auto_runs import OWN_COUNT

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
WITHHELD_RULE, ABOVE_RULE = "gpubench-count-above-ceiling", "flops-above-ceiling"
NOT_STEADY = {"too-short", "idle-gpu"}  # verdict rules of rows that measure nothing


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


def own_count(stdout: str) -> dict:
    """What a job printed of its own count: FLOPs a step and its steady steps/s ({} where it printed none)."""
    m = OWN_COUNT.search(stdout)
    return {"flops": float(m[1]), "rate": float(m[3]), "how": m[2]} if m else {}


def judge(job: str, row: dict, own: dict) -> dict:
    """One summary row held to its ceiling: its numbers, whether it is steady, and `bounded`: True where HFU is at
    or below the tensor ceiling's limit, False above it, None where the row has no HFU or no limit to judge."""
    rules = [r.strip() for r in str(row.get("verdict_rules") or "").split(",") if r.strip()]
    limit, over, hfu = (row.get(k) for k in ("tensor_ceiling_limit_pct", "ran_over_ceiling", "hfu_pct"))
    withheld = WITHHELD_RULE in rules and not finite(hfu) and finite(over) and finite(limit)
    if withheld:  # the verdict withheld gpubench's own HFU: its ratio to the limit still says what it was
        hfu = over * limit
    bounded = over <= 1 if finite(over) else hfu <= limit if finite(hfu) and finite(limit) else None
    out = {
        "job": job,
        **row,
        "hfu_pct": hfu,
        "hfu_withheld": withheld,
        "steady": row.get("kind") == "phase" and row.get("phase") != "warmup" and not NOT_STEADY & set(rules),
        "bounded": bounded,
        "rules": rules,
        "own_steps_per_s": math.nan,
        "own_flops_per_step": math.nan,
    }
    if own and finite(row.get("steps_per_s")):  # the job's count is of its training steps
        out.update(own_steps_per_s=own["rate"], own_flops_per_step=own["flops"])
    return out


def rows_of(job: str, run: Path, stdout: str) -> list[dict]:
    """The phase rows of a run directory (not its start-up nor teardown), judged."""
    summary = load_run(run)[2] if (run / "summary.csv").is_file() else []
    return [judge(job, r, own_count(stdout)) for r in summary if r.get("kind") == "phase"]


def committed_rows(results: Path, gpu: str) -> list[dict]:
    """The phase rows of the committed runs as they are summarized now, in the committed log's order of jobs: the
    page follows the summaries when they are made again (a new calibration), the job's own count its job.log."""
    logged = json.loads((results / "logs" / f"bound-jobs-{gpu}.json").read_text())["rows"]
    out = []
    for job in dict.fromkeys(r["job"] for r in logged):
        run = results / f"bound-{job}-{gpu}"
        out += rows_of(job, run, (run / "job.log").read_text(errors="replace") if (run / "job.log").is_file() else "")
    return out


def docs_table(rows: list[dict]) -> list[str]:
    """The steady rows as docs/ceiling.md prints them (its test holds the page to the committed log): how close
    each job's MFU comes to its ceiling, and whether what ran stayed under the limit."""
    out = [
        "| job | steps/s (its own) | MFU | HFU | ceiling | limit | MFU ÷ ceiling | HFU ≤ limit |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        if r["steady"] and finite(r.get("tensor_ceiling_limit_pct")) and finite(r.get("steps_per_s")):
            hfu = _num(r["hfu_pct"], "{:.1f}%") + (" (withheld)" if r["hfu_withheld"] else "")
            out.append(
                f"| {r['job']} | {_num(r['steps_per_s'])} ({_num(r['own_steps_per_s'])}) | "
                f"{_num(r['mfu_pct'], '{:.1f}%')} | {hfu} | {_num(r['tensor_ceiling_pct'], '{:.1f}%')} | "
                f"{_num(r['tensor_ceiling_limit_pct'], '{:.1f}%')} | "
                f"{_num(r['mfu_pct'] / r['tensor_ceiling_pct'], '{:.2f}')} | "
                f"{'yes' if r['bounded'] else 'no'} |"
            )
    return out


def _num(v, fmt: str = "{:.3g}") -> str:
    return fmt.format(v) if finite(v) else "–"


# (title, width) of each column; a cell wider than its column still leaves a space before the next
COLUMNS = (
    ("job", 18),
    ("phase", 8),
    ("steady", 6),
    ("s", 4),
    ("steps/s", 8),
    ("own/s", 8),
    ("MFU%", 8),
    ("HFU%", 8),
    ("ceil%", 6),
    ("limit%", 6),
    ("≤limit", 6),
)


def _cells(values) -> str:
    return " ".join(f"{v:<{w}}" if i < 3 else f"{v:>{w}}" for i, (v, (_, w)) in enumerate(zip(values, COLUMNS)))


HEADER = _cells(title for title, _ in COLUMNS) + " verdicts"


def line(r: dict) -> str:
    """One row of the table: HFU at or below its limit (yes), above it (NO), or not judged (–)."""
    hfu = _num(r.get("hfu_pct")) + ("*" if r["hfu_withheld"] else "")
    return (
        _cells(
            [
                r["job"],
                str(r["phase"])[:8],
                "yes" if r["steady"] else "no",
                _num(r["seconds"], "{:.0f}"),
                _num(r.get("steps_per_s")),
                _num(r["own_steps_per_s"]),
                _num(r.get("mfu_pct")),
                hfu,
                _num(r.get("tensor_ceiling_pct")),
                _num(r.get("tensor_ceiling_limit_pct")),
                {True: "yes", False: "NO", None: "–"}[r["bounded"]],
            ]
        )
        + " "
        + ", ".join(r["rules"])
    )


def tally(rows: list[dict]) -> dict:
    steady = [r for r in rows if r["steady"]]
    judged = [r for r in steady if r["bounded"] is not None]
    return {
        "steady": len(steady),
        "judged": len(judged),
        "bounded": sum(r["bounded"] is True for r in judged),
        "above_verdicts": sum(bool({ABOVE_RULE, WITHHELD_RULE} & set(r["rules"])) for r in rows),
        "withheld_verdicts": sum(WITHHELD_RULE in r["rules"] for r in rows),
    }


def table(rows: list[dict]) -> list[str]:
    """The table of every phase row, then what was not judged, then the closing count."""
    t = tally(rows)
    out = [HEADER] + [line(r) for r in rows]
    if any(r["hfu_withheld"] for r in rows):
        out.append("* HFU withheld by the verdict (gpubench's own count over the limit): the value it had")
    out.append(
        f"{t['steady'] - t['judged']} steady rows have no HFU or no limit to judge (evaluations, a GPU "
        f"without calibration); {t['withheld_verdicts']} of the verdicts above are {WITHHELD_RULE}"
    )
    out.append(
        f"{t['bounded']} of {t['judged']} steady rows at or below the ceiling; {t['above_verdicts']} "
        f"{ABOVE_RULE} verdicts"
    )
    return out


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
