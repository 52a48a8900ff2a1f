"""decode: the matrix-vector products of LLM decode, y = x·Wᵀ with W (N×K, bf16, as nn.Linear stores it)
one large MLP projection and x a batch of B token vectors. Triton kernels (kernels/decode_tiles.py: tensor
cores, or CUDA cores for a handful of tokens; K split or not; as tuned per batch), a CuPy RawKernel on
CUDA cores (one warp per output row, for small batches), and torch (F.linear's cuBLAS call) as the peer.

Every token must read all of W, so at small B the step time is W's bytes over the memory bandwidth and
the tensor cores idle; batching B sequences multiplies the tokens per step at almost the same step time,
until the arithmetic (2·B·K·N) catches up with the bytes near B ≈ peak FLOP/s ÷ bandwidth.
"""

from __future__ import annotations

import torch

from .common import Prepared, Work, check_close, count, cupy, generator, poison, raw_kernel, sm_count, tuned_row
from .decode_sk import launch_sk
from .decode_tiles import ON_CUDA_CORES, launch
from .gemm import _tma_ok as tma_ok

IMPLS = ("triton", "cupy", "torch")
# Llama-3-70B's MLP up projection: 8192 -> 28672, 470 MB of bf16 weights, nine times an H100's 50 MB L2.
SIZES = {"b": 1, "k": 8192, "n": 28672}
STORY = [
    "{said} at batch {tokens_per_call:.0f}: {kernel_us:.0f} µs a step for {tokens_per_s:,.0f} tokens/s.",
    "Each step moved {useful_gb:.2f} GB of useful bytes (the weights once, the tokens in and out): {gbps:.0f} "
    "GB/s, MBU {mbu_pct:.0f}% of the datasheet DRAM bandwidth, while the arithmetic reached MFU {mfu_pct:.2g}% "
    "of the {dtype} peak.",
    "Against the read peak measured at the start (a sum over 1 GiB: no writes share the bus) that is "
    "{mbu_read_pct:.0f}%, the ceiling of a kernel that reads its weights and writes almost nothing.",
    "That is {speedup_vs_baseline:.2f}x the speed of {baseline}.",
    "It used {j_per_token:.3g} J a token ({power_w_energy:.0f} W).",
]
SK_KEYS = ("sk", "swap", "warp_spec")  # settings that run decode_sk.py's kernel
CUPY_MAX_B = 16  # the CuPy kernel keeps one accumulator per token in registers, on CUDA cores

# Launch settings by batch size: each row covers batches up to its first number. A GPU model's line is
# written by python -m tools.tune.kernels --only decode --apply from a sweep interleaved with torch at sustained
# clocks (its CSV goes to results/). Keys: the tile (BLOCK_N weight rows x BLOCK_B tokens x BLOCK_K deep),
# num_warps, num_stages, and where tuned: "tma" (tiles through TMA descriptors), "fma" (CUDA cores),
# "split_k" (K over that many programs), "per_sm" (a persistent grid of that many programs a SM),
# "flatten" (its loops flattened), "evict" (an eviction hint on the weights' loads); and for the persistent
# TMA kernel of decode_sk.py: "sk" (the last waves streamed over K), "swap" (tokens as the rows of the
# product), "warp_spec" (Triton's warp specialization: num_warps=4 makes 12 warps); and "tail" (set by hand
# from research/decode_waves.py, which the sweep does not write): the rows past the last whole wave of these
# tiles run in a second launch with the tail's settings; and "gluon" (set by hand from research/decode_waves.py):
# kernels/decode_gluon.py's persistent kernel, its loads running ahead across the end of a tile. A GPU
# without a line gets the fallback rule: 16-row weight tiles up to 16 tokens, 64x32 tiles up to 32, GEMM-like
# 128x128 tiles above.
FALLBACK = (
    (16, {"BLOCK_N": 16, "BLOCK_B": 16, "BLOCK_K": 512, "num_warps": 4, "num_stages": 4}),
    (32, {"BLOCK_N": 64, "BLOCK_B": 32, "BLOCK_K": 128, "num_warps": 4, "num_stages": 4}),
    (None, {"BLOCK_N": 128, "BLOCK_B": 128, "BLOCK_K": 64, "num_warps": 8, "num_stages": 4}),
)
# tools/tune/choice.py reads and writes each GPU's line whole, so the formatter leaves the table as it is
# fmt: off
CONFIG = {  # python -m tools.tune.kernels --only decode --apply writes a GPU's line here
    "NVIDIA H100 80GB HBM3": {"triton": ((1, {"BLOCK_N": 8, "BLOCK_B": 1, "BLOCK_K": 1024, "num_warps": 4, "num_stages": 1, "fma": True, "evict": "evict_first"}), (2, {"BLOCK_N": 64, "BLOCK_B": 16, "BLOCK_K": 256, "num_warps": 4, "num_stages": 5, "tma": True}), (4, {"BLOCK_N": 64, "BLOCK_B": 16, "BLOCK_K": 256, "num_warps": 4, "num_stages": 4, "evict": "evict_first"}), (8, {"BLOCK_N": 64, "BLOCK_B": 16, "BLOCK_K": 256, "num_warps": 4, "num_stages": 5, "tma": True}), (16, {"BLOCK_N": 32, "BLOCK_B": 16, "BLOCK_K": 512, "num_warps": 4, "num_stages": 4}), (32, {"BLOCK_N": 64, "BLOCK_B": 32, "BLOCK_K": 128, "num_warps": 4, "num_stages": 4, "tma": True}), (64, {"BLOCK_N": 128, "BLOCK_B": 64, "BLOCK_K": 64, "num_warps": 4, "num_stages": 5, "tma": True}), (128, {"BLOCK_N": 128, "BLOCK_B": 128, "BLOCK_K": 64, "num_warps": 8, "num_stages": 3, "tma": True}), (256, {"BLOCK_N": 128, "BLOCK_B": 256, "BLOCK_K": 64, "num_warps": 8, "num_stages": 4, "tma": True, "per_sm": 1, "flatten": True}), (None, {"BLOCK_N": 128, "BLOCK_B": 256, "BLOCK_K": 64, "num_warps": 8, "num_stages": 3, "tma": True, "per_sm": 1, "tail": {"BLOCK_N": 128, "BLOCK_B": 128, "BLOCK_K": 64, "num_warps": 8, "num_stages": 4, "tma": True}})), "cupy_threads": 512},
    "NVIDIA H200": {"triton": ((1, {"BLOCK_N": 64, "BLOCK_B": 16, "BLOCK_K": 128, "num_warps": 4, "num_stages": 4}), (2, {"BLOCK_N": 64, "BLOCK_B": 16, "BLOCK_K": 128, "num_warps": 4, "num_stages": 4, "evict": "evict_first"}), (4, {"BLOCK_N": 64, "BLOCK_B": 16, "BLOCK_K": 128, "num_warps": 4, "num_stages": 4, "evict": "evict_first"}), (8, {"BLOCK_N": 256, "BLOCK_B": 16, "BLOCK_K": 128, "num_warps": 8, "num_stages": 3}), (16, {"BLOCK_N": 256, "BLOCK_B": 16, "BLOCK_K": 128, "num_warps": 8, "num_stages": 3}), (32, {"BLOCK_N": 128, "BLOCK_B": 32, "BLOCK_K": 128, "num_warps": 8, "num_stages": 4, "evict": "evict_first"}), (64, {"BLOCK_N": 128, "BLOCK_B": 64, "BLOCK_K": 128, "num_warps": 8, "num_stages": 4, "tma": True}), (128, {"BLOCK_N": 128, "BLOCK_B": 128, "BLOCK_K": 64, "num_warps": 8, "num_stages": 3, "tma": True}), (256, {"BLOCK_N": 128, "BLOCK_B": 256, "BLOCK_K": 64, "num_warps": 8, "num_stages": 4, "tma": True}), (None, {"BLOCK_N": 128, "BLOCK_B": 256, "BLOCK_K": 64, "num_warps": 8, "num_stages": 3, "tma": True, "per_sm": 1, "tail": {"BLOCK_N": 128, "BLOCK_B": 128, "BLOCK_K": 64, "num_warps": 8, "num_stages": 4, "tma": True}})), "cupy_threads": 128},
    "*": {"triton": FALLBACK, "cupy_threads": 256},
}
# fmt: on


# --- kernels: the Triton ones in decode_tiles.py; the CUDA-core RawKernel here --------------------

CUDA_DECODE = r"""
// bf16 as its bits (unsigned short): a bf16 is the top half of a float32.
__device__ __forceinline__ float bf(unsigned int bits) { return __uint_as_float(bits << 16); }
__device__ __forceinline__ unsigned short to_bf(float f) {  // round to nearest even
    unsigned int u = __float_as_uint(f);
    return (unsigned short)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

// One warp per output row n: each lane reads 8 weights (16 bytes) at a time, two loads in flight, and
// keeps one float accumulator per token; a shuffle sums the lanes. BATCH is fixed when compiled.
extern "C" __global__ void decode_bf16(const unsigned short* __restrict__ x, const unsigned short* __restrict__ w,
                                       unsigned short* __restrict__ y, int n_rows, int k) {
    int warps = blockDim.x / 32;
    int n = blockIdx.x * warps + threadIdx.x / 32;
    int lane = threadIdx.x % 32;
    if (n >= n_rows) return;
    const unsigned short* row = w + (long long)n * k;
    float acc[BATCH];
    #pragma unroll
    for (int b = 0; b < BATCH; ++b) acc[b] = 0.f;
    int i = lane * 8;  // k is a multiple of 8: rows start 16-byte aligned and end on a whole group
    for (; i + 256 < k; i += 512) {
        uint4 p = __ldcs(reinterpret_cast<const uint4*>(row + i));
        uint4 q = __ldcs(reinterpret_cast<const uint4*>(row + i + 256));
        unsigned int pw[4] = {p.x, p.y, p.z, p.w}, qw[4] = {q.x, q.y, q.z, q.w};
        #pragma unroll
        for (int b = 0; b < BATCH; ++b) {
            const unsigned short* xb = x + (long long)b * k;
            uint4 xp = __ldg(reinterpret_cast<const uint4*>(xb + i));
            uint4 xq = __ldg(reinterpret_cast<const uint4*>(xb + i + 256));
            unsigned int xpw[4] = {xp.x, xp.y, xp.z, xp.w}, xqw[4] = {xq.x, xq.y, xq.z, xq.w};
            #pragma unroll
            for (int j = 0; j < 4; ++j) {
                acc[b] += bf(pw[j] & 0xffffu) * bf(xpw[j] & 0xffffu) + bf(pw[j] >> 16) * bf(xpw[j] >> 16);
                acc[b] += bf(qw[j] & 0xffffu) * bf(xqw[j] & 0xffffu) + bf(qw[j] >> 16) * bf(xqw[j] >> 16);
            }
        }
    }
    for (; i < k; i += 256) {
        uint4 p = __ldcs(reinterpret_cast<const uint4*>(row + i));
        unsigned int pw[4] = {p.x, p.y, p.z, p.w};
        #pragma unroll
        for (int b = 0; b < BATCH; ++b) {
            uint4 xp = __ldg(reinterpret_cast<const uint4*>(x + (long long)b * k + i));
            unsigned int xpw[4] = {xp.x, xp.y, xp.z, xp.w};
            #pragma unroll
            for (int j = 0; j < 4; ++j)
                acc[b] += bf(pw[j] & 0xffffu) * bf(xpw[j] & 0xffffu) + bf(pw[j] >> 16) * bf(xpw[j] >> 16);
        }
    }
    #pragma unroll
    for (int b = 0; b < BATCH; ++b) {
        float s = acc[b];
        for (int off = 16; off > 0; off /= 2) s += __shfl_xor_sync(0xffffffffu, s, off);
        if (lane == 0) y[(long long)b * n_rows + n] = to_bf(s);
    }
}
"""


# --- host wrappers ---------------------------------------------------------------------------------


def _check_shapes(x, w, y):
    if x.ndim != 2 or w.ndim != 2 or x.shape[1] != w.shape[1]:
        raise ValueError(f"decode needs x (B×K) and W (N×K), got {tuple(x.shape)} and {tuple(w.shape)}")
    if y is not None and tuple(y.shape) != (x.shape[0], w.shape[0]):
        raise ValueError(f"decode writes y (B×N) = {(x.shape[0], w.shape[0])}, got {tuple(y.shape)}")


def settings_for(b: int, device=None) -> dict:
    """The Triton launch settings tuned for this GPU model at batch b (the first row whose batch limit
    holds b), else the fallback's."""
    rows = tuned_row(CONFIG, device).get("triton") or CONFIG["*"]["triton"]
    return next(cfg for limit, cfg in rows if limit is None or b <= limit)


def whole_wave_rows(b: int, n: int, cfg: dict, sms: int) -> int:
    """The rows of W whose tiles (one program each) fill whole waves of `sms` programs: the rest are the last
    wave's, which leaves SMs idle (at B = 512 with 128x256 tiles: 448 tiles, 3.39 waves of 132)."""
    per_row = -(-b // cfg["BLOCK_B"])
    tiles = (n // cfg["BLOCK_N"]) * per_row
    return (tiles // sms) * sms // per_row * cfg["BLOCK_N"]


def triton_decode(x: torch.Tensor, w: torch.Tensor, y: torch.Tensor, config: dict | None = None) -> str:
    """y = x·Wᵀ; returns the launch as launched.

    A setting with a "tail" runs in two launches: the rows that fill whole waves with its tiles, then the
    remaining rows with the tail's smaller tiles, so the last wave has more, shorter programs."""
    _check_shapes(x, w, y)
    if x.stride(1) != 1 or w.stride(1) != 1 or y.stride(1) != 1:
        raise ValueError("triton_decode needs rows with unit stride")
    cfg = config or settings_for(x.shape[0], x.device)
    if cfg.get("tail"):
        head = {key: v for key, v in cfg.items() if key != "tail"}
        n1 = whole_wave_rows(x.shape[0], w.shape[0], head, sm_count(x.device))
        if not 0 < n1 < w.shape[0]:
            return triton_decode(x, w, y, head)
        first = triton_decode(x, w[:n1], y[:, :n1], head)
        rest = triton_decode(x, w[n1:], y[:, n1:], cfg["tail"])
        return f"rows 0-{n1 - 1}: {first}; the other {w.shape[0] - n1}: {rest}"
    if cfg.get("gluon"):  # Hopper's WGMMA through TMA; elsewhere, and in the interpreter, the same tiles in Triton
        if any(cfg.get(key) for key in SK_KEYS):
            raise ValueError("a decode setting runs the Gluon kernel or the persistent TMA one's knobs, not both")
        if x.is_cuda and tma_ok(x, w, y) and torch.cuda.get_device_capability(x.device)[0] == 9:
            from .decode_gluon import launch_gluon  # here: Triton's experimental dialect only where it runs

            return launch_gluon(x, w, y, cfg)
        cfg = {key: v for key, v in cfg.items() if key != "gluon"}
    if any(cfg.get(key) for key in SK_KEYS):  # the persistent TMA kernel; the interpreter runs its descriptors
        if not x.is_cuda or tma_ok(x, w):
            return launch_sk(x, w, y, cfg)
        cfg = {key: v for key, v in cfg.items() if key not in SK_KEYS}  # no TMA here: the same tiles without
    return launch(x, w, y, cfg, tma=bool(cfg.get("tma")) and not cfg.get("fma") and tma_ok(x, w))


def _cupy_fits(b: int) -> None:
    if b > CUPY_MAX_B:
        raise ValueError(
            f"the CuPy decode kernel runs on CUDA cores for batches up to {CUPY_MAX_B}, not {b}: "
            "larger batches are matrix products for the tensor cores (triton, torch)"
        )


def cupy_decode(x, w, y, threads: int | None = None) -> str:
    """y = x·Wᵀ on CUDA cores, for batches up to CUPY_MAX_B and K a multiple of 8: CuPy arrays of bf16
    bits (int16 views)."""
    cp = cupy()
    _check_shapes(x, w, y)
    (b, k), n = x.shape, w.shape[0]
    _cupy_fits(b)
    if any(a.dtype.itemsize != 2 or not a.flags.c_contiguous for a in (x, w, y)) or k % 8:
        raise ValueError("cupy_decode takes contiguous 16-bit arrays (bf16 bits) with K a multiple of 8")
    threads = threads or tuned_row(CONFIG).get("cupy_threads", CONFIG["*"]["cupy_threads"])
    blocks = (n + threads // 32 - 1) // (threads // 32)
    kernel = raw_kernel(f"#define BATCH {b}\n" + CUDA_DECODE, "decode_bf16")
    kernel((blocks,), (threads,), (x, w, y, cp.int32(n), cp.int32(k)))
    return f"{count(blocks, 'block')} x {count(threads, 'thread')}, one warp per output row"


def torch_decode(x: torch.Tensor, w: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    # F.linear(x, w) without a bias is this call: cuBLAS on x·Wᵀ (into y, so the check sees a poisoned output)
    return torch.mm(x, w.t(), out=y)


# --- the contract: inputs, check, work model --------------------------------------------------------


def unit_of(impl: str, launch: str) -> str:
    """The peak a call's FLOPs are held to: that of the unit that ran them, from the launch as launched. The CuPy
    kernel and the Triton FMA tiles widen bf16 to fp32 and multiply-add on CUDA cores (fp32); the Triton dot
    tiles run on the tensor cores, and so does cuBLAS's GEMM (torch), as far as its launch can tell."""
    return "fp32" if impl == "cupy" or ON_CUDA_CORES in launch else "bf16_tensor"


def make_inputs(b: int, k: int, n: int, device="cuda", seed: int = 0):
    """Seeded tokens x (B×K) and weights W (N×K) scaled by 1/√K, so outputs are of order one, in bf16."""
    g = generator(device, seed)
    x = torch.randn(b, k, device=device, generator=g).to(torch.bfloat16)
    w = (torch.randn(n, k, device=device, generator=g) * k**-0.5).to(torch.bfloat16)
    return x, w


def reference(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    return x.to(torch.float64) @ w.to(torch.float64).t()


def work(b: int, k: int, n: int, itemsize: int = 2) -> Work:
    # one multiply and one add per (b, k, n); bytes: the weights once, the tokens in and the outputs out.
    # Every token is one step of one sequence: B tokens a call.
    return Work(flops=2.0 * b * k * n, bytes=float((n * k + b * k + b * n) * itemsize), tokens=float(b))


def prepare(
    impl: str, b: int = SIZES["b"], k: int = SIZES["k"], n: int = SIZES["n"], device="cuda", seed: int = 0
) -> Prepared:
    if impl not in IMPLS:
        raise ValueError(f"unknown decode implementation {impl!r}; choose from {', '.join(IMPLS)}")
    if impl == "cupy":
        _cupy_fits(b)  # before allocating hundreds of MB
    x, w = make_inputs(b, k, n, device, seed)
    y = torch.empty(b, n, device=device, dtype=torch.bfloat16)
    if impl == "triton":
        run = lambda: triton_decode(x, w, y)  # noqa: E731
    elif impl == "cupy":
        cp = cupy()
        xc, wc, yc = (cp.from_dlpack(t.view(torch.int16)) for t in (x, w, y))
        run = lambda: cupy_decode(xc, wc, yc)  # noqa: E731
    else:
        run = lambda: torch_decode(x, w, y)  # noqa: E731

    def check():
        poison(y)
        run()
        return check_close(f"decode[{impl}]", y, reference(x, w))

    how = run() if impl != "torch" else "cuBLAS-chosen"
    # the bytes are judged against the read peak as well as the datasheet (gpubench.read.summary)
    return Prepared(
        run=run,
        check=check,
        work=work(b, k, n),
        unit=unit_of(impl, how),
        bound="both",
        launch=how,
        sizes={"b": b, "k": k, "n": n, "dtype": "bfloat16"},
        info={"roof": "read"},
    )
