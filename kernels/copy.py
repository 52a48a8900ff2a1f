"""copy: pure memory traffic, zero FLOPs. Triton, CuPy (a RawKernel and cudaMemcpyAsync), torch, and
host-to-device from pinned memory (the copy engine: no SM does any work)."""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from .common import Work, check_equal, cupy, poison, raw_kernel


# --- kernels ---------------------------------------------------------------------------------------

@triton.jit
def _copy_kernel(src, dst, n, BLOCK: tl.constexpr):
    # 64-bit offsets: buffers of a few GiB overflow int32 element indices.
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(dst + offs, tl.load(src + offs, mask=mask), mask=mask)


CUDA_COPY = r"""
extern "C" __global__ void copy_f32(const float* __restrict__ src, float* __restrict__ dst, long long n) {
    // 16-byte loads and stores for the bulk, then the tail element by element; grid-stride.
    long long n4 = n / 4;
    long long tid = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    long long stride = (long long)gridDim.x * blockDim.x;
    const float4* s4 = reinterpret_cast<const float4*>(src);
    float4* d4 = reinterpret_cast<float4*>(dst);
    for (long long i = tid; i < n4; i += stride) d4[i] = s4[i];
    for (long long i = n4 * 4 + tid; i < n; i += stride) dst[i] = src[i];
}
"""


# --- host wrappers ---------------------------------------------------------------------------------

def _same(src, dst):
    if src.shape != dst.shape or src.dtype != dst.dtype:
        raise ValueError(f"copy needs equal shapes and dtypes, got {src.shape}/{src.dtype} and {dst.shape}/{dst.dtype}")


def triton_copy(src: torch.Tensor, dst: torch.Tensor, block: int = 1024, num_warps: int = 8) -> None:
    _same(src, dst)
    if not (src.is_contiguous() and dst.is_contiguous()):
        raise ValueError("triton_copy needs contiguous tensors")
    n = src.numel()
    _copy_kernel[(triton.cdiv(n, block),)](src, dst, n, BLOCK=block, num_warps=num_warps)


def cupy_copy(src, dst, threads: int = 512, blocks_per_sm: int = 16) -> None:
    """Grid-stride float4 copy of float32 CuPy arrays."""
    cp = cupy()
    _same(src, dst)
    if src.dtype != cp.float32:
        raise ValueError("cupy_copy copies float32 arrays")
    n = src.size
    sms = cp.cuda.Device().attributes["MultiProcessorCount"]
    blocks = max(1, min(sms * blocks_per_sm, (n // 4 + threads - 1) // threads))
    raw_kernel(CUDA_COPY, "copy_f32")((blocks,), (threads,), (src, dst, cp.int64(n)))


def cupy_memcpy(src, dst) -> None:
    """cudaMemcpyAsync device-to-device on the current stream."""
    cp = cupy()
    _same(src, dst)
    cp.cuda.runtime.memcpyAsync(dst.data.ptr, src.data.ptr, src.nbytes,
                                cp.cuda.runtime.memcpyDeviceToDevice, cp.cuda.get_current_stream().ptr)


def torch_copy(src: torch.Tensor, dst: torch.Tensor) -> None:
    dst.copy_(src)


def h2d_copy(host: torch.Tensor, dst: torch.Tensor) -> None:
    """Pinned host memory to device, asynchronous: the copy engine moves it, no SM runs."""
    _same(host, dst)
    dst.copy_(host, non_blocking=True)


IMPLS = {"triton": triton_copy, "cupy": cupy_copy, "cupy-memcpy": cupy_memcpy, "torch": torch_copy}


# --- correctness -----------------------------------------------------------------------------------

def make_buffers(n: int, impl: str, device="cuda", seed: int = 0):
    """A seeded random source and a poisoned destination of n float32 values, in the impl's framework."""
    src = torch.rand(n, device=device, generator=torch.Generator(device=device).manual_seed(seed))
    dst = torch.empty_like(src)
    poison(dst)
    if impl.startswith("cupy"):
        cp = cupy()
        return cp.from_dlpack(src), cp.from_dlpack(dst)
    return src, dst


def check(impl: str, n: int = 1823 * 781, device="cuda", **kwargs) -> None:
    src, dst = make_buffers(n, impl, device)
    IMPLS[impl](src, dst, **kwargs)
    check_equal(f"copy[{impl}]", dst, src)


def check_h2d(n: int = 1823 * 781) -> None:
    host = torch.rand(n, generator=torch.Generator().manual_seed(0)).pin_memory()
    dst = torch.empty(n, device="cuda")
    poison(dst)
    h2d_copy(host, dst)
    torch.cuda.synchronize()
    check_equal("h2d-copy", dst.cpu(), host)


# --- work model ------------------------------------------------------------------------------------

def work(n: int, itemsize: int = 4) -> Work:
    # read n, write n; no arithmetic
    return Work(flops=0.0, bytes=2.0 * n * itemsize)


def work_h2d(n: int, itemsize: int = 4) -> Work:
    # n elements cross the host link once; device memory is written once
    return Work(flops=0.0, bytes=float(n * itemsize))
