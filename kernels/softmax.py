"""softmax, row-wise over an M×N float32 matrix: the naive multi-kernel sequence (torch eager and CuPy)
against one fused Triton kernel that reads each row once and writes it once, with torch.softmax as the
peer.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from .common import Prepared, Work, check_close, count, cupy, generator, poison, tuned

IMPLS = ("triton-fused", "torch-naive", "cupy-naive", "torch")
SIZES = {"m": 8192, "n": 8192}
STORY = [
    "{said}. One call took {kernel_ms:.3f} ms for {useful_gb:.2f} GB of useful bytes (each input read once, "
    "each output written once): {gbps:.0f} GB/s, MBU {mbu_pct:.0f}%.",
    "It moved {traffic_gb:.2f} GB through DRAM to do so.",
    "That is {speedup_vs_baseline:.1f}x the speed of {baseline}, at the same utilization.",
    "Its FLOPs count 5 per element (max, subtract, exp, sum, divide; exp as one) against an FP32 peak that "
    "counts a fused multiply-add as two: MFU {mfu_pct:.2g}%.",
]

# Warps per program by row length (the next power of two of N), measured with
# tools/tune/kernels.py (results/tune-*.csv): one row per program, no persistent loop, beat a
# persistent kernel with two or four programs per SM by 5-30% on both GPUs.
CONFIG = {
    "NVIDIA H100 80GB HBM3": {4096: 4, 8192: 32, 16384: 16},
    "NVIDIA H200": {4096: 16, 8192: 16, 16384: 32},
    "*": {},
}

# --- kernels ---------------------------------------------------------------------------------------


@triton.jit
def _softmax_kernel(out_ptr, in_ptr, in_stride, out_stride, n_cols, BLOCK: tl.constexpr):
    # One row per program: the row stays in registers between the reduction and the write, so the
    # input is read once and the output written once.
    row = tl.program_id(0).to(tl.int64)
    offs = tl.arange(0, BLOCK)
    mask = offs < n_cols
    x = tl.load(in_ptr + row * in_stride + offs, mask=mask, other=-float("inf"))
    z = x - tl.max(x, axis=0)
    num = tl.exp(z)
    tl.store(out_ptr + row * out_stride + offs, num / tl.sum(num, axis=0), mask=mask)


# --- host wrappers ---------------------------------------------------------------------------------


def _check_input(x):
    if x.ndim != 2:
        raise ValueError(f"softmax takes an M×N matrix, got shape {tuple(x.shape)}")


def warps_for(block: int, device=None) -> int:
    """The tuned warps for this GPU and row length; elsewhere 16 elements per thread, 4 to 16 warps."""
    chosen = tuned(CONFIG, block, device)
    return chosen or max(4, min(16, block // (32 * 16)))


def triton_fused(x: torch.Tensor, out: torch.Tensor | None = None, num_warps: int | None = None) -> torch.Tensor:
    _check_input(x)
    if x.stride(1) != 1:
        raise ValueError("triton_fused needs rows that are contiguous")
    m, n = x.shape
    out = torch.empty_like(x) if out is None else out
    block = triton.next_power_of_2(n)
    _softmax_kernel[(m,)](
        out, x, x.stride(0), out.stride(0), n, BLOCK=block, num_warps=num_warps or warps_for(block, x.device)
    )
    return out


def torch_naive(x: torch.Tensor) -> torch.Tensor:
    """The eager sequence, one kernel per line, each reading and writing device memory."""
    _check_input(x)
    x_max = x.max(dim=1)[0]  # read MN, write M
    z = x - x_max[:, None]  # read MN + M, write MN
    num = torch.exp(z)  # read MN, write MN
    den = num.sum(dim=1)  # read MN, write M
    return num / den[:, None]  # read MN + M, write MN


def cupy_naive(x):
    """The same five passes in CuPy."""
    cp = cupy()
    _check_input(x)
    x_max = x.max(axis=1, keepdims=True)  # read MN, write M
    z = x - x_max  # read MN + M, write MN
    num = cp.exp(z)  # read MN, write MN
    den = num.sum(axis=1, keepdims=True)  # read MN, write M
    return num / den  # read MN + M, write MN


def torch_softmax(x: torch.Tensor) -> torch.Tensor:
    return torch.softmax(x, dim=1)


# --- the contract: input, check, work model ---------------------------------------------------------


def make_input(m: int, n: int, device="cuda", seed: int = 0) -> torch.Tensor:
    # spread of a few units, so exp() neither underflows everything nor overflows
    return 4 * torch.randn(m, n, device=device, generator=generator(device, seed))


def reference(x: torch.Tensor) -> torch.Tensor:
    return torch.softmax(x.to(torch.float64), dim=1)


def flops(m: int, n: int) -> float:
    # per element: max, subtract, exp, sum, divide (exp counted as one operation)
    return 5.0 * m * n


def work(impl: str, m: int, n: int, itemsize: int = 4) -> Work:
    useful = 2.0 * m * n * itemsize  # read MN, write MN: each row read once and written once
    if impl in ("cupy-naive", "torch-naive"):
        # read 5MN + 2M, write 3MN + 2M: the intermediates make the round trip through DRAM
        traffic = float(((5 * m * n + 2 * m) + (3 * m * n + 2 * m)) * itemsize)
    elif impl == "triton-fused":
        traffic = useful
    else:
        traffic = None  # torch.softmax's own passes are not ours to count
    return Work(flops=flops(m, n), bytes=useful, traffic=traffic)


def prepare(impl: str, m: int = SIZES["m"], n: int = SIZES["n"], device="cuda", seed: int = 0) -> Prepared:
    x = make_input(m, n, device, seed)
    if impl == "triton-fused":
        out = torch.empty_like(x)
        block = triton.next_power_of_2(n)
        warps = warps_for(block, x.device)
        run = lambda: triton_fused(x, out, warps)  # noqa: E731
        launch = f"{count(m, 'program')} x {count(warps, 'warp')}, one row each"

        def result():
            poison(out)
            run()
            return out
    elif impl == "cupy-naive":
        xc = cupy().from_dlpack(x)
        run = result = lambda: cupy_naive(xc)  # noqa: E731
        launch = "CuPy-chosen, 5 kernels"
    elif impl in ("torch-naive", "torch"):
        fn = torch_naive if impl == "torch-naive" else torch_softmax
        run = result = lambda: fn(x)  # noqa: E731
        launch = "torch-chosen, 5 kernels" if impl == "torch-naive" else "torch-chosen"
    else:
        raise ValueError(f"unknown softmax implementation {impl!r}; choose from {', '.join(IMPLS)}")
    return Prepared(
        run=run,
        check=lambda: check_close(f"softmax[{impl}]", result(), reference(x)),
        work=work(impl, m, n),
        unit="fp32",
        bound="dram",
        launch=launch,
        sizes={"m": m, "n": n, "dtype": "float32"},
    )
