"""Real NVML and GPM while a single-block spin kernel runs, and while the GPU is idle."""

import statistics
import time

import pytest
import torch

from gpubench.kernels import spin
from gpubench.sampler import Sampler, open_sources
from gpubench.sources.gpm import GpmSource
from gpubench.sources.nvml_source import NvmlSource

pytestmark = pytest.mark.gpu


def _sample(seconds, work=None):
    opened, why = open_sources([NvmlSource(), GpmSource()], [0])
    assert [s.name for s in opened] == ["nvml", "gpm"], why
    sampler = Sampler(opened, [0], 0.1)
    with sampler:
        t0 = time.monotonic()
        while time.monotonic() - t0 < seconds:
            if work:
                work()
                torch.cuda.synchronize()
            else:
                time.sleep(0.05)
    for s in opened:
        s.close()
    rows = [r for r in sampler.rows if r["t_mono_s"] >= t0 + 1.0]  # NVML's window needs a second to fill
    return {c: statistics.median(r[c] for r in rows) for c in ("gpu_util_pct", "sm_active_pct")}


def test_spin_one_thread_reads_busy_but_one_sm_active():
    sms = spin.sm_count()
    out = torch.empty(2, dtype=torch.int64, device="cuda")
    spin.triton_spin(1000, out)
    torch.cuda.synchronize()
    busy = _sample(4.0, lambda: spin.triton_spin(50_000_000, out))
    print(f"spin: {busy} with {sms} SMs (one SM is {100 / sms:.2f}%)")
    assert busy["gpu_util_pct"] >= 95
    assert busy["sm_active_pct"] <= 3 * 100 / sms


def test_idle_reads_near_zero():
    torch.cuda.synchronize()
    time.sleep(1.0)
    idle = _sample(3.0)
    print(f"idle: {idle}")
    assert idle["gpu_util_pct"] <= 5
    assert idle["sm_active_pct"] <= 1


def test_sampler_overhead_on_gemm_under_one_percent():
    from gpubench.kernels import gemm
    from gpubench.timing import time_loop

    a, b = gemm.make_inputs(8192, 8192, 8192, torch.bfloat16)
    c = torch.empty(8192, 8192, device="cuda", dtype=torch.bfloat16)
    run = lambda: torch.matmul(a, b, out=c)  # noqa: E731
    time_loop(run, calls_per_timing=10, groups=3)

    def median_ms(with_sampler: bool) -> float:
        if not with_sampler:
            return time_loop(run, calls_per_timing=10, duration_s=0.8).median_ms
        opened, _ = open_sources([NvmlSource(), GpmSource()], [0])
        with Sampler(opened, [0], 0.1):
            ms = time_loop(run, calls_per_timing=10, duration_s=0.8).median_ms
        for s in opened:
            s.close()
        return ms

    # A GEMM runs at the power limit, so its clock drifts by more than 1% over seconds. Interleave short
    # off/on windows and compare each pair, so the drift hits both sides of every ratio alike.
    ratios = []
    for _ in range(8):
        off = median_ms(False)
        ratios.append(median_ms(True) / off)
    slowdown = statistics.median(ratios) - 1
    print(f"gemm with the sampler on / off, per pair: {[round(r, 4) for r in ratios]}; median {100 * slowdown:+.2f}%")
    assert slowdown < 0.01
