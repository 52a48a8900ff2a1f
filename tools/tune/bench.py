"""Kernel speed on one GPU, in one run: the numbers behind the kernels' performance targets.

Every implementation comes from its family's prepare() (the suite's own buffers, checked before
timing). Implementations of one family are timed interleaved at sustained clocks (gpubench.truth.timing.
interleaved: settle, then windows in turns ABC, CBA, ...), and each ratio is the median of the
window-by-window ratios, with p10 and p90: a ratio never compares a cool GPU with a hot one.

    python -m tools.tune.bench --out bench.csv [--only copy,read,softmax,gemm,decode,spin]
"""

from __future__ import annotations

import argparse
import csv
import sys

import torch
from gpubench.kernels import copy, decode, gemm, read, softmax, spin
from gpubench.kernels.common import CupyMissing, cupy

from gpubench.stats import quantile
from gpubench.truth.timing import interleaved, time_loop, warm_up

ROWS: list[dict] = []


def has_cupy() -> bool:
    try:
        cupy()
        return True
    except CupyMissing as err:
        print(f"CuPy rows skipped: {err}", file=sys.stderr)
        return False


def compare(group: str, prepared: dict, reference: str, rounds: int = 8, **extra) -> None:
    """Check each implementation, time them interleaved, record each against the reference."""
    for name, p in prepared.items():
        p.check()
    cmp = interleaved({name: p.run for name, p in prepared.items()}, rounds=rounds)
    for name, p in prepared.items():
        ms = cmp.median_ms(name)
        speed, lo, hi = cmp.speed(name, reference)
        windows = cmp.window_ms[name]
        row = {
            "group": group,
            "name": name,
            "median_ms": ms,
            "p10_ms": quantile(windows, 0.1),
            "p90_ms": quantile(windows, 0.9),
            "windows": len(windows),
            "reference": reference,
            "speed_vs_reference": speed,
            "speed_p10": lo,
            "speed_p90": hi,
            "gbps": p.work.bytes / ms / 1e6,
            "tflops": p.work.flops / ms / 1e9,
            **extra,
        }
        ROWS.append(row)
        print(
            f"{group:<14} {name:<22} {ms:9.4f} ms  x{speed:.3f} vs {reference} [{lo:.3f}, {hi:.3f}]  "
            f"{row['gbps']:8.0f} GB/s {row['tflops']:7.1f} TFLOP/s",
            flush=True,
        )


def same_bytes_copy(x: torch.Tensor):
    """A copy of the same bytes as a softmax reads and writes: its bandwidth ceiling."""
    out = torch.empty_like(x)
    from gpubench.kernels.common import Prepared

    return Prepared(
        run=lambda: out.copy_(x),
        check=dict,
        work=copy.work(x.numel()),
        unit="fp32",
        bound="dram",
        launch="torch-chosen",
    )


DECODE_B = (1, 2, 4, 8, 16, 64, 256, 512)


def bench_decode(with_cupy: bool, save) -> None:
    """Decode at each batch: Triton and CuPy against torch (F.linear's cuBLAS call); at batch 1 also a
    read (torch's sum) and a copy of as many bytes as the decode's useful bytes: the read ceiling, which
    a step that reads its weights and writes little can reach, and the copy's, which also writes."""
    for b in DECODE_B:
        prepared = {
            i: decode.prepare(i, b=b) for i in decode.IMPLS if i != "cupy" or (with_cupy and b <= decode.CUPY_MAX_B)
        }
        if b == 1:
            nbytes = prepared["torch"].work.bytes
            prepared["read-same-bytes"] = read.prepare("torch", n=int(nbytes // 4))
            prepared["copy-same-bytes"] = copy.prepare("torch", n=int(nbytes // 8))
        compare(f"decode-b{b}", prepared, "torch", rounds=8 if b <= 16 else 4, b=b)
        save()
        del prepared
        torch.cuda.empty_cache()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default="bench_kernels.csv")
    ap.add_argument("--only", default="copy,read,softmax,gemm,decode,spin", help="the families to time")
    args = ap.parse_args()
    only = set(args.only.split(","))
    with_cupy = has_cupy()
    name = torch.cuda.get_device_name()
    print(f"{name}: {torch.cuda.get_device_properties(0).multi_processor_count} SMs, torch {torch.__version__}")

    save = lambda: write(args.out, name)  # noqa: E731
    if "copy" in only:
        impls = [i for i in copy.IMPLS if with_cupy or not i.startswith("cupy")]
        compare("copy-1GiB", {i: copy.prepare(i) for i in impls}, "torch")
        torch.cuda.empty_cache()
    if "read" in only:  # the read ceiling beside the copy's: a copy of half as many floats moves as many bytes
        impls = [i for i in read.IMPLS if with_cupy or i != "cupy"]
        prepared = {i: read.prepare(i) for i in impls}
        prepared["copy-same-bytes"] = copy.prepare("torch", n=read.SIZES["n"] // 2)
        compare("read-1GiB", prepared, "torch")
        del prepared
        torch.cuda.empty_cache()
    for m in (8192, 4096, 16384) if "softmax" in only else ():
        impls = [i for i in softmax.IMPLS if with_cupy or not i.startswith("cupy")]
        prepared = {i: softmax.prepare(i, m=m, n=m) for i in impls}
        prepared["copy-same-bytes"] = same_bytes_copy(softmax.make_input(m, m))
        compare(f"softmax-{m}", prepared, "torch", m=m)
        del prepared
        torch.cuda.empty_cache()
    if "gemm" in only:
        compare("gemm-bf16-8192", {i: gemm.prepare(i) for i in ("triton", "torch")}, "torch", rounds=10)
        impls = [i for i in gemm.IMPLS if with_cupy or i != "cupy"]
        compare("gemm-fp16-8192", {i: gemm.prepare(i, dtype="float16") for i in impls}, "torch", rounds=10)
        torch.cuda.empty_cache()
        save()
    if "decode" in only:
        bench_decode(with_cupy, save)

    for impl in (("cupy", "triton") if with_cupy else ("triton",)) if "spin" in only else ():
        for ns in (1_000_000, 10_000_000):
            p = spin.prepare(impl, "1thread", ns)
            p.check()
            warm_up(p.run)
            t = time_loop(p.run, groups=10)
            ROWS.append(
                {
                    "group": "spin",
                    "name": f"{impl}-{ns // 1000}us",
                    "median_ms": t.median_ms,
                    "p10_ms": t.p10_ms,
                    "p90_ms": t.p90_ms,
                    "requested_ms": ns / 1e6,
                    "error_pct": 100 * (t.median_ms - ns / 1e6) / (ns / 1e6),
                }
            )
            print(f"spin           {impl}-{ns // 1000}us {t.median_ms:9.4f} ms (asked {ns / 1e6} ms)")

    write(args.out, name)
    print(f"wrote {args.out}", file=sys.stderr)
    return 0


def write(path: str, gpu: str) -> None:
    """Every row so far: a run cut short still leaves what it measured."""
    fields: list[str] = []
    for r in ROWS:
        fields += [f for f in r if f not in fields]
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=["gpu"] + fields)
        w.writeheader()
        w.writerows({"gpu": gpu, **r} for r in ROWS)


if __name__ == "__main__":
    raise SystemExit(main())
