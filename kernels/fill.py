"""fill: write one value everywhere, read nothing. The smallest family: Triton, CuPy and torch's fill_.

It exists as the worked example of adding a family (README, "Add a kernel family"): this file, its
CPU test, and one line in gpubench/suite/scenarios.py.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from .common import Prepared, Work, check_equal, count, cupy, poison, powers_of_two

IMPLS = ("triton", "cupy", "torch")
SIZES = {"n": 2**28}  # float32 elements: 1 GiB written
VALUE = 1.5  # not zero: an unwritten (poisoned) or zeroed element fails the check
STORY = [
    "{said}; the kernel wrote {gbps:.0f} GB/s and read nothing, MBU {mbu_pct:.0f}% of the datasheet "
    "DRAM bandwidth, with no arithmetic at all.",
]


@triton.jit
def _fill_kernel(dst, n, value, BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    tl.store(dst + offs, tl.full((BLOCK,), value, tl.float32), mask=offs < n)


def triton_fill(dst: torch.Tensor, value: float, block: int = 1024, num_warps: int = 8) -> str:
    if not dst.is_contiguous():
        raise ValueError("triton_fill needs a contiguous tensor")
    grid = triton.cdiv(dst.numel(), block)
    _fill_kernel[(grid,)](dst, dst.numel(), value, BLOCK=block, num_warps=num_warps)
    return f"{count(grid, 'program')} x {count(num_warps, 'warp')}, {block} elements each"


def work(n: int, itemsize: int = 4) -> Work:
    # write n; read nothing
    return Work(flops=0.0, bytes=float(n * itemsize), traffic=float(n * itemsize))


def prepare(impl: str, n: int = SIZES["n"], device="cuda", seed: int = 0) -> Prepared:
    dst = torch.empty(n, device=device)
    if impl == "triton":
        run = lambda: triton_fill(dst, VALUE)  # noqa: E731
    elif impl == "cupy":
        dc = cupy().from_dlpack(dst)
        run = lambda: dc.fill(VALUE)  # noqa: E731
    elif impl == "torch":
        run = lambda: dst.fill_(VALUE)  # noqa: E731
    else:
        raise ValueError(f"unknown fill implementation {impl!r}; choose from {', '.join(IMPLS)}")

    def check():
        poison(dst)
        run()
        return check_equal(f"fill[{impl}]", dst, VALUE)

    launch = run() if impl == "triton" else f"{impl}-chosen"
    return Prepared(
        run=run,
        check=check,
        work=work(n),
        unit="fp32",
        bound="dram",
        launch=launch,
        sizes={"n": powers_of_two(n), "dtype": "float32"},
    )
