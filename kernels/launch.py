"""launch-bound: a stream of tiny kernels, one element each, back to back. The GPU is "busy" almost all
the time, yet each kernel does one addition: the cost is in launching, not in computing."""

from __future__ import annotations

from .common import CheckFailed, Work, cupy, raw_kernel

CUDA_BUMP = r"""
extern "C" __global__ void bump(float* x) { x[0] += 1.0f; }
"""


def cupy_bump(x) -> None:
    raw_kernel(CUDA_BUMP, "bump")((1,), (1,), (x,))


def check(launches: int = 1000) -> None:
    cp = cupy()
    x = cp.zeros(1, dtype=cp.float32)
    for _ in range(launches):
        cupy_bump(x)
    got = float(x.get()[0])
    if got != launches:  # exact: small integers are exact in float32
        raise CheckFailed(f"launch-bound: {got} after {launches} launches")


def work() -> Work:
    # one add; read and write 4 bytes
    return Work(flops=1.0, bytes=8.0)
