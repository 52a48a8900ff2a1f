"""spin: time passes, nothing is computed. Each block busy-waits on the GPU's global timer (ns), so the
duration does not depend on clocks; the launch shape alone decides how much of the GPU looks busy.

Each block writes how long it spun and which SM it ran on, so the suite reports how many SMs were
really occupied instead of assuming the block scheduler spread the blocks one per SM.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from .common import (
    CheckFailed,
    Prepared,
    Work,
    as_torch,
    count,
    cupy,
    poison,
    raw_kernel,
    sm_count,
)

IMPLS = ("cupy", "triton")
SIZES = {"shape": "1thread", "ns": 10_000_000}  # 10 ms per launch
STORY = [
    "{launch} waited on the GPU's clock, {kernel_ms:.2f} ms per launch, on {sms_used} of {sm_count} SMs.",
    "{said}; SM activity read {sm_active_pct:.2f}% and occupancy {sm_occupancy_pct:.2f}%.",
    "Zero FLOPs, zero bytes: utilization only says that a kernel was resident somewhere.",
]

# --- kernels ---------------------------------------------------------------------------------------

CUDA_SPIN = r"""
extern "C" __global__ void spin(long long ns, long long* out) {
    unsigned long long start, now;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
    now = start;
    while ((long long)(now - start) < ns) asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
    if (threadIdx.x == 0) {
        unsigned int sm;
        asm volatile("mov.u32 %0, %%smid;" : "=r"(sm));
        out[2 * blockIdx.x] = (long long)(now - start);
        out[2 * blockIdx.x + 1] = sm;
    }
}
"""


@triton.jit
def _globaltimer():
    return tl.inline_asm_elementwise("mov.u64 $0, %globaltimer;", "=l", [], dtype=tl.int64, is_pure=False, pack=1)


@triton.jit
def _smid():
    return tl.inline_asm_elementwise("mov.u32 $0, %smid;", "=r", [], dtype=tl.int32, is_pure=False, pack=1)


@triton.jit
def _spin_kernel(out, ns):
    start = _globaltimer()
    now = start
    while now - start < ns:
        now = _globaltimer()
    pid = tl.program_id(0)
    tl.store(out + 2 * pid, now - start)
    tl.store(out + 2 * pid + 1, _smid().to(tl.int64))


# --- host wrappers ---------------------------------------------------------------------------------


def launch_shape(shape: str, sms: int) -> tuple[int, int]:
    """(blocks, threads per block) for a named launch shape."""
    shapes = {
        "1thread": (1, 1),
        "1block": (1, 1024),
        "1warp-per-sm": (sms, 32),
        "half-sms": (max(1, sms // 2), 1024),
    }
    if shape not in shapes:
        raise ValueError(f"unknown spin shape {shape!r}; choose from {', '.join(shapes)}")
    return shapes[shape]


def cupy_spin(ns: int, blocks: int, threads: int, out=None):
    """Launch the CuPy spin kernel; out (int64, 2 per block) receives [ns spun, SM id] per block."""
    cp = cupy()
    if ns <= 0 or blocks < 1 or not 1 <= threads <= 1024:
        raise ValueError("spin needs ns > 0, blocks >= 1 and 1..1024 threads")
    if out is None:
        out = cp.empty(2 * blocks, dtype=cp.int64)
    raw_kernel(CUDA_SPIN, "spin")((blocks,), (threads,), (cp.int64(ns), out))
    return out


def triton_spin(ns: int, out: torch.Tensor | None = None, programs: int = 1, num_warps: int = 1):
    """Launch the Triton spin kernel: `programs` programs of `num_warps` warps each."""
    if ns <= 0 or programs < 1:
        raise ValueError("spin needs ns > 0 and at least one program")
    if out is None:
        out = torch.empty(2 * programs, dtype=torch.int64, device="cuda")
    _spin_kernel[(programs,)](out, ns, num_warps=num_warps)
    return out


# --- the contract: buffers, check, work model -------------------------------------------------------


def check_result(out, ns: int, blocks: int) -> dict:
    """Every block spun at least ns; return the SMs the blocks ran on."""
    res = as_torch(out).view(-1, 2).cpu()
    if res.shape[0] != blocks:
        raise CheckFailed(f"spin: {res.shape[0]} results for {blocks} blocks")
    spun, sm = res[:, 0], res[:, 1]
    if (spun < ns).any():
        raise CheckFailed(f"spin: a block stopped after {int(spun.min())} ns of the {ns} asked for")
    return {"check": "ok", "sms_used": int(sm.unique().numel()), "max_spun_ns": int(spun.max())}


def work() -> Work:
    # nothing is read, nothing computed; 16 bytes of bookkeeping per block are not work
    return Work(flops=0.0, bytes=0.0, traffic=0.0)


def prepare(impl: str, shape: str = SIZES["shape"], ns: int = SIZES["ns"], device="cuda", seed: int = 0) -> Prepared:
    blocks, threads = launch_shape(shape, sm_count(device))
    if impl == "cupy":
        cp = cupy()
        out = cp.empty(2 * blocks, dtype=cp.int64)
        run = lambda: cupy_spin(ns, blocks, threads, out)  # noqa: E731
        launch = f"{count(blocks, 'block')} x {count(threads, 'thread')}"
    elif impl == "triton":
        out = torch.empty(2 * blocks, dtype=torch.int64, device=device)
        warps = max(1, threads // 32)
        run = lambda: triton_spin(ns, out, programs=blocks, num_warps=warps)  # noqa: E731
        launch = f"{count(blocks, 'program')} x {count(warps, 'warp')}"
    else:
        raise ValueError(f"unknown spin implementation {impl!r}; choose from {', '.join(IMPLS)}")

    def check():
        poison(out)
        run()
        return check_result(out, ns, blocks)

    return Prepared(
        run=run,
        check=check,
        work=work(),
        unit="fp32",
        bound="none",
        launch=launch,
        calls_per_timing=1,
        info={"blocks": blocks, "threads_per_block": threads},
        sizes={"shape": shape, "ns": ns},
    )
