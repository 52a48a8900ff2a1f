"""The decode family's wide tiles (kernels/decode.py holds the contract): tiles of W whose row count is not a
power of two, so that the tiles fill whole waves of SMs where no power-of-two tile does.

At B = 256, 256x128 tiles (W's rows x tokens) make 224 tiles for 132 SMs, 1.70 waves: 92 SMs run two tiles
while 40 run one, so the step takes two tile-times for 1.70 of work. Tiles of 224 rows make 256 tiles, 1.94
waves, each 7/8 of the work: 1.75 tile-times of the big tile. cuBLAS picks such tiles itself (112 and 176
rows at B = 128 and 512 on an H100). Triton's tensors have power-of-two shapes, so a wide tile is its
row count's powers of two (224 = 128 + 64 + 32), slices side by side: each is its own product with the
same tile of tokens, with an accumulator of its own, and is loaded and stored where it lies. The tokens are
the rows of the product and W's rows its columns, because a tensor-core product (wgmma) takes any number
of columns that is a multiple of 8 but rows only in 64s; so each slice's output tile lies as y does.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from .common import count, sm_count

MAX_SLICES = 4


def slices(rows: int) -> tuple[int, ...]:
    """A wide tile's row count as its powers of two, largest first (224 -> 128, 64, 32): at most four, each at
    least 16 rows (the narrowest tensor-core product Triton makes)."""
    parts = tuple(1 << i for i in reversed(range(rows.bit_length())) if rows >> i & 1)
    if rows <= 0 or len(parts) > MAX_SLICES or min(parts) < 16:
        raise ValueError(f"a wide decode tile of {rows} rows is not {MAX_SLICES} or fewer powers of two of at "
                         "least 16 rows (224 = 128 + 64 + 32 is)")
    return parts


def rows_aligned(*tensors) -> bool:
    """Whether every tensor's rows start 16-byte aligned, as a TMA descriptor needs."""
    return all(t.stride(1) == 1 and t.stride(0) * t.element_size() % 16 == 0 and t.data_ptr() % 16 == 0
               for t in tensors)


@triton.jit
def _step(x, w_desc, acc, n0, kt, BLOCK_K: tl.constexpr, UPCAST: tl.constexpr):
    # one k-step of one slice's product: tokens x (rows n0...)
    w = w_desc.load([n0, kt * BLOCK_K])
    if UPCAST:  # Triton's CPU interpreter gets bf16 dots wrong; it computes them in float32 instead
        w = w.to(tl.float32)
    return tl.dot(x, w.T, acc)


@triton.jit
def _store(acc, y_desc, y_ptr, b0, n0, B, N, stride_yb, BLOCK_B: tl.constexpr, ROWS: tl.constexpr,
           TMA_STORE: tl.constexpr):
    if TMA_STORE:  # the copy engine clips rows past B and columns past N
        y_desc.store([b0, n0], acc.to(y_desc.dtype))
    else:
        offs_b = b0 + tl.arange(0, BLOCK_B)
        offs_n = n0 + tl.arange(0, ROWS)
        tl.store(y_ptr + offs_b[:, None].to(tl.int64) * stride_yb + offs_n[None, :], acc.to(y_ptr.dtype.element_ty),
                 mask=(offs_b[:, None] < B) & (offs_n[None, :] < N))


@triton.jit
def _decode_wide(x_desc, w1, w2, w3, w4, y1, y2, y3, y4, y_ptr, B, N, K, stride_yb, BLOCK_B: tl.constexpr,
                 BLOCK_K: tl.constexpr, S1: tl.constexpr, S2: tl.constexpr, S3: tl.constexpr, S4: tl.constexpr,
                 TMA_STORE: tl.constexpr, UPCAST: tl.constexpr):
    # Tiles in the order (rows of W, tokens), tokens fastest, as in decode_tiles: the programs that share a
    # tile of W run side by side, so W comes from DRAM once. Slices of width 0 are not there.
    BLOCK_N: tl.constexpr = S1 + S2 + S3 + S4
    num_b = tl.cdiv(B, BLOCK_B)
    tiles = tl.cdiv(N, BLOCK_N) * num_b
    k_tiles = tl.cdiv(K, BLOCK_K)
    for t in tl.range(tl.program_id(0), tiles, tl.num_programs(0)):
        b0 = (t % num_b) * BLOCK_B
        n1 = (t // num_b) * BLOCK_N
        n2 = n1 + S1
        n3 = n2 + S2
        n4 = n3 + S3
        a1 = tl.zeros((BLOCK_B, S1), dtype=tl.float32)
        if S2 > 0:
            a2 = tl.zeros((BLOCK_B, S2), dtype=tl.float32)
        if S3 > 0:
            a3 = tl.zeros((BLOCK_B, S3), dtype=tl.float32)
        if S4 > 0:
            a4 = tl.zeros((BLOCK_B, S4), dtype=tl.float32)
        for kt in range(k_tiles):
            x = x_desc.load([b0, kt * BLOCK_K])
            if UPCAST:
                x = x.to(tl.float32)
            a1 = _step(x, w1, a1, n1, kt, BLOCK_K, UPCAST)
            if S2 > 0:
                a2 = _step(x, w2, a2, n2, kt, BLOCK_K, UPCAST)
            if S3 > 0:
                a3 = _step(x, w3, a3, n3, kt, BLOCK_K, UPCAST)
            if S4 > 0:
                a4 = _step(x, w4, a4, n4, kt, BLOCK_K, UPCAST)
        _store(a1, y1, y_ptr, b0, n1, B, N, stride_yb, BLOCK_B, S1, TMA_STORE)
        if S2 > 0:
            _store(a2, y2, y_ptr, b0, n2, B, N, stride_yb, BLOCK_B, S2, TMA_STORE)
        if S3 > 0:
            _store(a3, y3, y_ptr, b0, n3, B, N, stride_yb, BLOCK_B, S3, TMA_STORE)
        if S4 > 0:
            _store(a4, y4, y_ptr, b0, n4, B, N, stride_yb, BLOCK_B, S4, TMA_STORE)


def launch_wide(x: torch.Tensor, w: torch.Tensor, y: torch.Tensor, cfg: dict, tma_store: bool) -> str:
    """Launch the wide tiles of cfg (BLOCK_N any sum of up to four powers of two, each ≥ 16; "per_sm" makes
    the grid persistent); tma_store where y's rows may be stored through TMA. Returns the launch as launched."""
    from triton.tools.tensor_descriptor import TensorDescriptor

    bn, bb, bk = cfg["BLOCK_N"], cfg["BLOCK_B"], cfg["BLOCK_K"]
    parts = slices(bn)
    widths = parts + (0,) * (MAX_SLICES - len(parts))
    (b, k), n = x.shape, w.shape[0]
    tiles = triton.cdiv(n, bn) * triton.cdiv(b, bb)
    per_sm = cfg.get("per_sm")
    grid = tiles if per_sm is None else min(tiles, sm_count(x.device) * per_sm)
    # an absent slice's descriptors are the first slice's: passed, never touched
    wd = [TensorDescriptor.from_tensor(w, [s or parts[0], bk]) for s in widths]
    yd = [TensorDescriptor.from_tensor(y, [bb, s or parts[0]]) if tma_store else None for s in widths]
    _decode_wide[(grid,)](TensorDescriptor.from_tensor(x, [bb, bk]), *wd, *yd, y, b, n, k, y.stride(0),
                          BLOCK_B=bb, BLOCK_K=bk, S1=widths[0], S2=widths[1], S3=widths[2], S4=widths[3],
                          TMA_STORE=tma_store, UPCAST=not x.is_cuda, num_warps=cfg.get("num_warps", 8),
                          num_stages=cfg.get("num_stages", 3))
    how = [f"{count(grid, 'program')} x {count(cfg.get('num_warps', 8), 'warp')}",
           f"{bn}x{bb}x{bk} tiles (weights x tokens x depth; slices of {' + '.join(map(str, parts))} rows) through TMA"]
    if tma_store:
        how.append("stored through TMA")
    if per_sm is not None:
        how.append(f"persistent ({per_sm} a SM)")
    return ", ".join(how + [count(cfg.get("num_stages", 3), "stage")])
