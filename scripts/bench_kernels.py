"""Kernel speed on one GPU, in one run: the numbers behind the kernels' performance targets.

Times every kernel with CUDA events after warm-up and compilation (median and p10/p90 over many
groups), on inputs larger than L2, and writes a CSV plus a Markdown table.

    python scripts/bench_kernels.py --out bench.csv
"""

from __future__ import annotations

import argparse
import csv
import sys

import torch

from gpubench import nvml
from gpubench.kernels import copy, gemm, launch, softmax, spin
from gpubench.kernels.common import cupy
from gpubench.peaks import datasheet_for
from gpubench.timing import calls_for, time_loop

ROWS: list[dict] = []


def bench(name: str, fn, flops: float, nbytes: float, groups: int = 30, **extra) -> dict:
    for _ in range(3):  # compile, autotune, allocate outside the timed groups
        fn()
    torch.cuda.synchronize()
    probe = time_loop(fn, calls_per_timing=3, groups=2).median_ms
    t = time_loop(fn, calls_per_timing=calls_for(probe, 10.0), groups=groups)
    s = t.median_ms / 1e3
    row = {"name": name, "median_ms": t.median_ms, "p10_ms": t.p10_ms, "p90_ms": t.p90_ms,
           "groups": len(t.per_call_ms), "calls": t.calls, "tflops": flops / s / 1e12, "gbps": nbytes / s / 1e9,
           **extra}
    ROWS.append(row)
    print(f"{name:<34} {t.median_ms:9.4f} ms [{t.p10_ms:.4f}, {t.p90_ms:.4f}]  "
          f"{row['tflops']:8.2f} TFLOP/s {row['gbps']:9.1f} GB/s", flush=True)
    return row


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default="bench_kernels.csv")
    ap.add_argument("--sweep", action="store_true", help="also time other block sizes and grid shapes")
    args = ap.parse_args()
    cp = cupy()
    name = nvml.device_info(0)["name"]
    sheet = datasheet_for(name) or {}
    sms = spin.sm_count()
    print(f"{name}: {sms} SMs, torch {torch.__version__}, datasheet DRAM {sheet.get('dram', 0) / 1e12:.2f} TB/s")

    # copy: 1 GiB each way
    n = 2**28
    for impl in ("torch", "triton", "cupy", "cupy-memcpy"):
        src, dst = copy.make_buffers(n, impl)
        fn = copy.IMPLS[impl]
        bench(f"copy[{impl}]", lambda: fn(src, dst), 0, copy.work(n).bytes)
        del src, dst
    if args.sweep:
        src, dst = copy.make_buffers(n, "triton")
        for block in (1024, 2048, 4096, 8192, 16384):
            for warps in (4, 8, 16):
                bench(f"copy[triton-b{block}-w{warps}]", lambda: copy.triton_copy(src, dst, block, warps), 0,
                      copy.work(n).bytes, groups=10)
        del src, dst
    torch.cuda.empty_cache()

    # softmax 8192 x 8192 fp32, and a copy of the same bytes as its ceiling
    m = k = 8192
    x = softmax.make_input(m, k)
    out = torch.empty_like(x)
    xc = cp.from_dlpack(x)
    bench("softmax[torch-naive]", lambda: softmax.torch_naive(x), softmax.flops(m, k),
          softmax.work("torch-naive", m, k).bytes)
    bench("softmax[cupy-naive]", lambda: softmax.cupy_naive(xc), softmax.flops(m, k),
          softmax.work("cupy-naive", m, k).bytes)
    bench("softmax[torch]", lambda: softmax.torch_softmax(x), softmax.flops(m, k), softmax.work("torch", m, k).bytes)
    bench("softmax[triton-fused]", lambda: softmax.triton_fused(x, out), softmax.flops(m, k),
          softmax.work("triton-fused", m, k).bytes)
    for warps in (8, 16, 32) if args.sweep else ():
        for per_sm in (1, 2, 4):
            progs = sms * per_sm
            if progs * warps * 32 > sms * 2048:
                continue
            bench(f"softmax[triton-fused-w{warps}-p{per_sm}]",
                  lambda: softmax.triton_fused(x, out, programs=progs, num_warps=warps),
                  softmax.flops(m, k), softmax.work("triton-fused", m, k).bytes, groups=10)
    bench("copy[torch-softmax-size]", lambda: out.copy_(x), 0, 2.0 * x.numel() * 4)
    del x, out, xc
    torch.cuda.empty_cache()

    # gemm 8192^3
    g = 8192
    for dtype in (torch.bfloat16, torch.float16):
        a, b = gemm.make_inputs(g, g, g, dtype)
        c = torch.empty(g, g, device="cuda", dtype=dtype)
        tag = "bf16" if dtype == torch.bfloat16 else "fp16"
        bench(f"gemm[torch-{tag}]", lambda: gemm.torch_matmul(a, b, c), gemm.work(g, g, g).flops, gemm.work(g, g, g).bytes)
        bench(f"gemm[triton-{tag}]", lambda: gemm.triton_matmul(a, b, c), gemm.work(g, g, g).flops,
              gemm.work(g, g, g).bytes)
        bench(f"gemm[triton-pointers-{tag}]", lambda: gemm.triton_matmul(a, b, c, tma=False),
              gemm.work(g, g, g).flops, gemm.work(g, g, g).bytes)
        if dtype == torch.float16:
            ac, bc, cc = cp.from_dlpack(a), cp.from_dlpack(b), cp.from_dlpack(c)
            bench("gemm[cupy-fp16]", lambda: gemm.cupy_matmul(ac, bc, cc), gemm.work(g, g, g).flops,
                  gemm.work(g, g, g).bytes)
        del a, b, c
    torch.cuda.empty_cache()

    # spin: measured duration against the requested one
    for ns in (1_000_000, 10_000_000):
        for shape in ("1thread", "1block", "1warp-per-sm", "half-sms"):
            blocks, threads = spin.launch_shape(shape, sms)
            o = cp.empty(2 * blocks, dtype=cp.int64)
            r = bench(f"spin[cupy-{shape}-{ns // 1000}us]", lambda: spin.cupy_spin(ns, blocks, threads, o), 0, 0,
                      groups=10, requested_ms=ns / 1e6)
            r["error_pct"] = 100 * (r["median_ms"] - ns / 1e6) / (ns / 1e6)
        o = torch.empty(2, dtype=torch.int64, device="cuda")
        r = bench(f"spin[triton-1warp-{ns // 1000}us]", lambda: spin.triton_spin(ns, o), 0, 0, groups=10,
                  requested_ms=ns / 1e6)
        r["error_pct"] = 100 * (r["median_ms"] - ns / 1e6) / (ns / 1e6)

    # launch-bound: per-launch time of a one-element kernel, launches back to back
    xs = cp.zeros(1, dtype=cp.float32)
    bench("launch-bound[cupy]", lambda: launch.cupy_bump(xs), 1, 8)

    fields = []
    for r in ROWS:
        fields += [f for f in r if f not in fields]
    with open(args.out, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=fields)
        w.writeheader()
        w.writerows(ROWS)
    print(f"wrote {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
