"""One benchmark per kernel family x implementation at the suite's size, in GPU time per call, through the
gpu_benchmark fixture (gpubench's pytest plugin), and a tiny kernel far shorter than its launch. Without a
GPU they skip.

    pytest tests/benchmarks --gpu-save-baseline=results/benchmarks     # 8 processes: the baseline and its floor
    pytest tests/benchmarks --gpu-baseline=results/benchmarks --gpu-fail-slower

Regressions the gate must catch, made of real work on the GPU (tests/conftest.py has the options):
--slow-copy swaps the Triton copy for 64-element, one-warp blocks; --slow-calls=PCT makes every copy and
GEMM call also run its own kernel on PCT% of its size, and --slow-share=F does that on a share F of the
calls only, in bursts of BURST calls, so that whole rounds are slower (a slow path taken part of the time).
"""

import itertools
import statistics

import pytest

BURST = 64  # calls in a burst of --slow-share: longer than a round of a 1 GiB copy or an 8192^3 GEMM
PERIOD = 10  # bursts in a cycle: --slow-share=0.4 slows 4 bursts of every 10


def measure(gpu_benchmark, prepared, run=None, **facts) -> dict:
    """Check the family's kernel once, then time it with its work model; the record's extra_info."""
    prepared.check()
    w = prepared.work
    gpu_benchmark.extra_info.update(launch=prepared.launch, bound=prepared.bound, **facts)
    gpu_benchmark(run or prepared.run, flops=w.flops, bytes=w.bytes, unit=prepared.unit, bound=prepared.bound)
    return gpu_benchmark.extra_info


def slowed(request, run, size: int, extra_of) -> tuple:
    """run as it is, or with --slow-calls: followed by extra_of(smaller size).run on the calls --slow-share
    picks; and the facts of the slowdown for extra_info."""
    pct = request.config.getoption("--slow-calls")
    if not pct:
        return run, {}
    extra_size = max(16, round(size * pct / 100 / 16) * 16)  # sizes a GEMM's tiles take
    extra = extra_of(extra_size).run
    share = request.config.getoption("--slow-share")
    slow_bursts, calls = round(share * PERIOD), itertools.count()

    def call():
        run()
        if next(calls) // BURST % PERIOD < slow_bursts:
            extra()

    return call, {
        "slowdown": {
            "extra_work_pct": 100 * extra_size / size,
            "share_of_calls": slow_bursts / PERIOD,
            "burst_calls": BURST,
        }
    }


@pytest.mark.benchmark(group="copy")
@pytest.mark.parametrize("impl", ["triton", "cupy", "cupy-memcpy", "torch"], ids=lambda i: f"{i}-1GiB")
def test_copy(gpu_benchmark, request, impl):
    from gpubench.kernels import copy

    prepared = copy.prepare(impl)
    run = prepared.run
    if impl == "triton" and request.config.getoption("--slow-copy"):
        # a deliberate regression: 64-element blocks of one warp, for checking that a comparison catches it
        src, dst = copy.make_buffers(copy.SIZES["n"], impl)
        run = lambda: copy.triton_copy(src, dst, block=64, num_warps=1)  # noqa: E731
    run, facts = slowed(request, run, copy.SIZES["n"], lambda n: copy.prepare(impl, n=n))
    measure(gpu_benchmark, prepared, run, **facts)


@pytest.mark.benchmark(group="softmax")
@pytest.mark.parametrize("impl", ["triton-fused", "torch-naive", "cupy-naive", "torch"], ids=lambda i: f"{i}-8192x8192")
def test_softmax(gpu_benchmark, impl):
    from gpubench.kernels import softmax

    measure(gpu_benchmark, softmax.prepare(impl))


@pytest.mark.benchmark(group="gemm")
@pytest.mark.parametrize(
    "impl,dtype",
    [("triton", "bfloat16"), ("torch", "bfloat16"), ("cupy", "float16")],
    ids=["triton-bf16", "torch-bf16", "cupy-fp16"],
)
def test_gemm(gpu_benchmark, request, impl, dtype):
    from gpubench.kernels import gemm

    prepared = gemm.prepare(impl, dtype=dtype)
    run, facts = slowed(request, prepared.run, gemm.SIZES["m"], lambda m: gemm.prepare(impl, m=m, dtype=dtype))
    measure(gpu_benchmark, prepared, run, **facts)


@pytest.mark.benchmark(group="spin")
@pytest.mark.parametrize("impl", ["cupy", "triton"], ids=["cupy-1thread-1ms", "triton-1warp-1ms"])
def test_spin(gpu_benchmark, impl):
    from gpubench.kernels import spin

    info = measure(gpu_benchmark, spin.prepare(impl, "1thread", ns=1_000_000))
    # the spin asks for 1 ms of GPU time: the per-call statistic must say 1 ms, not the host's launch time
    assert info["kernel_ms"] == pytest.approx(1.0, rel=0.01)


def graph_us_per_call(run, calls: int = 1000, replays: int = 10) -> float:
    """GPU time per call of `calls` calls captured in one CUDA graph: the kernels back to back with no host in
    between, the reference a tiny kernel's time per call is held against."""
    import torch

    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):  # warm up off the default stream before capturing, as torch asks
        for _ in range(3):
            run()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for _ in range(calls):
            run()
    graph.replay()
    torch.cuda.synchronize()
    times = []
    for _ in range(replays):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        graph.replay()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) * 1e3 / calls)
    return statistics.median(times)


@pytest.mark.benchmark(group="tiny")
def test_tiny(gpu_benchmark):
    """A 2 us spin, launched through Triton's Python launcher, which takes the host longer than the GPU takes
    to run it: its time per call must be the GPU's, as a CUDA graph of the same calls runs them (the fixture
    times it from one), not the host's launch rate."""
    from gpubench.kernels import spin

    ns = 2000
    prepared = spin.prepare("triton", "1thread", ns=ns)
    prepared.check()
    # no work: a spin computes nothing and moves nothing; flush_l2=False, for calls back to back
    gpu_benchmark(prepared.run, flops=0.0, bytes=0.0, unit="fp32", bound="none", flush_l2=False)
    info = gpu_benchmark.extra_info
    graph_us, kernel_us, launch_us = graph_us_per_call(prepared.run), info["kernel_ms"] * 1e3, info["launch_us"]
    info.update(graph_us=graph_us, kernel_us=kernel_us, spin_ns=ns)
    assert kernel_us >= ns / 1e3  # no call spins for less than it was asked
    # shorter than two of its launches: the fixture chose a CUDA graph by itself (a Triton launch captures)
    assert info["cuda_graph_calls"] > 0, info.get("cuda_graph_refused")
    if launch_us > 2 * graph_us:  # the host launches slower than the GPU runs it: the case at stake
        assert kernel_us < (graph_us + launch_us) / 2, (
            f"{kernel_us:.2f} us a call: nearer the launch rate "
            f"({launch_us:.2f} us) than the GPU time in a CUDA graph ({graph_us:.2f} us)"
        )
