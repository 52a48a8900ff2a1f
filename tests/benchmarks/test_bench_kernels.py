"""One benchmark per kernel family x implementation at a representative size, in GPU time per call.

    pytest tests/benchmarks --benchmark-autosave
    pytest tests/benchmarks --benchmark-compare --benchmark-compare-fail=median:10%
"""

import pytest

from gpubench.benchclock import CLOCK

torch = pytest.importorskip("torch")

COPY_N = 2**28  # 1 GiB of float32 each way
SOFTMAX = (8192, 8192)
GEMM = 8192


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


@pytest.mark.benchmark(group="softmax", timer=CLOCK)
@pytest.mark.parametrize("impl", ["triton-fused", "torch-naive", "cupy-naive", "torch"],
                         ids=lambda i: f"{i}-{SOFTMAX[0]}x{SOFTMAX[1]}")
def test_softmax(gpu_bench, impl):
    from gpubench.kernels import softmax
    from gpubench.kernels.common import cupy

    x = softmax.make_input(*SOFTMAX)
    if impl == "cupy-naive":
        xc = cupy().from_dlpack(x)
        fn = lambda: softmax.cupy_naive(xc)  # noqa: E731
    elif impl == "triton-fused":
        out = torch.empty_like(x)
        fn = lambda: softmax.triton_fused(x, out)  # noqa: E731
    else:
        fn = lambda: softmax.IMPLS[impl](x)  # noqa: E731
    gpu_bench(fn, softmax.work(impl, *SOFTMAX), unit="fp32", dram_bound=True)


@pytest.mark.benchmark(group="gemm", timer=CLOCK)
@pytest.mark.parametrize("impl,dtype", [("triton", "bf16"), ("torch", "bf16"), ("cupy", "fp16")],
                         ids=lambda v: v if v in ("bf16", "fp16") else v)
def test_gemm(gpu_bench, impl, dtype):
    from gpubench.kernels import gemm
    from gpubench.kernels.common import cupy

    dt = torch.bfloat16 if dtype == "bf16" else torch.float16
    a, b = gemm.make_inputs(GEMM, GEMM, GEMM, dt)
    c = torch.empty(GEMM, GEMM, device="cuda", dtype=dt)
    if impl == "cupy":
        cp = cupy()
        ac, bc, cc = cp.from_dlpack(a), cp.from_dlpack(b), cp.from_dlpack(c)
        fn = lambda: gemm.cupy_matmul(ac, bc, cc)  # noqa: E731
    else:
        fn = lambda: gemm.IMPLS[impl](a, b, c)  # noqa: E731
    gpu_bench(fn, gemm.work(GEMM, GEMM, GEMM), unit=f"{dtype}_tensor")


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
