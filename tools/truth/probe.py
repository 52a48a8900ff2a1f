"""The counters' side of tools/truth/gpu.py: the GPM pipe counters asked for, a sampler of them, and what is made
of what it read (a calibration point, the lag of each column at a known edge, each watch row beside its
counters). The GPU itself (its GEMMs in every tensor dtype, timed in groups stamped on its timeline, and the GPM
counters the driver answers) is tools/truth/device.py; the dry run's stand-in is tools/truth/fake.py."""

from __future__ import annotations

import csv
import json
import math
import statistics
import sys
import threading
import time
from pathlib import Path

import numpy as np

from gpubench.read.samples import as_samples
from gpubench.read.summary import TRAIL_S, covering
from gpubench.truth import ceiling

ROOT = Path(__file__).resolve().parents[2]
# NVML GPM metric ids (nvml.h): which pipe counter a dtype moves is measured, not assumed. The cycle counters
# (248 on) are recent: a driver that does not know them refuses them, and GpmCounters reads on without them.
COUNTERS = {
    "sm_active_pct": 2,
    "sm_occupancy_pct": 3,
    "integer_util_pct": 4,
    "tensor_active_pct": 5,
    "dfma_tensor_util_pct": 6,
    "hmma_tensor_util_pct": 7,
    "dmma_tensor_util_pct": 8,
    "imma_tensor_util_pct": 9,
    "dram_active_pct": 10,
    "fp64_active_pct": 11,
    "fp32_active_pct": 12,
    "fp16_active_pct": 13,
    "sm_cycles_elapsed": 248,
    "sm_cycles_active": 249,
    "mma_cycles_active": 250,
    "dmma_cycles_active": 251,
    "hmma_cycles_active": 252,
    "imma_cycles_active": 253,
    "dfma_cycles_active": 254,
    "integer_cycles_active": 257,
    "fp64_cycles_active": 258,
    "fp32_cycles_active": 259,
    "fp16_cycles_active": 260,
}
PIPES = [
    c
    for c in COUNTERS
    if c.endswith("_util_pct") or c in ("tensor_active_pct", "fp64_active_pct", "fp32_active_pct", "fp16_active_pct")
]
SIZE = 8192


GRACE_S = 10.0  # from Ctrl-C to a kill: a watch stopped at its time still writes its run directory


def bounded(child, seconds: float, grace_s: float = GRACE_S) -> int | None:
    """A child process's exit code, or None where it ran past `seconds`: then Ctrl-C goes to its process group
    (start it with start_new_session: a watch ends its command and writes its run), and after grace_s a kill."""
    import os
    import signal
    import subprocess

    try:
        return child.wait(timeout=max(1.0, seconds))
    except subprocess.TimeoutExpired:
        pass
    for sig, wait in ((signal.SIGINT, grace_s), (signal.SIGKILL, None)):
        try:
            os.killpg(child.pid, sig)
        except ProcessLookupError:
            break
        try:
            child.wait(timeout=wait)
            break
        except subprocess.TimeoutExpired:
            continue
    return None


def jsonable(value):
    return float(value) if isinstance(value, (np.floating, np.integer)) else str(value)


class Sampler:
    """Reads dev.sample() every interval_s on a fixed schedule into rows of [t_start_s, t_end_s]."""

    def __init__(self, dev, interval_s: float):
        self.dev, self.interval_s, self.rows = dev, interval_s, []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self):
        self.dev.sample()  # the first read starts the first interval
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()

    def _run(self):
        prev = time.monotonic()
        due = prev + self.interval_s
        while not self._stop.wait(max(0.0, due - time.monotonic())):
            try:
                values = self.dev.sample()
            except Exception as err:  # a counter the driver refuses: said once, the rows go on without it
                print(f"sampler: {type(err).__name__}: {err}", file=sys.stderr)
                values = {}
            now = time.monotonic()
            self.rows.append({"t_start_s": prev, "t_end_s": now, "gpu": 0, **values})
            prev, due = now, due + self.interval_s


def write_rows(rows: list[dict], path: Path) -> None:
    names = list(dict.fromkeys(k for r in rows for k in r))
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, names)
        w.writeheader()
        w.writerows(rows)


# The activity columns this probe reads (it asks no graphics util): a row where all read exactly 0 and DRAM
# nothing is a GPM pair with no refresh between its samples, no reading (gpubench.record.sources.gpm.stale).
READ_ACTIVITY = ("sm_active_pct", "sm_occupancy_pct", "tensor_active_pct")


def stale(rows) -> np.ndarray:
    """Which rows are GPM pairs with no refresh: kept, they read 0 in the middle of busy work (seen 5 times in
    the two windows of a 1x1 convolution on an H200) and lower the mean a point divides by."""
    zero = np.all([rows.col(c) == 0.0 for c in READ_ACTIVITY], axis=0)
    dram = rows.col("dram_active_pct") if rows.has("dram_active_pct") else np.full(len(rows), np.nan)
    return zero & ~(dram > 0)


def point(rows: list[dict], window: tuple[float, float], flops: float, dtype: str, dev) -> dict:
    """One calibration point: the GEMM's FLOP rate over its timed window, against the bare ceiling of the rows
    that cover only that window, less the stale ones; the mean of every counter there, and the ones that moved."""
    a, b = window
    inside = covering(as_samples(rows).window(a, b), a, TRAIL_S["tensor_active_pct"])
    inside = inside.take(~stale(inside)) if len(inside) else inside
    mhz, n = ceiling.active_cycles_mhz(inside)
    rate = flops / (b - a)
    found, unit = dev.ceiling, ceiling.UNIT_OF[dtype]
    factor = (
        ceiling.factor(rate, mhz, found.peak_clock_mhz, found.peaks[unit])
        if found is not None and unit in found.peaks and n
        else math.nan
    )
    means = {
        c: float(np.nanmean(inside.col(c))) if n and inside.has(c) and np.isfinite(inside.col(c)).any() else math.nan
        for c in list(COUNTERS) + ["sm_clock_mhz", "power_w"]
    }
    moved = [c for c in PIPES if means.get(c, 0) == means.get(c, 0) and means.get(c, 0) > 1.0]
    return {
        "dtype": dtype,
        "factor": factor,
        "tflops": rate / 1e12,
        "active_mhz": mhz,
        "rows": n,
        "t_start": a,
        "t_end": b,
        "tensor_active_pct": means["tensor_active_pct"],
        "clock_mhz": means["sm_clock_mhz"],
        "counters": means,
        "moved": moved,
    }


def lags(rows: list[dict], edges: list[tuple[float, float]]) -> dict:
    """For each column, from the rows across known edges (the GPU switched on at t_on, off at t_off): where a
    row reads part of a change, how long before the row's end its value ends (lag), and how far before a row's
    start the value of a row that begins after an off edge still reaches (trail)."""
    out = {}
    s = as_samples(rows)
    ts, te = s.col("t_start_s"), s.col("t_end_s")
    for col in ("sm_active_pct", "tensor_active_pct", "hmma_tensor_util_pct", "gpu_util_pct", "power_w"):
        if not s.has(col):
            continue
        v = s.col(col)
        steady = [x for a, b, x in zip(ts, te, v) if any(on + 0.2 <= a and b <= off for on, off in edges)]
        idle = [
            x
            for a, b, x in zip(ts, te, v)
            if any(off + 0.25 <= a and b <= on for (_, off), (on, _) in zip(edges, edges[1:]))
        ]
        if not steady or not idle or not np.isfinite(steady).any():
            continue
        hi, lo = float(np.nanmedian(steady)), float(np.nanmedian(idle))
        if hi - lo <= 1e-9:
            continue
        found, reach = [], 0.0
        marks = [(on, True) for on, _ in edges] + [(off, False) for _, off in edges]
        for a, b, x in zip(ts, te, v):
            f = (x - lo) / (hi - lo)
            near = [(e, rising) for e, rising in marks if a - 0.4 <= e <= b]  # a value that lags 0 to 0.4 s
            if 0.08 < f < 0.92 and len(near) == 1:
                e, rising = near[0]  # the row's value covers [a - lag, b - lag], across this edge
                found.append((b - e) - f * (b - a) if rising else f * (b - a) - (e - a))
            for _, off in edges:
                if off < a < off + 0.4 and f > 0.02:  # begun after the GPU stopped, it still reads it
                    reach = max(reach, a - off)
        if found or reach:
            q = np.percentile(found, [10, 50, 90]) if found else [math.nan] * 3
            out[col] = {
                "lag_p10_s": q[0],
                "lag_p50_s": q[1],
                "lag_p90_s": q[2],
                "edges": len(found),
                "trail_s": reach,
                "steady": hi,
                "idle": lo,
            }
    return out


def rows_beside_counters(run: Path) -> list[str]:
    """Each summary row of a watch beside the counters of its window, and what tools/truth/invariants.py finds."""
    summary = json.loads((run / "summary.json").read_text())
    lines = [
        f"  {run.name}: row, window, whole sample rows, steps/s (each process), TFLOP/s, MFU, HFU, tensor "
        "active, SM clock, tensor ceiling, HFU over its limit, energy"
    ]
    g = lambda r, k, f: format(r[k], f) if isinstance(r.get(k), (int, float)) else "–"  # noqa: E731
    for r in summary:
        lines.append(
            f"  {r['scenario']:>9} {r.get('windows', ''):>23} n={r.get('n_samples')} "
            f"{g(r, 'steps_per_s', '.4g')}/s [{r.get('stream_rates') or ''}] {g(r, 'tflops', '.4g')} TF "
            f"MFU {g(r, 'mfu_pct', '.3g')}% HFU {g(r, 'hfu_pct', '.3g')}% "
            f"tensor {g(r, 'tensor_active_pct', '.3g')}% "
            f"@ {g(r, 'sm_clock_mhz', '.0f')} MHz ceiling {g(r, 'tensor_ceiling_pct', '.3g')}% "
            f"ran/limit {g(r, 'ran_over_ceiling', '.3f')} energy {g(r, 'energy_used_j', '.4g')} J: "
            f"{r.get('verdict_rules')}"
        )
    try:
        from tools.truth.invariants import violations

        found = violations(run)
        lines += [f"  invariants: {k}: {'; '.join(v)}" for k, v in found.items()] or ["  invariants: every row holds"]
    except Exception as err:  # the checks are a report here, never a reason to lose the measurements
        lines.append(f"  invariants not checked: {type(err).__name__}: {err}")
    return lines


def summary_table(points: list[dict], found_lags: dict, runs: list[Path], dev) -> list[str]:
    lines = ["", f"=== summary on {dev.name}"]
    lines += [f"GPM counters refused and left out: {', '.join(f'{c} ({w})' for c, w in dev.refused.items())}"] * bool(
        getattr(dev, "refused", None)
    )
    lines.append("dtype  points  factor (median, spread)  tensor counters moved")
    for dtype in ceiling.TENSOR_DTYPES:
        mine = [p for p in points if p["dtype"] == dtype and p["factor"] == p["factor"]]
        if mine:
            fs = [p["factor"] for p in mine]
            moved = sorted({c for p in mine for c in p["moved"]})
            lines.append(
                f"{dtype:<6} {len(mine):>6}  {statistics.median(fs):.3f} ({min(fs):.3f}–{max(fs):.3f})    "
                f"{', '.join(moved)}"
            )
    lines.append("interval column               lag p50 (p10–p90)      trail   (the summary's TRAIL_S)")
    for interval, cols in found_lags.items():
        for col, lag in cols.items():
            lines.append(
                f"{interval:>8} {col:<20} {lag['lag_p50_s']:.3f} "
                f"({lag['lag_p10_s']:.3f}–{lag['lag_p90_s']:.3f})"
                f"   {lag['trail_s']:.3f}   ({TRAIL_S.get(col, '-')})"
            )
    for run in runs:
        rows = json.loads((run / "summary.json").read_text())
        lines.append(f"{run.name}: " + ", ".join(f"{r['scenario']} {r['verdict_rules']}" for r in rows))
    return lines
