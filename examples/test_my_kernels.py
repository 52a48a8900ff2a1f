"""Benchmark your own GPU kernels in your own test suite with gpubench's `gpu_benchmark` fixture: copy this
file next to your tests and replace the kernels with yours.

    pip install -e /path/to/gpubench       # from its checkout; its pytest plugin registers itself (pytest11)
    pytest test_my_kernels.py                                        # GPU time per call, metrics in extra_info
    pytest test_my_kernels.py --gpu-save-baseline=benchmarks         # benchmarks/<this gpu>.json
    pytest test_my_kernels.py --gpu-baseline=benchmarks --benchmark-compare-fail=median:10%

Without a GPU the benchmarks skip.
"""

import pytest

torch = pytest.importorskip("torch")
triton = pytest.importorskip("triton")
tl = triton.language


@triton.jit
def _add_kernel(x, y, out, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out + offs, tl.load(x + offs, mask=mask) + tl.load(y + offs, mask=mask), mask=mask)


def add(x: torch.Tensor, y: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
    """Your kernel: out = x + y, 1024 elements per program."""
    n = out.numel()
    _add_kernel[(triton.cdiv(n, 1024),)](x, y, out, n, BLOCK=1024)
    return out


@pytest.mark.benchmark(group="add")
@pytest.mark.parametrize("n", [2**20, 2**28], ids=["4MiB", "1GiB"])
def test_add(gpu_benchmark, n):
    g = torch.Generator(device="cuda").manual_seed(0)
    x = torch.randn(n, device="cuda", generator=g)
    y = torch.randn(n, device="cuda", generator=g)
    out = torch.empty_like(x)
    # 1 FLOP per element; read x and y, write out: 12 bytes per element. At 4 MiB the arrays fit in L2, so
    # each round is one call after an L2 flush; at 1 GiB, calls run back to back.
    result = gpu_benchmark(add, x, y, out, flops=n, bytes=12 * n, unit="fp32")
    torch.testing.assert_close(result, x + y)


@pytest.mark.benchmark(group="matmul")
def test_matmul_bf16(gpu_benchmark):
    n = 4096
    g = torch.Generator(device="cuda").manual_seed(0)
    a = torch.randn(n, n, device="cuda", generator=g, dtype=torch.bfloat16)
    b = torch.randn(n, n, device="cuda", generator=g, dtype=torch.bfloat16)
    out = torch.empty_like(a)
    # 2 n^3 FLOPs on the bf16 tensor cores: MFU is against that peak
    gpu_benchmark(torch.matmul, a, b, out=out, flops=2 * n**3, bytes=3 * n * n * 2, unit="bf16_tensor")
    info = gpu_benchmark.extra_info  # what lands in the JSON: tflops, mfu_pct, sm_active_pct, gpu, ...
    assert info["tflops"] > 0
