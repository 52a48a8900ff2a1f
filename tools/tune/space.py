"""The launch settings the tuning sweep tries for the decode and read kernels, pruned by arithmetic.

No GPU library is imported: the space is tested on the CPU (tests/kernels/test_tune_space.py). The reasoning:

- Bytes floor. W is 470 MB at every batch: 0.107 ms at the H200's 4.4 TB/s of reads, 0.155 ms at the H100's
  3.0. FLOP floor: 2·B·K·N, 0.24 ms at B = 512 on ~1000 TFLOP/s. So B <= 64 is a streaming problem (bytes
  in flight, and the tail of the last wave), B = 256-512 a GEMM one (tile efficiency, and again waves).
- Waves. 132 SMs hold `slots` programs at once (the fewest of shared memory, registers and warps allow);
  a grid of P equal programs takes ceil(P / slots) waves, so P / (ceil(P / slots) x slots) of the time is
  useful. Splitting K multiplies the programs (finer pieces, a smaller tail); a persistent grid of a few
  programs per SM walks the tiles instead. Settings under MIN_WAVE_EFFICIENCY are left out.
- Resources (Hopper): 227 KB of shared memory per block and 228 KB per SM, 64K registers, 64 warps.
"""

from __future__ import annotations

import itertools
import json
import math

SMEM_SM = 228 * 1024
SMEM_BLOCK = 227 * 1024
REGS_SM = 65536
WARPS_SM = 64
MIN_WAVE_EFFICIENCY = 0.8
KEYS = (
    "BLOCK_N",
    "BLOCK_B",
    "BLOCK_K",
    "num_warps",
    "num_stages",
    "tma",
    "fma",
    "split_k",
    "per_sm",
    "flatten",
    "evict",
    "sk",
    "swap",
    "warp_spec",
    "gluon",
)
SPEC_REGS = 168  # registers a thread of a warp-specialized kernel: Triton 3.6's setmaxnreg split (ptxas, sm_90)


def cfg(bn, bb, bk, warps, stages, **extra) -> dict:
    """A decode setting as decode.CONFIG writes it: defaults (False, 1, None, "") left out."""
    out = {"BLOCK_N": bn, "BLOCK_B": bb, "BLOCK_K": bk, "num_warps": warps, "num_stages": stages}
    out.update(
        {
            k: v
            for k, v in extra.items()
            if v is not None and v is not False and v != "" and not (k == "split_k" and v == 1)
        }
    )
    return out


def tag(c: dict) -> str:
    """A short unique name: ptr-64x16x128-w4-s4, tma-...-k2-p2f-ef, fma-8x1x512-w4-s1; for the persistent TMA
    kernel -sk1 (the last wave streamed over K), -sw (operands swapped), -ws (warp-specialized); gluon-... for
    kernels/decode_gluon.py's."""
    kind = "gluon" if c.get("gluon") else "fma" if c.get("fma") else "tma" if c.get("tma") else "ptr"
    t = f"{kind}-{c['BLOCK_N']}x{c['BLOCK_B']}x{c['BLOCK_K']}-w{c['num_warps']}-s{c['num_stages']}"
    if c.get("split_k", 1) > 1:
        t += f"-k{c['split_k']}"
    if c.get("per_sm"):
        t += f"-p{c['per_sm']}" + ("f" if c.get("flatten") else "")
    if c.get("sk"):
        t += f"-sk{c['sk']}"
    t += ("-sw" if c.get("swap") else "") + ("-ws" if c.get("warp_spec") else "")
    return t + ("-ef" if c.get("evict") else "")


def dumps(c: dict) -> str:
    return json.dumps({k: c[k] for k in KEYS if k in c}, separators=(",", ":"))


def resources(c: dict, b: int) -> dict:
    """Estimated shared memory (bytes), registers a thread, and programs an SM holds at once."""
    bn, bb, bk, warps, stages = (c[k] for k in ("BLOCK_N", "BLOCK_B", "BLOCK_K", "num_warps", "num_stages"))
    threads = 32 * warps * (3 if c.get("warp_spec") else 1)  # a producer warpgroup and two consumers
    if c.get("fma"):  # registers only: the tile loaded, and the products kept apart until the end
        smem = 0
        regs = 40 + (bb * bn * bk + bn * bk // 2 + bb * bk // 2) // threads
    else:  # a stage holds a tile of W and one of the tokens (bf16); the accumulator lives in registers
        smem = max(stages * (bn + bb) * bk * 2, bn * bb * 2)  # the epilogue's layout change reuses the stages
        if c.get("swap") and not c.get("warp_spec"):
            smem = stages * (bn + bb) * bk * 2 + bn * bb * 2  # a store through TMA has a buffer of its own
        regs = SPEC_REGS if c.get("warp_spec") else 48 + bn * bb // threads
    slots = min(SMEM_SM // max(smem, 1), REGS_SM // (threads * min(regs, 255)), WARPS_SM // (threads // 32), 32)
    return {"smem": smem, "regs": regs, "per_sm": slots}


def programs(c: dict, b: int, n: int, k: int, sms: int) -> int:
    tiles = -(-n // c["BLOCK_N"]) * -(-b // c["BLOCK_B"]) * c.get("split_k", 1)
    return min(tiles, sms * c["per_sm"]) if c.get("per_sm") else tiles


def wave_efficiency(c: dict, b: int, n: int, k: int, sms: int) -> float:
    """The useful share of the time if every piece takes as long (see the module's note)."""
    pieces = -(-n // c["BLOCK_N"]) * -(-b // c["BLOCK_B"]) * c.get("split_k", 1)
    if c.get("sk"):  # stream-K: every program gets as many k-steps (the partials' round trip left out)
        return 1.0
    if c.get("per_sm"):
        grid = min(pieces, sms * c["per_sm"])
        return pieces / grid / math.ceil(pieces / grid)
    slots = sms * max(resources(c, b)["per_sm"], 1)
    return pieces / (math.ceil(pieces / slots) * slots)


def fits(c: dict, b: int, n: int, k: int, sms: int) -> bool:
    r = resources(c, b)
    if r["per_sm"] < 1 or r["smem"] > SMEM_BLOCK or r["regs"] > 255:
        return False
    if k % (c["BLOCK_K"] * c.get("split_k", 1)):  # every split a whole number of tiles deep
        return False
    if c.get("per_sm") and c["per_sm"] > r["per_sm"]:
        return False
    return wave_efficiency(c, b, n, k, sms) >= MIN_WAVE_EFFICIENCY


def _dot_tiles(b: int):
    """(BLOCK_N, BLOCK_B, BLOCK_K, warps) of the tensor-core kernel for batch b."""
    if b <= 16:  # the batch padded to 16 (its rows past B masked, never read); tiles of W from 8 to 64 KB a
        # stage. Every tile reads the tokens again from L2, B / BLOCK_N of W's bytes: from B = 8, 256-row tiles
        # halve what 128-row ones read (12% at B = 16), and K split 2 ways gives their 112 tiles 224 programs
        wide = [(256, 16, 64, 8), (256, 16, 128, 8)] if b >= 8 else []
        return [
            (16, 16, 512, 4),
            (32, 16, 256, 4),
            (32, 16, 512, 4),
            (64, 16, 128, 4),
            (64, 16, 256, 4),
            (128, 16, 128, 8),
        ] + wide
    if b <= 64:  # the tokens in one tile (W read once from DRAM), its rows for one or two warpgroups
        bb = max(32, 1 << (b - 1).bit_length())
        return [
            (64, bb, 64, 4),
            (64, bb, 128, 4),
            (128, bb, 64, 4),
            (128, bb, 64, 8),
            (128, bb, 128, 8),
            (256, bb, 64, 8),
        ]
    bbs = [128, 256] if b >= 256 else [128]  # GEMM tiles: as wide as the tensor cores like them
    return [
        (bn, bb, bk, w)
        for bb in bbs
        for bn, bk, w in ((128, 64, 8), (128, 128, 8), (256, 64, 8), (64, 64, 4))
        if bn * bb <= 256 * 128
    ]


def decode_space(b: int, n: int = 28672, k: int = 8192, sms: int = 132) -> list[dict]:
    """The broad sweep's settings at batch b, each fitting the SM and the wave rule. Per tile shape: the
    pipeline depth with pointer loads and with TMA; K split 2 and 4 ways (finer pieces, a smaller tail);
    a persistent grid (2 programs a SM for streaming, 1 for GEMM tiles at every depth), its loops flattened; the
    evict-first hint on the weights alone and with the split. For B <= 4, CUDA-core tiles besides."""
    out = []
    big = b > 64
    stages = (3, 4) if big else (3, 4, 5)
    mid = 4 if not big else 3
    for bn, bb, bk, w in _dot_tiles(b):
        for tma in (False, True):
            out += [cfg(bn, bb, bk, w, s, tma=tma) for s in stages]
            out += [cfg(bn, bb, bk, w, mid, tma=tma, split_k=sk) for sk in ((2,) if big else (2, 4))]
            # GEMM tiles persistent at every depth: at B = 256 on an H100 the 4-stage one won, the 3-stage one lost
            out += [
                cfg(bn, bb, bk, w, s, tma=tma, per_sm=1 if big else 2, flatten=True)
                for s in (stages if big else (mid,))
            ]
        if not big:  # the streaming hint, on the pointer path (TMA loads take none)
            out += [
                cfg(bn, bb, bk, w, mid, evict="evict_first"),
                cfg(bn, bb, bk, w, mid, evict="evict_first", split_k=4),
            ]
    if b <= 4:  # CUDA cores: a handful of tokens, W straight to registers
        for bn, bk, w in ((4, 1024, 4), (8, 512, 4), (8, 1024, 4), (16, 512, 4), (16, 256, 4)):
            out += [cfg(bn, b, bk, w, s, fma=True, split_k=sk) for s in (1, 3) for sk in (1, 4)]
            out.append(cfg(bn, b, bk, w, 1, fma=True, evict="evict_first"))
    return dedup(c for c in out if fits(c, b, n, k, sms))


def second_space(b: int, n: int = 28672, k: int = 8192, sms: int = 132) -> list[dict]:
    """The second sweep's new settings at batch b, all through kernels/decode_sk.py (see the module's note
    on the second sweep): stream-K tails (sk=1: the tiles past the last full wave; sk=2: one wave more),
    operands swapped (the tile stored through TMA as y lies), and warp specialization (num_warps=4: one
    warpgroup loads, two compute; one program a SM by its registers)."""
    out = []
    if b <= 16:  # streaming: every SM the same bytes, or a producer warpgroup that only issues loads
        for bn, bk, s in ((128, 128, 4), (128, 128, 6), (64, 256, 4), (256, 64, 6)):
            # with no more tiles than SMs, sk=1 already streams every tile (decode_sk.plan): sk=2 would repeat it
            waves = (1, 2) if -(-n // bn) > sms else (1,)
            out += [cfg(bn, 16, bk, 4, s, tma=True, per_sm=1, sk=sk) for sk in waves]
            out.append(cfg(bn, 16, bk, 4, s, tma=True, warp_spec=True))
        # 256-row tiles: the tokens' tile is re-read from L2 for every tile of W, 6% of W's bytes at B = 16
        # where 128-row tiles read 12%; their 112 tiles are all streamed over the 132 SMs
        for bk, s, w in ((64, 4, 4), (128, 3, 4), (64, 4, 8), (128, 3, 8)):
            out.append(cfg(256, 16, bk, w, s, tma=True, per_sm=1, sk=1))
        out += [cfg(64, 16, 128, 4, s, tma=True, per_sm=2, sk=1) for s in (3, 4)]  # two programs a SM
    else:  # GEMM tiles: 128x256 is the shape Triton's GEMM matched cuBLAS with; 256x128 the first sweep's best at
        # B = 256 on an H100; 128x128 the one with fewer idle SMs
        for bn, bb, bk, w, s in (
            (128, 256, 64, 8, 3),
            (128, 256, 64, 8, 4),
            (256, 128, 64, 8, 3),
            (256, 128, 64, 8, 4),
            (128, 128, 64, 8, 4),
            (128, 128, 128, 8, 3),
        ):
            if bb <= max(128, b):
                out += [
                    cfg(bn, bb, bk, w, s, tma=True, per_sm=1, sk=sk, swap=sw) for sk in (1, 2) for sw in (False, True)
                ]
        for bn, bb, s in ((128, 256, 3), (128, 256, 4), (256, 128, 3), (256, 128, 4), (128, 128, 4), (128, 128, 5)):
            if bb <= max(128, b):
                out += [
                    cfg(bn, bb, 64, 4, s, tma=True, warp_spec=True, swap=sw, per_sm=p)
                    for sw in (False, True)
                    for p in (None, 1)
                ]
    return dedup(c for c in out if fits(c, b, n, k, sms))


def dedup(configs) -> list[dict]:
    seen, out = set(), []
    for c in configs:
        if tag(c) not in seen:
            seen.add(tag(c))
            out.append(c)
    return out


def around(c: dict, b: int, n: int = 28672, k: int = 8192, sms: int = 132) -> list[dict]:
    """Settings one step from c: each knob moved once (stages +-1, warps x2 /2, depth x2 /2, split, grid,
    the hint, TMA on or off), for the narrower second sweep."""
    moves = [{"num_stages": c["num_stages"] + d} for d in (-1, 1)]
    moves += [{"num_warps": c["num_warps"] * f} for f in (0.5, 2)]
    moves += [{"BLOCK_K": c["BLOCK_K"] * f} for f in (0.5, 2)]
    moves += [{"BLOCK_N": c["BLOCK_N"] * f} for f in (0.5, 2)]
    moves += [{"split_k": s} for s in (1, 2, 3, 4, 8) if s != c.get("split_k", 1)]
    moves += [{"per_sm": p} for p in (None, 1, 2, 3, 4) if p != c.get("per_sm")]
    moves += [{"evict": "" if c.get("evict") else "evict_first"}, {"tma": not c.get("tma")}]
    out = []
    for m in moves:
        new = {**c, **{key: int(v) if isinstance(v, float) else v for key, v in m.items()}}
        if new["num_stages"] < 1 or new["num_warps"] < 1 or (new.get("fma") and new.get("tma")):
            continue
        if new.get("tma") and new.get("evict"):
            continue
        out.append(
            cfg(
                **{
                    "bn": new["BLOCK_N"],
                    "bb": new["BLOCK_B"],
                    "bk": new["BLOCK_K"],
                    "warps": new["num_warps"],
                    "stages": new["num_stages"],
                },
                **{key: new.get(key) for key in KEYS[5:]},
            )
        )
    return dedup(x for x in out if fits(x, b, n, k, sms) and tag(x) != tag(c))


def read_space(triton_only: bool = False) -> list[tuple[str, dict]]:
    """The read kernels' settings: elements a thread keeps in flight (BLOCK / threads from 8 to 32), programs
    a SM (a persistent grid: every program reads many tiles), pipelining and the streaming hint."""
    out = []
    for block, warps, per_sm in itertools.product((2048, 4096, 8192), (4, 8, 16), (2, 4, 8, 16)):
        if not 8 <= block // (32 * warps) <= 32 or warps * per_sm > WARPS_SM:
            continue
        for stages, evict in ((1, ""), (1, "evict_first"), (3, "")):
            out.append(
                ("triton", {"BLOCK": block, "num_warps": warps, "per_sm": per_sm, "stages": stages, "evict": evict})
            )
    if not triton_only:
        for threads, per_sm, unroll in itertools.product((256, 512, 1024), (2, 4, 8, 16), (2, 4, 8)):
            if threads * per_sm <= 2048:
                out.append(("cupy", {"threads": threads, "per_sm": per_sm, "unroll": unroll}))
    return out


def read_tag(impl: str, c: dict) -> str:
    if impl == "cupy":
        return f"cupy-t{c['threads']}-p{c['per_sm']}-u{c['unroll']}"
    return f"triton-{c['BLOCK']}-w{c['num_warps']}-p{c['per_sm']}-s{c['stages']}" + ("-ef" if c.get("evict") else "")
