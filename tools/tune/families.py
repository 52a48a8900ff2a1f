"""The tuning sweeps of the copy, softmax and GEMM kernels, for tools/tune/kernels.py: candidate kernels timed
in turns with the family's reference (torch) after a settling period at sustained clocks; every row goes to ROWS
(the clock trace and the machine's facts are in tools/tune/machine.py)."""

from __future__ import annotations

import statistics
import time

import torch
import triton
import triton.language as tl
from gpubench.kernels.gemm import _tile

from gpubench.stats import quantile
from gpubench.truth.timing import time_loop

ROWS: list[dict] = []


# --- candidate kernels -----------------------------------------------------------------------------


@triton.jit
def _copy_kernel(src, dst, n, BLOCK: tl.constexpr, EVICT: tl.constexpr, STORE: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(dst + offs, tl.load(src + offs, mask=mask, eviction_policy=EVICT), mask=mask, cache_modifier=STORE)


@triton.jit
def _softmax_rows(out_ptr, in_ptr, in_stride, out_stride, n_cols, BLOCK: tl.constexpr, EVICT: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    offs = tl.arange(0, BLOCK)
    mask = offs < n_cols
    x = tl.load(in_ptr + row * in_stride + offs, mask=mask, other=-float("inf"), eviction_policy=EVICT)
    z = x - tl.max(x, axis=0)
    num = tl.exp(z)
    tl.store(out_ptr + row * out_stride + offs, num / tl.sum(num, axis=0), mask=mask)


@triton.jit
def _softmax_persistent(
    out_ptr,
    in_ptr,
    in_stride,
    out_stride,
    n_rows,
    n_cols,
    BLOCK: tl.constexpr,
    STAGES: tl.constexpr,
    EVICT: tl.constexpr,
):
    offs = tl.arange(0, BLOCK)
    mask = offs < n_cols
    for row in tl.range(tl.program_id(0), n_rows, tl.num_programs(0), num_stages=STAGES):
        r = tl.cast(row, tl.int64)
        x = tl.load(in_ptr + r * in_stride + offs, mask=mask, other=-float("inf"), eviction_policy=EVICT)
        z = x - tl.max(x, axis=0)
        num = tl.exp(z)
        tl.store(out_ptr + r * out_stride + offs, num / tl.sum(num, axis=0), mask=mask)


@triton.jit
def _mm_tma(
    a_desc,
    b_desc,
    c_desc,
    M,
    N,
    K,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
    GROUP_M: tl.constexpr,
):
    pid_m, pid_n = _tile(tl.program_id(0), tl.cdiv(M, BLOCK_M), tl.cdiv(N, BLOCK_N), GROUP_M)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_K)):
        acc = tl.dot(a_desc.load([pid_m * BLOCK_M, k * BLOCK_K]), b_desc.load([k * BLOCK_K, pid_n * BLOCK_N]), acc)
    c_desc.store([pid_m * BLOCK_M, pid_n * BLOCK_N], acc.to(c_desc.dtype))


@triton.jit
def _mm_tma_persistent(
    a_desc,
    b_desc,
    c_desc,
    M,
    N,
    K,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
    GROUP_M: tl.constexpr,
    NUM_SMS: tl.constexpr,
    FLATTEN: tl.constexpr,
):
    num_pid_m, num_pid_n = tl.cdiv(M, BLOCK_M), tl.cdiv(N, BLOCK_N)
    k_tiles = tl.cdiv(K, BLOCK_K)
    for tile_id in tl.range(tl.program_id(0), num_pid_m * num_pid_n, NUM_SMS, flatten=FLATTEN):
        pid_m, pid_n = _tile(tile_id, num_pid_m, num_pid_n, GROUP_M)
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        for k in range(k_tiles):
            acc = tl.dot(a_desc.load([pid_m * BLOCK_M, k * BLOCK_K]), b_desc.load([k * BLOCK_K, pid_n * BLOCK_N]), acc)
        c_desc.store([pid_m * BLOCK_M, pid_n * BLOCK_N], acc.to(c_desc.dtype))


CUDA_COPY_UNROLL = r"""
template<int U> __device__ void body(const float4* s, float4* d, long long n4) {
    long long stride = (long long)gridDim.x * blockDim.x;
    long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    for (; i + (U - 1) * stride < n4; i += U * stride) {
        float4 v[U];
        #pragma unroll
        for (int u = 0; u < U; ++u) v[u] = __ldcs(s + i + u * stride);
        #pragma unroll
        for (int u = 0; u < U; ++u) __stcs(d + i + u * stride, v[u]);
    }
    for (; i < n4; i += stride) d[i] = s[i];
}
extern "C" __global__ void copy_u1(const float4* s, float4* d, long long n4) { body<1>(s, d, n4); }
extern "C" __global__ void copy_u2(const float4* s, float4* d, long long n4) { body<2>(s, d, n4); }
extern "C" __global__ void copy_u4(const float4* s, float4* d, long long n4) { body<4>(s, d, n4); }
extern "C" __global__ void copy_exact(const float4* s, float4* d, long long n4) {
    long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (i < n4) d[i] = s[i];
}
"""


# --- timing ----------------------------------------------------------------------------------------


def interleaved(
    family: str,
    fns: dict,
    reference: str,
    nbytes: float = 0.0,
    flops: float = 0.0,
    rounds: int = 6,
    window_s: float = 0.12,
    settle_s: float = 1.0,
    **extra,
):
    calls = {}
    for name, fn in list(fns.items()):
        try:
            for _ in range(3):
                fn()
            torch.cuda.synchronize()
            ms = time_loop(fn, calls_per_timing=3, groups=2).median_ms
            calls[name] = max(1, int(10.0 / max(ms, 1e-4)))
        except Exception as err:  # a candidate that does not compile or launch is reported, not fatal
            print(f"{family}: {name} failed: {type(err).__name__}: {str(err)[:200]}", flush=True)
            fns.pop(name)
    deadline = time.monotonic() + settle_s
    while time.monotonic() < deadline:
        for name, fn in fns.items():
            time_loop(fn, calls_per_timing=calls[name], groups=1)
    med = {name: [] for name in fns}
    order = list(fns)
    for r in range(rounds):
        for name in order if r % 2 == 0 else order[::-1]:
            med[name].append(time_loop(fns[name], calls_per_timing=calls[name], duration_s=window_s).median_ms)
    ref = med[reference]
    for name, ms in med.items():
        ratios = [b / a for a, b in zip(ms, ref)]  # >1: faster than the reference
        m = statistics.median(ms)
        row = {
            "family": family,
            "name": name,
            "median_ms": m,
            "p10_ms": quantile(ms, 0.1),
            "p90_ms": quantile(ms, 0.9),
            "speed_vs_ref": statistics.median(ratios),
            "speed_vs_ref_p10": quantile(ratios, 0.1),
            "speed_vs_ref_p90": quantile(ratios, 0.9),
            "gbps": nbytes / m / 1e6 if nbytes else "",
            "tflops": flops / m / 1e9 if flops else "",
            "reference": reference,
            **extra,
        }
        ROWS.append(row)
        print(
            f"{family:<8} {name:<34} {m:9.4f} ms  x{row['speed_vs_ref']:.3f} vs {reference}"
            f" [{row['speed_vs_ref_p10']:.3f}, {row['speed_vs_ref_p90']:.3f}]"
            + (f"  {row['gbps']:8.1f} GB/s" if nbytes else "")
            + (f"  {row['tflops']:7.1f} TFLOP/s" if flops else ""),
            flush=True,
        )
    return med


# --- sweeps ----------------------------------------------------------------------------------------


def sweep_copy(sms: int):
    import cupy as cp

    n = 2**28
    src = torch.rand(n, device="cuda")
    dst = torch.empty_like(src)
    s4, d4 = cp.from_dlpack(src), cp.from_dlpack(dst)
    mod = cp.RawModule(code=CUDA_COPY_UNROLL, options=("-std=c++17",), name_expressions=None)
    fns = {
        "torch": lambda: dst.copy_(src),
        "memcpy": lambda: cp.cuda.runtime.memcpyAsync(
            d4.data.ptr, s4.data.ptr, src.nbytes, cp.cuda.runtime.memcpyDeviceToDevice, cp.cuda.get_current_stream().ptr
        ),
    }
    for block in (1024, 2048, 4096, 8192):
        for warps in (4, 8, 16):
            for evict in ("", "evict_first"):
                grid = (triton.cdiv(n, block),)
                fns[f"triton-b{block}-w{warps}{'-ef' if evict else ''}"] = lambda g=grid, b=block, w=warps, e=evict: (
                    _copy_kernel[g](src, dst, n, BLOCK=b, EVICT=e, STORE=".cs" if e else "", num_warps=w)
                )
    n4 = n // 4
    for kname in ("copy_u1", "copy_u2", "copy_u4"):
        k = mod.get_function(kname)
        for threads in (256, 512, 1024):
            for per_sm in (4, 8, 16, 32):
                blocks = min(sms * per_sm, (n4 + threads - 1) // threads)
                if threads * per_sm > 2048 * 4:
                    continue
                fns[f"cupy-{kname[5:]}-t{threads}-s{per_sm}"] = lambda k=k, b=blocks, t=threads: k(
                    (b,), (t,), (s4, d4, cp.int64(n4))
                )
    exact = mod.get_function("copy_exact")
    for threads in (256, 512, 1024):
        fns[f"cupy-exact-t{threads}"] = lambda t=threads: exact(((n4 + t - 1) // t,), (t,), (s4, d4, cp.int64(n4)))
    interleaved("copy", fns, "torch", nbytes=2.0 * n * 4, rounds=5, window_s=0.1)


def sweep_softmax(sms: int, shapes):
    for m, ncol in shapes:
        _sweep_softmax_shape(sms, m, ncol)
        # the shape's tensors died with its sweep's frame (its closures held them): hand their memory back
        torch.cuda.empty_cache()


def _sweep_softmax_shape(sms: int, m: int, ncol: int):
    x = 4 * torch.randn(m, ncol, device="cuda", generator=torch.Generator(device="cuda").manual_seed(0))
    out = torch.empty_like(x)
    block = triton.next_power_of_2(ncol)

    def naive():
        x_max = x.max(dim=1)[0]
        num = torch.exp(x - x_max[:, None])
        return num / num.sum(dim=1)[:, None]

    fns = {"torch": lambda: torch.softmax(x, dim=1), "naive-torch": naive, "copy-same-bytes": lambda: out.copy_(x)}
    for warps in (4, 8, 16, 32):
        if block // (32 * warps) < 1:
            continue
        for evict in ("", "evict_first"):
            fns[f"rows-w{warps}{'-ef' if evict else ''}"] = lambda w=warps, e=evict: _softmax_rows[(m,)](
                out, x, x.stride(0), out.stride(0), ncol, BLOCK=block, EVICT=e, num_warps=w
            )
    for warps in (8, 16, 32):
        for per_sm in (1, 2, 4):
            if per_sm * warps > 64:
                continue
            for stages in (1, 2):
                progs = min(m, sms * per_sm)
                fns[f"pers-w{warps}-p{per_sm}-s{stages}"] = lambda w=warps, p=progs, s=stages: _softmax_persistent[
                    (p,)
                ](out, x, x.stride(0), out.stride(0), m, ncol, BLOCK=block, STAGES=s, EVICT="", num_warps=w)
    interleaved(f"softmax{m}", fns, "torch", nbytes=2.0 * x.numel() * 4, rounds=5, window_s=0.1, m=m, n=ncol)


def sweep_gemm(sms: int):
    from triton.tools.tensor_descriptor import TensorDescriptor

    n = 8192
    g = torch.Generator(device="cuda").manual_seed(0)
    a = torch.randn(n, n, device="cuda", generator=g).to(torch.bfloat16)
    b = torch.randn(n, n, device="cuda", generator=g).to(torch.bfloat16)
    c = torch.empty(n, n, device="cuda", dtype=torch.bfloat16)
    fns = {"torch": lambda: torch.matmul(a, b, out=c)}
    for bm, bn, bk, stages, warps in (
        (128, 256, 64, 3, 8),
        (128, 256, 64, 4, 8),
        (256, 128, 64, 3, 8),
        (128, 128, 64, 4, 4),
        (128, 256, 128, 2, 8),
        (128, 128, 128, 3, 8),
    ):
        ad = TensorDescriptor.from_tensor(a, [bm, bk])
        bd = TensorDescriptor.from_tensor(b, [bk, bn])
        cd = TensorDescriptor.from_tensor(c, [bm, bn])
        tiles = triton.cdiv(n, bm) * triton.cdiv(n, bn)
        tag = f"{bm}x{bn}x{bk}-s{stages}-w{warps}"
        fns[f"tma-{tag}"] = lambda ad=ad, bd=bd, cd=cd, bm=bm, bn=bn, bk=bk, s=stages, w=warps, t=tiles: _mm_tma[(t,)](
            ad, bd, cd, n, n, n, BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, GROUP_M=8, num_stages=s, num_warps=w
        )
        for flatten in (False, True):
            fns[f"pers-{tag}{'-flat' if flatten else ''}"] = (
                lambda ad=ad, bd=bd, cd=cd, bm=bm, bn=bn, bk=bk, s=stages, w=warps, t=tiles, f=flatten: (
                    _mm_tma_persistent[(min(sms, t),)](
                        ad,
                        bd,
                        cd,
                        n,
                        n,
                        n,
                        BLOCK_M=bm,
                        BLOCK_N=bn,
                        BLOCK_K=bk,
                        GROUP_M=8,
                        NUM_SMS=sms,
                        FLATTEN=f,
                        num_stages=s,
                        num_warps=w,
                    )
                )
            )
    interleaved("gemm", fns, "torch", flops=2.0 * n**3, rounds=5, window_s=0.15, settle_s=2.0)
    ref = a.double() @ b.double()
    for name in list(fns)[:4]:
        c.fill_(float("nan"))
        fns[name]()
        err = (torch.linalg.vector_norm(c.double() - ref) / torch.linalg.vector_norm(ref)).item()
        print(f"gemm check {name}: rel err {err:.2e}")
