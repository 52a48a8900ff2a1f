"""The gate's own benchmarks: nine calls from about 5 us to about 50 ms, in torch, Triton and CuPy, that
tools/gate/effort.py (and tools/gate/baseline.sh) runs unchanged again and again (no run may read `slower`
or `faster`) and with more work (every call of 100 us or more must read `slower` at 5%). Without a GPU they skip.
The calls themselves, their checks and their work: tests/gatecalls.py.

    pytest tests/gate_benchmarks --gpu-save-baseline=results/benchmarks/gate
    pytest tests/gate_benchmarks --gpu-baseline=results/benchmarks/gate --gpu-fail-slower

| benchmark | what | about | timed |
| --- | --- | --- | --- |
| test_matmul_tiny | torch bf16 512^3 | 6 us | one call per round after an L2 flush |
| test_sum_small | torch sum of 2^22 fp32 | 14 us | flushed |
| test_sum_outliers | CuPy sum of 2^22 fp32: host held up 0.6 ms every 50th call, 8x work every 97th | 14 us | flushed |
| test_matmul_2048 | torch bf16 2048^3, compute-bound | 30 us | flushed |
| test_softmax_4096 | Triton fused softmax, 4096 x 4096 fp32 | 40 us | CUDA graph |
| test_sum_large | CuPy sum of 2^27 fp32 | 0.2 ms | calls back to back |
| test_saxpy | CuPy elementwise a*x + y over 2^27 fp32 | 0.5 ms | back to back |
| test_fma_1ms | Triton FMA chains, compute-bound | 1 ms | flushed |
| test_fma_50ms | CuPy FMA chains, compute-bound | 50 ms | flushed |

--more-work=PCT (tests/conftest.py) makes every call do PCT% more work, its size grown by as much; with
--slow-share=F only a share F of the calls does, in bursts of BURST calls (a slow path taken part of the time).
--slowdown=fp32 runs the bf16 matmuls in fp32 (off the tensor cores), --slowdown=grid the 1 ms FMA chains on
half the blocks, each twice as long (conftest.py): the same work done worse, for the counters to name.
"""

from gatecalls import BURST, FMA_1MS_ITERS, FMA_50MS_ITERS, bursts, cupy_sum, fma, matmul, saxpy, softmax, torch_sum


def slowdown(request) -> str | None:
    """--slowdown's kind, where this folder's conftest added the option."""
    return request.config.getoption("--slowdown", None)


def measure(gpu_benchmark, request, make, **kwargs):
    """Check the call once, then time it: as it is, or with --more-work on every call or on --slow-share of them."""
    pct, share = request.config.getoption("--more-work"), request.config.getoption("--slow-share")
    base = make(0.0)
    base.check()
    run = base.run
    if pct:
        more = make(pct)
        more.check()
        run = more.run if share >= 1 else bursts(base.run, more.run, share)
        gpu_benchmark.extra_info["more_work"] = {"pct": pct, "share_of_calls": share, "burst_calls": BURST}
    gpu_benchmark.extra_info.update(base.facts)
    gpu_benchmark(run, flops=base.flops, bytes=base.bytes, unit=base.unit, bound=base.bound, **kwargs)


# --- torch -----------------------------------------------------------------------------------------------


def test_matmul_tiny(gpu_benchmark, request):
    measure(gpu_benchmark, request, lambda pct: matmul(512, pct, slowdown(request) == "fp32"))


def test_sum_small(gpu_benchmark, request):
    measure(gpu_benchmark, request, lambda pct: torch_sum(2**22, pct))


def test_matmul_2048(gpu_benchmark, request):
    measure(gpu_benchmark, request, lambda pct: matmul(2048, pct, slowdown(request) == "fp32"))


# --- CuPy ------------------------------------------------------------------------------------------------


def test_sum_outliers(gpu_benchmark, request):
    measure(gpu_benchmark, request, lambda pct: cupy_sum(2**22, pct, outliers=True))


def test_sum_large(gpu_benchmark, request):
    measure(gpu_benchmark, request, lambda pct: cupy_sum(2**27, pct))


def test_saxpy(gpu_benchmark, request):
    measure(gpu_benchmark, request, lambda pct: saxpy(2**27, pct))


# --- FMA chains: compute-bound, Triton and CuPy ----------------------------------------------------------


def test_fma_1ms(gpu_benchmark, request):
    from gpubench.kernels.common import sm_count

    # --slowdown=grid: the same FMAs on half the blocks (a quarter of the SMs busy), each thread twice the steps
    smaller = slowdown(request) == "grid"
    blocks = max(1, sm_count() // 2 // (2 if smaller else 1))
    measure(gpu_benchmark, request, lambda pct: fma("triton", FMA_1MS_ITERS * (2 if smaller else 1), pct, blocks))


def test_fma_50ms(gpu_benchmark, request):
    measure(gpu_benchmark, request, lambda pct: fma("cupy", FMA_50MS_ITERS, pct))


# --- Triton ----------------------------------------------------------------------------------------------


def test_softmax_4096(gpu_benchmark, request):
    measure(gpu_benchmark, request, lambda pct: softmax(4096, 4096, pct))
