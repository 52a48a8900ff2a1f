"""One benchmark per kernel family x implementation at the suite's size, in GPU time per call, through the
gpu_benchmark fixture (gpubench's pytest plugin). Without a GPU they skip.

    pytest tests/benchmarks --gpu-save-baseline=results/benchmarks
    pytest tests/benchmarks --gpu-baseline=results/benchmarks --benchmark-compare-fail=median:10%
"""

import pytest


def measure(gpu_benchmark, prepared, run=None) -> dict:
    """Check the family's kernel once, then time it with its work model; the record's extra_info."""
    prepared.check()
    w = prepared.work
    gpu_benchmark.extra_info.update(launch=prepared.launch, bound=prepared.bound)
    gpu_benchmark(run or prepared.run, flops=w.flops, bytes=w.bytes, unit=prepared.unit, bound=prepared.bound)
    return gpu_benchmark.extra_info


@pytest.mark.benchmark(group="copy")
@pytest.mark.parametrize("impl", ["triton", "cupy", "cupy-memcpy", "torch"], ids=lambda i: f"{i}-1GiB")
def test_copy(gpu_benchmark, request, impl):
    from gpubench.kernels import copy

    prepared = copy.prepare(impl)
    run = None
    if impl == "triton" and request.config.getoption("--slow-copy"):
        # a deliberate regression: 64-element blocks of one warp, for checking that a comparison catches it
        src, dst = copy.make_buffers(copy.SIZES["n"], impl)
        run = lambda: copy.triton_copy(src, dst, block=64, num_warps=1)  # noqa: E731
    measure(gpu_benchmark, prepared, run)


@pytest.mark.benchmark(group="softmax")
@pytest.mark.parametrize("impl", ["triton-fused", "torch-naive", "cupy-naive", "torch"], ids=lambda i: f"{i}-8192x8192")
def test_softmax(gpu_benchmark, impl):
    from gpubench.kernels import softmax

    measure(gpu_benchmark, softmax.prepare(impl))


@pytest.mark.benchmark(group="gemm")
@pytest.mark.parametrize("impl,dtype", [("triton", "bfloat16"), ("torch", "bfloat16"), ("cupy", "float16")],
                         ids=["triton-bf16", "torch-bf16", "cupy-fp16"])
def test_gemm(gpu_benchmark, impl, dtype):
    from gpubench.kernels import gemm

    measure(gpu_benchmark, gemm.prepare(impl, dtype=dtype))


@pytest.mark.benchmark(group="spin")
@pytest.mark.parametrize("impl", ["cupy", "triton"], ids=["cupy-1thread-1ms", "triton-1warp-1ms"])
def test_spin(gpu_benchmark, impl):
    from gpubench.kernels import spin

    info = measure(gpu_benchmark, spin.prepare(impl, "1thread", ns=1_000_000))
    # the spin asks for 1 ms of GPU time: the per-call statistic must say 1 ms, not the host's launch time
    assert info["kernel_ms"] == pytest.approx(1.0, rel=0.01)
