"""read: stream a large array and write one number (its sum), the read-only rung beside the copy. Triton,
a CuPy RawKernel, and torch's sum as the peer.

A decode step reads its weights and writes almost nothing, so its ceiling is what a read-only kernel
reaches, not a copy: a copy also writes what it reads, and the memory bus turns round between the two.
Both kernels here are one launch: each program sums its share into a partial, and the last program to
finish (a ticket counter) adds the partials in a fixed order, so the result is the same on every call.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from .common import (
    Prepared,
    Work,
    check_close,
    count,
    cupy,
    generator,
    poison,
    powers_of_two,
    raw_kernel,
    sm_count,
    tuned,
)

IMPLS = ("triton", "cupy", "torch")
SIZES = {"n": 2**28}  # float32 elements: 1 GiB read, far larger than any L2
STORY = [
    "{said}; the kernel read {gbps:.0f} GB/s and wrote one number, MBU {mbu_pct:.0f}% of the datasheet DRAM "
    "bandwidth and {mbu_read_pct:.0f}% of the read peak measured at the start.",
    "A read is the ceiling of any kernel that streams its inputs and writes little, such as decode's weights.",
]
# A sum of 2^28 uniform values in float32 lands within ~1e-7 of the float64 sum; a tile of 256 elements
# left unread moves it by ~1e-6, which this bound catches (the CPU tests hold irregular sizes).
TOLERANCE = 5e-7

# Launch settings per GPU model, written by python -m tools.tune.kernels --only read --apply from a sweep
# interleaved with torch.sum at sustained clocks (results/tune-read-*.csv). A GPU without a line gets
# the fallback: 4096 elements an iteration, 8 warps, 4 programs per SM; CuPy 256 threads, 8 blocks per
# SM, 4 loads in flight per thread.
# tools/tune/choice.py reads and writes each GPU's line whole, so the formatter leaves the table as it is
# fmt: off
CONFIG = {  # python -m tools.tune.kernels --only read --apply writes a GPU's line here
    "NVIDIA H100 80GB HBM3": {"triton": {"BLOCK": 4096, "num_warps": 4, "per_sm": 4, "stages": 3, "evict": ""}, "cupy": {"threads": 1024, "per_sm": 2, "unroll": 8}},
    "NVIDIA H200": {"triton": {"BLOCK": 8192, "num_warps": 8, "per_sm": 2, "stages": 3, "evict": ""}, "cupy": {"threads": 1024, "per_sm": 2, "unroll": 4}},
    "*": {"triton": {"BLOCK": 4096, "num_warps": 8, "per_sm": 4, "stages": 1, "evict": ""},
          "cupy": {"threads": 256, "per_sm": 8, "unroll": 4}},
}
# fmt: on


# --- kernels ---------------------------------------------------------------------------------------


@triton.jit
def _sum_kernel(
    x_ptr,
    out_ptr,
    partial_ptr,
    count_ptr,
    n,
    BLOCK: tl.constexpr,
    PARTIALS: tl.constexpr,
    STAGES: tl.constexpr,
    EVEN: tl.constexpr,
    EVICT: tl.constexpr,
):
    # Grid-stride: at any moment the programs read neighbouring tiles, so DRAM sees one front moving
    # through the array; each thread keeps BLOCK / threads sums in registers until the end.
    pid, programs = tl.program_id(0), tl.num_programs(0)
    offs = tl.arange(0, BLOCK)
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    for t in tl.range(pid, tl.cdiv(n, BLOCK), programs, num_stages=STAGES):
        o = tl.cast(t, tl.int64) * BLOCK + offs
        if EVEN:  # n a whole number of tiles: no mask in the loop
            acc += tl.load(x_ptr + o, eviction_policy=EVICT)
        else:
            acc += tl.load(x_ptr + o, mask=o < n, other=0.0, eviction_policy=EVICT)
    tl.store(partial_ptr + pid, tl.sum(acc, axis=0))
    # Every thread's store comes before the ticket (the barrier), the ticket releases them to the GPU,
    # and the last program acquires them all; it then resets the counter for the next call.
    tl.debug_barrier()
    ticket = tl.atomic_add(count_ptr, 1, sem="acq_rel")
    if ticket == programs - 1:
        p = tl.arange(0, PARTIALS)
        parts = tl.load(partial_ptr + p, mask=p < programs, other=0.0, cache_modifier=".cg")
        tl.store(out_ptr, tl.sum(parts, axis=0))
        tl.atomic_xchg(count_ptr, 0)


CUDA_SUM = r"""
// Sum of n floats in one launch. Each thread reads UNROLL float4s a step (16-byte streaming loads, all in
// flight before the first add), over a grid-stride loop; a block sums its threads through shuffles, and
// the last block to finish sums the blocks' partials in a fixed order and resets the counter.
__device__ __forceinline__ float block_sum(float v, float* smem) {
    for (int off = 16; off > 0; off /= 2) v += __shfl_xor_sync(0xffffffffu, v, off);
    int warp = threadIdx.x / 32, lane = threadIdx.x % 32, warps = blockDim.x / 32;
    __syncthreads();  // smem may still be read by an earlier call of this function
    if (lane == 0) smem[warp] = v;
    __syncthreads();
    v = threadIdx.x < warps ? smem[threadIdx.x] : 0.f;
    if (warp == 0) for (int off = 16; off > 0; off /= 2) v += __shfl_xor_sync(0xffffffffu, v, off);
    return v;  // the block's sum, in thread 0
}

extern "C" __global__ void sum_f32(const float* __restrict__ x, long long n, float* partial, unsigned int* count,
                                   float* out) {
    __shared__ float smem[32];
    __shared__ bool last;
    const float4* x4 = reinterpret_cast<const float4*>(x);
    long long n4 = n / 4, stride = (long long)gridDim.x * blockDim.x;
    long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    float acc = 0.f;
    for (; i + (UNROLL - 1) * stride < n4; i += UNROLL * stride) {
        float4 v[UNROLL];
        #pragma unroll
        for (int u = 0; u < UNROLL; ++u) v[u] = __ldcs(x4 + i + u * stride);
        #pragma unroll
        for (int u = 0; u < UNROLL; ++u) acc += (v[u].x + v[u].y) + (v[u].z + v[u].w);
    }
    for (; i < n4; i += stride) { float4 v = __ldcs(x4 + i); acc += (v.x + v.y) + (v.z + v.w); }
    if (blockIdx.x == 0 && threadIdx.x < n - n4 * 4) acc += x[n4 * 4 + threadIdx.x];  // the 0-3 tail floats
    float total = block_sum(acc, smem);
    if (threadIdx.x == 0) {
        partial[blockIdx.x] = total;
        __threadfence();  // the partial reaches the GPU before the ticket does
        last = atomicAdd(count, 1u) == gridDim.x - 1;
    }
    __syncthreads();
    if (!last) return;
    float s = 0.f;
    for (unsigned int b = threadIdx.x; b < gridDim.x; b += blockDim.x) s += __ldcg(partial + b);
    s = block_sum(s, smem);
    if (threadIdx.x == 0) { *out = s; *count = 0u; }
}
"""


# --- host wrappers ---------------------------------------------------------------------------------


class Workspace:
    """One partial per program and the ticket counter (zero between calls): allocated once per call
    site, never shared by two launches in flight at once."""

    def __init__(self, programs: int, device):
        self.partial = torch.empty(programs, device=device, dtype=torch.float32)
        self.count = torch.zeros(1, device=device, dtype=torch.int32)


def _vector(x, out):
    if x.ndim != 1 or tuple(out.shape) != () or out.dtype != x.dtype:
        raise ValueError(f"read sums a vector into a scalar of its dtype, got {tuple(x.shape)} -> {tuple(out.shape)}")


def triton_programs(device=None, config: dict | None = None) -> int:
    cfg = config or tuned(CONFIG, "triton", device)
    return sm_count(device) * cfg["per_sm"]


def triton_read(x: torch.Tensor, out: torch.Tensor, ws: Workspace, config: dict | None = None) -> str:
    """out = sum(x) in one launch; returns the launch as launched."""
    _vector(x, out)
    if not x.is_contiguous() or x.dtype != torch.float32:
        raise ValueError("triton_read sums a contiguous float32 vector")
    cfg = config or tuned(CONFIG, "triton", x.device)
    block, n = cfg["BLOCK"], x.numel()
    programs = min(triton_programs(x.device, cfg), triton.cdiv(n, block))
    if ws.partial.numel() < programs:
        raise ValueError(f"the workspace holds {ws.partial.numel()} partials, the launch needs {programs}")
    _sum_kernel[(programs,)](
        x,
        out,
        ws.partial,
        ws.count,
        n,
        BLOCK=block,
        PARTIALS=triton.next_power_of_2(programs),
        STAGES=cfg.get("stages", 1),
        EVEN=n % block == 0,
        EVICT=cfg.get("evict", ""),
        num_warps=cfg["num_warps"],
    )
    return (
        f"{count(programs, 'program')} x {count(cfg['num_warps'], 'warp')}, {block} elements an iteration, grid-stride"
    )


def cupy_read(x, out, ws: Workspace, config: dict | None = None) -> str:
    """out = sum(x) for a 16-byte aligned float32 CuPy vector, in one launch."""
    cp = cupy()
    if x.ndim != 1 or out.shape != () or x.dtype != cp.float32 or out.dtype != cp.float32 or x.data.ptr % 16:
        raise ValueError("cupy_read sums a 16-byte aligned float32 vector into a float32 scalar")
    cfg = config or tuned(CONFIG, "cupy")
    threads, n4 = cfg["threads"], x.size // 4
    blocks = max(1, min(sm_count() * cfg["per_sm"], (n4 + threads - 1) // threads))
    if ws.partial.numel() < blocks:
        raise ValueError(f"the workspace holds {ws.partial.numel()} partials, the launch needs {blocks}")
    kernel = raw_kernel(f"#define UNROLL {cfg['unroll']}\n" + CUDA_SUM, "sum_f32")
    part, cnt = cp.from_dlpack(ws.partial), cp.from_dlpack(ws.count)
    kernel((blocks,), (threads,), (x, cp.int64(x.size), part, cnt, out))
    return f"{count(blocks, 'block')} x {count(threads, 'thread')}, {cfg['unroll']} float4 loads in flight a thread"


def torch_read(x: torch.Tensor, out: torch.Tensor) -> str:
    torch.sum(x, 0, out=out)
    return "torch-chosen"


# --- the contract: input, check, work model ---------------------------------------------------------


def make_input(n: int, device="cuda", seed: int = 0) -> torch.Tensor:
    """n seeded uniform float32 values in [0, 1): never zeros, and a sum that no cancellation hides."""
    return torch.rand(n, device=device, generator=generator(device, seed))


def reference(x: torch.Tensor) -> torch.Tensor:
    return x.to(torch.float64).sum()


def work(n: int, itemsize: int = 4) -> Work:
    # read n, write one value; one add per element
    nbytes = float((n + 1) * itemsize)
    return Work(flops=float(n), bytes=nbytes, traffic=nbytes)


def prepare(impl: str, n: int = SIZES["n"], device="cuda", seed: int = 0, config: dict | None = None) -> Prepared:
    if impl not in IMPLS:
        raise ValueError(f"unknown read implementation {impl!r}; choose from {', '.join(IMPLS)}")
    x = make_input(n, device, seed)
    out = torch.empty((), device=device, dtype=torch.float32)
    if impl == "triton":
        ws = Workspace(triton_programs(device, config), device)
        run = lambda: triton_read(x, out, ws, config)  # noqa: E731
    elif impl == "cupy":
        cp = cupy()
        ws = Workspace(sm_count() * (config or tuned(CONFIG, "cupy"))["per_sm"], device)
        xc, oc = cp.from_dlpack(x), cp.from_dlpack(out)
        run = lambda: cupy_read(xc, oc, ws, config)  # noqa: E731
    else:
        run = lambda: torch_read(x, out)  # noqa: E731

    def check():
        poison(out)
        run()
        return check_close(f"read[{impl}]", out, reference(x), tol=TOLERANCE)

    launch = run()
    # the bytes are judged against the read peak as well as the datasheet (gpubench.read.summary)
    return Prepared(
        run=run,
        check=check,
        work=work(n),
        unit="fp32",
        bound="dram",
        launch=launch,
        sizes={"n": powers_of_two(n), "dtype": "float32"},
        info={"roof": "read"},
    )
