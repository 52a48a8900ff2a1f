"""One benchmark per kernel family x implementation at the suite's size, in GPU time per call.

    pytest tests/benchmarks --benchmark-autosave
    pytest tests/benchmarks --benchmark-compare --benchmark-compare-fail=median:10%
"""

import pytest

from gpubench.benchclock import CLOCK

torch = pytest.importorskip("torch")


@pytest.mark.benchmark(group="copy", timer=CLOCK)
@pytest.mark.parametrize("impl", ["triton", "cupy", "cupy-memcpy", "torch"], ids=lambda i: f"{i}-1GiB")
def test_copy(gpu_bench, request, impl):
    from gpubench.kernels import copy

    prepared = copy.prepare(impl)
    if impl == "triton" and request.config.getoption("--slow-copy"):
        # a deliberate regression: 64-element blocks of one warp, for checking that compare catches it
        src, dst = copy.make_buffers(copy.SIZES["n"], impl)
        prepared.run = lambda: copy.triton_copy(src, dst, block=64, num_warps=1)
    gpu_bench(prepared)


@pytest.mark.benchmark(group="softmax", timer=CLOCK)
@pytest.mark.parametrize("impl", ["triton-fused", "torch-naive", "cupy-naive", "torch"], ids=lambda i: f"{i}-8192x8192")
def test_softmax(gpu_bench, impl):
    from gpubench.kernels import softmax

    gpu_bench(softmax.prepare(impl))


@pytest.mark.benchmark(group="gemm", timer=CLOCK)
@pytest.mark.parametrize("impl,dtype", [("triton", "bfloat16"), ("torch", "bfloat16"), ("cupy", "float16")],
                         ids=["triton-bf16", "torch-bf16", "cupy-fp16"])
def test_gemm(gpu_bench, impl, dtype):
    from gpubench.kernels import gemm

    gpu_bench(gemm.prepare(impl, dtype=dtype))


@pytest.mark.benchmark(group="spin", timer=CLOCK)
@pytest.mark.parametrize("impl", ["cupy", "triton"], ids=["cupy-1thread-1ms", "triton-1warp-1ms"])
def test_spin(gpu_bench, impl):
    from gpubench.kernels import spin

    info = gpu_bench(spin.prepare(impl, "1thread", ns=1_000_000))
    # the spin asks for 1 ms of GPU time: the per-call statistic must say 1 ms, not the host's launch time
    assert info["kernel_ms"] == pytest.approx(1.0, rel=0.01)
