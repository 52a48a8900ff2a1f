"""h2d: host-to-device copy from pinned memory. The copy engine moves the bytes over the PCIe link; no
SM runs, yet GPU-Util counts the copy as busy time."""

from __future__ import annotations

import torch

from .common import Prepared, Work, check_equal, generator, poison, powers_of_two

IMPLS = ("torch",)
SIZES = {"n": 2**26}  # float32 elements: 256 MiB from pinned host memory
STORY = [
    "{said}, yet SM activity read {sm_active_pct:.1f}%: no SM ran at all.",
    "The copy engine moved {link_gbps:.1f} GB/s over the host link, {link_pct:.0f}% of its theoretical "
    "bandwidth per direction.",
    "GPU-Util counts time in which anything ran on the GPU, and a copy counts.",
]


def work(n: int, itemsize: int = 4) -> Work:
    # read n from host memory, write n to device memory (the convention: read + written); n cross the link
    nbytes = float(n * itemsize)
    return Work(flops=0.0, bytes=2 * nbytes, traffic=nbytes, link_bytes=nbytes)


def prepare(impl: str = "torch", n: int = SIZES["n"], device="cuda", seed: int = 0) -> Prepared:
    if impl not in IMPLS:
        raise ValueError(f"unknown h2d implementation {impl!r}; choose from {', '.join(IMPLS)}")
    host = torch.rand(n, generator=generator("cpu", seed)).pin_memory()
    dst = torch.empty(n, device=device)

    def run():
        dst.copy_(host, non_blocking=True)

    def check():
        poison(dst)
        run()
        return check_equal("h2d-copy", dst.cpu(), host)

    return Prepared(
        run=run,
        check=check,
        work=work(n),
        unit=None,
        bound="link",
        launch="copy engine, no kernel",
        sizes={"n": powers_of_two(n), "dtype": "float32"},
    )
