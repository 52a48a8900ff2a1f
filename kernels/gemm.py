"""gemm: C = A·B with bf16 or fp16 inputs and fp32 accumulation. A Triton kernel (autotuned over a few
tile shapes, grouped tile order for L2 reuse), CuPy's matmul (cuBLAS), and torch.matmul as the peer."""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from .common import Work, check_close, cupy, poison

# --- kernels ---------------------------------------------------------------------------------------


@triton.jit
def _matmul_kernel(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_ak, stride_bk, stride_bn,
                   stride_cm, stride_cn, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                   BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr):
    # Grouped order: programs that run together share rows of A and columns of B in L2.
    pid = tl.program_id(0)
    num_m = tl.cdiv(M, BLOCK_M)
    num_n = tl.cdiv(N, BLOCK_N)
    group = GROUP_M * num_n
    first_m = (pid // group) * GROUP_M
    size_m = min(num_m - first_m, GROUP_M)
    pid_m = first_m + ((pid % group) % size_m)
    pid_n = (pid % group) // size_m

    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)
    a_ptrs = a_ptr + offs_m[:, None].to(tl.int64) * stride_am + offs_k[None, :] * stride_ak
    b_ptrs = b_ptr + offs_k[:, None] * stride_bk + offs_n[None, :].to(tl.int64) * stride_bn
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_K)):
        k_left = K - k * BLOCK_K
        a = tl.load(a_ptrs, mask=(offs_m[:, None] < M) & (offs_k[None, :] < k_left), other=0.0)
        b = tl.load(b_ptrs, mask=(offs_k[:, None] < k_left) & (offs_n[None, :] < N), other=0.0)
        acc = tl.dot(a, b, acc)
        a_ptrs += BLOCK_K * stride_ak
        b_ptrs += BLOCK_K * stride_bk
    c_ptrs = c_ptr + offs_m[:, None].to(tl.int64) * stride_cm + offs_n[None, :] * stride_cn
    tl.store(c_ptrs, acc.to(c_ptr.dtype.element_ty), mask=(offs_m[:, None] < M) & (offs_n[None, :] < N))


@triton.jit
def _matmul_tma_kernel(a_desc, b_desc, c_desc, M, N, K, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                       BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr):
    # Tiles arrive through tensor descriptors (TMA on Hopper): the copy engine computes addresses and
    # masks the edges, which frees the warps' issue slots for the matrix instructions.
    pid = tl.program_id(0)
    num_m = tl.cdiv(M, BLOCK_M)
    num_n = tl.cdiv(N, BLOCK_N)
    group = GROUP_M * num_n
    first_m = (pid // group) * GROUP_M
    size_m = min(num_m - first_m, GROUP_M)
    pid_m = first_m + ((pid % group) % size_m)
    pid_n = (pid % group) // size_m
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_K)):
        a = a_desc.load([pid_m * BLOCK_M, k * BLOCK_K])
        b = b_desc.load([k * BLOCK_K, pid_n * BLOCK_N])
        acc = tl.dot(a, b, acc)
    c_desc.store([pid_m * BLOCK_M, pid_n * BLOCK_N], acc.to(c_desc.dtype))


def _set_block_shapes(nargs):
    bm, bn, bk = nargs["BLOCK_M"], nargs["BLOCK_N"], nargs["BLOCK_K"]
    nargs["a_desc"].block_shape = [bm, bk]
    nargs["b_desc"].block_shape = [bk, bn]
    nargs["c_desc"].block_shape = [bm, bn]


# A few tile shapes that suit Hopper and Ampere; autotuning picks per (M, N, K) once.
CONFIGS = [
    triton.Config({"BLOCK_M": 128, "BLOCK_N": 256, "BLOCK_K": 64, "GROUP_M": 8}, num_stages=3, num_warps=8),
    triton.Config({"BLOCK_M": 256, "BLOCK_N": 128, "BLOCK_K": 64, "GROUP_M": 8}, num_stages=3, num_warps=8),
    triton.Config({"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 64, "GROUP_M": 8}, num_stages=4, num_warps=4),
]
_matmul_autotuned = triton.autotune(configs=CONFIGS, key=["M", "N", "K"])(_matmul_kernel)
TMA_CONFIGS = [triton.Config(dict(c.kwargs), num_stages=c.num_stages, num_warps=c.num_warps,
                             pre_hook=_set_block_shapes) for c in CONFIGS] + [
    triton.Config({"BLOCK_M": 128, "BLOCK_N": 256, "BLOCK_K": 64, "GROUP_M": 8}, num_stages=4, num_warps=8,
                  pre_hook=_set_block_shapes),
]
_matmul_tma_autotuned = triton.autotune(configs=TMA_CONFIGS, key=["M", "N", "K"])(_matmul_tma_kernel)


def _tma_ok(*tensors) -> bool:
    """TMA needs Hopper or newer and 16-byte aligned rows."""
    t = tensors[0]
    if not t.is_cuda or torch.cuda.get_device_capability(t.device)[0] < 9:
        return False
    return all(x.stride(1) == 1 and (x.stride(0) * x.element_size()) % 16 == 0 and x.data_ptr() % 16 == 0
               for x in tensors)


# --- host wrappers ---------------------------------------------------------------------------------

def _check_shapes(a, b):
    if a.ndim != 2 or b.ndim != 2 or a.shape[1] != b.shape[0]:
        raise ValueError(f"gemm needs (M×K)·(K×N), got {tuple(a.shape)} and {tuple(b.shape)}")
    if a.dtype != b.dtype:
        raise ValueError(f"gemm needs one input dtype, got {a.dtype} and {b.dtype}")


def triton_matmul(a: torch.Tensor, b: torch.Tensor, out: torch.Tensor | None = None,
                  config: dict | None = None, tma: bool = True) -> torch.Tensor:
    """config (BLOCK_M/N/K, GROUP_M, num_warps, num_stages) skips autotuning: small tests use it.
    On Hopper with 16-byte aligned rows, tiles load through TMA descriptors; otherwise through pointers."""
    _check_shapes(a, b)
    (m, k), n = a.shape, b.shape[1]
    out = torch.empty((m, n), device=a.device, dtype=a.dtype) if out is None else out

    def grid(meta):
        return (triton.cdiv(m, meta["BLOCK_M"]) * triton.cdiv(n, meta["BLOCK_N"]),)

    if config is None and tma and _tma_ok(a, b, out):
        from triton.tools.tensor_descriptor import TensorDescriptor

        dummy = [1, 1]  # the autotuner's pre_hook sets each config's block shapes
        descs = [TensorDescriptor.from_tensor(t, dummy) for t in (a, b, out)]
        _matmul_tma_autotuned[grid](*descs, m, n, k)
        return out
    args = (a, b, out, m, n, k, a.stride(0), a.stride(1), b.stride(0), b.stride(1), out.stride(0), out.stride(1))
    if config is None:
        _matmul_autotuned[grid](*args)
    else:
        _matmul_kernel[grid](*args, **config)
    return out


def cupy_matmul(a, b, out=None):
    return cupy().matmul(a, b, out=out)


def torch_matmul(a: torch.Tensor, b: torch.Tensor, out: torch.Tensor | None = None) -> torch.Tensor:
    return torch.matmul(a, b, out=out)


IMPLS = {"triton": triton_matmul, "cupy": cupy_matmul, "torch": torch_matmul}


# --- correctness -----------------------------------------------------------------------------------

def make_inputs(m: int, n: int, k: int, dtype=torch.bfloat16, device="cuda", seed: int = 0):
    g = torch.Generator(device=device).manual_seed(seed)
    a = torch.randn(m, k, device=device, generator=g).to(dtype)
    b = torch.randn(k, n, device=device, generator=g).to(dtype)
    return a, b


def reference(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return a.to(torch.float64) @ b.to(torch.float64)


def check(impl: str, m: int = 1823, n: int = 781, k: int = 517, dtype=torch.bfloat16, device="cuda",
          **kwargs) -> float:
    a, b = make_inputs(m, n, k, dtype, device)
    out = torch.empty((m, n), device=device, dtype=dtype)
    poison(out)
    if impl == "cupy":
        cp = cupy()
        cupy_matmul(cp.from_dlpack(a), cp.from_dlpack(b), out=cp.from_dlpack(out))
    else:
        IMPLS[impl](a, b, out, **kwargs)
    return check_close(f"gemm[{impl}]", out, reference(a, b))


# --- work model ------------------------------------------------------------------------------------

def work(m: int, n: int, k: int, itemsize: int = 2) -> Work:
    # one multiply and one add per (m, n, k); A, B read once and C written once at best
    return Work(flops=2.0 * m * n * k, bytes=float((m * k + k * n + m * n) * itemsize))
