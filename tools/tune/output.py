"""What tools/tune/kernels.py writes and prints: the CSVs (one per family, or one of every row), the
summary per batch, and the CONFIG lines from a sweep's rows or from its CSVs."""

from __future__ import annotations

import csv
import sys
from pathlib import Path

from tools.tune.choice import DECODE, apply_decode, apply_read, current, decode_choice, read_choice


def summary(rows: list[dict]) -> None:
    """Per batch (and for the read), the fastest setting of the final round against torch, and the ceilings."""
    ideas(rows)
    final = [r for r in rows if r.get("stage") == "final"]
    print("\nfamily      best setting                      x torch [p10, p90]      GB/s  TFLOP/s  vs read ceiling")
    for family in dict.fromkeys(r["family"] for r in final):
        mine = [r for r in final if r["family"] == family]
        kernels = [r for r in mine if r["name"][:4] in ("ptr-", "tma-", "fma-") or r["name"].startswith("triton-")]
        if not kernels:
            continue
        top = max(kernels, key=lambda r: r["speed_vs_ref"])
        ceiling = next((r for r in mine if r["name"] == "read-same-bytes"), None)
        vs = f"{top['gbps'] / ceiling['gbps']:.3f}" if ceiling else ""
        print(
            f"{family:<11} {top['name']:<33} x{top['speed_vs_ref']:.3f} [{top['speed_vs_ref_p10']:.3f}, "
            f"{top['speed_vs_ref_p90']:.3f}] {top['gbps']:7.0f} {top['tflops']:7.1f}  {vs}"
        )


IDEAS = {  # by the names tools/tune/space.py's tag gives
    "pointer loads": lambda t: t.startswith("ptr-") and not any(x in t for x in ("-k", "-p", "-ef")),
    "TMA": lambda t: t.startswith("tma-") and not any(x in t for x in ("-k", "-p", "-sw", "-ws")),
    "CUDA cores": lambda t: t.startswith("fma-"),
    "split K": lambda t: "-k" in t,
    "persistent": lambda t: "-p" in t and "-sk" not in t and "-ws" not in t,
    "evict-first": lambda t: t.endswith("-ef"),
    "stream-K": lambda t: "-sk" in t,
    "swapped": lambda t: "-sw" in t,
    "warp-spec": lambda t: "-ws" in t,
}


def ideas(rows: list[dict]) -> None:
    """Per batch, the fastest screened setting of each idea against torch: what each idea did."""
    screen = [r for r in rows if r.get("stage") == "screen" and str(r["family"]).startswith("decode-b")]
    names = [k for k in IDEAS if any(IDEAS[k](r["name"]) for r in screen)]  # the ideas this sweep tried
    print("\nfamily      " + "  ".join(f"{k:>13}" for k in names) + "   (best screened speed vs torch per idea)")
    for family in dict.fromkeys(r["family"] for r in screen):
        mine = [r for r in screen if r["family"] == family]
        cells = [max((r["speed_vs_ref"] for r in mine if IDEAS[k](r["name"])), default=None) for k in names]
        print(f"{family:<11} " + "  ".join(f"{c:13.3f}" if c else f"{'-':>13}" for c in cells))


def apply_rows(rows: list[dict], gpu: str) -> None:
    if any(str(r.get("family", "")).startswith("decode-b") for r in rows):
        apply_decode(decode_choice(rows, current(gpu, DECODE)), gpu)  # untuned batches keep their rows
    entry = read_choice(rows)
    if entry:
        apply_read(entry, gpu)


def merge(*sweeps: list[dict]) -> list[dict]:
    """The rows of several sweeps of one GPU, each family (decode-b<B>, read) from the last sweep that has it."""
    families: dict[str, list] = {}
    for rows in sweeps:
        for family in dict.fromkeys(r.get("family", "") for r in rows):
            families[family] = [r for r in rows if r.get("family", "") == family]
    return [r for rows in families.values() for r in rows]


def apply_from(paths: list[str]) -> int:
    """--apply-from: the CONFIG lines from CSVs of sweeps already run, each for the GPU its rows name. Where
    several CSVs of one GPU tuned the same batch (a second sweep after the first), the later file's rows
    of that batch stand: each batch is chosen from one sweep's final round, never across sweeps."""
    by_gpu: dict[str, list] = {}
    for path in paths:
        try:
            rows = list(csv.DictReader(open(path, newline="")))
        except OSError as err:
            print(f"cannot read {path}: {err.strerror}", file=sys.stderr)
            return 2
        gpus = {r.get("gpu") for r in rows} - {None, ""}
        if len(gpus) != 1:
            print(f"{path} names {len(gpus)} GPUs in its gpu column; a sweep's CSV names one", file=sys.stderr)
            return 2
        gpu = gpus.pop()
        by_gpu[gpu] = merge(by_gpu.get(gpu, []), rows)
    for gpu, rows in by_gpu.items():
        apply_rows(rows, gpu)
    return 0


def write_all(args, gpu: str, rows: list[dict]) -> None:
    """--out-dir: tune-decode-<gpu>.csv (tune-decode2- for a second sweep), tune-read-, tune-<gpu>.csv for
    the other families; --out (or no --out-dir): one CSV of every row."""
    rows = [{"gpu": gpu, **r} for r in rows]
    if args.out_dir:
        from gpubench.record.rundir import slug

        out = Path(args.out_dir)
        out.mkdir(parents=True, exist_ok=True)
        name = slug(gpu)
        decode = "decode2-" if getattr(args, "second", None) else "decode-"  # a second sweep beside the first
        for part, keep in (
            (decode, lambda f: f.startswith("decode-b")),
            ("read-", lambda f: f == "read"),
            ("", lambda f: not f.startswith("decode-b") and f != "read"),
        ):
            mine = [r for r in rows if keep(str(r.get("family", "")))]
            if mine:
                write(str(out / f"tune-{part}{name}.csv"), mine)
    if args.out or not args.out_dir:
        write(args.out or "tune.csv", rows)


def write(path: str, rows: list[dict]) -> None:
    """Every row so far, so that a sweep cut short still leaves what it measured."""
    fields: list[str] = []
    for r in rows:
        fields += [f for f in r if f not in fields]
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=fields)
        w.writeheader()
        w.writerows(rows)
