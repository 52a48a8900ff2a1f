"""A small synthetic run directory, written through the project's own writers."""

from __future__ import annotations

import math

from gpubench.results import CsvSink, write_json, write_summary
from gpubench.summary import summarize

SCENARIOS = [  # name, family, flops, bytes, unit, dram_bound, util, sm_active, tensor
    ("idle", "idle", 0, 0, None, False, 0, 0, 0),
    ("copy-triton", "copy", 0, 2e9, "fp32", True, 100, 99, 0),
    ("spin-1thread", "spin", 0, 0, "fp32", False, 100, 0.76, 0),
    ("softmax-naive-torch", "softmax", 3.3e8, 2.1e9, "fp32", True, 100, 98, 1),
    ("softmax-fused", "softmax", 3.3e8, 5.4e8, "fp32", True, 100, 83, 0),
    ("gemm-torch", "gemm", 1.1e12, 4e8, "bf16_tensor", False, 100, 97, 94),
]


def make_run(run_dir, profiling=True):
    """Write manifest, samples and summary; without profiling there are no GPM columns (pre-Hopper)."""
    run_dir.mkdir(parents=True)
    columns = ["gpu_util_pct", "power_w"] + (["sm_active_pct", "sm_occupancy_pct", "tensor_active_pct",
                                             "dram_active_pct", "fp32_active_pct"] if profiling else [])
    sink = CsvSink(run_dir / "samples.csv", columns)
    rows, results, t = [], [], 0.0
    for k, (name, fam, flops, nbytes, unit, dram, util, sm, tensor) in enumerate(SCENARIOS):
        start = t
        for phase, n in (("gap", 5), (name, 20)):
            for _ in range(n):
                row = {"t_mono_s": t, "t_wall": 1.7e9 + t, "gpu": 0, "phase": phase,
                       "gpu_util_pct": util if phase == name else 0.0, "power_w": 100.0 + k}
                if profiling:
                    busy = phase == name
                    row.update(sm_active_pct=sm if busy else 0.0, sm_occupancy_pct=sm / 2 if busy else 0.0,
                               tensor_active_pct=tensor if busy else 0.0, dram_active_pct=50.0 if busy and dram else 0.0,
                               fp32_active_pct=1.0 if busy else 0.0)
                rows.append(row)
                sink(row)
                t += 0.1
            if phase == "gap":
                start = t
        results.append({"scenario": name, "family": fam, "impl": "x", "t_start": start, "t_end": t - 0.1,
                        "kernel_ms": math.nan if fam == "idle" else 1.0 + k, "kernel_ms_p10": 0.9 + k,
                        "kernel_ms_p90": 1.1 + k, "flops_per_call": flops, "bytes_per_call": nbytes,
                        "unit": unit or "", "dram_bound": dram, "check": "ok"})
    sink.close()
    peaks = {"datasheet": {"bf16_tensor": 989.4e12, "fp32": 66.9e12, "dram": 4.8e12},
             "measured": {"bf16_tensor": 790e12, "dram": 4.28e12}}
    manifest = {"gpu": {"name": "NVIDIA H200", "sm_count": 132, "index": 0, "memory_mib": 143771},
                "start_wall": "2026-11-21T11:39:11+0000", "completed": True, "status": "completed",
                "peaks": peaks, "versions": {"gpubench": "test"},
                "sources": {"used": ["nvml"] + (["gpm"] if profiling else []),
                            "unavailable": {} if profiling else {"gpm": "GPU 0 does not support NVML GPM"}},
                "warnings": [], "errors": []}
    write_json(run_dir / "manifest.json", manifest)
    write_summary(run_dir, summarize(rows, results, peaks, 0, columns))
    return run_dir
