"""The decode family's Gluon kernel (kernels/decode.py holds the contract): a persistent product on Hopper's
tensor cores, written in Triton's lower-level Gluon dialect, for the GEMM-like batches (B = 256 and up).

With one launch of 256x128 tiles a H100 reaches 0.96-0.97 of cuBLAS at B = 256 even over whole waves: every
tile starts with an empty pipeline and ends with an epilogue while its SM has nothing else in flight (one
tile of that size a SM, by its registers and shared memory). Here each program walks its tiles as one
stream of k-steps: the loads run NUM_STAGES - 1 steps ahead across the end of a tile, so the next tile's
first loads are in flight while the last one's product is stored, and the store (through TMA) overlaps
the next tile's products. Tiles are tokens x rows of W (BLOCK_M x BLOCK_N) in the order (rows of W,
tokens), tokens fastest, so the programs that share a tile of W run side by side and read it together.

Gluon runs on NVIDIA GPUs only (Triton's interpreter does not run it): the CPU tests compile it for sm_90.
"""

from __future__ import annotations

import triton
from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.hopper import fence_async_shared, mbarrier, tma, warpgroup_mma
from triton.experimental.gluon.language.nvidia.hopper import warpgroup_mma_wait

from .common import count, sm_count

# TMA's copies by the names of the Triton installed (3.6 on the GPU machines; later versions renamed them)
_tma_load = getattr(tma, "async_load", None) or tma.async_copy_global_to_shared
_tma_store = getattr(tma, "async_store", None) or tma.async_copy_shared_to_global


@gluon.constexpr_function
def _acc_layout(BLOCK_M, BLOCK_N, num_warps):
    # WGMMA's accumulator: warpgroups stacked along the tokens (16 rows a warp), one instruction as wide as the
    # tile's rows of W allow (at most 256)
    warps = [4, 1]
    while warps[0] * warps[1] < num_warps:
        if BLOCK_M > 16 * warps[0]:
            warps[0] *= 2
        else:
            warps[1] *= 2
    n = min(256, BLOCK_N // warps[1])
    return gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=warps, instr_shape=[16, n, 16])


@gluon.jit
def _load(step, k_tiles, pid, progs, num_m, x_desc, w_desc, x_bufs, w_bufs, bars, NUM_STAGES: gl.constexpr, pred):
    # the loads of the program's k-step `step`: its tile is the (step // k_tiles)-th of the program's tiles
    t = pid + (step // k_tiles) * progs
    k = (step % k_tiles) * x_desc.block_type.shape[1]
    s = step % NUM_STAGES
    bar = bars.index(s)
    mbarrier.expect(bar, x_desc.block_type.nbytes + w_desc.block_type.nbytes, pred=pred)
    _tma_load(x_desc, [(t % num_m) * x_desc.block_type.shape[0], k], bar, x_bufs.index(s), pred)
    _tma_load(w_desc, [(t // num_m) * w_desc.block_type.shape[0], k], bar, w_bufs.index(s), pred)


@gluon.jit
def _decode_gluon(x_desc, w_desc, y_desc, B, N, K, NUM_STAGES: gl.constexpr, num_warps: gl.constexpr):
    BLOCK_M: gl.constexpr = x_desc.block_type.shape[0]  # tokens
    BLOCK_N: gl.constexpr = w_desc.block_type.shape[0]  # rows of W
    dtype: gl.constexpr = x_desc.dtype
    num_m = gl.cdiv(B, BLOCK_M)
    k_tiles = gl.cdiv(K, x_desc.block_type.shape[1])
    pid = gl.program_id(0)
    progs = gl.num_programs(0)
    total = gl.cdiv(gl.cdiv(N, BLOCK_N) * num_m - pid, progs) * k_tiles  # the program's k-steps, all its tiles

    x_bufs = gl.allocate_shared_memory(dtype, [NUM_STAGES] + x_desc.block_type.shape, x_desc.layout)
    w_bufs = gl.allocate_shared_memory(dtype, [NUM_STAGES] + w_desc.block_type.shape, w_desc.layout)
    y_smem = gl.allocate_shared_memory(dtype, y_desc.block_type.shape, y_desc.layout)
    bars = gl.allocate_shared_memory(gl.int64, [NUM_STAGES, 1], mbarrier.MBarrierLayout())
    for st in gl.static_range(NUM_STAGES):
        mbarrier.init(bars.index(st), count=1)

    for j in gl.static_range(NUM_STAGES - 1):  # the first steps' loads
        _load(j, k_tiles, pid, progs, num_m, x_desc, w_desc, x_bufs, w_bufs, bars, NUM_STAGES, j < total)
    acc = gl.zeros((BLOCK_M, BLOCK_N), dtype=gl.float32, layout=_acc_layout(BLOCK_M, BLOCK_N, num_warps))
    for i in range(total):
        s = i % NUM_STAGES
        kt = i % k_tiles
        mbarrier.wait(bars.index(s), (i // NUM_STAGES) & 1)
        acc = warpgroup_mma(x_bufs.index(s), w_bufs.index(s).permute((1, 0)), acc, use_acc=kt > 0, is_async=True)
        # the product of step i - 1 is done: its buffers take the loads NUM_STAGES - 1 steps ahead
        acc = warpgroup_mma_wait(1, deps=(acc,))
        nxt = i + NUM_STAGES - 1
        _load(nxt, k_tiles, pid, progs, num_m, x_desc, w_desc, x_bufs, w_bufs, bars, NUM_STAGES, nxt < total)
        if kt == k_tiles - 1:  # the tile's last step: store it while the next tile's loads are in flight
            acc = warpgroup_mma_wait(0, deps=(acc,))
            t = pid + (i // k_tiles) * progs
            tma.store_wait(pendings=0)  # the previous tile's store has left y_smem
            y_smem.store(acc.to(dtype))
            fence_async_shared()
            _tma_store(y_desc, [(t % num_m) * BLOCK_M, (t // num_m) * BLOCK_N], y_smem)
    tma.store_wait(pendings=0)
    for st in gl.static_range(NUM_STAGES):
        mbarrier.invalidate(bars.index(st))


def descriptors(x, w, y, bm: int, bn: int, bk: int):
    from triton.experimental.gluon.nvidia.hopper import TensorDescriptor

    def desc(t, shape):
        return TensorDescriptor.from_tensor(t, shape, gl.NVMMASharedLayout.get_default_for(shape, gl.bfloat16))

    return desc(x, [bm, bk]), desc(w, [bn, bk]), desc(y, [bm, bn])


def launch_gluon(x, w, y, cfg: dict) -> str:
    """y = x·Wᵀ through _decode_gluon with the settings cfg: BLOCK_B tokens x BLOCK_N rows of W x BLOCK_K deep,
    num_warps, num_stages. x, w and y need 16-byte aligned rows (TMA)."""
    bm, bn, bk = cfg["BLOCK_B"], cfg["BLOCK_N"], cfg["BLOCK_K"]
    (b, k), n = x.shape, w.shape[0]
    tiles = triton.cdiv(b, bm) * triton.cdiv(n, bn)
    progs = min(tiles, sm_count(x.device))
    warps, stages = cfg.get("num_warps", 8), cfg.get("num_stages", 3)
    _decode_gluon[(progs,)](*descriptors(x, w, y, bm, bn, bk), b, n, k, NUM_STAGES=stages, num_warps=warps)
    return (
        f"{count(progs, 'persistent program')} x {count(warps, 'warp')}, {bn}x{bm}x{bk} tiles (weights x tokens "
        f"x depth) in Gluon, loads across tiles, {count(stages, 'stage')}"
    )
