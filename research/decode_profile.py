"""What runs when torch's F.linear and the suite's decode kernel multiply the decode shape: each kernel's name,
grid, block, registers, shared memory and time, from torch's profiler.

    python -m research.decode_profile [--batches 256,512] [--calls 20] [--out kernels.csv]
    ncu --clock-control none --section SpeedOfLight ... python -m research.decode_profile --bare --calls 3

cuBLAS's kernel name carries its tile, its cluster and how it splits the work, which says what the suite's
tile is measured against. `--bare` only runs the calls (no profiler), for a wrapper such as Nsight Compute.
"""

from __future__ import annotations

import argparse
import csv
import json
import sys
import tempfile
from collections import defaultdict
from pathlib import Path

import torch
import torch.nn.functional as F

from gpubench.kernels import decode

ROOT = Path(__file__).resolve().parents[1]

K, N = decode.SIZES["k"], decode.SIZES["n"]
ARGS = ("grid", "block", "registers per thread", "shared memory", "blocks per SM", "est. achieved occupancy %")


def calls(b: int, w: torch.Tensor):
    """One closure per contender at batch b, each one call; the first call (compilation) is made here."""
    g = torch.Generator(device="cuda").manual_seed(b)
    x = torch.randn(b, K, device="cuda", dtype=torch.bfloat16, generator=g)
    y = torch.empty(b, N, device="cuda", dtype=torch.bfloat16)
    out = {"torch": lambda: F.linear(x, w), "triton": lambda: decode.triton_decode(x, w, y)}
    for fn in out.values():
        fn()
    torch.cuda.synchronize()
    return out


def repeat(fn, times: int) -> None:
    for _ in range(times):
        fn()
    torch.cuda.synchronize()


def kernels(trace: Path) -> list[dict]:
    events = json.loads(trace.read_text())["traceEvents"]
    return [e for e in events if e.get("cat") == "kernel"]


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--batches", default="256,512", help="batches to run, comma-separated (default 256,512)")
    p.add_argument("--calls", type=int, default=20, help="calls of each contender at each batch (default 20)")
    p.add_argument("--bare", action="store_true", help="only make the calls, for a profiler that wraps this")
    p.add_argument("--out", type=Path, help="write one row per kernel and contender here (CSV)")
    a = p.parse_args(argv)
    if not torch.cuda.is_available():
        p.error("this tool needs a CUDA GPU")
    batches = [int(s) for s in a.batches.split(",")]
    w = torch.randn(N, K, device="cuda", dtype=torch.bfloat16, generator=torch.Generator(device="cuda").manual_seed(0))
    print(
        f"{torch.cuda.get_device_name()}: W {N} x {K} bf16; settings in force "
        f"{[decode.settings_for(b) for b in batches]}"
    )
    rows = []
    for b in batches:
        for who, fn in calls(b, w).items():
            if a.bare:
                repeat(fn, a.calls)
                continue
            with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
                repeat(fn, a.calls)
            with tempfile.TemporaryDirectory() as tmp:
                prof.export_chrome_trace(f"{tmp}/t.json")
                found = kernels(Path(tmp) / "t.json")
            by_name = defaultdict(list)
            for e in found:
                by_name[e["name"]].append(e)
            for name, es in by_name.items():
                durs = sorted(e["dur"] for e in es)
                row = {
                    "b": b,
                    "who": who,
                    "kernel": name,
                    "count": len(es),
                    "median_us": durs[len(durs) // 2],
                    "min_us": durs[0],
                    "max_us": durs[-1],
                }
                row.update({k: json.dumps(es[0]["args"].get(k)) for k in ARGS})
                rows.append(row)
                print(
                    f"B={b:<4} {who:<7} {row['median_us']:8.1f} us (min {row['min_us']:.1f}) x{len(es):<3} "
                    f"grid {row['grid']} block {row['block']} regs {row['registers per thread']} "
                    f"smem {row['shared memory']}  {name}",
                    flush=True,
                )
    if a.out and rows:
        with a.out.open("w", newline="") as f:
            wr = csv.DictWriter(f, fieldnames=list(rows[0]))
            wr.writeheader()
            wr.writerows(rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
