"""Calibrate the tensor-pipe ceiling (gpubench.truth.ceiling) of a GPU model from measured GEMMs: each one's
FLOP rate over the bare ceiling of the same seconds (tensor active × SM clock ÷ the peak's clock × the dense
datasheet peak), per dtype; the calibration is their median, its error the farthest any lies from it. Beside
it, `highest`: the highest rate per active cycle over every kernel measured (those GEMMs and the points files
given with --beside, python -m tools.truth.gpu --broad's), with the kernel that set it, the median and the spread.

    python -m tools.truth.calibrate RUN_DIR ...         # suite runs recorded with GPM: their GEMMs
    python -m tools.truth.calibrate --points FILE ...   # points measured by tools/truth/gpu.py
    python -m tools.truth.calibrate --repoint FILE ...  # those points made again from their raw samples
    ... --beside FILE ...                                  # points of every kernel: the highest only
    ... --out results/calibration                          # where tensor-<gpu>.json goes (the default)

From a suite run, the points are its sustained matmul peaks (bf16 and fp16 torch.matmul at 8192³, timed in
the window the manifest records) and its GEMM scenarios (timed over the scenario, the counters over its
window after the trim). The file names each point's run, scenario and window: the raw samples are those runs'
own, committed beside them. Points from tools/truth/gpu.py carry their numbers and name their raw samples.
"""

from __future__ import annotations

import argparse
import csv
import json
import math
from pathlib import Path
from types import SimpleNamespace

from gpubench.read.summary import TRAIL_S, TRIM_S, covering
from gpubench.record.rundir import load_run, slug, write_json
from gpubench.truth import ceiling
from gpubench.truth.peaks import datasheet_for

ROOT = Path(__file__).resolve().parents[2]

GPM_TRAIL_S = TRAIL_S["tensor_active_pct"]


def point(samples, gpu: int, a: float, b: float, flops_per_s: float, unit: str, found, where: dict) -> dict | None:
    """One GEMM: its rate over the bare ceiling of the rows that cover only [a, b]."""
    window = covering(samples.of("gpu", gpu).window(a, b), a, GPM_TRAIL_S)
    mhz, n = ceiling.active_cycles_mhz(window)
    dtype = ceiling.DTYPE_OF.get(unit)
    if not n or dtype is None or unit not in found.peaks:
        return None
    f = ceiling.factor(flops_per_s, mhz, found.peak_clock_mhz, found.peaks[unit])
    return {
        "dtype": dtype,
        "factor": f,
        "tflops": flops_per_s / 1e12,
        "active_mhz": mhz,
        "rows": n,
        "t_start": a,
        "t_end": b,
        **where,
    }


def from_run(run: Path) -> tuple[str, list[dict]]:
    """The GEMM points of a suite run recorded with GPM (its gpu name, the points)."""
    manifest, samples, summary = load_run(run)
    name = manifest["gpu"]["name"]
    source = ((manifest.get("sources") or {}).get("columns") or {}).get("tensor_active_pct", {}).get("source")
    if manifest.get("kind") != "run" or manifest.get("distributed") or source != "gpm":
        raise SystemExit(f"{run}: not a one-GPU suite run with tensor activity from GPM")
    found = ceiling.ceiling_for(name, datasheet_for(name, manifest["gpu"].get("memory_mib")))
    if found is None:
        raise SystemExit(f"{run}: no peak clock or tensor peak is known for {name}")
    gpu, rel = manifest["gpu"].get("nvml_index", 0), str(run.relative_to(ROOT) if run.is_absolute() else run)
    peaks = manifest.get("peaks") or {}
    points = []
    for unit, cond in (peaks.get("conditions") or {}).items():
        rate = (peaks.get("measured") or {}).get(unit)
        if unit in ceiling.DTYPE_OF and rate:
            points.append(
                point(
                    samples,
                    gpu,
                    cond["t_start"],
                    cond["t_end"],
                    rate,
                    unit,
                    found,
                    {"run": rel, "what": f"sustained {unit} matmul peak, 8192³ torch.matmul"},
                )
            )
    for r in summary:
        if r.get("family") == "gemm" and r.get("unit") in ceiling.DTYPE_OF and r.get("tflops"):
            what = f"scenario {r['scenario']} ({r.get('sizes', '')})" + (
                ""
                if r.get("timing_window")
                else ", timed over the whole scenario (a run recorded before the "
                "suite timed the window its counters cover)"
            )
            points.append(
                point(
                    samples,
                    r["gpu"],
                    r["t_start"] + TRIM_S,
                    r["t_end"],
                    r["tflops"] * 1e12,
                    r["unit"],
                    found,
                    {"run": rel, "what": what},
                )
            )
    return name, [p for p in points if p is not None]


def repoint(path: Path) -> list[dict]:
    """A points file of tools/truth/gpu.py made again by today's tools/truth/probe.py point() from the raw samples
    committed beside it (each point's window and FLOP rate as measured, so that a change in how a window's rows
    are read, such as leaving stale GPM rows out, reaches the committed points); the file is rewritten."""
    from tools.truth import probe as truth_probe

    data = json.loads(path.read_text())
    with open(path.parent / data["samples"], newline="") as f:
        rows = [{k: float(v) if v not in ("", None) else math.nan for k, v in r.items()} for r in csv.DictReader(f)]
    dev = SimpleNamespace(ceiling=ceiling.ceiling_for(data["gpu"], datasheet_for(data["gpu"])))
    points = []
    for p in data["points"]:
        flops = p["tflops"] * 1e12 * (p["t_end"] - p["t_start"])
        points.append(
            {
                **truth_probe.point(rows, (p["t_start"], p["t_end"]), flops, p["dtype"], dev),
                **{k: p[k] for k in ("what", "samples") if k in p},
            }
        )
    data["points"] = points
    path.write_text(json.dumps(data, indent=1, default=truth_probe.jsonable))
    return points


def write(name: str, points: list[dict], out: Path, beside: list[Path] = ()) -> Path:
    clock = ceiling.PEAK_CLOCK_MHZ[name]
    beside = [p for p in beside if json.loads(p.read_text())["gpu"] == name]
    beside_points = [q for p in beside for q in json.loads(p.read_text())["points"]]
    data = {
        "gpu": name,
        "peak_clock_mhz": clock,
        "counter": "tensor_active_pct (NVML GPM ANY_TENSOR_UTIL)",
        "method": "a GEMM's FLOP rate over (mean of tensor active × SM clock over the rows that cover only its "
        f"timed window) ÷ {clock:g} MHz × the dense datasheet peak; the factor is the median, the "
        "error the farthest point from it; highest, lowest and spread are the extremes, highest_what "
        "the kernel that set the highest",
        "highest": {
            "method": "over every kernel measured (these points and the files named), the highest rate "
            "per active cycle of those whose tensor pipes were busier than their FP32 pipes "
            "(stale GPM rows left out), the kernel that set it, their median, lowest and spread; "
            "beside: the points left out, their FLOPs run beside the tensor pipes",
            "files": [p.name for p in beside],
            "dtypes": ceiling.highest(points + beside_points),
        },
        "dtypes": ceiling.calibrate(points),
        "points": points,
    }
    path = out / f"tensor-{slug(name)}.json"
    out.mkdir(parents=True, exist_ok=True)
    write_json(path, data)
    return path


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("runs", nargs="*", type=Path)
    ap.add_argument("--points", nargs="*", type=Path, default=[], help="points files from tools/truth/gpu.py")
    ap.add_argument(
        "--repoint",
        nargs="*",
        type=Path,
        default=[],
        help="points files rewritten from their raw samples first, then calibrated from as --points",
    )
    ap.add_argument(
        "--beside",
        nargs="*",
        type=Path,
        default=[],
        help="points files of every kernel measured (tools.truth.gpu --broad): they enter the highest only",
    )
    ap.add_argument("--out", type=Path, default=ROOT / "results" / "calibration")
    args = ap.parse_args(argv)
    for path in args.repoint:
        print(f"{path}: {len(repoint(path))} points made again from {json.loads(path.read_text())['samples']}")
    args.points = [p for p in [*args.repoint, *args.points] if p not in args.beside]
    by_gpu: dict[str, list] = {}
    for run in args.runs:
        name, points = from_run(run)
        by_gpu.setdefault(name, []).extend(points)
    for path in args.points:
        data = json.loads(path.read_text())
        by_gpu.setdefault(data["gpu"], []).extend(data["points"])
    if not by_gpu:
        ap.error("give suite runs or points files")
    for name, points in by_gpu.items():
        path = write(name, points, args.out, args.beside)
        top = json.loads(path.read_text())["highest"]["dtypes"]
        said = ", ".join(
            f"{d} {v['factor']:.3f} ± {100 * v['error']:.1f}% ({v['n']}; highest of every kernel "
            f"{top[d]['factor']:.3f} of {top[d]['n']}, {top[d]['what']}, median {top[d]['median']:.3f})"
            for d, v in ceiling.calibrate(points).items()
        )
        print(f"{path}: {said}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
