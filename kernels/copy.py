"""copy: pure memory traffic, zero FLOPs. Triton, a CuPy RawKernel, cudaMemcpyAsync through CuPy, and
torch's copy_ as the peer."""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from .common import (
    Prepared,
    Work,
    check_equal,
    count,
    cupy,
    generator,
    poison,
    powers_of_two,
    raw_kernel,
    tuned,
)

IMPLS = ("triton", "cupy", "cupy-memcpy", "torch")
SIZES = {"n": 2**28}  # float32 elements: 1 GiB each way, far larger than any L2
STORY = [
    "{said} and SM activity {sm_active_pct:.1f}%, while the kernel did no arithmetic at all (0 FLOP/s).",
    "It moved {gbps:.0f} GB/s of useful bytes (read + written), MBU {mbu_pct:.0f}% of the datasheet DRAM "
    "bandwidth and {mbu_measured_pct:.0f}% of the copy peak measured at the start.",
    "Busy is true; useful arithmetic is zero.",
]

# Measured with tools/tune/kernels.py (results/tune-*.csv): a 1024-element, 8-warp Triton copy runs
# at torch's speed on both GPUs; CuPy's one-float4-per-thread copy wants 1024 threads on an H100 and
# 256 on an H200 (1024 loses 3.5% there).
CONFIG = {
    "NVIDIA H100 80GB HBM3": {"triton_block": 1024, "triton_warps": 8, "cupy_threads": 1024},
    "NVIDIA H200": {"triton_block": 1024, "triton_warps": 8, "cupy_threads": 256},
    "*": {"triton_block": 1024, "triton_warps": 8, "cupy_threads": 256},
}


# --- kernels ---------------------------------------------------------------------------------------


@triton.jit
def _copy_kernel(src, dst, n, BLOCK: tl.constexpr):
    # 64-bit offsets: buffers of a few GiB overflow int32 element indices.
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(dst + offs, tl.load(src + offs, mask=mask), mask=mask)


CUDA_COPY = r"""
extern "C" __global__ void copy_f32(const float* __restrict__ src, float* __restrict__ dst, long long n) {
    // One 16-byte load and store per thread over an exact grid: on an H100 and an H200 this beat a
    // grid-stride loop by 5-6%. The thread just past the last float4 copies the 0-3 tail elements.
    long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    long long n4 = n / 4;
    if (i < n4) reinterpret_cast<float4*>(dst)[i] = reinterpret_cast<const float4*>(src)[i];
    else if (i == n4) for (long long j = n4 * 4; j < n; ++j) dst[j] = src[j];
}
"""


# --- host wrappers ---------------------------------------------------------------------------------


def _same(src, dst):
    if src.shape != dst.shape or src.dtype != dst.dtype:
        raise ValueError(f"copy needs equal shapes and dtypes, got {src.shape}/{src.dtype} and {dst.shape}/{dst.dtype}")


def triton_copy(src: torch.Tensor, dst: torch.Tensor, block: int | None = None, num_warps: int | None = None) -> str:
    """Copy; returns the launch as launched."""
    _same(src, dst)
    if not (src.is_contiguous() and dst.is_contiguous()):
        raise ValueError("triton_copy needs contiguous tensors")
    block = block or tuned(CONFIG, "triton_block", src.device)
    num_warps = num_warps or tuned(CONFIG, "triton_warps", src.device)
    n = src.numel()
    grid = triton.cdiv(n, block)
    _copy_kernel[(grid,)](src, dst, n, BLOCK=block, num_warps=num_warps)
    return f"{count(grid, 'program')} x {count(num_warps, 'warp')}, {block} elements each"


def cupy_copy(src, dst, threads: int | None = None) -> str:
    """float4 copy of float32 CuPy arrays (16-byte aligned), one float4 per thread."""
    cp = cupy()
    _same(src, dst)
    if src.dtype != cp.float32 or src.data.ptr % 16 or dst.data.ptr % 16:
        raise ValueError("cupy_copy copies 16-byte aligned float32 arrays")
    threads = threads or tuned(CONFIG, "cupy_threads")
    blocks = (src.size // 4 + 1 + threads - 1) // threads
    raw_kernel(CUDA_COPY, "copy_f32")((blocks,), (threads,), (src, dst, cp.int64(src.size)))
    return f"{count(blocks, 'block')} x {count(threads, 'thread')}, one float4 each"


def cupy_memcpy(src, dst) -> str:
    """cudaMemcpyAsync device-to-device on the current stream."""
    cp = cupy()
    _same(src, dst)
    cp.cuda.runtime.memcpyAsync(
        dst.data.ptr, src.data.ptr, src.nbytes, cp.cuda.runtime.memcpyDeviceToDevice, cp.cuda.get_current_stream().ptr
    )
    return "cudaMemcpyAsync, driver-chosen"


def torch_copy(src: torch.Tensor, dst: torch.Tensor) -> str:
    dst.copy_(src)
    return "torch-chosen"


WRAPPERS = {"triton": triton_copy, "cupy": cupy_copy, "cupy-memcpy": cupy_memcpy, "torch": torch_copy}


# --- the contract: buffers, check, work model -------------------------------------------------------


def make_buffers(n: int, impl: str, device="cuda", seed: int = 0):
    """A seeded random source and a poisoned destination of n float32 values, in the impl's framework."""
    src = torch.rand(n, device=device, generator=generator(device, seed))
    dst = torch.empty_like(src)
    poison(dst)
    if impl.startswith("cupy"):
        cp = cupy()
        return cp.from_dlpack(src), cp.from_dlpack(dst)
    return src, dst


def work(n: int, itemsize: int = 4) -> Work:
    # read n, write n; no arithmetic; a copy moves exactly its useful bytes
    return Work(flops=0.0, bytes=2.0 * n * itemsize, traffic=2.0 * n * itemsize)


def prepare(impl: str, n: int = SIZES["n"], device="cuda", seed: int = 0) -> Prepared:
    if impl not in WRAPPERS:
        raise ValueError(f"unknown copy implementation {impl!r}; choose from {', '.join(IMPLS)}")
    src, dst = make_buffers(n, impl, device, seed)
    fn = WRAPPERS[impl]

    def check():
        poison(dst)
        fn(src, dst)
        return check_equal(f"copy[{impl}]", dst, src)

    launch = fn(src, dst)
    return Prepared(
        run=lambda: fn(src, dst),
        check=check,
        work=work(n),
        unit="fp32",
        bound="dram",
        launch=launch,
        sizes={"n": powers_of_two(n), "dtype": "float32"},
    )
