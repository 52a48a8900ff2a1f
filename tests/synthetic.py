"""A small synthetic run directory, written through the project's own writers and summary."""

from __future__ import annotations

import importlib
import math

from gpubench.kernels.decode import work as decode_work

from gpubench.read.summary import summarize
from gpubench.record.csvfile import CsvSink
from gpubench.record.rundir import SAMPLES_FILE, open_sink, read_samples, write_json, write_summary

# Test data, not measurements: decode steps timed as the roofline of the synthetic peaks would time them
# (470 MB of weights at 4.2 TB/s, 2·B·K·N FLOPs at 650 TFLOP/s), so the sweep crosses the ridge.
DECODE = {b: decode_work(b, 8192, 28672) for b in (1, 16, 128, 512)}
DECODE_MS = {b: 1.05e3 * max(w.bytes / 4.2e12, w.flops / 650e12) for b, w in DECODE.items()}

SCENARIOS = [  # name, family, flops, bytes, traffic, unit, bound, util, sm_active, tensor, baseline
    ("idle", "idle", 0, 0, 0, None, "none", 0, 0, 0, ""),
    ("copy-triton", "copy", 0, 2e9, 2e9, "fp32", "dram", 100, 99, 0, ""),
    ("h2d-copy", "h2d", 0, 5.4e8, 2.7e8, None, "link", 100, 0, 0, ""),
    ("spin-1thread", "spin", 0, 0, 0, "fp32", "none", 100, 0.76, 0, ""),
    ("softmax-naive-torch", "softmax", 3.3e8, 5.4e8, 2.1e9, "fp32", "dram", 100, 98, 1, ""),
    ("softmax-fused", "softmax", 3.3e8, 5.4e8, 5.4e8, "fp32", "dram", 100, 83, 0, "softmax-naive-torch"),
    ("gemm-torch", "gemm", 1.1e12, 4e8, math.nan, "bf16_tensor", "compute", 100, 97, 94, ""),
    *(
        (f"decode-b{b}", "decode", w.flops, w.bytes, math.nan, "bf16_tensor", "both", 100, 98, min(90, b / 6), "")
        for b, w in DECODE.items()
    ),
]


def make_run(run_dir, profiling=True, completed=True, fmt="arrows", scenarios=SCENARIOS, kind="run"):
    """Write manifest, samples and summary; without profiling there are no GPM columns (pre-Hopper). fmt:
    "arrows" as a recording writes today, "csv" as runs recorded before samples.arrows hold them. scenarios:
    a few of SCENARIOS, for a smaller run; kind "watch" for a run that the figures and report take for a
    watched job's."""
    run_dir.mkdir(parents=True)
    columns = ["gpu_util_pct", "power_w", "energy_j"] + (
        ["sm_active_pct", "sm_occupancy_pct", "tensor_active_pct", "dram_active_pct", "fp32_active_pct"]
        if profiling
        else []
    )
    path = run_dir / (SAMPLES_FILE if fmt == "arrows" else "samples.csv")
    sink = open_sink(path, columns) if fmt == "arrows" else CsvSink(path, columns)
    rows, results, t, energy = [], [], 0.0, 1000.0
    for k, (name, fam, flops, nbytes, traffic, unit, bound, util, sm, tensor, base) in enumerate(scenarios):
        start = t
        for phase, n in (("gap", 5), (name, 20)):
            for _ in range(n):
                busy = phase == name
                power = 100.0 + 40 * k if busy and util else 70.0
                energy += 0.1 * power  # each row lasts 0.1 s
                row = {
                    "t_start_s": t,
                    "t_end_s": t + 0.1,
                    "t_wall": 1.7e9 + t,
                    "gpu": 0,
                    "uuid": "GPU-synthetic",
                    "phase": phase,
                    "gpu_util_pct": util if busy else 0.0,
                    "power_w": power,
                    "energy_j": energy,
                }
                if profiling:
                    row.update(
                        sm_active_pct=sm if busy else 0.0,
                        sm_occupancy_pct=sm / 2 if busy else 0.0,
                        tensor_active_pct=tensor if busy else 0.0,
                        dram_active_pct=50.0 if busy and bound == "dram" else 0.0,
                        fp32_active_pct=1.0 if busy else 0.0,
                    )
                rows.append(row)
                sink(row)
                t += 0.1
            if phase == "gap":
                start = t
        ms = DECODE_MS[int(name[8:])] if fam == "decode" else 1.0 + k
        results.append(
            {
                "scenario": name,
                "family": fam,
                "impl": "x",
                "baseline": base,
                "launch": "1 block x 1 thread",
                "sizes": "n=1",
                "gpu": 0,
                "uuid": "GPU-synthetic",
                "t_start": start,
                "t_end": t,
                "kernel_ms": math.nan if fam == "idle" else ms,
                "kernel_ms_p10": 0.9 * ms,
                "kernel_ms_p90": 1.1 * ms,
                "flops_per_call": flops,
                "bytes_per_call": nbytes,
                "tokens_per_call": DECODE[int(name[8:])].tokens if fam == "decode" else math.nan,
                "traffic_per_call": traffic,
                "link_bytes_per_call": nbytes / 2 if bound == "link" else 0.0,
                "unit": unit or "",
                "bound": bound,
                "check": "ok",
                "sms_used": 1,
                "blocks": 1,
            }
        )
    sink.close()
    peaks = {
        "datasheet": {"bf16_tensor": 989.4e12, "fp32": 66.9e12, "dram": 4.8e12, "link": 63e9},
        "measured": {"bf16_tensor": 790e12, "dram": 4.28e12},
        "conditions": {"bf16_tensor": {"sm_clock_mhz": 1500.0, "power_w_energy": 690.0}},
    }
    families = {f: {"story": importlib.import_module(f"gpubench.kernels.{f}").STORY} for _, f, *_ in scenarios}
    manifest = {
        "kind": kind,
        "gpu": {"name": "NVIDIA H200", "sm_count": 132, "nvml_index": 0, "memory_mib": 143771},
        "start_wall": "2026-11-21T11:39:11+0000",
        "completed": completed,
        "status": "completed" if completed else "interrupted",
        "peaks": peaks,
        "families": families,
        "versions": {"gpubench": "test"},
        "options": {"trim_s": 0.5},
        "sources": {
            "used": ["nvml"] + (["gpm"] if profiling else []),
            "unavailable": {} if profiling else {"gpm": "GPU 0 does not support NVML GPM"},
        },
        "warnings": [],
        "errors": [],
    }
    write_json(run_dir / "manifest.json", manifest)
    # summarized from what the file holds, as a recording does
    write_summary(run_dir, summarize(read_samples(path), results, peaks, columns))
    return run_dir


def drawing_modules() -> list:
    """Every module that saves a figure (each figure's own, and common's empty figure): tests replace save there."""
    import sys

    from gpubench.show.figures import FIGURES, common

    return [common] + [sys.modules[f.draw.__module__] for f in FIGURES]
