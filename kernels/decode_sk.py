"""The decode family's persistent TMA kernel (kernels/decode.py holds the contract; decode_tiles.py the
first kernels): for the batches where a wave of tiles no longer fills the GPU evenly.

At B = 512 with 128x256 tiles there are 448 tiles for 132 SMs: 3.39 waves, so the fourth wave runs on 52
SMs while 80 idle, and the step takes 4 tile-times for 3.39 of work (85%). Stream-K (Osama et al., 2023)
evens it out: the whole tiles of the first waves run as usual, and the iterations over K of the last
tiles are dealt out in equal runs to every program of a persistent grid (to groups of programs side by side,
one a token tile, where a row of W has several), so each program does the same number of k-steps. A tile
whose k-steps fall to several programs is finished by the last of them to
arrive: each stores its partial sum (float32) in a slot of its own, takes a ticket, and the last adds
the partials in the order of K, so the result does not depend on which program ran first.

The same scheme serves the memory-bound batches (B <= 16): every program then streams exactly as many
bytes of W. Two more knobs: the operands swapped (tokens as the rows of the product, so the tile is
stored into y as it lies, through TMA), and warp specialization (Triton's automatic producer/consumer
split on Hopper: with num_warps=4 one warpgroup issues the TMA loads and two compute, 12 warps in all).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from .common import count, sm_count


@triton.jit
def _tile_product(
    x_desc,
    w_desc,
    pid_n,
    pid_b,
    k_lo,
    k_hi,
    BLOCK_N: tl.constexpr,
    BLOCK_B: tl.constexpr,
    BLOCK_K: tl.constexpr,
    SWAP: tl.constexpr,
    WARP_SPEC: tl.constexpr,
    UPCAST: tl.constexpr,
):
    # the k-steps [k_lo, k_hi) of one tile: (tokens x rows) when SWAP, else (rows of W x tokens)
    if SWAP:
        acc = tl.zeros((BLOCK_B, BLOCK_N), dtype=tl.float32)
    else:
        acc = tl.zeros((BLOCK_N, BLOCK_B), dtype=tl.float32)
    for kt in tl.range(k_lo, k_hi, warp_specialize=WARP_SPEC):
        w = w_desc.load([pid_n * BLOCK_N, kt * BLOCK_K])
        x = x_desc.load([pid_b * BLOCK_B, kt * BLOCK_K])
        if UPCAST:  # Triton's CPU interpreter gets bf16 dots wrong; it computes them in float32 instead
            w, x = w.to(tl.float32), x.to(tl.float32)
        if SWAP:
            acc = tl.dot(x, w.T, acc)
        else:
            acc = tl.dot(w, x.T, acc)
    return acc


@triton.jit
def _store(
    acc,
    y_ptr,
    y_desc,
    pid_n,
    pid_b,
    B,
    N,
    stride_yb,
    BLOCK_N: tl.constexpr,
    BLOCK_B: tl.constexpr,
    SWAP: tl.constexpr,
    TMA_STORE: tl.constexpr,
):
    if TMA_STORE:  # the tile lies as y does (SWAP); the copy engine clips rows past B and columns past N
        y_desc.store([pid_b * BLOCK_B, pid_n * BLOCK_N], acc.to(y_desc.dtype))
    elif SWAP:
        offs_b = pid_b * BLOCK_B + tl.arange(0, BLOCK_B)
        offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
        tl.store(
            y_ptr + offs_b[:, None].to(tl.int64) * stride_yb + offs_n[None, :],
            acc.to(y_ptr.dtype.element_ty),
            mask=(offs_b[:, None] < B) & (offs_n[None, :] < N),
        )
    else:
        offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
        offs_b = pid_b * BLOCK_B + tl.arange(0, BLOCK_B)
        tl.store(
            y_ptr + offs_b[None, :].to(tl.int64) * stride_yb + offs_n[:, None],
            acc.to(y_ptr.dtype.element_ty),
            mask=(offs_n[:, None] < N) & (offs_b[None, :] < B),
        )


@triton.jit
def _slot(ws_ptr, slot, D0: tl.constexpr, D1: tl.constexpr):
    # the pointers of one partial tile (D0 x D1 float32) in the workspace
    return ws_ptr + slot.to(tl.int64) * (D0 * D1) + tl.arange(0, D0)[:, None] * D1 + tl.arange(0, D1)[None, :]


@triton.jit
def _decode_sk(
    x_desc,
    w_desc,
    y_desc,
    y_ptr,
    ws_ptr,
    cnt_ptr,
    B,
    N,
    K,
    stride_yb,
    sk_tiles,
    BLOCK_N: tl.constexpr,
    BLOCK_B: tl.constexpr,
    BLOCK_K: tl.constexpr,
    SWAP: tl.constexpr,
    TMA_STORE: tl.constexpr,
    WARP_SPEC: tl.constexpr,
    UPCAST: tl.constexpr,
):
    # Tiles in the order (rows of W, tokens), tokens fastest: the programs that share a tile of W run side
    # by side, so W comes from DRAM once however many token tiles there are; x stays in L2.
    num_b = tl.cdiv(B, BLOCK_B)
    tiles = tl.cdiv(N, BLOCK_N) * num_b
    k_tiles = tl.cdiv(K, BLOCK_K)
    pid = tl.program_id(0)
    progs = tl.num_programs(0)
    D0: tl.constexpr = BLOCK_B if SWAP else BLOCK_N
    D1: tl.constexpr = BLOCK_N if SWAP else BLOCK_B
    dp_tiles = tiles - sk_tiles
    for t in tl.range(pid, dp_tiles, progs):  # whole tiles: the waves that fill every SM
        acc = _tile_product(
            x_desc, w_desc, t // num_b, t % num_b, 0, k_tiles, BLOCK_N, BLOCK_B, BLOCK_K, SWAP, WARP_SPEC, UPCAST
        )
        _store(acc, y_ptr, y_desc, t // num_b, t % num_b, B, N, stride_yb, BLOCK_N, BLOCK_B, SWAP, TMA_STORE)
    if not WARP_SPEC:  # (Triton 3.6 specializes the warps of a kernel with one loop nest only)
        # The last sk_tiles tiles: their k-steps dealt out in equal runs, `per` to a group of num_b programs
        # side by side, one a token tile, which run the same k-steps of the same rows of W at the same time,
        # so W comes from DRAM once here as in the whole waves. The launch makes progs and sk_tiles
        # multiples of num_b.
        g = pid // num_b
        lane = pid % num_b
        groups = progs // num_b
        total = (sk_tiles // num_b) * k_tiles
        per = tl.cdiv(total, groups)
        it = g * per
        end = tl.minimum(it + per, total)
        while it < end:
            s = it // k_tiles  # the streamed row of W this run is in, and the k-steps of it that are this group's
            k_lo = it - s * k_tiles
            k_hi = tl.minimum(k_tiles, k_lo + end - it)
            t = dp_tiles + s * num_b + lane
            acc = _tile_product(
                x_desc, w_desc, t // num_b, lane, k_lo, k_hi, BLOCK_N, BLOCK_B, BLOCK_K, SWAP, False, UPCAST
            )
            if k_hi - k_lo == k_tiles:  # the whole tile is this program's
                _store(acc, y_ptr, y_desc, t // num_b, lane, B, N, stride_yb, BLOCK_N, BLOCK_B, SWAP, TMA_STORE)
            else:
                # two slots a program: the run that starts its range (slot 2p), and the one that ends it (2p + 1)
                tl.store(_slot(ws_ptr, 2 * pid + (it != g * per).to(tl.int32), D0, D1), acc)
                tl.debug_barrier()  # every thread's partial before the ticket, which releases them to the GPU
                ticket = tl.atomic_add(cnt_ptr + s * num_b + lane, 1, sem="acq_rel")
                p0 = (s * k_tiles) // per
                p1 = ((s + 1) * k_tiles - 1) // per
                if ticket == p1 - p0:  # the last to arrive adds the partials in the order of K
                    sum_ = tl.zeros((D0, D1), dtype=tl.float32)
                    for q in range(p0, p1 + 1):
                        q_slot = 2 * (q * num_b + lane) + (q * per < s * k_tiles).to(tl.int32)
                        sum_ += tl.load(_slot(ws_ptr, q_slot, D0, D1), cache_modifier=".cg")
                    _store(sum_, y_ptr, y_desc, t // num_b, lane, B, N, stride_yb, BLOCK_N, BLOCK_B, SWAP, TMA_STORE)
                    tl.atomic_xchg(cnt_ptr + s * num_b + lane, 0)
            it += k_hi - k_lo


# --- launching -------------------------------------------------------------------------------------

_workspaces: dict = {}


def plan(b: int, n: int, cfg: dict, sms: int) -> tuple[int, int, int]:
    """(tiles, programs, streamed tiles) of a setting: a persistent grid of per_sm programs a SM (one
    program a tile when neither per_sm nor sk is set; with sk, whole groups of one program a token tile:
    the grid rounded down to a multiple of them, and never fewer than one group); sk = w streams the tiles
    past the last full wave and w - 1 waves before it (at most every tile). A streamed grid keeps every
    program even where there are fewer tiles than programs (B <= 16 with 256-row tiles: 112 tiles on 132
    SMs), so that every SM streams as many bytes; a grid that does not stream has no more programs than
    tiles."""
    num_b = triton.cdiv(b, cfg["BLOCK_B"])
    tiles = triton.cdiv(n, cfg["BLOCK_N"]) * num_b
    sk, per_sm = cfg.get("sk", 0), cfg.get("per_sm")
    grid = sms * (per_sm or 1)
    if sk:  # whole groups of num_b programs (one a token tile), so that the streamed tiles are whole rows of W
        grid = max(num_b, grid - grid % num_b)
    progs = grid if sk else min(tiles, grid) if per_sm else tiles
    streamed = 0 if not sk else min(tiles, tiles % progs + (sk - 1) * progs)
    return tiles, progs, streamed


def workspace(device, progs: int, tile: int, streamed: int):
    """Two partial tiles a program (float32) and a counter per streamed tile (zero between calls),
    allocated once per shape: launches of one shape must not run at once on two streams."""
    key = (str(device), progs, tile, streamed)
    if key not in _workspaces:
        _workspaces[key] = (
            torch.empty(max(2 * progs * tile, 1), device=device, dtype=torch.float32),
            torch.zeros(max(streamed, 1), device=device, dtype=torch.int32),
        )
    return _workspaces[key]


def launch_sk(x: torch.Tensor, w: torch.Tensor, y: torch.Tensor, cfg: dict) -> str:
    """y = x·Wᵀ through _decode_sk with the settings cfg (see decode.CONFIG); returns the launch as launched.
    x, w and y need 16-byte aligned rows (TMA)."""
    from triton.tools.tensor_descriptor import TensorDescriptor

    cfg = dict(cfg)
    bn, bb, bk = cfg.pop("BLOCK_N"), cfg.pop("BLOCK_B"), cfg.pop("BLOCK_K")
    swap, spec = bool(cfg.pop("swap", False)), bool(cfg.pop("warp_spec", False))
    sk, per_sm = cfg.pop("sk", 0), cfg.pop("per_sm", None)
    if spec and sk:
        raise ValueError("the decode kernel streams its last tiles over K or specializes its warps, not both")
    for key in ("tma", "flatten", "evict", "split_k"):  # TMA is this kernel's only path; the rest are not its knobs
        cfg.pop(key, None)
    (b, k), n = x.shape, w.shape[0]
    sms = sm_count(x.device)
    tiles, progs, streamed = plan(b, n, {"BLOCK_N": bn, "BLOCK_B": bb, "sk": sk, "per_sm": per_sm}, sms)
    # with nothing streamed the workspace is never touched, but the counters' loads still compile: int32 always
    ws, cnt = workspace(x.device, progs if streamed else 0, bn * bb, streamed)
    tma_store = swap and not spec and (y.stride(0) * y.element_size()) % 16 == 0
    x_desc, w_desc = TensorDescriptor.from_tensor(x, [bb, bk]), TensorDescriptor.from_tensor(w, [bn, bk])
    y_desc = TensorDescriptor.from_tensor(y, [bb, bn]) if tma_store else None
    _decode_sk[(progs,)](
        x_desc,
        w_desc,
        y_desc,
        y,
        ws,
        cnt,
        b,
        n,
        k,
        y.stride(0),
        streamed,
        BLOCK_N=bn,
        BLOCK_B=bb,
        BLOCK_K=bk,
        SWAP=swap,
        TMA_STORE=tma_store,
        WARP_SPEC=spec,
        UPCAST=not x.is_cuda,
        **cfg,
    )
    warps = cfg.get("num_warps", 4)
    how = [
        f"{count(progs, 'program')} x {count(3 * warps if spec else warps, 'warp')}",
        f"{bn}x{bb}x{bk} tiles (weights x tokens x depth) through TMA",
    ]
    if swap:
        how.append("tokens as the rows" + (", stored through TMA" if tma_store else ""))
    if spec:
        how.append("warp-specialized")
    if per_sm or sk:
        how.append(
            f"persistent ({per_sm or 1} a SM)"
            if progs == sms * (per_sm or 1)
            else f"persistent ({count(progs, 'program')})"
        )
    if streamed:
        how.append(f"the last {count(streamed, 'tile')} of {tiles} streamed over K")
    return ", ".join(how + [count(cfg.get("num_stages", 3), "stage")])
