"""plot and report of a day on eight GPUs, timed: the benchmark behind the long-run target of docs/storage.md
(plot + report of 24 h x 8 GPUs in at most 30 s together on two cores).

    python -m tools.longrun.day [--runs 5]   # time it, into docs/longrun-day.json
    python -m tools.longrun.day --docs       # the part of docs/storage.md made from docs/longrun-day.json
    python -m tools.longrun.day --summary    # the committed summary and manifest made anew (minutes)

The run is tools/longrun/synthetic.py's 24 h x 8 GPUs at 0.1 s (6,912,000 rows), seed 0. Its samples.arrows (274 MB)
is written on the fly through gpubench's own writer, in seconds; its summary.csv and manifest.json, which the
watch's own summary takes minutes to make from those samples and the marks of the same seed, are committed
(tests/benchmarks/day/, 80 kB) and copied beside them. plot and report run as a user runs them, each its own
process one after the other, with the machine's load read before each. tests/benchmarks/test_longrun_day.py
runs the same in CI and records the time; it never fails on it, since a loaded machine is slower.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from tools.longrun import synthetic as longrun

ROOT = Path(__file__).resolve().parents[2]

GPUS, HOURS, SEED = 8, 24.0, 0
FIXTURE = ROOT / "tests" / "benchmarks" / "day"  # summary.csv and manifest.json of the day
RESULT = ROOT / "docs" / "longrun-day.json"
TARGET_S = 30.0  # plot + report, together, on two cores
VERBS = ("plot", "report")


def make_day(run: Path) -> Path:
    """The day's run directory: samples written now, the summary and manifest made from them copied in."""
    run.mkdir(parents=True)
    longrun.write_samples(run, GPUS, HOURS, 0.1, SEED, longrun.schedule(HOURS))
    for name in ("summary.csv", "manifest.json"):
        shutil.copyfile(FIXTURE / name, run / name)
    return run


def make_fixture() -> None:
    """The whole day made by tools/longrun/synthetic.py (its marks, the watch's own summary of them), and its summary
    and manifest kept as the fixture."""
    with tempfile.TemporaryDirectory(prefix="gpubench-day-") as tmp:
        run = longrun.generate(Path(tmp) / "day", n_gpus=GPUS, hours=HOURS, seed=SEED)
        FIXTURE.mkdir(parents=True, exist_ok=True)
        for name in ("summary.csv", "manifest.json"):
            shutil.copyfile(run / name, FIXTURE / name)


def timed(cmd: list[str]) -> dict:
    """Wall time, CPU time and peak memory of one command, run as its own process (wait4 gives its usage)."""
    env = dict(os.environ, PYTHONPATH=str(ROOT), OMP_NUM_THREADS="1")
    with tempfile.TemporaryFile() as err:
        t0 = time.perf_counter()
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=err, env=env)
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - t0
        proc.returncode = os.waitstatus_to_exitcode(status)
        if proc.returncode != 0:
            err.seek(0)
            said = err.read()[-800:].decode(errors="replace")
            raise RuntimeError(f"{' '.join(cmd)} exited {proc.returncode}: {said}")
    return {
        "s": round(wall, 2),
        "cpu_s": round(usage.ru_utime + usage.ru_stime, 2),
        "peak_rss_mb": round(usage.ru_maxrss / 1024),
        "load": round(os.getloadavg()[0], 2),
    }


def plot_and_report(run: Path, out: Path) -> dict:
    """plot, then report, of run, each its own process, writing under out."""
    took = {verb: timed([sys.executable, "-m", "gpubench", verb, str(run), "--out", str(out / verb)]) for verb in VERBS}
    return {**took, "s": round(sum(took[v]["s"] for v in VERBS), 2)}


def machine() -> str:
    gpu = "no GPU" if shutil.which("nvidia-smi") is None else "a GPU present (unused)"
    return f"{os.cpu_count()} cores, {platform.machine()}, {gpu}, Python {platform.python_version()}"


def measure(runs: int) -> dict:
    """The day made once, then plot and report timed runs times, the machine's load read around each."""
    with tempfile.TemporaryDirectory(prefix="gpubench-day-") as tmp:
        t0 = time.perf_counter()
        run = make_day(Path(tmp) / "day")
        made = time.perf_counter() - t0
        rounds = [plot_and_report(run, Path(tmp) / f"out{k}") for k in range(runs)]
    return {
        "machine": machine(),
        "target_s": TARGET_S,
        "made_s": round(made, 1),
        "rounds": rounds,
        "run": {"gpus": GPUS, "hours": HOURS, "rows": GPUS * round(HOURS * 3600 / 0.1), "seed": SEED},
        "load_after": round(os.getloadavg()[0], 2),
    }


def median(bench: dict, *keys) -> float:
    values = []
    for r in bench["rounds"]:
        for k in keys:
            r = r[k]
        values.append(r)
    return statistics.median(values)


def docs_block(bench: dict) -> str:
    """The day's part of docs/storage.md, from longrun-day.json."""
    n, rows = len(bench["rounds"]), bench["run"]["rows"]
    total = median(bench, "s")
    lines = ["| 24 h × 8 GPUs, median of " + f"{n} | wall | CPU | peak memory |", "| --- | --- | --- | --- |"]
    for verb in VERBS:
        lines.append(
            f"| `gpubench {verb}` | {median(bench, verb, 's'):.1f} s | {median(bench, verb, 'cpu_s'):.1f} s | "
            f"{median(bench, verb, 'peak_rss_mb'):.0f} MB |"
        )
    lines.append(f"| together | **{total:.1f} s** | {sum(median(bench, v, 'cpu_s') for v in VERBS):.1f} s | |")
    loads = [r[v]["load"] for r in bench["rounds"] for v in VERBS]
    met = "met" if total <= bench["target_s"] else "NOT met"
    busy = ": other work ran on the machine" if min(loads) > 1.5 else ""
    lines += [
        "",
        f"{rows:,} rows of samples; {bench['machine']}; the load average (1 minute) when each command "
        f"started ranged from {min(loads):g} to {max(loads):g}, where 2 means two busy cores{busy}. Against "
        f"the target of {bench['target_s']:g} s together: {met}. Each round: "
        + ", ".join(f"{r['s']:.1f} s" for r in bench["rounds"])
        + ".",
    ]
    return "\n".join(lines)


def docs(text: str, bench: dict) -> str:
    """The page with its `<!-- gpubench:longrun-day -->` part made from bench."""
    return re.sub(
        r"(<!-- gpubench:longrun-day -->\n).*?(<!-- /gpubench:longrun-day -->)",
        lambda m: m[1] + docs_block(bench) + "\n" + m[2],
        text,
        count=1,
        flags=re.S,
    )


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=5, help="rounds of plot and report (default 5)")
    ap.add_argument("--docs", action="store_true", help="write the day's part of docs/storage.md from longrun-day.json")
    ap.add_argument("--summary", action="store_true", help="make the committed summary and manifest anew")
    args = ap.parse_args(argv)
    page = ROOT / "docs" / "storage.md"
    if args.summary:
        make_fixture()
    elif args.docs:
        page.write_text(docs(page.read_text(), json.loads(RESULT.read_text())))
    else:
        bench = measure(max(1, args.runs))
        RESULT.write_text(json.dumps(bench, indent=2) + "\n")
        print(docs_block(bench))
    return 0


if __name__ == "__main__":
    sys.exit(main())
