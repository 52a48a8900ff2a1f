"""The README's sentences about the committed results, written by the same generator as its tables
(tools/readme/tables.py imports these): every number in them is read from a file under results/.

Each function takes the results folder and returns the part's text; the table generator puts it between
the part's markers.
"""

from __future__ import annotations

import csv
import math
from pathlib import Path

from gpubench.metrics import finite
from gpubench.read.summary import batch_at, ridge_flop_per_byte
from gpubench.record.rundir import load_run

GPUS = {"h100-80gb-hbm3": "H100", "h200": "H200"}


def _reference(results: Path) -> dict:
    """The newest suite run of each GPU: slug -> (manifest, {scenario: row})."""
    out = {}
    for slug in GPUS:
        found = sorted(p.parent for p in results.glob(f"{slug}-2*/manifest.json"))
        if found:
            manifest, _, summary = load_run(found[-1])
            out[slug] = (manifest, {r["scenario"]: r for r in summary})
    return out


def _span(values, fmt="{:.0f}", unit="%") -> str:
    """'lo–hi%' of values as tables round them ('x%' where they round alike)."""
    lo, hi = fmt.format(min(values)), fmt.format(max(values))
    return f"{lo}{unit}" if lo == hi else f"{lo}–{hi}{unit}"


def ladder_notes(results: Path) -> str:
    runs = _reference(results)
    if not runs:
        return "(no reference run committed yet)\n"
    rows = [by for _, by in runs.values()]
    busy_all = [n for n in rows[0] if all((by.get(n) or {}).get("gpu_util_pct") == 100.0 for by in rows)]
    not_busy = [n for n in rows[0] if n not in busy_all and n != "idle"]
    sms = sorted({m["gpu"].get("sm_count") for m, _ in runs.values() if m["gpu"].get("sm_count")})
    spin = [by["spin-1warp-per-sm"] for by in rows if "spin-1warp-per-sm" in by]
    copies = [by[n]["mbu_pct"] for by in rows for n in ("copy-triton", "copy-cupy", "copy-torch") if n in by]
    h2d = [by["h2d-copy"] for by in rows if "h2d-copy" in by]
    naive = [
        100 * by["softmax-fused"]["kernel_ms"] / by["softmax-naive-torch"]["kernel_ms"]
        for by in rows
        if "softmax-fused" in by and "softmax-naive-torch" in by
    ]
    said = [
        "Read it row by row: nvidia-smi reads 100% for every kernel but "
        + " and ".join(f"`{n}`" for n in not_busy)
        + "."
    ]
    if sms and spin:
        said.append(
            f"`spin-1thread` keeps one SM of {' or '.join(map(str, sms))} busy; `spin-1warp-per-sm` drives SM "
            f"active to {_span([r['sm_active_pct'] for r in spin])} with the SMs nearly empty (occupancy "
            f"{_span([r['sm_occupancy_pct'] for r in spin], '{:.2g}')});"
        )
    if copies:
        said.append(f"the copies do no arithmetic while moving bytes at {_span(copies)} of the datasheet bandwidth;")
    if h2d:
        said.append(
            f"`h2d-copy` reads {_span([r['gpu_util_pct'] for r in h2d])} with SM active at "
            f"{_span([r['sm_active_pct'] for r in h2d])};"
        )
    if naive:
        said.append(f"the naive softmax does the same useful work as the fused one at {_span(naive)} of its speed.")
    return " ".join(said) + (
        " Add DCGM's `DCGM_FI_PROF_SM_ACTIVE` (1002), `SM_OCCUPANCY` (1003), "
        "`PIPE_TENSOR_ACTIVE` (1004) and `DRAM_ACTIVE` (1005) to your dashboards, and count "
        "FLOPs.\n"
    )


def _bench(results: Path) -> dict:
    out = {}
    for slug in GPUS:
        found = sorted(results.glob(f"bench-kernels-{slug}-*.csv"))
        if found:
            with open(found[-1], newline="") as f:
                out[slug] = {(r["group"], r["name"]): r for r in csv.DictReader(f)}
    return out


def _f(row, key) -> float:
    try:
        return float(row[key])
    except (KeyError, TypeError, ValueError):
        return math.nan


def kernels_notes(results: Path) -> str:
    bench = _bench(results)
    h100 = bench.get("h100-80gb-hbm3")
    if not h100:
        return "(no kernel bench committed yet)\n"
    said = []
    tri, ref = h100.get(("gemm-bf16-8192", "triton")), h100.get(("gemm-bf16-8192", "torch"))
    if tri and ref:
        said.append(
            f"The ratio of two medians timed apart can mislead: it puts the Triton GEMM at "
            f"{_f(ref, 'median_ms') / _f(tri, 'median_ms'):.3f}x torch.matmul on the H100, where the paired "
            f"ratio is {_f(tri, 'speed_vs_reference'):.3f}x with p10–p90 {_f(tri, 'speed_p10'):.3f}–"
            f"{_f(tri, 'speed_p90'):.3f}."
        )
    sizes = ("4096", "8192", "16384")
    reach = [
        100 / _f(h100[(f"softmax-{n}", "copy-same-bytes")], "speed_vs_reference")
        for n in sizes
        if (f"softmax-{n}", "copy-same-bytes") in h100
    ]
    fused = [
        100
        * _f(h100[(f"softmax-{n}", "triton-fused")], "speed_vs_reference")
        / _f(h100[(f"softmax-{n}", "copy-same-bytes")], "speed_vs_reference")
        for n in sizes
        if (f"softmax-{n}", "triton-fused") in h100 and (f"softmax-{n}", "copy-same-bytes") in h100
    ]
    if reach and fused:
        said.append(
            "\n\nA fused softmax must read its input once and write its output once, so it can be no faster "
            'than a copy of the same bytes: the "(ceiling)" rows give that bound for each size. On the H100, '
            f"where torch.softmax already reaches {_span(reach)} of that ceiling, the targets above torch "
            "(1.6x at 8192², 1.3x at 4096² and 16384²) exceed what a copy achieves, and 5x the naive "
            "sequence would need more than a copy's speed; the fused kernel reaches "
            f"{_span(fused)} of the ceiling."
        )
    h200 = bench.get("h200")
    if h200 and ("softmax-16384", "copy-same-bytes") in h200:
        cap = _f(h200[("softmax-16384", "copy-same-bytes")], "speed_vs_reference")
        got = _f(h200[("softmax-16384", "triton-fused")], "speed_vs_reference")
        said.append(
            f"On the H200, at 16384², it reaches {100 * got / cap:.0f}% of its ceiling, which is itself "
            f"{cap:.3f}x torch.softmax."
        )
    return " ".join(said).replace(" \n\n", "\n\n") + "\n"


def decode_notes(results: Path) -> str:
    runs = _reference(results)
    said = []
    for which, words in (
        ("datasheet", "From the datasheets"),
        ("measured", "from the peaks measured in the reference runs"),
    ):
        parts = []
        for slug, (manifest, by) in runs.items():
            ridge = ridge_flop_per_byte(manifest.get("peaks") or {}, which)
            sweep = [r for r in by.values() if r.get("family") == "decode"]
            if ridge:
                b = batch_at(sweep, ridge)
                parts.append(
                    f"{ridge:.0f} FLOP per byte on an {GPUS[slug]}"
                    + (f" (B ≈ {b:.0f} for this W)" if finite(b) else "")
                )
        if parts:
            said.append(f"{words} the ridge lies at {' and '.join(parts)}")
    text = ("; ".join(said) + ".") if said else ""
    bench = _bench(results)
    per_gpu = []
    for slug, rows in bench.items():
        tri, copy = rows.get(("decode-b1", "triton")), rows.get(("decode-b1", "copy-same-bytes"))
        ratios = [
            _f(rows[(f"decode-b{b}", "triton")], "speed_vs_reference")
            for b in (1, 2, 4, 8, 16)
            if (f"decode-b{b}", "triton") in rows
        ]
        torch1 = rows.get(("decode-b1", "torch"))
        if tri and copy and ratios and torch1:
            per_gpu.append(
                f"on the {GPUS[slug]} the Triton kernel reads the weights at "
                f"{100 * _f(tri, 'gbps') / _f(copy, 'gbps'):.0f}% of a same-size copy's rate at B = 1 and "
                f"runs {_span(ratios, '{:.2f}', '×')} cuBLAS's speed from B = 1 to 16, where `F.linear` "
                f"reads {_f(torch1, 'gbps') / 1e3:.2f} TB/s at B = 1 against the copy's "
                f"{_f(copy, 'gbps') / 1e3:.2f}"
            )
    if per_gpu:
        text += (" " if text else "") + "Timed interleaved (the kernel bench CSVs above), " + "; ".join(per_gpu) + "."
    return (text or "(no reference run committed yet)") + "\n"


def calibration_notes(results: Path) -> str:
    """What the committed calibrations of the tensor ceiling hold (results/calibration/tensor-*.json): each GPU
    model's dtypes with their factor, error and points, the runs the points come from, and the tensor dtypes
    no GPU model has a calibration for."""
    import json

    from gpubench.truth.ceiling import TENSOR_DTYPES, load_calibrations

    said, runs, known, probes = [], set(), set(), set()
    for path in sorted((results / "calibration").glob("tensor-*.json")):
        data = json.loads(path.read_text())
        dtypes = data.get("dtypes") or {}
        if not dtypes:
            continue
        known |= set(dtypes)
        runs |= {p["run"] for p in data.get("points") or [] if p.get("run")}
        probes |= {
            f"results/calibration/{p['samples']}"
            for p in data.get("points") or []
            if not p.get("run") and p.get("samples")
        }
        cals = load_calibrations(data["gpu"], results / "calibration")
        each = ", ".join(
            f"{d} {c.factor:.3f} ± {100 * c.error:.1f}% (the highest of {c.n} kernels, whose median is {c.median:.3f})"
            for d, c in cals.items()
        )
        said.append(f"the {data['gpu']}: {each}")
    if not said:
        return "(no calibration committed yet: every ceiling is the bare bf16 rule, which judges no FLOP count)\n"
    text = (
        "The committed calibrations in force, the highest rate per active cycle of every kernel measured, as a "
        "share of the datasheet rate: " + "; ".join(said)
    )
    if runs:
        text += (
            ", over the suite's GEMMs of the reference run "
            + " or ".join(f"[`{r}`]({r})" for r in sorted(runs))
            + " (a sustained matmul peak or a `gemm` scenario)"
        )
    if probes:
        text += (
            ("; and" if runs else ", each point") + " a GEMM of `tools/truth/gpu.py`'s part (a), sustained "
            "and in bursts at half duty, its counters read every 0.1 s ("
            + ", ".join(f"[samples]({r})" for r in sorted(probes))
            + ")"
        )
    broad = sorted(
        {
            f
            for path in (results / "calibration").glob("tensor-*.json")
            for f in (json.loads(path.read_text()).get("highest") or {}).get("files") or []
        }
    )
    if broad:
        text += (
            "; and every other kernel measured (attention, convolutions, products of every shape, "
            + ", ".join(f"[`{f}`](results/calibration/{f})" for f in broad)
            + ")"
        )
    missing = [d for d in TENSOR_DTYPES if d not in known]
    if missing:
        text += (
            f". {' and '.join(d.upper() for d in missing)} have no calibration on any GPU: "
            "`tools/truth/gpu.py` measures them (its part (a)), and no run of that part is committed, so a row "
            f"of {' or '.join(missing)} gets no ceiling and no FLOP count of it is held to one"
        )
    return text + ".\n"
