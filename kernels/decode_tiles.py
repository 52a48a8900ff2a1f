"""The decode family's Triton kernels (kernels/decode.py holds the family's contract and launch table).

Two kernels compute y = x·Wᵀ tile by tile, a tile being BLOCK_N rows of W against BLOCK_B tokens:
- `_decode_dot`: the tile product on the tensor cores (a batch under 16 padded with masked zeros: the
  spare arithmetic is free while the weights stream), tiles through pointer loads or TMA descriptors;
- `_decode_fma`: on CUDA cores, for a handful of tokens: W goes from DRAM to registers with no shared
  memory on the way, and each thread keeps its products apart until one reduction at the end.
Both can split K over SPLIT_K programs (more, shorter programs for the same rows: a smaller tail of
the last wave), and both walk their tiles grid-stride, so a grid of a few programs per SM is a
persistent kernel. A split tile is finished by its last program to arrive: every program stores its
partial, takes a ticket, and the last one adds the partials in the order of K, so the result is the
same whatever order the programs ran in.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from .common import count, sm_count

ON_CUDA_CORES = "on CUDA cores"  # in the launch's text where _decode_fma ran: decode.unit_of reads it


@triton.jit
def _finish(
    acc,
    y_ptr,
    ws_ptr,
    cnt_ptr,
    pid_n,
    pid_s,
    pid_b,
    num_b,
    B,
    N,
    stride_yb,
    BLOCK_N: tl.constexpr,
    BLOCK_B: tl.constexpr,
    SPLIT_K: tl.constexpr,
):
    # acc: this program's (BLOCK_N x BLOCK_B) sums over its share of K
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_b = pid_b * BLOCK_B + tl.arange(0, BLOCK_B)
    mask = (offs_n[:, None] < N) & (offs_b[None, :] < B)
    y_ptrs = y_ptr + offs_b[None, :].to(tl.int64) * stride_yb + offs_n[:, None]
    if SPLIT_K == 1:
        tl.store(y_ptrs, acc.to(y_ptr.dtype.element_ty), mask=mask)
    else:
        # partials in ws (SPLIT_K x B x N, float32); a counter per tile, zero between calls
        ws_ptrs = ws_ptr + offs_b[None, :].to(tl.int64) * N + offs_n[:, None]
        plane = B * N  # (B may be the constant 1: Triton specializes it; S·B·N stays far under 2^31)
        tl.store(ws_ptrs + pid_s * plane, acc, mask=mask)
        tl.debug_barrier()  # every thread's partial before the ticket, which releases them to the GPU
        ticket = tl.atomic_add(cnt_ptr + pid_n * num_b + pid_b, 1, sem="acq_rel")
        if ticket == SPLIT_K - 1:
            total = tl.zeros((BLOCK_N, BLOCK_B), dtype=tl.float32)
            for s in tl.static_range(SPLIT_K):  # in the order of K, from L2 (written by other SMs)
                total += tl.load(ws_ptrs + s * plane, mask=mask, other=0.0, cache_modifier=".cg")
            tl.store(y_ptrs, total.to(y_ptr.dtype.element_ty), mask=mask)
            tl.atomic_xchg(cnt_ptr + pid_n * num_b + pid_b, 0)


@triton.jit
def _decode_dot(
    x_ptr,
    w_ptr,
    x_desc,
    w_desc,
    y_ptr,
    ws_ptr,
    cnt_ptr,
    B,
    N,
    K,
    stride_xb,
    stride_wn,
    stride_yb,
    BLOCK_N: tl.constexpr,
    BLOCK_B: tl.constexpr,
    BLOCK_K: tl.constexpr,
    SPLIT_K: tl.constexpr,
    TMA: tl.constexpr,
    EVEN: tl.constexpr,
    EVICT: tl.constexpr,
    FLATTEN: tl.constexpr,
    UPCAST: tl.constexpr,
):
    # Tiles in the order (rows of W, split of K, tokens), tokens fastest: the programs that share a tile
    # of W run side by side, so W comes from DRAM once however many token tiles there are.
    num_b = tl.cdiv(B, BLOCK_B)
    k_tiles = tl.cdiv(K, BLOCK_K)
    k_per = tl.cdiv(k_tiles, SPLIT_K)
    tiles = tl.cdiv(N, BLOCK_N) * SPLIT_K * num_b
    for t in tl.range(tl.program_id(0), tiles, tl.num_programs(0), flatten=FLATTEN):
        pid_b = t % num_b
        pid_s = (t // num_b) % SPLIT_K
        pid_n = t // (num_b * SPLIT_K)
        k_lo = pid_s * k_per
        k_hi = tl.minimum(k_lo + k_per, k_tiles)
        offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
        offs_b = pid_b * BLOCK_B + tl.arange(0, BLOCK_B)
        offs_k = tl.arange(0, BLOCK_K)
        w_ptrs = w_ptr + offs_n[:, None].to(tl.int64) * stride_wn + offs_k[None, :]
        x_ptrs = x_ptr + offs_b[None, :].to(tl.int64) * stride_xb + offs_k[:, None]  # xᵀ, BLOCK_K x BLOCK_B
        acc = tl.zeros((BLOCK_N, BLOCK_B), dtype=tl.float32)
        for kt in range(k_lo, k_hi):
            if TMA:  # the copy engine computes addresses and fills rows past B or N with zeros
                w = w_desc.load([pid_n * BLOCK_N, kt * BLOCK_K])
                xt = x_desc.load([pid_b * BLOCK_B, kt * BLOCK_K]).T
            elif EVEN:  # N and K whole tiles: no mask on the weights
                w = tl.load(w_ptrs + kt * BLOCK_K, eviction_policy=EVICT)
                xt = tl.load(x_ptrs + kt * BLOCK_K, mask=offs_b[None, :] < B, other=0.0)
            else:
                k_left = K - kt * BLOCK_K
                w = tl.load(
                    w_ptrs + kt * BLOCK_K,
                    mask=(offs_n[:, None] < N) & (offs_k[None, :] < k_left),
                    other=0.0,
                    eviction_policy=EVICT,
                )
                xt = tl.load(x_ptrs + kt * BLOCK_K, mask=(offs_b[None, :] < B) & (offs_k[:, None] < k_left), other=0.0)
            if UPCAST:  # Triton's CPU interpreter gets bf16 dots wrong; it computes them in float32 instead
                w, xt = w.to(tl.float32), xt.to(tl.float32)
            acc = tl.dot(w, xt, acc)
        _finish(acc, y_ptr, ws_ptr, cnt_ptr, pid_n, pid_s, pid_b, num_b, B, N, stride_yb, BLOCK_N, BLOCK_B, SPLIT_K)


@triton.jit
def _decode_fma(
    x_ptr,
    w_ptr,
    y_ptr,
    ws_ptr,
    cnt_ptr,
    B,
    N,
    K,
    stride_xb,
    stride_wn,
    stride_yb,
    BLOCK_N: tl.constexpr,
    BLOCK_B: tl.constexpr,
    BLOCK_K: tl.constexpr,
    SPLIT_K: tl.constexpr,
    EVEN: tl.constexpr,
    EVICT: tl.constexpr,
):
    num_b = tl.cdiv(B, BLOCK_B)
    k_tiles = tl.cdiv(K, BLOCK_K)
    k_per = tl.cdiv(k_tiles, SPLIT_K)
    tiles = tl.cdiv(N, BLOCK_N) * SPLIT_K * num_b
    for t in tl.range(tl.program_id(0), tiles, tl.num_programs(0)):
        pid_b = t % num_b
        pid_s = (t // num_b) % SPLIT_K
        pid_n = t // (num_b * SPLIT_K)
        k_lo = pid_s * k_per
        k_hi = tl.minimum(k_lo + k_per, k_tiles)
        offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
        offs_b = pid_b * BLOCK_B + tl.arange(0, BLOCK_B)
        offs_k = tl.arange(0, BLOCK_K)
        w_ptrs = w_ptr + offs_n[:, None].to(tl.int64) * stride_wn + offs_k[None, :]
        x_ptrs = x_ptr + offs_b[:, None].to(tl.int64) * stride_xb + offs_k[None, :]
        # products kept apart along K (tokens x rows x depth) and summed once, after the loop
        acc = tl.zeros((BLOCK_B, BLOCK_N, BLOCK_K), dtype=tl.float32)
        for kt in range(k_lo, k_hi):
            if EVEN:
                w = tl.load(w_ptrs + kt * BLOCK_K, eviction_policy=EVICT)
                x = tl.load(x_ptrs + kt * BLOCK_K, mask=offs_b[:, None] < B, other=0.0)
            else:
                k_left = K - kt * BLOCK_K
                w = tl.load(
                    w_ptrs + kt * BLOCK_K,
                    mask=(offs_n[:, None] < N) & (offs_k[None, :] < k_left),
                    other=0.0,
                    eviction_policy=EVICT,
                )
                x = tl.load(x_ptrs + kt * BLOCK_K, mask=(offs_b[:, None] < B) & (offs_k[None, :] < k_left), other=0.0)
            acc += w.to(tl.float32)[None, :, :] * x.to(tl.float32)[:, None, :]
        _finish(
            tl.trans(tl.sum(acc, axis=2)),
            y_ptr,
            ws_ptr,
            cnt_ptr,
            pid_n,
            pid_s,
            pid_b,
            num_b,
            B,
            N,
            stride_yb,
            BLOCK_N,
            BLOCK_B,
            SPLIT_K,
        )


# --- launching -------------------------------------------------------------------------------------

_workspaces: dict = {}


def workspace(device, split_k: int, b: int, n: int, tiles: int):
    """The partials (split_k x b x n, float32) and per-tile counters (zero between calls) of a split-K
    launch, allocated once per shape: launches of one shape must not run at once on two streams."""
    key = (str(device), split_k, b, n, tiles)
    if key not in _workspaces:
        _workspaces[key] = (
            torch.empty(split_k * b * n, device=device, dtype=torch.float32),
            torch.zeros(tiles, device=device, dtype=torch.int32),
        )
    return _workspaces[key]


def launch(x: torch.Tensor, w: torch.Tensor, y: torch.Tensor, cfg: dict, tma: bool) -> str:
    """Launch one of the two kernels with the settings cfg (see decode.CONFIG); return the launch as launched."""
    cfg = dict(cfg)
    bn, bb, bk = cfg.pop("BLOCK_N"), cfg.pop("BLOCK_B"), cfg.pop("BLOCK_K")
    split, evict, fma = cfg.pop("split_k", 1), cfg.pop("evict", ""), cfg.pop("fma", False)
    per_sm, flatten = cfg.pop("per_sm", None), cfg.pop("flatten", False)
    cfg.pop("tma", None)
    (b, k), n = x.shape, w.shape[0]
    num_b = triton.cdiv(b, bb)
    tiles = triton.cdiv(n, bn) * num_b
    grid = tiles * split if per_sm is None else min(tiles * split, sm_count(x.device) * per_sm)
    ws, cnt = workspace(x.device, split, b, n, tiles) if split > 1 else (y, y)  # y stands in: never touched
    even = n % bn == 0 and k % bk == 0
    if fma:
        _decode_fma[(grid,)](
            x,
            w,
            y,
            ws,
            cnt,
            b,
            n,
            k,
            x.stride(0),
            w.stride(0),
            y.stride(0),
            BLOCK_N=bn,
            BLOCK_B=bb,
            BLOCK_K=bk,
            SPLIT_K=split,
            EVEN=even,
            EVICT=evict,
            **cfg,
        )
    else:
        descs = (None, None)
        if tma:
            from triton.tools.tensor_descriptor import TensorDescriptor

            descs = (TensorDescriptor.from_tensor(x, [bb, bk]), TensorDescriptor.from_tensor(w, [bn, bk]))
        _decode_dot[(grid,)](
            x,
            w,
            *descs,
            y,
            ws,
            cnt,
            b,
            n,
            k,
            x.stride(0),
            w.stride(0),
            y.stride(0),
            BLOCK_N=bn,
            BLOCK_B=bb,
            BLOCK_K=bk,
            SPLIT_K=split,
            TMA=tma,
            EVEN=even,
            EVICT=evict,
            FLATTEN=flatten and split == 1,
            UPCAST=not x.is_cuda,
            **cfg,
        )
    how = [
        f"{count(grid, 'program')} x {count(cfg.get('num_warps', 4), 'warp')}",
        f"{bn}x{bb}x{bk} tiles (weights x tokens x depth){' through TMA' if tma else ''}"
        f"{' ' + ON_CUDA_CORES if fma else ''}",
    ]
    if split > 1:
        how.append(f"K split {split} ways")
    if per_sm is not None:
        how.append(f"persistent ({per_sm} a SM{', flattened' if flatten and split == 1 else ''})")
    if evict:
        how.append(f"weights {evict.replace('_', '-')}")
    return ", ".join(how + [count(cfg.get("num_stages", 3), "stage")])
