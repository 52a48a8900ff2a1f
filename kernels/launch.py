"""launch: a stream of tiny kernels, one element each, back to back. GPU-Util reads near 100% while each
kernel does one addition: the host's launch rate, not the GPU, sets the pace."""

from __future__ import annotations

from .common import CheckFailed, Prepared, Work, cupy, raw_kernel

IMPLS = ("cupy",)
SIZES = {"launches": 2000}  # kernels per timed group
STORY = [
    "{said} and SM activity {sm_active_pct:.2f}%.",
    "Each one-element kernel took {kernel_us:.1f} µs of GPU time, launch gaps included: the GPU spent its "
    "time waiting for the host to launch the next kernel, and did one addition each time.",
]

CUDA_BUMP = r"""
extern "C" __global__ void bump(float* x) { x[0] += 1.0f; }
"""


def cupy_bump(x) -> None:
    raw_kernel(CUDA_BUMP, "bump")((1,), (1,), (x,))


def work() -> Work:
    # one add; read and write 4 bytes
    return Work(flops=1.0, bytes=8.0, traffic=8.0)


def prepare(impl: str = "cupy", launches: int = SIZES["launches"], device="cuda", seed: int = 0) -> Prepared:
    if impl not in IMPLS:
        raise ValueError(f"unknown launch implementation {impl!r}; choose from {', '.join(IMPLS)}")
    cp = cupy()
    x = cp.zeros(1, dtype=cp.float32)

    def check():
        x.fill(0)
        for _ in range(launches):
            cupy_bump(x)
        got = float(x.get()[0])
        if got != launches:  # exact: small integers are exact in float32
            raise CheckFailed(f"launch-bound: {got} after {launches} launches")
        return {"check": "exact"}

    return Prepared(
        run=lambda: cupy_bump(x),
        check=check,
        work=work(),
        unit="fp32",
        bound="dram",
        launch="1 block x 1 thread, back to back",
        calls_per_timing=launches,
        sizes={"launches": launches},
    )
