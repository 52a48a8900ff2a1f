"""What the tensor-pipe ceiling and the summary's windows need from a GPU, measured in one command (about
four minutes on an H100 or an H200, six with (d); it stops itself at --budget-s, 540 by default, keeping
what it measured), from the repository root:

    OUT=/some/dir python3 scripts/truth_gpu.py          # --dry-run: the same on the CPU, counters faked

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
    whose phases end at different times (scripts/truth_job.py); each row printed beside its counters and
    held to tests/test_invariants.py.
(d) On an H100 with 200 s left: `bash scripts/watch_examples.sh gpt`, the README's GPT runs recorded anew.

Writes $OUT/truth-<gpu>.tar.gz (truth-<gpu>/: calibration/points-<gpu>.json and samples-<gpu>.csv,
probe/, the two watch runs, truth.log) and, with (d), $OUT/watch-gpt.tar.gz and $OUT/watch-gpt.log. Then, in
the repository: copy calibration/* to results/calibration/ and run `python scripts/calibrate_tensor.py
--points results/calibration/points-<gpu>.json` (it writes tensor-<gpu>.json from those points alone); copy
the watch runs under results/ (and unpack watch-gpt.tar.gz at the root); `python scripts/resummarize.py
results/*/`, `gpubench report` on the new and changed runs, `python scripts/readme_tables.py`; then
tests/test_ceiling.py, tests/test_invariants.py, tests/test_edges.py and tests/test_readme.py check them.
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

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "scripts"), str(ROOT / "tests")]

import truth_probe as probe  # noqa: E402


class Log:
    """Everything printed, also kept for the tarball."""

    def __init__(self, path: Path):
        self.path, self.lines = path, []

    def __call__(self, *parts) -> None:
        text = " ".join(str(p) for p in parts)
        print(text, flush=True)
        self.lines.append(text)
        self.path.write_text("\n".join(self.lines) + "\n")


def calibrate(dev, out: Path, left, say) -> list[dict]:
    """(a): each GEMM sustained and at half duty, under the sampler; the points."""
    points = []
    rows_path = out / f"samples-{dev.slug}.csv"
    with probe.Sampler(dev, 0.1) as sampler:
        for label, dtype, gemm in dev.gemms(say):
            if left() < 60:
                say(f"(a) stopped before {label}: {left():.0f} s left")
                break
            for duty in (1.0, 0.5):
                window, flops = dev.run_for(gemm, warm_s=1.0, timed_s=2.0, duty=duty)
                time.sleep(0.3)  # the counters of the window's end reach the sampler
                point = probe.point(sampler.rows, window, flops, dtype, dev)
                point.update(what=f"{label}, {'sustained' if duty == 1 else 'bursts at half duty'}",
                             samples=rows_path.name)
                points.append(point)
                say(f"(a) {label:<26} duty {duty:.1f}: {point['tflops']:7.1f} TFLOP/s, tensor active "
                    f"{point['tensor_active_pct']:5.1f}%, clock {point['clock_mhz']:6.0f} MHz, factor "
                    f"{point['factor']:.3f}; moved: {', '.join(point['moved']) or 'nothing'}")
            dev.release()
    probe.write_rows(sampler.rows, rows_path)
    data = {"gpu": dev.name, "points": points, "samples": rows_path.name, "counters": probe.COUNTERS}
    (out / f"points-{dev.slug}.json").write_text(json.dumps(data, indent=1, default=probe.jsonable))
    return points


def align(dev, out: Path, left, say) -> dict:
    """(b): a GEMM on and off, sampled at two intervals; the lag of each column."""
    found = {}
    for interval in (0.1, 0.05):
        if left() < 40:
            say(f"(b) stopped before the {interval} s probe: {left():.0f} s left")
            break
        with probe.Sampler(dev, interval) as sampler:
            edges = dev.square_wave(on_s=0.5, off_s=0.5, cycles=8)
            time.sleep(0.5)
        probe.write_rows(sampler.rows, out / f"samples-{interval:g}s.csv")
        found[f"{interval:g}"] = lags = probe.lags(sampler.rows, edges)
        for col, lag in lags.items():
            say(f"(b) rows of {interval:g} s, {col:<20} value reaches back {lag['trail_s']:.3f} s before the row's "
                f"start at most, ends {lag['lag_p50_s']:.3f} s before the row's end "
                f"(p10–p90 {lag['lag_p10_s']:.3f}–{lag['lag_p90_s']:.3f}, {lag['edges']} edges)")
        (out / "edges.json").write_text(json.dumps({"edges": edges, "lags": found}, indent=1, default=probe.jsonable))
    return found


def watch(dev, out: Path, left, say, dry: bool) -> list[Path]:
    """(c): the compiled job with a short warm-up; two processes whose phases end apart."""
    job = f"{sys.executable} {ROOT / 'scripts' / 'truth_job.py'}" + (" --tiny --device cpu" if dry else "")
    train = 2 if dry else 8
    sync = out / "two-processes-ready"
    runs = {"compiled": f"{job} --role compiled --train-s {train} --eval-s {train / 4:g}",
            # both start together; a trains for 60% of b's time, then evaluates: its phases end first
            "two-processes": f"{job} --role a --sync {sync} --train-s {train * 0.6:g} --eval-s {train / 4:g} & "
                             f"{job} --role b --sync {sync} --train-s {train:g} & wait"}
    done = []
    for name, command in runs.items():
        if left() < (90 if name == "compiled" else 45):
            say(f"(c) stopped before {name}: {left():.0f} s left")
            break
        run = out / f"watch-{name}-{dev.slug}"
        say(f"(c) gpubench watch -- sh -c '{command}'")
        code = dev.watch(run, ["sh", "-c", command])
        say(f"(c) {name}: exit code {code}")
        if (run / "summary.json").is_file():
            done.append(run)
            for line in probe.rows_beside_counters(run):
                say(line)
    return done


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", "out")))
    ap.add_argument("--budget-s", type=float, default=540.0)
    ap.add_argument("--dry-run", action="store_true", help="the same steps on the CPU, with counters faked")
    ap.add_argument("--only", default="abcd", help="the parts to run, of abcd")
    args = ap.parse_args(argv)
    start = time.monotonic()
    left = lambda: args.budget_s - (time.monotonic() - start)  # noqa: E731
    dev = probe.FakeGpu() if args.dry_run else probe.Gpu()
    top = args.out / f"truth-{dev.slug}"
    if top.exists():
        shutil.rmtree(top)
    top.mkdir(parents=True)
    say = Log(top / "truth.log")
    kind = "dry run, counters faked" if args.dry_run else "GPU"
    say(f"truth_gpu on {dev.name} ({kind}), budget {args.budget_s:.0f} s")
    points, lags, runs = [], {}, []
    try:
        if "a" in args.only:
            points = calibrate(dev, _dir(top / "calibration"), left, say)
        if "b" in args.only:
            lags = align(dev, _dir(top / "probe"), left, say)
        if "c" in args.only or "d" in args.only:
            dev.close()  # the watches read the counters from their own process
        if "c" in args.only:
            runs = watch(dev, top, left, say, args.dry_run)
        if "d" in args.only and not args.dry_run and "H100" in dev.name and left() > 200:
            say("(d) bash scripts/watch_examples.sh gpt")
            gpt(args.out, left() - 20, say)
    except KeyboardInterrupt:
        say("interrupted: what was measured is kept")
    for line in probe.summary_table(points, lags, runs, dev):
        say(line)
    say(f"done in {time.monotonic() - start:.0f} s")
    with tarfile.open(args.out / f"truth-{dev.slug}.tar.gz", "w:gz") as tar:
        tar.add(top, arcname=top.name)
    shutil.rmtree(top)
    print(f"wrote {args.out / f'truth-{dev.slug}.tar.gz'}")
    return 0


def gpt(out: Path, seconds: float, say) -> None:
    """(d), stopped with every process it started where it runs past `seconds`."""
    child = subprocess.Popen(["bash", str(ROOT / "scripts" / "watch_examples.sh"), "gpt"], cwd=ROOT,
                             env=dict(os.environ, OUT=str(out)), start_new_session=True)
    try:
        child.wait(timeout=max(10.0, seconds))
    except subprocess.TimeoutExpired:
        os.killpg(child.pid, signal.SIGINT)  # the watches finish their run directories, then stop
        try:
            child.wait(timeout=15)
        except subprocess.TimeoutExpired:
            os.killpg(child.pid, signal.SIGKILL)
            child.wait()
        say("(d) stopped at the budget: what was measured is kept")


def _dir(path: Path) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    return path


if __name__ == "__main__":
    raise SystemExit(main())

