"""One benchmark per kernel family x implementation at a representative size, in GPU time per call.

    pytest tests/benchmarks --benchmark-autosave
    pytest tests/benchmarks --benchmark-compare --benchmark-compare-fail=median:10%
"""

import pytest

from gpubench.benchclock import CLOCK

torch = pytest.importorskip("torch")

COPY_N = 2**28  # 1 GiB of float32 each way
SOFTMAX = (8192, 8192)  # the suite's sizes (gpubench.suite): benchmarks reuse its workloads


@pytest.mark.benchmark(group="copy", timer=CLOCK)
@pytest.mark.parametrize("impl", ["triton", "cupy", "cupy-memcpy", "torch"], ids=lambda i: f"{i}-1GiB")
def test_copy(gpu_bench, request, impl):
    from gpubench.kernels import copy

    src, dst = copy.make_buffers(COPY_N, impl)
    fn = copy.IMPLS[impl]
    if impl == "triton" and request.config.getoption("--slow-copy"):
        # a deliberate regression: 64-element blocks of one warp, for checking that compare catches it
        def run():
            copy.triton_copy(src, dst, block=64, num_warps=1)
    else:
        def run():
            fn(src, dst)
    gpu_bench(run, copy.work(COPY_N), unit="fp32", dram_bound=True)


def _scenario(gpu_bench, name):
    """Benchmark a suite scenario's workload: the same kernels, sizes and work model as `gpubench run`."""
    from gpubench.suite import BY_NAME

    wl = BY_NAME[name].build()
    gpu_bench(wl.run, wl.work, unit=wl.unit, dram_bound=wl.dram_bound)


@pytest.mark.benchmark(group="softmax", timer=CLOCK)
@pytest.mark.parametrize("scenario", [
    pytest.param(name, id=f"{impl}-{SOFTMAX[0]}x{SOFTMAX[1]}") for impl, name in
    [("triton-fused", "softmax-fused"), ("torch-naive", "softmax-naive-torch"), ("cupy-naive", "softmax-naive-cupy"),
     ("torch", "softmax-torch")]])
def test_softmax(gpu_bench, scenario):
    _scenario(gpu_bench, scenario)


@pytest.mark.benchmark(group="gemm", timer=CLOCK)
@pytest.mark.parametrize("scenario", [
    pytest.param(name, id=impl) for impl, name in
    [("triton-bf16", "gemm-triton"), ("torch-bf16", "gemm-torch"), ("cupy-fp16", "gemm-cupy")]])
def test_gemm(gpu_bench, scenario):
    _scenario(gpu_bench, scenario)


@pytest.mark.benchmark(group="spin", timer=CLOCK)
@pytest.mark.parametrize("impl", ["cupy-1thread-1ms", "triton-1warp-1ms"])
def test_spin(gpu_bench, impl):
    from gpubench.kernels import spin

    ns = 1_000_000
    if impl.startswith("cupy"):
        from gpubench.kernels.common import cupy

        out = cupy().empty(2, dtype=cupy().int64)
        fn = lambda: spin.cupy_spin(ns, 1, 1, out)  # noqa: E731
    else:
        out = torch.empty(2, dtype=torch.int64, device="cuda")
        fn = lambda: spin.triton_spin(ns, out)  # noqa: E731
    info = gpu_bench(fn, spin.work(), unit="fp32")
    # the spin asks for 1 ms of GPU time: the per-call statistic must say 1 ms, not the host's launch time
    assert info["kernel_ms"] == pytest.approx(1.0, rel=0.01)
