"""What no summary row may say, checked against its own run's raw samples and marks (violations(run)):

- the FLOPs that ran (HFU; a suite kernel's MFU, which counts what ran) are within the tensor-pipe ceiling's
  limit in the row's window: the ceiling at the highest SM clock read while each sample row's activity ran
  (the clock is read at a row's end, GPM's value reaches back TRAIL_S before its start), with its calibrated
  error (gpubench.truth.ceiling), and MFU too where it counts no more than ran; the row carries that ceiling
  and that limit;
- work summed over processes comes from one window: TFLOP/s × the window's seconds is no more than the FLOPs
  of the steps stamped in it and the steps in progress at its start;
- the energy is at least what the counter rose by between its first and last reading inside the window;
- a rate (steps/s, a process's rate, TFLOP/s) only where the row holds a sample row whose every ladder value
  covers only its window.

A watch row whose FLOPs ran beside the tensor pipes (FP32 work watched with --dtype bf16) may read above the
tensor ceiling where it says so itself and its counters bear it out (ran_elsewhere).

tests/read/test_invariants.py holds every committed run to these checks and excuses no row: a run whose raw
files cannot give the right number is recorded anew or removed; tools/truth/probe.py prints what they find beside
a run's counters. On the runs as they were committed before the ceiling existed, they fail: no row carried a
ceiling or its window, the two processes' eval row summed rates of two sub-windows (25.8% against 20.3%), the compiled
loop's warmup showed a rate beside one sample row that its counters could not cover, energies were read
from the rows wholly inside a window (49 J where the counter gives 95), and every Llama-style train row's
HFU counted the half of causal attention the kernels skip.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np

from gpubench.job.markfile import read_all
from gpubench.job.markreader import Steps
from gpubench.job.provenance import resolve
from gpubench.metrics import finite
from gpubench.read.summary import NEEDED, TRAIL_S, TRIM_S, covering, row_label, windows_of
from gpubench.record.rundir import load_run
from gpubench.truth import ceiling
from gpubench.truth.peaks import datasheet_for

ROOT = Path(__file__).resolve().parents[2]
RUNS = sorted(p.parent for p in (ROOT / "results").glob("*/summary.json"))

# Watch runs recorded before count_flops counted what the kernels run (their manifests have no flop_count_version)
# are not here: their summaries give no HFU (gpubench.inside.flops), so no count of theirs is held to the ceiling.


def suite_windows(row: dict) -> list[tuple[float, float]]:
    return [(row["t_start"] + TRIM_S, row["t_end"])]


def phase_windows(row: dict, manifest: dict, steps: list[Steps]) -> list[tuple[float, float]]:
    """The README's window of a phase row, rebuilt from the marks: in each span, from the first step stamped at
    least TRIM_S after the span began to its last step; the span after the trim without two steps."""
    spans = next((p["spans"] for p in manifest.get("phases") or [] if p["name"] == row["phase"]), [])
    out = []
    for a, b in spans:
        a, b = max(a, row["t_start"]), min(b, row["t_end"])
        if b <= a:
            continue
        kept = [g for g in steps if a + TRIM_S <= g.t_first and g.t_last <= b]
        if sum(g.n for g in kept) >= 2:
            out.append((min(g.t_first for g in kept), max(g.t_last for g in kept)))
        elif b > a + TRIM_S:
            out.append((a + TRIM_S, b))
    return out


def same_windows(a, b) -> bool:
    return len(a) == len(b) and all(abs(x - y) <= 1e-6 for p, q in zip(a, b) for x, y in zip(p, q))


def gpu_steps(events, row: dict, one_gpu: bool) -> list[Steps]:
    """The row's GPU's steps as the summary counts them: the FLOPs of the one step gpubench counted given to
    all the optimizer's steps of its process (gpubench.job.provenance.resolve)."""
    return sorted(
        (e for e in resolve(events) if isinstance(e, Steps) and (one_gpu or e.uuid == row.get("uuid"))),
        key=lambda e: e.t_first,
    )


def violations(run: Path) -> dict[str, list[str]]:
    """scenario -> the invariants its committed row breaks."""
    manifest, samples, _ = load_run(run)
    summary = json.loads((run / "summary.json").read_text())  # every digit of the times
    watch = manifest.get("kind") == "watch"
    events = read_all(run / "marks.tsv") if (run / "marks.tsv").is_file() else []
    one_gpu = len({r.get("uuid") for r in summary}) == 1
    name = (manifest.get("gpu") or {}).get("name", "")
    found = ceiling.ceiling_for(name, datasheet_for(name, (manifest.get("gpu") or {}).get("memory_mib")))
    recorded = samples.valued([c for c in NEEDED if samples.has(c)])
    out: dict[str, list[str]] = {}
    for row in summary:
        bad = out.setdefault(row_label(row), [])
        steps = gpu_steps(events, row, one_gpu) if watch else []
        if watch and row.get("kind") == "phase":
            windows = phase_windows(row, manifest, steps)
        elif watch:
            windows = windows_of(row.get("windows"))
        else:
            windows = suite_windows(row)
        if "windows" not in row:
            bad.append("no window recorded")
        elif not same_windows(windows_of(row["windows"]), windows):
            bad.append(f"window {row['windows']} is not the README's {windows}")
        mine = samples.of("gpu", row["gpu"])
        rows_in = [mine.window(a, b) for a, b in windows]
        bad += check_ceiling(row, rows_in, windows, found, manifest, watch, mine)
        bad += check_one_window(row, steps, windows) if watch else []
        bad += check_energy(row, mine, windows)
        bad += check_rate_samples(row, rows_in, windows, recorded)
    return {k: v for k, v in out.items() if v}


def check_ceiling(row, rows_in, windows, found, manifest, watch, mine=None) -> list[str]:
    if found is None:
        return []
    if row.get("verdict_rules") == "too-short":  # no number of a window too short to measure (phaserow.judge)
        return (
            [f"too short, yet a ceiling of {row['tensor_ceiling_pct']}"]
            if finite(row.get("tensor_ceiling_pct"))
            else []
        )
    covered = [covering(w, a, TRAIL_S["tensor_active_pct"]) for w, (a, _) in zip(rows_in, windows)]
    products = np.concatenate([w.col("tensor_active_pct") / 100 * w.col("sm_clock_mhz") for w in covered] or [[]])
    highest = np.concatenate(
        [w.col("tensor_active_pct") / 100 * highest_clock(w, mine if mine is not None else w) for w in covered] or [[]]
    )
    highest = highest[np.isfinite(products)]
    products = products[np.isfinite(products)]
    if not len(products):
        return []
    dtype = manifest.get("dtype", "bf16") if watch else ceiling.DTYPE_OF.get(row.get("unit") or "")
    shown = ceiling.ceiling_dtype(dtype)
    basis = found.basis(shown)
    if basis is None:
        return []
    factor, error, _ = basis
    pct = 100 * float(np.mean(products)) / found.peak_clock_mhz * factor
    bad = []
    if not (
        finite(row.get("tensor_ceiling_pct"))
        and math.isclose(row["tensor_ceiling_pct"], pct, rel_tol=1e-6, abs_tol=1e-12)
    ):
        bad.append(f"tensor ceiling {row.get('tensor_ceiling_pct')} where its window gives {pct:.4g}%")
    if dtype not in ceiling.TENSOR_DTYPES or error is None:
        return bad
    limit = 100 * float(np.nanmean(highest)) / found.peak_clock_mhz * factor * (1 + error)
    if not (
        finite(row.get("tensor_ceiling_limit_pct"))
        and math.isclose(row["tensor_ceiling_limit_pct"], limit, rel_tol=1e-6, abs_tol=1e-12)
    ):
        bad.append(f"tensor ceiling limit {row.get('tensor_ceiling_limit_pct')} where its window gives {limit:.4g}%")
    ran = [("HFU", row.get("hfu_pct"))] if watch else [("MFU", row.get("mfu_pct"))]
    if watch and finite(row.get("mfu_pct")) and finite(row.get("hfu_pct")) and row["mfu_pct"] <= row["hfu_pct"]:
        ran.append(("MFU", row["mfu_pct"]))  # a model count of no more than ran
    for what, value in ran:
        if finite(value) and value > limit * (1 + 1e-9) and not (watch and ran_elsewhere(row, manifest, limit)):
            bad.append(
                f"{what} {value:.3g}% above the tensor ceiling {pct:.3g}% (its limit {limit:.3g}%: the highest "
                f"clocks, +{100 * error:.1f}%)"
            )
    return bad


def highest_clock(rows, around) -> np.ndarray:
    """Each row's highest SM clock read while its tensor activity may have run: the clock is read at a row's end,
    GPM's value reaches back TRAIL_S before the row's start, so the readings from the last one at or before that
    time to the row's own."""
    ends, clocks = around.col("t_end_s"), around.col("sm_clock_mhz")
    out = []
    for a, b in zip(rows.col("t_start_s"), rows.col("t_end_s")):
        before = ends[ends <= a - TRAIL_S["tensor_active_pct"]]
        start = before.max() if len(before) else -np.inf
        seen = clocks[(ends >= start) & (ends <= b + 1e-9) & np.isfinite(clocks)]
        out.append(seen.max() if len(seen) else np.nan)
    return np.array(out, dtype=float)


def ran_elsewhere(row, manifest, limit_pct) -> bool:
    """A watch row whose FLOPs are above the tensor ceiling because its --dtype names a unit that did not run,
    and which says so about itself: its verdict is flops-above-ceiling (whose sentence names that cause), its
    FP32 pipes were busier than its tensor pipes, and what ran fits in what the tensor pipes and the FP32 pipes
    could deliver together (FP32 active × the FP32 datasheet peak, the rate of the highest clock). A FLOP
    count too large for the pipes that were active is not excused."""
    rules = str(row.get("verdict_rules") or "").split(", ")
    tensor, fp32 = row.get("tensor_active_pct"), row.get("fp32_active_pct")
    sheet = (manifest.get("peaks") or {}).get("datasheet") or {}
    unit = ceiling.UNIT_OF.get(manifest.get("dtype", "bf16"))
    if not (
        "flops-above-ceiling" in rules
        and finite(tensor)
        and finite(fp32)
        and fp32 > tensor
        and finite(row.get("hfu_pct"))
        and sheet.get("fp32")
        and sheet.get(unit)
    ):
        return False
    could = limit_pct / 100 * sheet[unit] + fp32 / 100 * sheet["fp32"]
    return row["hfu_pct"] / 100 * sheet[unit] <= could


def check_one_window(row, steps: list[Steps], windows) -> list[str]:
    """Summed FLOP/s × the window's seconds: no more than the FLOPs stamped inside it, and one step a process
    for each step in progress at a window's ends."""
    if not finite(row.get("tflops")):
        return []
    seconds = sum(b - a for a, b in windows)
    bound = 0.0
    for a, b in windows:
        inside = [g for g in steps if a <= g.t_first and g.t_last <= b]
        bound += sum(g.flops for g in inside)
        for stream in {g.stream for g in steps}:
            later = [g for g in steps if g.stream == stream and g.t_last >= a]
            bound += later[0].flops / later[0].n if later else 0.0  # the step in progress at a
            after = [g for g in steps if g.stream == stream and g.t_first > b]
            bound += after[0].flops / after[0].n if after else 0.0  # and at b
    done = row["tflops"] * 1e12 * seconds
    return (
        [
            f"{row['tflops']:.4g} TFLOP/s over {seconds:.4g} s is {done:.4g} FLOPs, more than the "
            f"{bound:.4g} stamped in its window"
        ]
        if done > bound * (1 + 1e-6)
        else []
    )


def check_energy(row, mine, windows) -> list[str]:
    """At least the rise between the first and last reading of the counter inside each window."""
    if not windows or not mine.has("energy_j"):
        return []
    ends, energy = mine.col("t_end_s"), mine.col("energy_j")
    least = 0.0
    for a, b in windows:
        inside = np.flatnonzero((ends >= a) & (ends <= b) & np.isfinite(energy))
        least += float(energy[inside[-1]] - energy[inside[0]]) if len(inside) >= 2 else 0.0
    got = row.get("energy_used_j")
    if least > 0 and not (finite(got) and got >= least - 1e-6):
        return [f"energy {got} J below the counter's {least:.4g} J between readings inside its window"]
    return []


def check_rate_samples(row, rows_in, windows, recorded) -> list[str]:
    """A rate only where a sample row covers the window for every ladder column the run recorded."""
    rated = [k for k in ("steps_per_s", "tflops", "kernel_ms") if finite(row.get(k))]
    if isinstance(row.get("stream_rates"), str) and row["stream_rates"]:
        rated.append("stream_rates")
    if not rated:
        return []
    trail = max((TRAIL_S.get(c, 0.0) for c in NEEDED if c in recorded), default=0.0)
    whole = sum(len(covering(w, a, trail)) for w, (a, _) in zip(rows_in, windows))
    return [] if whole else [f"{', '.join(rated)} beside no sample row that covers only its window"]
