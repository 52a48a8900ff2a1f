"""Real NVML and GPM while a single-block spin kernel runs, and while the GPU is idle."""

import statistics
import time

import pytest
import torch
from gpubench.kernels import spin

from gpubench.record.sampler import Sampler
from gpubench.record.sources.policy import open_sources

pytestmark = pytest.mark.gpu


def _gpu():
    from gpubench.suite.backend import CudaBackend

    return CudaBackend().resolve(torch.cuda.current_device(), False)[0]


def _sample(seconds, work=None):
    gpu = _gpu()
    opened = open_sources([gpu.nvml_index], profiling="gpm", smi=False)
    assert [s.name for s in opened.sources] == ["nvml", "gpm"], opened.unavailable
    sampler = Sampler(opened.sources, [gpu.nvml_index], opened.interval_s)
    with sampler:
        t0 = time.monotonic()
        while time.monotonic() - t0 < seconds:
            if work:
                work()
                torch.cuda.synchronize()
            else:
                time.sleep(0.05)
    for s in opened.sources:
        s.close()
    rows = [r for r in sampler.rows if r["t_start_s"] >= t0 + 1.0]  # NVML's window needs a second to fill
    return rows, {c: statistics.median(r[c] for r in rows) for c in ("gpu_util_pct", "sm_active_pct")}


def test_spin_one_thread_reads_busy_but_one_sm_active():
    sms = spin.sm_count()
    p = spin.prepare("triton", "1thread", ns=50_000_000)
    p.run()
    torch.cuda.synchronize()
    rows, busy = _sample(4.0, p.run)
    print(f"spin: {busy} with {sms} SMs (one SM is {100 / sms:.2f}%)")
    assert busy["gpu_util_pct"] >= 95
    assert busy["sm_active_pct"] <= 3 * 100 / sms


def test_every_gpm_row_is_a_fresh_interval():
    """No row repeats the previous one's interval: the stale-row bug read 35% repeats."""
    rows, _ = _sample(3.0, spin.prepare("triton", "1thread", ns=20_000_000).run)
    values = [r["sm_active_pct"] for r in rows]
    repeats = sum(1 for a, b in zip(values, values[1:]) if a == b)
    assert repeats <= len(values) // 10, values
    assert all(b["t_start_s"] == a["t_end_s"] for a, b in zip(rows, rows[1:]))


def test_idle_reads_near_zero():
    torch.cuda.synchronize()
    time.sleep(1.0)
    _, idle = _sample(3.0)
    print(f"idle: {idle}")
    assert idle["gpu_util_pct"] <= 5
    assert idle["sm_active_pct"] <= 1


def test_sampler_overhead_on_gemm_under_one_percent():
    from gpubench.kernels import gemm

    from gpubench.truth.timing import time_loop

    p = gemm.prepare("torch")
    time_loop(p.run, calls_per_timing=10, groups=3)
    gpu = _gpu()

    def median_ms(with_sampler: bool) -> float:
        if not with_sampler:
            return time_loop(p.run, calls_per_timing=10, duration_s=0.8).median_ms
        opened = open_sources([gpu.nvml_index])
        with Sampler(opened.sources, [gpu.nvml_index], opened.interval_s):
            ms = time_loop(p.run, calls_per_timing=10, duration_s=0.8).median_ms
        for s in opened.sources:
            s.close()
        return ms

    # A GEMM runs at the power limit, so its clock drifts by more than 1% over seconds. Interleave short
    # off/on windows and compare each pair, so the drift hits both sides of every ratio alike, the sampler
    # second in half the pairs and first in the other half (the GPU warms over each pair).
    ratios = []
    for i in range(8):
        if i % 2 == 0:
            off = median_ms(False)
            ratios.append(median_ms(True) / off)
        else:
            on = median_ms(True)
            ratios.append(on / median_ms(False))
    slowdown = statistics.median(ratios) - 1
    print(f"gemm with the sampler on / off, per pair: {[round(r, 4) for r in ratios]}; median {100 * slowdown:+.2f}%")
    assert slowdown < 0.01
