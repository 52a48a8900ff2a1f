"""A synthetic long watch in the run-directory format gpubench writes: N GPUs for H hours, phases, marks.

    python -m tools.longrun.synthetic OUT_DIR [--gpus 8] [--hours 24] [--interval 0.1] [--steps-per-s 10] [--seed 0]
                                      [--phases N] [--csv]

No GPU: the numbers are made up, the files are not. The samples go through gpubench's own writer
(samples.arrows, in the batches a recording writes), the marks through the job's own writer
(gpubench.inside.markwriter, one process per GPU, stamps on a simulated clock), and the summary through the watch's
own summary of those files (gpubench.job.watcher.resummarize), so plot and report read what a day-long
`gpubench watch` would leave. The GPU is named "synthetic" in the manifest, so every figure's stamp says so.

The job: a start-up, 10 minutes of warm-up, then every hour 53 minutes of training, 5 of evaluation and 2 of
checkpointing. Each GPU's metrics follow its phase with noise at the resolution of its source (NVML's
integers and milliwatts, GPM's continuous ratios), and a one-sample dip of GPU-Util to 0 on each GPU
every 17 minutes, which a figure must still show.

--phases N: a job that marks every epoch instead (or every request): after the start-up, N phases named
"epoch 1" to "epoch N" back to back, every tenth one at evaluation's level, so that the summary has N rows a
GPU. --csv: the samples kept as samples.csv alone, as runs recorded before samples.arrows (or converted by
another tool) hold them.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import numpy as np

from gpubench.inside import linewriter
from gpubench.job import markfile
from gpubench.job.phases import FLOP_CONVENTION, STORY
from gpubench.job.watcher import MARKS_FILE, resummarize
from gpubench.metrics import COLUMNS
from gpubench.read.samplekeys import TIME_KEYS
from gpubench.read.samples import Samples
from gpubench.record import arrowfile
from gpubench.record.gpus import Gpu
from gpubench.record.rundir import (
    CSV_SAMPLES,
    SAMPLE_KEYS,
    SAMPLES_FILE,
    write_json,
    write_summary,
)

ROOT = Path(__file__).resolve().parents[2]

NAME = "synthetic H100 (tools/longrun/synthetic.py: made-up numbers)"
PEAKS = {
    "datasheet": {
        "bf16_tensor": 989.4e12,
        "fp16_tensor": 989.4e12,
        "tf32_tensor": 494.7e12,
        "fp32": 66.9e12,
        "dram": 3.35e12,
        "link": 63e9,
    },
    "measured": None,
    "conditions": {},
}
FLOPS_PER_STEP = 1.43e13  # examples/train_gpt.py's step on an H100
T0 = 1000.0  # the monotonic clock when the recording starts
WALL0 = 1795353000.0
HOUR_S = 3600.0
# phase: (GPU-Util, SM active, occupancy, tensor, DRAM, FP32, power W, steps/s as a share of --steps-per-s)
PHASES = {
    "run": (2, 0.5, 0.2, 0.0, 0.5, 0.0, 95, 0.0),
    "warmup": (90, 70, 25, 12, 30, 3, 450, 0.8),
    "train": (99, 90, 30, 22, 40, 3, 620, 1.0),
    "eval": (75, 55, 20, 15, 35, 2, 420, 2.5),
    "checkpoint": (4, 1, 0.5, 0.0, 2, 0.1, 130, 0.0),
}
START_S, WARMUP_S = 5.0, 600.0
CYCLE = (("train", 53 * 60.0), ("eval", 5 * 60.0), ("checkpoint", 2 * 60.0))
DIP_EVERY_S = 17 * 60.0


def schedule(hours: float) -> list[tuple[str, float, float]]:
    """(phase, start, end) on the monotonic clock, back to back."""
    end = T0 + hours * HOUR_S
    out, t = [("run", T0, T0 + START_S), ("warmup", T0 + START_S, T0 + START_S + WARMUP_S)], T0 + START_S + WARMUP_S
    while t < end:
        for name, length in CYCLE:
            out.append((name, t, min(end, t + length)))
            t += length
            if t >= end:
                break
    return [s for s in out if s[2] > s[1]]


def epochs(hours: float, n: int) -> list[tuple[str, float, float]]:
    """The start-up, then n phases "epoch 1" ... "epoch n" back to back to the end."""
    end = T0 + hours * HOUR_S
    length = (end - T0 - START_S) / n
    return [("run", T0, T0 + START_S)] + [
        (f"epoch {k + 1}", T0 + START_S + k * length, T0 + START_S + (k + 1) * length) for k in range(n)
    ]


def level_of(name: str) -> str:
    """The phase whose levels a phase's metrics follow: an epoch trains, every tenth evaluates."""
    if not name.startswith("epoch "):
        return name
    return "eval" if int(name.split()[1]) % 10 == 0 else "train"


def gpus(n: int) -> list[Gpu]:
    return [Gpu(i, f"GPU-{i:08x}-5e7f-4c1a-9d2b-{i:012x}", NAME, i) for i in range(n)]


def sample_chunk(
    rng, k0: int, k1: int, interval_s: float, n_gpus: int, spans, energy: np.ndarray, last_end: float
) -> tuple[dict, float]:
    """Ticks k0..k1-1, one row per GPU each, tick-major as the sampler writes them."""
    ticks = np.arange(k0, k1)
    t_end = T0 + (ticks + 1) * interval_s + rng.normal(0, 2e-4, len(ticks))
    t_start = np.r_[last_end, t_end[:-1]]
    starts = np.array([a for _, a, _ in spans])
    which = np.clip(np.searchsorted(starts, t_end, side="right") - 1, 0, len(spans) - 1)
    names = np.array([p for p, _, _ in spans], dtype=object)[which]
    level = np.array([PHASES[level_of(p)] for p, _, _ in spans])[which]  # ticks x 8
    g = len(ticks) * n_gpus
    rep = lambda a: np.repeat(a, n_gpus)  # noqa: E731 -- a value per tick, for each GPU's row
    lv = np.repeat(level, n_gpus, axis=0)
    gpu = np.tile(np.arange(n_gpus), len(ticks)).astype(float)
    noisy = lambda mean, sd: np.clip(mean + rng.normal(0, 1, g) * sd, 0, 100)  # noqa: E731
    util = np.clip(np.round(lv[:, 0] - np.abs(rng.normal(0, 1.5, g))), 0, 100)
    dip = np.floor(rep(t_end) / DIP_EVERY_S) != np.floor(rep(t_start) / DIP_EVERY_S)
    util[dip] = 0.0
    power = np.round((lv[:, 6] - 8 * gpu + rng.normal(0, 25, g)) * 1000) / 1000
    per_gpu = power.reshape(len(ticks), n_gpus) * interval_s
    joules = energy + np.cumsum(per_gpu, axis=0)
    energy[:] = joules[-1]
    sm = noisy(lv[:, 1], 2.0)
    cols = {
        "t_start_s": rep(t_start),
        "t_end_s": rep(t_end),
        "t_wall": rep(WALL0 + t_end - T0),
        "gpu": gpu,
        "uuid": np.array([u.uuid for u in gpus(n_gpus)], dtype=object)[gpu.astype(int)],
        "phase": rep(names),
        "gpu_util_pct": util,
        "mem_util_pct": np.round(noisy(lv[:, 4] * 0.9, 3.0)),
        "power_w": power,
        "sm_clock_mhz": np.where(rng.random(g) < 0.9, 1980.0, 1965.0),
        "mem_used_mib": np.full(g, 61234.5625),
        "energy_j": np.round(joules.ravel() * 1000) / 1000,
        "graphics_active_pct": np.minimum(100, sm + 3),
        "sm_active_pct": sm,
        "sm_occupancy_pct": noisy(lv[:, 2], 1.0),
        "tensor_active_pct": noisy(lv[:, 3], 1.5),
        "dram_active_pct": noisy(lv[:, 4], 2.0),
        "fp64_active_pct": np.zeros(g),
        "fp32_active_pct": noisy(lv[:, 5], 0.3),
        "fp16_active_pct": noisy(lv[:, 5] / 6, 0.05),
        "smi_gpu_util_pct": util,
        "smi_power_w": np.round(power, 2),
        "smi_sm_clock_mhz": np.full(g, 1980.0),
    }
    cols["smi_mem_util_pct"] = cols["mem_util_pct"]
    return cols, float(t_end[-1])


def write_samples(
    run_dir: Path, n_gpus: int, hours: float, interval_s: float, seed: int, spans, csv: bool = False
) -> list[str]:
    rng = np.random.default_rng(seed)
    names = list(SAMPLE_KEYS) + [c for c in COLUMNS if c != "dcgm_gpu_util_pct"]
    writer = (CsvColumns if csv else arrowfile.Writer)(run_dir / (CSV_SAMPLES if csv else SAMPLES_FILE), names)
    ticks = int(hours * HOUR_S / interval_s)
    per_chunk = max(1, int(600 / interval_s))  # ten minutes at a time: memory stays small
    energy, last_end = np.full(n_gpus, 2.5e6), T0
    try:
        for k0 in range(0, ticks, per_chunk):
            cols, last_end = sample_chunk(
                rng, k0, min(ticks, k0 + per_chunk), interval_s, n_gpus, spans, energy, last_end
            )
            writer.write_table(Samples(cols))
    finally:
        writer.close()
    return names[len(SAMPLE_KEYS) :]


class CsvColumns:
    """Columns of samples appended to samples.csv as a recording's CsvSink writes them (times to 0.1 ms,
    numbers to ten significant digits, a missing value empty), a chunk at a time."""

    def __init__(self, path: Path, names: list[str]):
        self.names, self.f = names, open(path, "w", newline="")  # noqa: SIM115 -- closed by close()
        self.f.write(",".join(names) + "\n")

    def write_table(self, samples: Samples) -> None:
        cols = []
        for n in self.names:
            v = samples.col(n)
            if v.dtype == object:
                cols.append(v.astype(str))
            elif n in TIME_KEYS:
                cols.append(np.char.mod("%.4f", v))
            elif n in ("gpu", "rank"):
                cols.append(v.astype(np.int64).astype(str))
            else:
                cols.append(np.where(np.isnan(v), "", np.char.mod("%.10g", v)))
        self.f.write("\n".join(",".join(row) for row in zip(*(c.tolist() for c in cols))) + "\n")

    def close(self) -> None:
        self.f.close()


def write_marks(run_dir: Path, n_gpus: int, steps_per_s: float, spans, seed: int) -> list[int]:
    """Each GPU's process marks every phase and steps at its rate, through the job's own writer."""
    rng = np.random.default_rng(seed + 1)
    writers = []
    for g, gpu in enumerate(gpus(n_gpus)):
        w = linewriter._Writer(str(run_dir / MARKS_FILE))
        w.rank, w.pid, w.uuid, w.clock, w.fine_until = g, 40000 + g, gpu.uuid, "gpu", 0.0
        writers.append(w)
    for name, a, b in spans:
        rate = steps_per_s * PHASES[level_of(name)][7]
        for w in writers:
            if name != "run":
                w.on_mark(a + rng.uniform(0, 0.02), name)
        if rate <= 0:
            continue
        for minute in np.arange(a, b, 60.0):  # a minute at a time, the processes' lines interleaved as in a job
            for g, w in enumerate(writers):
                t = np.arange(minute + 1.0 / rate, min(b, minute + 60.0), 1.0 / rate) + rng.normal(0, 1e-4)
                for stamp in t.tolist():
                    w.on_step(stamp, FLOPS_PER_STEP, FLOPS_PER_STEP * 1.02, None, 16384.0, False, lead_s=0.004)
    for w in writers:
        w.close()
    return [w.pid for w in writers]


def generate(
    run_dir: Path,
    n_gpus: int = 8,
    hours: float = 24.0,
    interval_s: float = 0.1,
    steps_per_s: float = 10.0,
    seed: int = 0,
    phases: int | None = None,
    csv: bool = False,
) -> Path:
    run_dir = Path(run_dir)
    run_dir.mkdir(parents=True, exist_ok=False)
    spans = epochs(hours, phases) if phases else schedule(hours)
    columns = write_samples(run_dir, n_gpus, hours, interval_s, seed, spans, csv)
    pids = write_marks(run_dir, n_gpus, steps_per_s, spans, seed)
    sampled = gpus(n_gpus)
    t1 = T0 + int(hours * HOUR_S / interval_s) * interval_s
    manifest = {
        "kind": "watch",
        "command": ["python", "train.py", "(synthetic: tools/longrun/synthetic.py)"],
        "gpus_sampled": [g.as_dict() for g in sampled],
        "gpu": {**sampled[0].as_dict(), "sm_count": 132},
        "options": {"interval_s": interval_s, "profiling": "auto", "smi": True, "trim_s": 0.5},
        "start_wall": time.strftime("%Y-%m-%dT%H:%M:%S+0000", time.gmtime(WALL0)),
        "end_wall": None,
        "completed": True,
        "status": "completed",
        "warnings": [],
        "errors": [],
        "sources": {"used": ["synthetic"], "unavailable": {}, "columns": {}},
        "columns": columns,
        "peaks": PEAKS,
        "dtype": "bf16",
        "families": {"watch": {"story": STORY}},
        "versions": {"gpubench": "tools/longrun/synthetic.py"},
        "window": {"t_start": T0, "t_end": t1},
        "all_gpus": False,
        "flop_convention": FLOP_CONVENTION,
        "marks": {"file": MARKS_FILE},
        "contexts": {"used": {str(g.nvml_index): [pid] for g, pid in zip(sampled, pids)}},
    }
    write_json(run_dir / "manifest.json", manifest)
    result = resummarize(run_dir)
    write_summary(run_dir, result.summary)
    events = markfile.read_all(run_dir / MARKS_FILE)
    manifest.update(
        phases=[{"name": p.name, "spans": p.spans} for p in result.phases],
        gpus_used=result.used,
        gpus_idle=[],
        marks={"file": MARKS_FILE, "lines": len(events)},
    )
    write_json(run_dir / "manifest.json", manifest)
    return run_dir


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out", type=Path)
    ap.add_argument("--gpus", type=int, default=8)
    ap.add_argument("--hours", type=float, default=24.0)
    ap.add_argument("--interval", type=float, default=0.1)
    ap.add_argument("--steps-per-s", type=float, default=10.0)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument(
        "--phases", type=int, metavar="N", help="a job that marks N epochs (default: train, eval, checkpoint)"
    )
    ap.add_argument("--csv", action="store_true", help="keep the samples as samples.csv only")
    args = ap.parse_args(argv)
    if args.out.exists():
        print(f"longrun.py: {args.out} exists; choose a new directory", file=sys.stderr)
        return 2
    if not (
        args.gpus >= 1
        and args.hours > 0
        and args.interval > 0
        and args.steps_per_s >= 0
        and (args.phases is None or args.phases >= 1)
    ):
        print("longrun.py: --gpus and --phases must be 1 or more, --hours and --interval above 0", file=sys.stderr)
        return 2
    generate(args.out, args.gpus, args.hours, args.interval, args.steps_per_s, args.seed, args.phases, args.csv)
    print(args.out)
    return 0


if __name__ == "__main__":
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    sys.exit(main())
