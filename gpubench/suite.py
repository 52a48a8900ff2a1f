"""The suite as data: each scenario is a small record, and the runner iterates over the records.

A scenario names its kernel, implementation, sizes and launch shape, says in one sentence what it
demonstrates, and knows how to build its Workload: the call to time, the correctness check, and the
work model (FLOPs and bytes per call) that turns GPU time into achieved FLOP/s and bytes/s.
"""

from __future__ import annotations

import fnmatch
from dataclasses import dataclass, field
from typing import Callable

import torch

from gpubench.kernels import copy, gemm, launch, softmax, spin
from gpubench.kernels.common import Work, cupy


@dataclass
class Workload:
    run: Callable[[], None] | None  # one call, launched asynchronously; None for the idle baseline
    check: Callable[[], object]  # raises CheckFailed when wrong; may return facts (error, SMs used)
    work: Work
    unit: str | None = None  # which datasheet/measured peak MFU divides by (bf16_tensor, fp16_tensor, fp32)
    dram_bound: bool = False  # MBU against DRAM bandwidth is meaningful
    calls_per_timing: int | None = None  # None: the runner sizes timed groups to ~20 ms
    info: dict = field(default_factory=dict)


@dataclass(frozen=True)
class Scenario:
    name: str
    family: str
    impl: str
    story: str
    launch: str
    sizes: str
    build: Callable[[], Workload]
    default: bool = True


# --- builders ---------------------------------------------------------------------------------------

COPY_N = 2**28  # float32 elements: 1 GiB each way, far larger than any L2
H2D_N = 2**26  # 256 MiB from pinned host memory
SPIN_NS = 10_000_000  # 10 ms per launch
SOFTMAX_M = SOFTMAX_N = 8192
GEMM_MNK = 8192


def _copy(impl: str) -> Callable[[], Workload]:
    def build():
        src, dst = copy.make_buffers(COPY_N, impl)
        fn = copy.IMPLS[impl]
        return Workload(run=lambda: fn(src, dst), check=lambda: copy.check(impl), work=copy.work(COPY_N),
                        unit="fp32", dram_bound=True)
    return build


def _h2d() -> Workload:
    host = torch.rand(H2D_N, generator=torch.Generator().manual_seed(0)).pin_memory()
    dst = torch.empty(H2D_N, device="cuda")
    return Workload(run=lambda: copy.h2d_copy(host, dst), check=copy.check_h2d, work=copy.work_h2d(H2D_N),
                    unit="fp32")


def _spin(shape: str, impl: str = "cupy") -> Callable[[], Workload]:
    def build():
        blocks, threads = spin.launch_shape(shape, spin.sm_count())
        if impl == "cupy":
            out = cupy().empty(2 * blocks, dtype=cupy().int64)
            run = lambda: spin.cupy_spin(SPIN_NS, blocks, threads, out)  # noqa: E731
        else:
            out = torch.empty(2 * blocks, dtype=torch.int64, device="cuda")
            run = lambda: spin.triton_spin(SPIN_NS, out, programs=blocks, num_warps=max(1, threads // 32))  # noqa: E731
        return Workload(run=run, check=lambda: spin.check(impl, shape), work=spin.work(), unit="fp32",
                        calls_per_timing=1, info={"blocks": blocks, "threads_per_block": threads})
    return build


def _softmax(impl: str) -> Callable[[], Workload]:
    def build():
        x = softmax.make_input(SOFTMAX_M, SOFTMAX_N)
        if impl == "cupy-naive":
            xc = cupy().from_dlpack(x)
            run = lambda: softmax.cupy_naive(xc)  # noqa: E731
        elif impl == "triton-fused":
            out = torch.empty_like(x)
            run = lambda: softmax.triton_fused(x, out)  # noqa: E731
        else:
            fn = softmax.IMPLS[impl]
            run = lambda: fn(x)  # noqa: E731
        return Workload(run=run, check=lambda: softmax.check(impl), work=softmax.work(impl, SOFTMAX_M, SOFTMAX_N),
                        unit="fp32", dram_bound=True)
    return build


def _gemm(impl: str, dtype) -> Callable[[], Workload]:
    def build():
        n = GEMM_MNK
        a, b = gemm.make_inputs(n, n, n, dtype)
        c = torch.empty(n, n, device="cuda", dtype=dtype)
        if impl == "cupy":
            cp = cupy()
            ac, bc, cc = cp.from_dlpack(a), cp.from_dlpack(b), cp.from_dlpack(c)
            run = lambda: gemm.cupy_matmul(ac, bc, out=cc)  # noqa: E731
        else:
            fn = gemm.IMPLS[impl]
            run = lambda: fn(a, b, c)  # noqa: E731
        unit = "bf16_tensor" if dtype == torch.bfloat16 else "fp16_tensor"
        return Workload(run=run, check=lambda: gemm.check(impl, dtype=dtype), work=gemm.work(n, n, n), unit=unit)
    return build


def _launch_bound() -> Workload:
    x = cupy().zeros(1, dtype=cupy().float32)
    return Workload(run=lambda: launch.cupy_bump(x), check=launch.check, work=launch.work(), unit="fp32",
                    dram_bound=True, calls_per_timing=2000)


def _idle() -> Workload:
    return Workload(run=None, check=lambda: None, work=Work(0.0, 0.0))


# --- the suite --------------------------------------------------------------------------------------

GIB = "1 GiB float32 read + 1 GiB written"
SCENARIOS: list[Scenario] = [
    Scenario("idle", "idle", "none", "Nothing runs: the baseline every other row is read against.",
             "no kernel", "-", _idle),
    Scenario("copy-triton", "copy", "triton", "A pure copy keeps GPU-Util at 100% while doing zero FLOPs.",
             "2^16 programs x 8 warps", GIB, _copy("triton")),
    Scenario("copy-cupy", "copy", "cupy", "The same copy as a CuPy RawKernel (float4, grid-stride): 100% busy, no math.",
             "16 blocks/SM x 512 threads", GIB, _copy("cupy")),
    Scenario("copy-cupy-memcpy", "copy", "cupy", "cudaMemcpyAsync device-to-device: the driver's own copy.",
             "driver-chosen", GIB, _copy("cupy-memcpy"), default=False),
    Scenario("copy-torch", "copy", "torch", "torch's copy_, the peer for both copies.",
             "torch-chosen", GIB, _copy("torch")),
    Scenario("h2d-copy", "copy", "torch", "Host-to-device from pinned memory: only the copy engine works, no SM runs.",
             "copy engine", "256 MiB pinned host -> device", _h2d),
    Scenario("spin-1thread", "spin", "cupy", "One thread spinning on one SM: GPU-Util reads 100%.",
             "1 block x 1 thread", "10 ms per launch", _spin("1thread")),
    Scenario("spin-1block", "spin", "cupy", "One full block (1024 threads) on one SM: still 100% util, one SM busy.",
             "1 block x 1024 threads", "10 ms per launch", _spin("1block")),
    Scenario("spin-1warp-per-sm", "spin", "cupy", "One warp on every SM: SM active reads ~100% with the SMs nearly empty.",
             "SMs blocks x 32 threads", "10 ms per launch", _spin("1warp-per-sm")),
    Scenario("spin-half-sms", "spin", "cupy", "Full blocks on half the SMs: SM active near 50%, util still 100%.",
             "SMs/2 blocks x 1024 threads", "10 ms per launch", _spin("half-sms")),
    Scenario("spin-triton", "spin", "triton", "The spin as a one-program Triton kernel (one warp).",
             "1 program x 1 warp", "10 ms per launch", _spin("1thread", "triton"), default=False),
    Scenario("softmax-naive-torch", "softmax", "torch", "Five eager kernels, intermediates through DRAM: 100% busy, slow.",
             "torch-chosen, 5 kernels", "8192 x 8192 float32", _softmax("torch-naive")),
    Scenario("softmax-naive-cupy", "softmax", "cupy", "The same five passes in CuPy.",
             "CuPy-chosen, 5 kernels", "8192 x 8192 float32", _softmax("cupy-naive")),
    Scenario("softmax-fused", "softmax", "triton", "One fused Triton kernel: the same util, several times faster.",
             "persistent, SMs x (2048/threads) programs", "8192 x 8192 float32", _softmax("triton-fused")),
    Scenario("softmax-torch", "softmax", "torch", "torch.softmax, the peer for the fused kernel.",
             "torch-chosen", "8192 x 8192 float32", _softmax("torch")),
    Scenario("gemm-triton", "gemm", "triton", "A bf16 GEMM: high tensor activity, and MFU that means something.",
             "autotuned tiles", "8192^3 bf16", _gemm("triton", torch.bfloat16)),
    Scenario("gemm-cupy", "gemm", "cupy", "CuPy matmul (cuBLAS) in fp16: the vendor library's GEMM.",
             "cuBLAS-chosen", "8192^3 fp16", _gemm("cupy", torch.float16)),
    Scenario("gemm-torch", "gemm", "torch", "torch.matmul in bf16, the peer for the Triton GEMM.",
             "cuBLAS-chosen", "8192^3 bf16", _gemm("torch", torch.bfloat16)),
    Scenario("launch-bound", "launch", "cupy", "Tiny one-element kernels back to back: the host's launch rate, not the GPU, sets the pace.",
             "1 block x 1 thread, 2000 per group", "1 element per launch", _launch_bound),
]
BY_NAME = {s.name: s for s in SCENARIOS}


class UnknownScenario(ValueError):
    pass


def select(patterns: list[str] | None) -> list[Scenario]:
    """Scenarios by name or glob (spin-*), in suite order; no patterns means the default suite."""
    if not patterns:
        return [s for s in SCENARIOS if s.default]
    chosen = set()
    for pattern in patterns:
        hits = [s.name for s in SCENARIOS if fnmatch.fnmatchcase(s.name, pattern)]
        if not hits:
            raise UnknownScenario(f"no scenario matches {pattern!r}; valid names: {', '.join(BY_NAME)}")
        chosen.update(hits)
    return [s for s in SCENARIOS if s.name in chosen]
