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
    """The GPU CUDA device 0 is (mapped to NVML by UUID), its peaks and versions: once per session."""
    from gpubench import peaks
    from gpubench.backend import CudaBackend

    backend = CudaBackend()
    gpu, _ = backend.resolve(0, all_gpus=False)
    info = backend.device_info(gpu)
    return {"gpu": gpu, "info": info, "versions": backend.versions(),
            "peaks": {"datasheet": peaks.datasheet_for(info["name"], info["memory_mib"]), "measured": peaks.measure()}}


@pytest.fixture
def gpu_bench(benchmark, context):
    """gpu_bench(prepared): time prepared.run in GPU time and fill extra_info."""
    from gpubench.benchclock import CLOCK
    from gpubench.sampler import Sampler
    from gpubench.sources.policy import open_sources
    from gpubench.summary import derive, metric_stats
    from gpubench.timing import warm_up

    def run(prepared):
        prepared.check()
        call_s = warm_up(prepared.run) / 1e3
        iterations = max(1, round(ROUND_S / call_s))
        rounds = max(10, math.ceil(MIN_TIME_S / (iterations * call_s)))
        gpu = context["gpu"]
        opened = open_sources([gpu.nvml_index], smi=False)
        sampler = Sampler(opened.sources, [gpu.nvml_index], opened.interval_s)
        t0 = time.monotonic()
        CLOCK.reset()
        with sampler:
            benchmark.pedantic(prepared.run, rounds=rounds, iterations=iterations, warmup_rounds=1)
        for s in opened.sources:
            s.close()
        rows = [r for r in sampler.rows if r["t_start_s"] >= t0 + 0.5]
        median_s = benchmark.stats.stats.median
        w = prepared.work
        result = {"kernel_ms": median_s * 1e3, "flops_per_call": w.flops, "bytes_per_call": w.bytes,
                  "traffic_per_call": w.traffic if w.traffic is not None else math.nan,
                  "link_bytes_per_call": w.link_bytes, "unit": prepared.unit, "bound": prepared.bound}
        info = benchmark.extra_info
        info.update(derive(result, context["peaks"]))
        stats = metric_stats(rows, sampler.columns)
        info.update({col: stats[col] for col in sampler.columns})
        info["kernel_ms"] = median_s * 1e3
        info.update(gpu=context["info"]["name"], uuid=gpu.uuid, driver=context["info"]["driver"],
                    cuda_driver=context["info"]["cuda_driver"], calls_per_round=iterations, launch=prepared.launch,
                    timer="CUDA events, GPU time per call", **context["versions"])
        for k, v in list(info.items()):
            if isinstance(v, float) and not math.isfinite(v):
                info[k] = None  # JSON has no NaN
        return info

    return run
