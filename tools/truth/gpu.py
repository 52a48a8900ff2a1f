"""What the tensor-pipe ceiling and the summary's windows need from a GPU, measured in one command, from the
repository root:

    OUT=/some/dir python3 -m tools.truth.gpu --only ab   # calibration and alignment: 3 minutes at most
    OUT=/some/dir python3 -m tools.truth.gpu --only c    # the two watches: 2 minutes at most
    OUT=/some/dir python3 -m tools.truth.gpu --only a --broad   # (a) over tools/truth/kernels.py: 6 minutes
    ... --dry-run                                          # the same on the CPU, counters faked

Each part has its own time (PART_S: a 125 s, b 35 s, c 105 s, d 240 s) and stops itself at its end, keeping
what it measured; the run's budget is the sum of its parts' (--budget-s to give less). What fills them, from
the parts' structure (the dry run prints this plan first):
  (a) 6 GEMMs x 2 duties x (1 s warm-up + 2 s timed + 0.3 s for the counters) = 40 s of measuring, plus each
      GEMM's float64 check and the Triton and CuPy compiles: about 60-90 s.
  (b) 2 sampling intervals x (0.5 s + 8 cycles x (0.5 s on + 0.5 s off) + 0.5 s) = 18 s, plus a warm-up.
  (c) the compiled job: start-up and torch.compile of its train step (20-40 s on an H100), 3 warm-up steps,
      6 s of train, 2 s of eval (eager); the two processes: start-up (about 10 s), 6 s and 3.6 s of train, 2 s
      of eval: about 50-75 s. The compiled watch is stopped after 60 s at most and the two processes' after
      what is left (at least 25 s), each by Ctrl-C to its process group, so that it still writes its run.
  (d) optional, on an H100 only: `bash tools/watch/examples.sh gpt`, the README's GPT runs recorded anew
      (another script records them too).

(a) Calibration. The suite's own GEMMs at 8192³ in each dtype (bf16: gemm-torch and gemm-triton; fp16:
    gemm-torch and gemm-cupy; tf32: torch.matmul with TF32; fp8: torch._scaled_mm in e4m3), each checked
    against a float64 reference first, then run sustained (1 s of warm-up, 2 s timed) and in bursts at half
    duty (a higher clock, half the tensor activity), timed in groups stamped on the GPU's timeline, while a
    sampler reads every NVML GPM pipe counter every 0.1 s (the tensor utils ANY, HMMA, IMMA, DFMA, DMMA; the
    FP16, FP32, FP64 and integer utils; the cycle counters): which counters each dtype moves, and its FLOPs
    per active tensor cycle, each point over the rows that cover only its timed window.
(b) Alignment. A GEMM switched on and off every 0.5 s, its edges stamped on the GPU's timeline, sampled at
    0.1 s and at 0.05 s: how far before a row's end each column's value reaches (gpubench.read.summary.TRAIL_S).
(c) Watch. `gpubench watch` of a torch.compile'd job with a short warm-up, and of two processes on one GPU
    whose phases end at different times (tools/truth/job.py); each row printed beside its counters and
    held to tools/truth/invariants.py.

Writes two files: $OUT/truth-<gpu>.tar.gz (truth-<gpu>/: calibration/points-<gpu>.json and samples-<gpu>.csv,
probe/, the two watch runs, with (d) d/ holding watch-gpt.tar.gz and its log, truth.log) and $OUT/truth-<gpu>.log
(the log, to read without unpacking). Then, in the repository: copy calibration/* to results/calibration/ and
run `python -m tools.truth.calibrate --points results/calibration/points-<gpu>.json` (it writes
tensor-<gpu>.json from those points alone); copy the watch runs under results/ (and unpack d/watch-gpt.tar.gz at
the root); `python -m tools.runs.resummarize results/*/`, `gpubench report` on the new and changed runs, `python -m
tools.readme.tables`; then tests/truth/test_ceiling.py, tests/read/test_invariants.py, tests/job/test_edges.py and
tests/test_readme.py check them.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tarfile
import time
from pathlib import Path

from tools.truth import device
from tools.truth import kernels as truth_kernels
from tools.truth import probe
from tools.truth.fake import FakeGpu

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests"))  # the invariants the watch is held to (tools/truth/probe.py)

# Each part's own seconds: it stops itself at their end, keeping what it measured (the module's docstring
# says what fills them). A part left less than it needs for its next step skips that step and says so.
PART_S = {"a": 125.0, "b": 35.0, "c": 105.0, "d": 240.0}
GEMM_S = 2 * (1.0 + 2.0 + 0.3)  # (a): one GEMM, sustained and at half duty
PROBE_S = 0.5 + 8 * (0.5 + 0.5) + 0.5  # (b): one sampling interval's square wave
TRAIN_S = 6.0  # (c): each watched job's train phase
# (a) with --broad: about 45 kernels, each 0.5 s of warm-up and 1 s timed (at least 9 sample rows of 0.1 s
# inside its window) at both duties: 45 x 2 x 1.8 s = 160 s, plus each kernel's count and set-up
BROAD_TIMES = (0.5, 1.0)
BROAD_A_S = 330.0


class Log:
    """Everything printed, also kept for the tarball."""

    def __init__(self, path: Path):
        self.path, self.lines = path, []

    def __call__(self, *parts) -> None:
        text = " ".join(str(p) for p in parts)
        print(text, flush=True)
        self.lines.append(text)
        self.path.write_text("\n".join(self.lines) + "\n")


def calibrate(dev, out: Path, left, say, broad: bool = False) -> list[dict]:
    """(a): each GEMM (with `broad`, each kernel of tools/truth/kernels.py) sustained and at half duty, under
    the sampler; the points."""
    points = []
    kind = "broad" if broad else ""
    rows_path = out / f"samples-{kind + '-' if kind else ''}{dev.slug}.csv"
    warm_s, timed_s = BROAD_TIMES if broad else (1.0, 2.0)
    with probe.Sampler(dev, 0.1) as sampler:
        for label, dtype, gemm in truth_kernels.broad(dev, say) if broad else dev.gemms(say):
            if left() < 2 * (warm_s + timed_s + 0.3) + 4:
                say(f"(a) stopped before {label}: {left():.0f} s left of its part")
                break
            for duty in (1.0, 0.5):
                window, flops = dev.run_for(gemm, warm_s=warm_s, timed_s=timed_s, duty=duty)
                time.sleep(0.3)  # the counters of the window's end reach the sampler
                point = probe.point(sampler.rows, window, flops, dtype, dev)
                point.update(
                    what=f"{label}, {'sustained' if duty == 1 else 'bursts at half duty'}", samples=rows_path.name
                )
                points.append(point)
                say(
                    f"(a) {label:<26} duty {duty:.1f}: {point['tflops']:7.1f} TFLOP/s, tensor active "
                    f"{point['tensor_active_pct']:5.1f}%, clock {point['clock_mhz']:6.0f} MHz, factor "
                    f"{point['factor']:.3f}; moved: {', '.join(point['moved']) or 'nothing'}"
                )
            dev.release()
    probe.write_rows(sampler.rows, rows_path)
    if dev.refused:
        say(f"(a) counters NVML refused on this GPU and driver, read without: {', '.join(dev.refused)}")
    data = {
        "gpu": dev.name,
        "points": points,
        "samples": rows_path.name,
        "refused": dict(dev.refused),
        "counters": {c: i for c, i in probe.COUNTERS.items() if c not in dev.refused},
    }
    (out / f"points-{kind + '-' if kind else ''}{dev.slug}.json").write_text(
        json.dumps(data, indent=1, default=probe.jsonable)
    )
    return points


def align(dev, out: Path, left, say) -> dict:
    """(b): a GEMM on and off, sampled at two intervals; the lag of each column."""
    found = {}
    for interval in (0.1, 0.05):
        if left() < PROBE_S + 2:
            say(f"(b) stopped before the {interval} s probe: {left():.0f} s left of its part")
            break
        with probe.Sampler(dev, interval) as sampler:
            edges = dev.square_wave(on_s=0.5, off_s=0.5, cycles=8)
            time.sleep(0.5)
        probe.write_rows(sampler.rows, out / f"samples-{interval:g}s.csv")
        found[f"{interval:g}"] = lags = probe.lags(sampler.rows, edges)
        for col, lag in lags.items():
            say(
                f"(b) rows of {interval:g} s, {col:<20} value reaches back {lag['trail_s']:.3f} s before the row's "
                f"start at most, ends {lag['lag_p50_s']:.3f} s before the row's end "
                f"(p10–p90 {lag['lag_p10_s']:.3f}–{lag['lag_p90_s']:.3f}, {lag['edges']} edges)"
            )
        (out / "edges.json").write_text(json.dumps({"edges": edges, "lags": found}, indent=1, default=probe.jsonable))
    return found


def watch(dev, out: Path, left, say, dry: bool) -> list[Path]:
    """(c): the compiled job with a short warm-up; two processes whose phases end apart."""
    job = f"{sys.executable} -m tools.truth.job" + (" --tiny --device cpu" if dry else "")
    train = 2 if dry else TRAIN_S
    sync = out / "two-processes-ready"
    # (command, the seconds it needs at least, the seconds the jobs after it keep)
    evals = 0.5 if dry else 2
    runs = {
        "compiled": (f"{job} --role compiled --train-s {train:g} --eval-s {evals:g}", 55, 35),
        # both start together; a trains for 60% of b's time, then evaluates: its phases end first
        "two-processes": (
            f"{job} --role a --sync {sync} --train-s {train * 0.6:g} --eval-s {evals:g} & "
            f"{job} --role b --sync {sync} --train-s {train:g} & wait",
            25,
            0,
        ),
    }
    done = []
    for name, (command, needs, keep) in runs.items():
        if left() < needs:
            say(f"(c) stopped before {name}: {left():.0f} s left of its part")
            continue
        run = out / f"watch-{name}-{dev.slug}"
        seconds = left() - keep - probe.GRACE_S
        say(f"(c) gpubench watch -- sh -c '{command}' (stopped after {seconds:.0f} s at most)")
        code = dev.watch(run, ["sh", "-c", command], seconds)
        say(f"(c) {name}: {'stopped at the end of its time' if code is None else f'exit code {code}'}")
        if (run / "summary.json").is_file():
            done.append(run)
            for line in probe.rows_beside_counters(run):
                say(line)
    return done


def plan(parts: str, dev, broad: bool = False) -> list[str]:
    """What each part will do and how long it may take, from its structure."""
    gemms = 2 if isinstance(dev, FakeGpu) else 6
    each = 2 * (sum(BROAD_TIMES) + 0.3)
    n = len(truth_kernels.kernels(dev.torch)) if broad else 0
    said = {
        "a": (
            f"(a) {n} kernels x 2 duties x {each / 2:g} s = {n * each:.0f} s of measuring, with each one's "
            "count and set-up"
            if broad
            else f"(a) {gemms} GEMMs x 2 duties x {GEMM_S / 2:g} s = {gemms * GEMM_S:.0f} s of measuring, with checks "
            "and compiles"
        ),
        "b": f"(b) 2 intervals x {PROBE_S:g} s = {2 * PROBE_S:.0f} s of square waves",
        "c": f"(c) 2 watches of {TRAIN_S:g} s of train, with start-up, torch.compile and 2 s of eval",
        "d": "(d) bash tools/watch/examples.sh gpt (an H100 only)",
    }
    return [f"{said[k]}; its part: {PART_S[k]:.0f} s" for k in "abcd" if k in parts]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", "out")))
    ap.add_argument("--budget-s", type=float, help="at most this long in all (default: the sum of the parts' PART_S)")
    ap.add_argument("--dry-run", action="store_true", help="the same steps on the CPU, with counters faked")
    ap.add_argument("--only", default="abc", help="the parts to run, of abcd ((d) only where named)")
    ap.add_argument(
        "--broad",
        action="store_true",
        help="(a) over tools/truth/kernels.py's kernels (points-broad-<gpu>.json), not the suite's GEMMs",
    )
    args = ap.parse_args(argv)
    if args.broad:
        PART_S["a"] = BROAD_A_S
    parts = "".join(k for k in "abcd" if k in args.only)
    start = time.monotonic()
    budget = args.budget_s if args.budget_s is not None else sum(PART_S[k] for k in parts)
    dev = FakeGpu() if args.dry_run else device.Gpu()
    top = args.out / f"truth-{dev.slug}"
    if top.exists():
        shutil.rmtree(top)
    top.mkdir(parents=True)
    say = Log(top / "truth.log")
    kind = "dry run, counters faked" if args.dry_run else "GPU"
    say(f"truth_gpu on {dev.name} ({kind}), parts {parts}, budget {budget:.0f} s")
    for line in plan(parts, dev, args.broad):
        say(line)
    points, lags, runs = [], {}, []

    def part(k: str):
        """This part's clock: its PART_S, less what the parts after it need of what is left of the budget."""
        after = sum(PART_S[x] for x in parts[parts.index(k) + 1 :])
        end = min(time.monotonic() + PART_S[k], start + budget - after)
        say(f"({k}) begins at {time.monotonic() - start:.0f} s, {max(0.0, end - time.monotonic()):.0f} s for it")
        return lambda: end - time.monotonic()

    try:
        if "a" in parts:
            points = calibrate(dev, _dir(top / "calibration"), part("a"), say, args.broad)
        if "b" in parts:
            lags = align(dev, _dir(top / "probe"), part("b"), say)
        if "c" in parts or "d" in parts:
            dev.close()  # the watches read the counters from their own process
        if "c" in parts:
            runs = watch(dev, top, part("c"), say, args.dry_run)
        if "d" in parts:
            left = part("d")
            why = (
                "a dry run"
                if args.dry_run
                else "the GPT runs are the H100's"
                if "H100" not in dev.name
                else f"it needs 200 s, {left():.0f} s are left"
                if left() < 200
                else ""
            )
            if why:
                say(f"(d) not run: {why}")
            else:
                say("(d) bash tools/watch/examples.sh gpt")
                gpt(_dir(top / "d"), left() - 20, say)
    except KeyboardInterrupt:
        say("interrupted: what was measured is kept")
    for line in probe.summary_table(points, lags, runs, dev):
        say(line)
    say(f"done in {time.monotonic() - start:.0f} s")
    packed = args.out / f"truth-{dev.slug}.tar.gz"
    with tarfile.open(packed, "w:gz") as tar:
        tar.add(top, arcname=top.name)
    shutil.copyfile(top / "truth.log", args.out / f"truth-{dev.slug}.log")
    shutil.rmtree(top)
    print(f"wrote {packed} and {args.out / f'truth-{dev.slug}.log'}")
    return 0


def gpt(out: Path, seconds: float, say) -> None:
    """(d), its tarball and log written under `out`; stopped with every process it started where it runs past
    `seconds`."""
    child = subprocess.Popen(
        ["bash", str(ROOT / "tools" / "watch" / "examples.sh"), "gpt"],
        cwd=ROOT,
        env=dict(os.environ, OUT=str(out)),
        start_new_session=True,
    )
    if probe.bounded(child, seconds) is None:
        say("(d) stopped at the budget: what was measured is kept")


def _dir(path: Path) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    return path


if __name__ == "__main__":
    raise SystemExit(main())
