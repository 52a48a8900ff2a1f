"""The CUPTI source on a real GPU, where cupti-python is installed: one spinning thread reads as one SM, a
bf16 GEMM as busy tensor pipes, and every row is a fresh interval."""

import statistics
import time

import pytest
import torch

from gpubench.record.sampler import Sampler
from gpubench.record.sources.policy import open_sources

pytestmark = pytest.mark.gpu


@pytest.fixture(scope="module")
def gpu():
    pytest.importorskip("cupti.pm_sampling", reason="cupti-python is not installed (pip install -e '.[cupti]')")
    from gpubench.suite.backend import CudaBackend

    return CudaBackend().resolve(torch.cuda.current_device(), False)[0]


def sample(gpu, seconds, work):
    opened = open_sources([gpu.nvml_index], profiling="cupti", smi=False)
    assert [s.name for s in opened.sources] == ["nvml", "cupti"], opened.unavailable
    columns = opened.sources[1].columns
    with Sampler(opened.sources, [gpu.nvml_index], opened.interval_s) as sampler:
        t0 = time.monotonic()
        while time.monotonic() - t0 < seconds:
            work()
            torch.cuda.synchronize()
    for s in opened.sources:
        s.close()
    rows = [r for r in sampler.rows if r["t_start_s"] >= t0 + 0.5]
    return rows, columns


def median(rows, column):
    values = [r[column] for r in rows if r[column] == r[column]]
    assert values, f"no {column} in {len(rows)} rows"
    return statistics.median(values)


def test_one_spinning_thread_reads_as_one_sm(gpu):
    from gpubench.kernels import spin

    sms = spin.sm_count()
    p = spin.prepare("cupy", "1thread", ns=20_000_000)
    p.run()
    rows, _ = sample(gpu, 3.0, p.run)
    sm = median(rows, "sm_active_pct")
    print(f"spin-1thread through CUPTI: SM active {sm:.3f}% with {sms} SMs (one is {100 / sms:.2f}%)")
    assert 0.5 * 100 / sms <= sm <= 3 * 100 / sms


def test_a_bf16_gemm_keeps_the_tensor_pipes_busy_and_rows_are_fresh(gpu):
    from gpubench.kernels import gemm

    p = gemm.prepare("torch")
    p.run()
    rows, columns = sample(gpu, 3.0, lambda: [p.run() for _ in range(10)])
    if "tensor_active_pct" not in columns:
        pytest.skip("PM sampling offers no tensor metric on this chip")
    tensor, sm = median(rows, "tensor_active_pct"), median(rows, "sm_active_pct")
    print(f"bf16 GEMM through CUPTI: SM active {sm:.1f}%, tensor active {tensor:.1f}%")
    assert sm >= 80 and tensor >= 50
    values = [r["sm_active_pct"] for r in rows]
    assert sum(1 for a, b in zip(values, values[1:]) if a == b) <= len(values) // 10
