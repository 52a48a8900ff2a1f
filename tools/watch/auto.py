"""Watch jobs nobody changed, on one GPU, beside the examples watched with their own gpubench calls.

    python3 -m tools.watch.auto                  # everything: about 8 minutes on an H100 (never past --budget-s)
    python3 -m tools.watch.auto --part examples  # (a) and (b): about 5 minutes
    python3 -m tools.watch.auto --part jobs      # (c) without decode: about 2.5 minutes
    python3 -m tools.watch.auto --part llama --pairs 4   # more (a) pairs of Llama alone: about 1 minute a pair
    python3 -m tools.watch.auto --dry-run        # on a CPU: tiny sizes, a stand-in for the GPU's counters

(a) examples/train_gpt.py (healthy), train_llama.py (eager) and decode_llm.py, each watched with its own
    gpubench calls (arm `own`) and with them off (`auto`: --no-gpubench, so steps come from the optimizer
    and FLOPs from one step gpubench counts), interleaved: three pairs for the GPT, two for Llama, one for
    decode; steps/s and MFU of `train`, with no code change against the job's own calls.
(b) the optimizer hook's cost on the healthy GPT: --no-gpubench watched with the hook (`auto`) and with
    --no-auto (`off`), interleaved with (a); the example's median step on the host clock, which the one
    counted step (of hundreds) moves little.
(c) jobs of examples/unmodified/ watched as they are: a Hugging Face Trainer, Lightning, JAX, a ResNet-50;
    decode is (a)'s `auto` arm.

Runs are interleaved in rounds, each run checked against the time left (--budget-s): what does not fit is
left out and said, and what was measured is kept. Writes results/watch-auto-<job>-<arm>-<i>-<gpu>/ (each run
directory, with what the job printed in job.log; <i> goes on from the runs already there, none is replaced)
and results/logs/watch-auto[-<part>]-<gpu>.log and .json, and packs them into
$OUT/watch-auto[-<part>]-<gpu>.tar.gz (with the log beside it). Ends with the README table.
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

from tools.watch import auto_tables as tables

ROOT = Path(__file__).resolve().parents[2]

EX = ROOT / "examples"
PY = sys.executable
SECONDS = {"gpt": 8, "llama": 8, "decode": 6, "hftrainer": 12, "lightning": 12, "jax": 10, "resnet50": 12}
EXPECT_S = {"gpt": 22, "llama": 25, "decode": 22, "hftrainer": 40, "lightning": 35, "jax": 25, "resnet50": 30}
TINY = {
    "gpt": ["--layers", "2", "--width", "64", "--heads", "4", "--vocab", "256", "--seq", "32", "--batch", "2"],
    "llama": [
        "--layers",
        "2",
        "--width",
        "64",
        "--heads",
        "4",
        "--kv-heads",
        "2",
        "--ffn",
        "128",
        "--vocab",
        "256",
        "--seq",
        "32",
        "--batch",
        "2",
    ],
    "decode": [
        "--layers",
        "2",
        "--width",
        "64",
        "--heads",
        "4",
        "--kv-heads",
        "2",
        "--ffn",
        "128",
        "--vocab",
        "256",
        "--max-len",
        "32",
    ],
    "hftrainer": ["--tiny"],
    "lightning": ["--tiny"],
    "jax": ["--tiny"],
    "resnet50": ["--tiny"],
}
EXAMPLES = {"gpt": EX / "train_gpt.py", "llama": EX / "train_llama.py", "decode": EX / "decode_llm.py"}
JOBS = {
    "hftrainer": EX / "unmodified" / "hf_trainer.py",
    "lightning": EX / "unmodified" / "lightning_gpt.py",
    "jax": EX / "unmodified" / "jax_mlp.py",
    "resnet50": EX / "unmodified" / "resnet50.py",
}
ROUNDS = [
    ("gpt", ("own", "auto", "off")),
    ("llama", ("own", "auto")),
    ("gpt", ("auto", "off", "own")),
    ("llama", ("auto", "own")),
    ("gpt", ("off", "own", "auto")),
    ("decode", ("own", "auto")),
]


def plan(part: str, dry: bool, pairs: int = 4) -> list[dict]:
    """The runs, in the order they run: rounds that interleave the arms, then the unmodified jobs. The part
    `llama` is `pairs` Llama pairs alone, each pair's order the reverse of the last's."""
    out, seen = [], {}
    rounds = ROUNDS if part in ("all", "examples") else []
    if part == "llama":
        rounds = [("llama", ("own", "auto") if i % 2 == 0 else ("auto", "own")) for i in range(pairs)]
    for job, arms in rounds:
        for arm in arms:
            seen[(job, arm)] = seen.get((job, arm), 0) + 1
            out.append(_run(job, arm, seen[(job, arm)], EXAMPLES[job], dry))
    for job, script in JOBS.items() if part in ("all", "jobs") else []:
        out.append(_run(job, "auto", 1, script, dry))
    return out


def _run(job: str, arm: str, i: int, script: Path, dry: bool) -> dict:
    argv = [PY, str(script), "--seconds", str(2 if dry else SECONDS[job])]
    if job in ("gpt", "llama"):
        argv += ["--eval-seconds", "0.5" if dry else "2"] + (["--warmup-steps", "2"] if dry else [])
    if dry:
        argv += TINY[job] + (["--device", "cpu"] if job in EXAMPLES else [])
    if job in EXAMPLES and arm != "own":
        argv.append("--no-gpubench")
    return {
        "job": job,
        "arm": arm,
        "i": i,
        "argv": argv,
        "no_auto": arm == "off",
        "expect_s": 15 if dry else EXPECT_S[job],
    }


def watch(run: dict, out: Path, dry: bool, limit_s: float) -> dict:
    """One `gpubench watch` of the run into out; what it took and how it ended. Past limit_s the watch gets
    a SIGINT (it ends the job and finishes the run directory), then, 30 s on, the whole group a SIGKILL."""
    head = (
        [PY, "-m", "tools.watch.auto", "--dry-watch", str(out)]
        if dry
        else [PY, "-m", "gpubench", "watch", "--out", str(out)]
    )
    cmd = head + (["--no-auto"] if run["no_auto"] else []) + ["--", *run["argv"]]
    t0 = time.monotonic()
    proc = subprocess.Popen(
        cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT, start_new_session=True
    )
    try:
        stdout, stderr = proc.communicate(timeout=max(1.0, limit_s))
    except subprocess.TimeoutExpired:
        proc.send_signal(signal.SIGINT)
        try:
            stdout, stderr = proc.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            stdout, stderr = proc.communicate()
    if out.is_dir():
        (out / "job.log").write_text(stdout)
    return {"code": proc.returncode, "seconds": time.monotonic() - t0, "stdout": stdout, "stderr": stderr}


def gpu_slug(dry: bool) -> str:
    if dry:
        return "dry-run"
    from gpubench.record import nvml
    from gpubench.record.rundir import slug

    return slug(nvml.device_info(0)["name"])


def describe(run: dict, out: Path, done: dict) -> str:
    if not (out / "summary.csv").is_file():
        return f"{out.name}: exit {done['code']}, no summary ({done['seconds']:.0f} s)"
    if run["job"] in tables.OWN_PHASE and run["arm"] == "off":
        return f"{out.name}: exit {done['code']} in {done['seconds']:.0f} s; its median step is in its job.log"
    phase = (
        tables.OWN_PHASE.get(run["job"], "train")
        if run["arm"] == "own"
        else ("train" if run["job"] not in ("decode", "jax") else None)
    )
    r = tables.row_of(out, phase)
    manifest, _, _ = tables.load_run(out)
    auto = manifest.get("auto") or {}
    counted = [p["counted"] for p in auto.get("processes", []) if p.get("counted")]
    ceiling = f"{r.get(tables.CEILING, float('nan')):.3g}%"
    rate = (
        f"{r['steps_per_s']:.4g} steps/s, MFU {r.get('mfu_pct', float('nan')):.3g}%, tensor ceiling {ceiling}"
        if tables._finite(r.get("steps_per_s"))
        else f"no steps: at most {ceiling} of the bf16 peak ran on the tensor pipes"
    )
    return (
        f"{out.name}: exit {done['code']} in {done['seconds']:.0f} s; phases from {auto.get('phases_from')}; "
        f"{r.get('phase')}: {rate}; steps from {r.get('steps_source') or '-'}, FLOPs from "
        f"{r.get('flops_source') or '-'}; counted {counted}"
    )


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--part", choices=("all", "examples", "jobs", "llama"), default="all")
    p.add_argument("--pairs", type=int, default=4, help="with --part llama: how many Llama pairs (default 4)")
    p.add_argument("--budget-s", type=float, default=540.0, help="start no run that would end past this (default 540)")
    p.add_argument("--dry-run", action="store_true", help="on a CPU: tiny jobs, a stand-in for the counters")
    p.add_argument(
        "--results",
        type=Path,
        help="where the run directories go (default results/, or a new temporary folder for a dry run)",
    )
    args = p.parse_args(argv)
    start = time.monotonic()
    out_dir = Path(os.environ.get("OUT", "/tmp/gpubench-watch-auto-out"))
    out_dir.mkdir(parents=True, exist_ok=True)
    results = args.results or (Path(tempfile.mkdtemp(prefix="watch-auto-dry-")) if args.dry_run else ROOT / "results")
    gpu = gpu_slug(args.dry_run)
    logs = results / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    stem = f"watch-auto{'' if args.part == 'all' else '-' + args.part}-{gpu}"  # one invocation's, kept apart
    log = open(logs / f"{stem}.log", "w")

    def say(text: str = "") -> None:
        print(text, flush=True)
        log.write(text + "\n")
        log.flush()

    say(f"watch_auto: {gpu}, part {args.part}, budget {args.budget_s:.0f} s{' (dry run)' if args.dry_run else ''}")
    if not args.dry_run:
        say(subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True).stdout.strip())
    made, skipped = [], []
    before = tables.runs(results).get(gpu, {})  # runs of earlier invocations: numbered on from them
    for run in plan(args.part, args.dry_run, args.pairs):
        i = run["i"] + len((before.get(run["job"]) or {}).get(run["arm"], []))
        name = f"watch-auto-{run['job']}-{run['arm']}-{i}-{gpu}"
        left = args.budget_s - (time.monotonic() - start)
        if left < 1.3 * run["expect_s"]:
            skipped.append(name)
            continue
        out = results / name
        shutil.rmtree(out, ignore_errors=True)
        say(
            f"\n=== {name}: {' '.join(Path(a).name if a.startswith('/') else a for a in run['argv'])}"
            f"{' (watch --no-auto)' if run['no_auto'] else ''}"
        )
        done = watch(run, out, args.dry_run, min(left - 5, 4 * run["expect_s"]))
        log.write(done["stderr"][-4000:] + "\n")
        say(describe(run, out, done))
        if out.is_dir():
            made.append(out)
    if skipped:
        say(
            f"\nleft out for the time budget ({args.budget_s:.0f} s): {', '.join(skipped)}; run --part "
            f"{'jobs' if all('-auto-1-' in s for s in skipped) else args.part} for them"
        )
    found = tables.runs(results).get(gpu, {})
    report = {job: tables.compare(found[job], "train") for job in ("gpt", "llama") if job in found}
    if "gpt" in found:
        report["hook_cost"] = tables.hook_cost(found["gpt"])
    say("\n=== with no code change against the jobs' own calls, and the hook's cost")
    for line in tables._findings(found):
        say(line)
    say("\n=== the README table (tools/readme/tables.py writes it from the committed runs)\n")
    say(tables.table(results))
    (logs / f"{stem}.json").write_text(json.dumps(report, indent=1, default=str))
    log.close()
    with tarfile.open(out_dir / f"{stem}.tar.gz", "w:gz") as tar:
        for path in made + [logs / f"{stem}.log", logs / f"{stem}.json"]:
            tar.add(path, arcname=str(path.relative_to(results.parent)))
    shutil.copy(logs / f"{stem}.log", out_dir / f"{stem}.log")
    print(
        f"\ndone in {time.monotonic() - start:.0f} s: {len(made)} runs; {out_dir}/{stem}.tar.gz holds "
        f"them (unpack at the repository root)"
    )
    return 0


def dry_watch(argv: list[str]) -> int:
    """`gpubench watch` with a stand-in for the GPU's counters (the CPU path of --dry-run)."""
    from gpubench.job import watchcmd as watching
    from gpubench.job.watcher import WatchOptions
    from gpubench.record.config import RecordingConfig
    from gpubench.record.gpus import Gpu
    from gpubench.record.sources import Source
    from gpubench.show.console import make_console

    class Busy(Source):
        name, columns = "dry", ("gpu_util_pct", "sm_active_pct", "tensor_active_pct", "power_w")

        def open(self, gpus):
            self.gpus = gpus

        def read(self):
            return {
                g: {"gpu_util_pct": 100.0, "sm_active_pct": 80.0, "tensor_active_pct": 30.0, "power_w": 300.0}
                for g in self.gpus
            }

        def close(self):
            pass

    out, rest = Path(argv[0]), argv[1:]
    no_auto = rest[0] == "--no-auto"
    command = rest[rest.index("--") + 1 :]
    gpu = Gpu(0, "GPU-00000000-0000-0000-0000-000000000000", "NVIDIA H100 80GB HBM3", 0)
    opts = WatchOptions(
        out, [gpu], {"name": gpu.name}, RecordingConfig(interval_s=0.1, sources=[Busy()]), auto=not no_auto
    )
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
    os.environ.update(env)
    code, w = watching.run(opts, command)
    watching.show(w, make_console(stderr=True))
    return code


if __name__ == "__main__":
    if sys.argv[1:2] == ["--dry-watch"]:
        raise SystemExit(dry_watch(sys.argv[2:]))
    raise SystemExit(main())
