"""gemm: C = A·B with bf16 or fp16 inputs and fp32 accumulation. A Triton kernel (persistent, tiles through
TMA descriptors on Hopper; pointer loads elsewhere), CuPy's matmul (cuBLAS), and torch.matmul as the peer."""

from __future__ import annotations

import inspect

import torch
import triton
import triton.language as tl

from gpubench.truth.peaks import MATMUL_UNITS

from .common import (
    DTYPES,
    Prepared,
    Work,
    check_close,
    count,
    cupy,
    generator,
    poison,
    sm_count,
    tuned_row,
)

IMPLS = ("triton", "cupy", "torch")
SIZES = {"m": 8192, "n": 8192, "k": 8192, "dtype": "bfloat16"}
STORY = [
    "{said}, SM activity {sm_active_pct:.0f}% and tensor pipes active {tensor_active_pct:.0f}%.",
    "It achieved {tflops:.0f} TFLOP/s: MFU {mfu_pct:.0f}% of the datasheet dense {dtype} peak and "
    "{mfu_measured_pct:.0f}% of the {dtype} matmul peak measured, sustained, at the start, with the SM clock "
    "at {sm_clock_mhz:.0f} MHz and {power_w_energy:.0f} W.",
    "Here busy and working agree, and MFU says how far from the peak.",
]

# Tile shapes measured with tools/tune/kernels.py (results/tune-*.csv), bf16 8192^3, interleaved
# with torch.matmul at sustained clocks: a persistent TMA kernel with 128x256x64 tiles, 3 stages and
# 8 warps ran at 1.04x torch.matmul on an H100 and 1.00x on an H200. Other GPUs autotune.
PERSISTENT = {"BLOCK_M": 128, "BLOCK_N": 256, "BLOCK_K": 64, "GROUP_M": 8, "num_stages": 3, "num_warps": 8}
CONFIG = {"NVIDIA H100 80GB HBM3": PERSISTENT, "NVIDIA H200": PERSISTENT, "*": None}

# --- kernels ---------------------------------------------------------------------------------------


@triton.jit
def _tile(tile_id, num_m, num_n, GROUP_M: tl.constexpr):
    # Grouped order: tiles that run together share rows of A and columns of B in L2.
    group = GROUP_M * num_n
    first_m = (tile_id // group) * GROUP_M
    size_m = min(num_m - first_m, GROUP_M)
    return first_m + ((tile_id % group) % size_m), (tile_id % group) // size_m


@triton.jit
def _matmul_kernel(
    a_ptr,
    b_ptr,
    c_ptr,
    M,
    N,
    K,
    stride_am,
    stride_ak,
    stride_bk,
    stride_bn,
    stride_cm,
    stride_cn,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
    GROUP_M: tl.constexpr,
):
    pid_m, pid_n = _tile(tl.program_id(0), tl.cdiv(M, BLOCK_M), tl.cdiv(N, BLOCK_N), GROUP_M)
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
def _matmul_tma_kernel(
    a_desc,
    b_desc,
    c_desc,
    M,
    N,
    K,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
    GROUP_M: tl.constexpr,
    NUM_PROGRAMS: tl.constexpr,
):
    # Persistent: NUM_PROGRAMS programs (one per SM) walk the tiles, so a program's next tile starts
    # while the SM is still warm. Tiles arrive through tensor descriptors (TMA on Hopper): the copy
    # engine computes addresses and masks the edges, freeing the warps for the matrix instructions.
    num_m, num_n = tl.cdiv(M, BLOCK_M), tl.cdiv(N, BLOCK_N)
    for tile_id in tl.range(tl.program_id(0), num_m * num_n, NUM_PROGRAMS):
        pid_m, pid_n = _tile(tile_id, num_m, num_n, GROUP_M)
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        for k in range(0, tl.cdiv(K, BLOCK_K)):
            acc = tl.dot(a_desc.load([pid_m * BLOCK_M, k * BLOCK_K]), b_desc.load([k * BLOCK_K, pid_n * BLOCK_N]), acc)
        c_desc.store([pid_m * BLOCK_M, pid_n * BLOCK_N], acc.to(c_desc.dtype))


def _set_block_shapes(nargs):
    bm, bn, bk = nargs["BLOCK_M"], nargs["BLOCK_N"], nargs["BLOCK_K"]
    nargs["a_desc"].block_shape = [bm, bk]
    nargs["b_desc"].block_shape = [bk, bn]
    nargs["c_desc"].block_shape = [bm, bn]


# Candidates for GPUs not in CONFIG; autotuning picks per (M, N, K) once and caches the choice on disk.
TILES = [(128, 256, 64, 3, 8), (256, 128, 64, 3, 8), (128, 128, 64, 4, 4)]
_AUTOTUNE_CACHE = {"cache_results": True} if "cache_results" in inspect.signature(triton.autotune).parameters else {}
_matmul_autotuned = triton.autotune(
    configs=[
        triton.Config({"BLOCK_M": m, "BLOCK_N": n, "BLOCK_K": k, "GROUP_M": 8}, num_stages=s, num_warps=w)
        for m, n, k, s, w in TILES
    ],
    key=["M", "N", "K"],
    **_AUTOTUNE_CACHE,
)(_matmul_kernel)
_matmul_tma_autotuned = triton.autotune(
    configs=[
        triton.Config(
            {"BLOCK_M": m, "BLOCK_N": n, "BLOCK_K": k, "GROUP_M": 8},
            num_stages=s,
            num_warps=w,
            pre_hook=_set_block_shapes,
        )
        for m, n, k, s, w in TILES
    ],
    key=["M", "N", "K"],
    **_AUTOTUNE_CACHE,
)(_matmul_tma_kernel)


def _tma_ok(*tensors) -> bool:
    """TMA needs Hopper or newer and 16-byte aligned rows."""
    t = tensors[0]
    if not t.is_cuda or torch.cuda.get_device_capability(t.device)[0] < 9:
        return False
    return all(
        x.stride(1) == 1 and (x.stride(0) * x.element_size()) % 16 == 0 and x.data_ptr() % 16 == 0 for x in tensors
    )


# --- host wrappers ---------------------------------------------------------------------------------


def _check_shapes(a, b):
    if a.ndim != 2 or b.ndim != 2 or a.shape[1] != b.shape[0]:
        raise ValueError(f"gemm needs (M×K)·(K×N), got {tuple(a.shape)} and {tuple(b.shape)}")
    if a.dtype != b.dtype:
        raise ValueError(f"gemm needs one input dtype, got {a.dtype} and {b.dtype}")


def _describe(cfg: dict, programs) -> str:
    return (
        f"{programs} x {count(cfg['num_warps'], 'warp')}, {cfg['BLOCK_M']}x{cfg['BLOCK_N']}x{cfg['BLOCK_K']} "
        f"tiles, {count(cfg['num_stages'], 'stage')}"
    )


def triton_matmul(
    a: torch.Tensor, b: torch.Tensor, out: torch.Tensor | None = None, config: dict | None = None, tma: bool = True
) -> str:
    """C = A·B into out; returns the launch as launched.

    config (BLOCK_M/N/K, GROUP_M, num_warps, num_stages) fixes the tiles: small tests use it, and the
    tuned table gives it on the GPUs it was measured on; otherwise autotuning chooses.
    On Hopper with 16-byte aligned rows, tiles load through TMA descriptors; otherwise through pointers.
    """
    _check_shapes(a, b)
    (m, k), n = a.shape, b.shape[1]
    out = torch.empty((m, n), device=a.device, dtype=a.dtype) if out is None else out
    if config is None and a.is_cuda:
        config = tuned_row(CONFIG, a.device)
    tiles = lambda meta: triton.cdiv(m, meta["BLOCK_M"]) * triton.cdiv(n, meta["BLOCK_N"])  # noqa: E731
    if tma and _tma_ok(a, b, out):
        from triton.tools.tensor_descriptor import TensorDescriptor

        programs = sm_count(a.device)
        if config is None:
            descs = [TensorDescriptor.from_tensor(t, [1, 1]) for t in (a, b, out)]  # the pre_hook sets shapes
            _matmul_tma_autotuned[lambda meta: (min(programs, tiles(meta)),)](*descs, m, n, k, NUM_PROGRAMS=programs)
            best = _matmul_tma_autotuned.best_config
            return "autotuned: " + _describe(
                {**best.kwargs, "num_warps": best.num_warps, "num_stages": best.num_stages},
                f"{programs} persistent programs",
            )
        bm, bn, bk = config["BLOCK_M"], config["BLOCK_N"], config["BLOCK_K"]
        descs = [
            TensorDescriptor.from_tensor(a, [bm, bk]),
            TensorDescriptor.from_tensor(b, [bk, bn]),
            TensorDescriptor.from_tensor(out, [bm, bn]),
        ]
        grid = min(programs, tiles(config))
        _matmul_tma_kernel[(grid,)](*descs, m, n, k, NUM_PROGRAMS=grid, **config)
        return _describe(config, f"{count(grid, 'persistent program')}")
    args = (a, b, out, m, n, k, a.stride(0), a.stride(1), b.stride(0), b.stride(1), out.stride(0), out.stride(1))
    if config is None:
        _matmul_autotuned[lambda meta: (tiles(meta),)](*args)
        best = _matmul_autotuned.best_config
        return "autotuned: " + _describe(
            {**best.kwargs, "num_warps": best.num_warps, "num_stages": best.num_stages}, "one program per tile"
        )
    _matmul_kernel[(tiles(config),)](*args, **config)
    return _describe({"num_stages": 1, "num_warps": 4, **config}, count(tiles(config), "program"))


def cupy_matmul(a, b, out=None):
    return cupy().matmul(a, b, out=out)


def torch_matmul(a: torch.Tensor, b: torch.Tensor, out: torch.Tensor | None = None) -> torch.Tensor:
    return torch.matmul(a, b, out=out)


# --- the contract: inputs, check, work model --------------------------------------------------------


def make_inputs(m: int, n: int, k: int, dtype=torch.bfloat16, device="cuda", seed: int = 0):
    g = generator(device, seed)
    a = torch.randn(m, k, device=device, generator=g).to(dtype)
    b = torch.randn(k, n, device=device, generator=g).to(dtype)
    return a, b


def reference(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return a.to(torch.float64) @ b.to(torch.float64)


def work(m: int, n: int, k: int, itemsize: int = 2) -> Work:
    # one multiply and one add per (m, n, k). Bytes: A and B read once and C written once, the least any
    # GEMM moves (the minimum traffic); tiles re-read from DRAM are not counted.
    return Work(flops=2.0 * m * n * k, bytes=float((m * k + k * n + m * n) * itemsize))


def prepare(
    impl: str,
    m: int = SIZES["m"],
    n: int = SIZES["n"],
    k: int = SIZES["k"],
    dtype: str = SIZES["dtype"],
    device="cuda",
    seed: int = 0,
) -> Prepared:
    if dtype not in MATMUL_UNITS:
        raise ValueError(f"gemm runs in {' or '.join(MATMUL_UNITS)}, not {dtype}")
    tdtype = DTYPES[dtype]
    a, b = make_inputs(m, n, k, tdtype, device, seed)
    c = torch.empty(m, n, device=device, dtype=tdtype)
    if impl == "cupy":
        cp = cupy()
        ac, bc, cc = cp.from_dlpack(a), cp.from_dlpack(b), cp.from_dlpack(c)
        run = lambda: cupy_matmul(ac, bc, out=cc)  # noqa: E731
        launch = "cuBLAS-chosen"
    elif impl == "triton":
        run = lambda: triton_matmul(a, b, c)  # noqa: E731
        launch = run()
    elif impl == "torch":
        run = lambda: torch_matmul(a, b, c)  # noqa: E731
        launch = "cuBLAS-chosen"
    else:
        raise ValueError(f"unknown gemm implementation {impl!r}; choose from {', '.join(IMPLS)}")

    def check():
        poison(c)
        run()
        return check_close(f"gemm[{impl}]", c, reference(a, b))

    unit = MATMUL_UNITS[dtype]
    return Prepared(
        run=run,
        check=check,
        work=work(m, n, k, tdtype.itemsize),
        unit=unit,
        bound="compute",
        launch=launch,
        sizes={"m": m, "n": n, "k": k, "dtype": dtype},
    )
