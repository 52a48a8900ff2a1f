"""What a long watch costs on a small machine: plot and report time, peak memory and file sizes for a
synthetic watch of 1 h x 1 GPU, 24 h x 1 GPU and 24 h x 8 GPUs (tools/longrun/synthetic.py), the marks a process
writes in a day at 1,000 steps/s, and samples.arrows beside CSV and Parquet.

    OMP_NUM_THREADS=1 python -m tools.longrun.bench [--out results/longrun] [--cases 1x1,24x1,24x8]
    python -m tools.longrun.bench --readme   # the long-run part of docs/storage.md, from results/longrun/bench.json

A benchmark, not a test: each command runs as its own process, timed on the wall clock, its peak resident
memory from the kernel (wait4's ru_maxrss). Writes OUT/bench.json and OUT/bench.log (with the machine's
load, `uptime`, before and after); the long-run table of docs/storage.md is made from bench.json (readme_block).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from tools.longrun import synthetic as longrun

ROOT = Path(__file__).resolve().parents[2]

TARGETS = {
    "plot_report_s": 60,
    "peak_rss_mb": 2000,
    "figure_mb": 2,
    "report_html_mb": 5,
    "samples_mb_per_gpu_day": 50,
    "marks_mb_per_day": 10,
}
UUID = "GPU-a7bf0bb4-c4b0-2abb-5034-6d549663e8da"  # a real UUID's length, written on a process's first line
MARKS_CODE = f"""
import os, sys
from gpubench.inside import linewriter
w = linewriter._Writer(sys.argv[1])
w.rank, w.uuid, w.clock = 0, {UUID!r}, "gpu"
w.on_mark(100.0, "decode")
for k in range(1, 86_400_001):  # a day at 1,000 steps/s, on a simulated clock
    w.on_step(100.0 + k / 1000, 2.5e11, 2.5e11, 1.6e10, 64.0, False, 0.0021)
w.close()
"""
RESUMMARIZE = (
    "import sys; from pathlib import Path; from gpubench.job.watcher import resummarize; resummarize(Path(sys.argv[1]))"
)


# The command runs under a small Python of its own that waits for it: a child's peak memory counts the
# memory of the process it was forked from, which here holds a generated day of samples.
WRAP = (
    "import resource, subprocess, sys; r = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL); "
    "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, file=sys.stderr); sys.exit(r.returncode)"
)


def measure(cmd: list[str]) -> dict:
    """Wall time and peak resident memory of one command, run as its own process."""
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONPATH=str(ROOT))
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, "-c", WRAP, *cmd], capture_output=True, text=True, env=env)
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed: {proc.stderr[-500:]}")
    return {"s": round(wall, 2), "peak_rss_mb": round(int(proc.stderr.split()[-1]) / 1024, 1)}


def mb(path: Path) -> float:
    return round(path.stat().st_size / 1e6, 3)


def case(work: Path, hours: float, gpus: int) -> dict:
    run = work / f"run-{hours:g}h-{gpus}gpu"
    t0 = time.perf_counter()
    longrun.generate(run, n_gpus=gpus, hours=hours)
    made_s = time.perf_counter() - t0
    gb = [sys.executable, "-m", "gpubench"]
    plot, report = (
        measure(gb + [verb, str(run), "--out", str(work / f"{run.name}-{verb}")]) for verb in ("plot", "report")
    )
    summary = measure([sys.executable, "-c", RESUMMARIZE, str(run)])
    figures = [p for p in (work / f"{run.name}-report" / "figures").iterdir()]
    samples = mb(run / "samples.arrows")
    return {
        "hours": hours,
        "gpus": gpus,
        "generate_s": round(made_s, 1),
        "plot": plot,
        "report": report,
        "plot_report_s": round(plot["s"] + report["s"], 2),
        "peak_rss_mb": max(plot["peak_rss_mb"], report["peak_rss_mb"]),
        "resummarize": summary,
        "samples_mb": samples,
        "samples_mb_per_gpu_day": round(samples / gpus / (hours / 24), 2),
        "marks_mb": mb(run / "marks.tsv"),
        "figure_mb": max(mb(p) for p in figures),
        "figures": {p.name: mb(p) for p in sorted(figures)},
        "report_html_mb": mb(work / f"{run.name}-report" / "report.html"),
    }


def marks_day(work: Path) -> dict:
    path = work / "marks-day.tsv"
    took = measure([sys.executable, "-c", MARKS_CODE, str(path)])
    lines = path.read_bytes().count(b"\n")
    return {"steps_per_s": 1000, "lines": lines, "mb": mb(path), "simulate_s": took["s"]}


def formats(work: Path) -> dict:
    """The 24 h x 1 GPU samples as samples.arrows, as samples.csv and as Parquet (zstd), and what each leaves
    readable when the file is cut short as a kill leaves it."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from gpubench.record import arrowread
    from gpubench.record.csvfile import CsvSink
    from gpubench.record.samplesfile import read_samples

    run = work / "run-24h-1gpu"
    samples = read_samples(run / "samples.arrows")
    names = samples.names
    sink = CsvSink(work / "day.csv", names[6:])
    cols = samples.columns()
    for i in range(len(samples)):
        sink(
            {
                n: (int(cols[n][i]) if n == "gpu" else cols[n][i].item() if hasattr(cols[n][i], "item") else cols[n][i])
                for n in names
            }
        )
    sink.close()
    table = pa.Table.from_batches(list(pa.ipc.open_stream(str(run / "samples.arrows"))))
    pq.write_table(table, work / "day.parquet", compression="zstd", row_group_size=600)
    out = {
        "rows": len(samples),
        "arrows_mb": mb(run / "samples.arrows"),
        "csv_mb": mb(work / "day.csv"),
        "parquet_zstd_mb": mb(work / "day.parquet"),
    }
    for name, path in (("arrows", run / "samples.arrows"), ("parquet", work / "day.parquet")):
        cut = work / f"cut{path.suffix}"
        cut.write_bytes(path.read_bytes()[: path.stat().st_size // 2])  # killed halfway through the day
        try:
            got = len(arrowread.read(cut)) if name == "arrows" else pq.read_table(cut).num_rows
            out[f"{name}_cut_in_half"] = f"{got} rows readable"
        except Exception as err:  # noqa: BLE001 -- what the reader says is the measurement
            out[f"{name}_cut_in_half"] = f"unreadable ({type(err).__name__}: {str(err)[:80]})"
    return out


def list_import() -> dict:
    code = (
        "import sys, contextlib, io\nfrom gpubench.cli import main\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        "    main(['list'])\nprint(int('pyarrow' in sys.modules), int('numpy' in sys.modules))"
    )
    times = [measure([sys.executable, "-m", "gpubench", "list"])["s"] for _ in range(5)]
    loaded = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=dict(os.environ, PYTHONPATH=str(ROOT))
    ).stdout.split()
    return {
        "median_s": statistics.median(times),
        "runs_s": times,
        "pyarrow_loaded": loaded[0] == "1",
        "numpy_loaded": loaded[1] == "1",
    }


def readme_block(bench: dict) -> str:
    """The long-run table of docs/storage.md, from bench.json."""
    rows = [
        "| run | samples.arrows | per GPU-day | marks.tsv | plot + report | peak memory | largest figure "
        "| report.html |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for c in bench["cases"]:
        rows.append(
            f"| {c['hours']:g} h × {c['gpus']} GPU{'s' if c['gpus'] > 1 else ''} | {c['samples_mb']:.1f} MB | "
            f"{c['samples_mb_per_gpu_day']:.1f} MB | {c['marks_mb']:.1f} MB | {c['plot']['s']:.1f} + "
            f"{c['report']['s']:.1f} s | {c['peak_rss_mb']:.0f} MB | {c['figure_mb']:.2f} MB | "
            f"{c['report_html_mb']:.2f} MB |"
        )
    f, m, day = bench["formats"], bench["marks_day"], bench["cases"][-1]
    rows += [
        "",
        f"The same day of one GPU ({f['rows']:,} rows) takes {f['arrows_mb']:.1f} MB as samples.arrows, "
        f"{f['csv_mb']:.0f} MB as CSV and {f['parquet_zstd_mb']:.1f} MB as Parquet (zstd, row groups of 600 "
        f"rows); cut in half as a kill leaves it, samples.arrows keeps {f['arrows_cut_in_half']}, Parquet is "
        f"{f['parquet_cut_in_half'].split(' (')[0]}. "
        f"A process stepping 1,000 times a second writes {m['lines']:,} lines of marks a day, {m['mb']:.1f} MB. "
        f"The watch's own summary of the {day['hours']:g} h × {day['gpus']} GPUs run takes "
        f"{day['resummarize']['s']:.0f} s at {day['resummarize']['peak_rss_mb']:.0f} MB. "
        f"`gpubench list` loads neither numpy nor pyarrow ({bench['list']['median_s']:.2f} s). "
        f"{bench['machine']}; load before: {bench['uptime_before'].split('load average: ')[-1]}.",
    ]
    t = bench["targets"]
    checks = [
        ("plot + report", day["plot_report_s"], t["plot_report_s"], "s"),
        ("peak memory", day["peak_rss_mb"], t["peak_rss_mb"], "MB"),
        ("largest figure", max(c["figure_mb"] for c in bench["cases"]), t["figure_mb"], "MB"),
        ("report.html", max(c["report_html_mb"] for c in bench["cases"]), t["report_html_mb"], "MB"),
        (
            "samples per GPU-day",
            max(c["samples_mb_per_gpu_day"] for c in bench["cases"] if c["hours"] >= 24),
            t["samples_mb_per_gpu_day"],
            "MB",
        ),
        ("marks a day at 1,000 steps/s", m["mb"], t["marks_mb_per_day"], "MB"),
    ]
    rows += [
        "",
        "Against the targets of a day on eight GPUs: "
        + "; ".join(
            f"{name} {value:g} {unit} ({'met' if value <= limit else 'NOT met'}: at most {limit:g} {unit})"
            for name, value, limit, unit in checks
        )
        + ".",
    ]
    return "\n".join(rows)


def readme(text: str, bench: dict) -> str:
    """The page with its `<!-- gpubench:longrun -->` part made from bench."""
    head, tail = "<!-- gpubench:longrun -->\n", "<!-- /gpubench:longrun -->"
    start, end = text.index(head) + len(head), text.index(tail)
    return text[:start] + readme_block(bench) + "\n" + text[end:]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, default=ROOT / "results" / "longrun")
    ap.add_argument("--cases", default="1x1,24x1,24x8", help="HOURSxGPUS, comma-separated")
    ap.add_argument(
        "--readme", action="store_true", help="write the long-run part of docs/storage.md from OUT/bench.json"
    )
    ap.add_argument(
        "--marks",
        action="store_true",
        help="measure the marks of a day again, into OUT/bench.json beside the cases measured before",
    )
    args = ap.parse_args(argv)
    if args.marks:
        bench = json.loads((args.out / "bench.json").read_text())
        with tempfile.TemporaryDirectory(prefix="gpubench-longrun-") as tmp:
            bench["marks_day"] = marks_day(Path(tmp))
        write(args.out, bench)
        return 0
    if args.readme:
        path = ROOT / "docs" / "storage.md"
        path.write_text(readme(path.read_text(), json.loads((args.out / "bench.json").read_text())))
        return 0
    args.out.mkdir(parents=True, exist_ok=True)
    bench = {
        "machine": f"{os.cpu_count()} cores, {platform.machine()}, Python {platform.python_version()}",
        "uptime_before": subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip(),
        "targets": TARGETS,
        "cases": [],
    }
    with tempfile.TemporaryDirectory(prefix="gpubench-longrun-") as tmp:
        work = Path(tmp)
        for spec in args.cases.split(","):
            hours, gpus = spec.split("x")
            bench["cases"].append(case(work, float(hours), int(gpus)))
            print(json.dumps(bench["cases"][-1]), flush=True)
        bench["formats"] = formats(work) if (work / "run-24h-1gpu").is_dir() else {}
        bench["marks_day"] = marks_day(work)
        bench["list"] = list_import()
    bench["uptime_after"] = subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()
    write(args.out, bench)
    return 0


def write(out: Path, bench: dict) -> None:
    (out / "bench.json").write_text(json.dumps(bench, indent=2) + "\n")
    log = json.dumps(bench, indent=2) + "\n\n" + readme_block(bench) + "\n"
    (out / "bench.log").write_text(log)
    print(log)


if __name__ == "__main__":
    sys.exit(main())
