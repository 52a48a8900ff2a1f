"""GPU benchmarks for pytest-benchmark: GPU time per call, with the metrics recorded alongside."""

from __future__ import annotations

import math
import time

import pytest

ROUND_S = 0.02  # GPU time per round: long enough that one launch latency is noise
MIN_TIME_S = 2.0  # per benchmark, so NVML's utilization window fills and the medians mean something


def pytest_collection_modifyitems(config, items):
    import torch

    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="benchmarks time GPU kernels with CUDA events: needs an NVIDIA GPU")
    for item in items:
        if "benchmarks" in str(item.fspath):
            item.add_marker(skip)


@pytest.fixture(scope="session")
def context():
    """Measured peaks, datasheet peaks, GPU and versions: measured once per session."""
    from gpubench import peaks
    from gpubench.backend import CudaBackend

    backend = CudaBackend()
    info = backend.device_info(0)
    return {"info": info, "versions": backend.versions(),
            "peaks": {"datasheet": peaks.datasheet_for(info["name"]), "measured": peaks.measure()}}


@pytest.fixture
def gpu_bench(benchmark, context):
    """gpu_bench(fn, work, unit=..., dram_bound=...): time fn in GPU time and fill extra_info."""
    import torch

    from gpubench.sampler import Sampler, open_sources
    from gpubench.sources.gpm import GpmSource
    from gpubench.sources.nvml_source import NvmlSource
    from gpubench.summary import derive, metric_stats
    from gpubench.timing import time_loop

    def run(fn, work, unit=None, dram_bound=False):
        for _ in range(3):  # compile, autotune and allocate before anything is timed
            fn()
        torch.cuda.synchronize()
        call_s = time_loop(fn, calls_per_timing=3, groups=2).median_ms / 1e3
        iterations = max(1, round(ROUND_S / call_s))
        rounds = max(10, math.ceil(MIN_TIME_S / (iterations * call_s)))
        opened, _ = open_sources([NvmlSource(), GpmSource()], [0])
        sampler = Sampler(opened, [0], 0.1)
        t0 = time.monotonic()
        with sampler:
            benchmark.pedantic(fn, rounds=rounds, iterations=iterations, warmup_rounds=1)
        for s in opened:
            s.close()
        rows = [r for r in sampler.rows if r["t_mono_s"] >= t0 + 0.5]
        median_s = benchmark.stats.stats.median
        result = {"kernel_ms": median_s * 1e3, "flops_per_call": work.flops, "bytes_per_call": work.bytes,
                  "unit": unit, "dram_bound": dram_bound}
        info = benchmark.extra_info
        info.update(derive(result, context["peaks"]))
        stats = metric_stats(rows, sampler.columns)
        info.update({col: stats[col] for col in sampler.columns})
        info["kernel_ms"] = median_s * 1e3
        info.update(gpu=context["info"]["name"], driver=context["info"]["driver"],
                    cuda_driver=context["info"]["cuda_driver"], calls_per_round=iterations,
                    timer="CUDA events, GPU time per call", **context["versions"])
        for k, v in list(info.items()):
            if isinstance(v, float) and not math.isfinite(v):
                info[k] = None  # JSON has no NaN
        return info

    return run
