"""Choosing a sweep's winners and writing them into the CONFIG tables of kernels/decode.py and read.py."""

from __future__ import annotations

import json
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

DECODE = ROOT / "kernels" / "decode.py"
LEGACY = re.compile(r"(ptr|tma)-(\d+)x(\d+)x(\d+)-w(\d+)-s(\d+)")


def _settings(row: dict) -> dict:
    if row.get("cfg"):
        return json.loads(row["cfg"])
    m = LEGACY.fullmatch(row["name"])  # a sweep's CSV from before the settings were written out
    c = {
        "BLOCK_N": int(m[2]),
        "BLOCK_B": int(m[3]),
        "BLOCK_K": int(m[4]),
        "num_warps": int(m[5]),
        "num_stages": int(m[6]),
    }
    return {**c, "tma": True} if m[1] == "tma" else c


def _score(row: dict) -> float:
    """Faster is higher: the paired speed over torch where the row has it, else 1 / median."""
    v = row.get("speed_vs_ref")
    return float(v) if v not in (None, "") else 1.0 / float(row["median_ms"])


def decode_choice(rows: list[dict], old: dict | None = None) -> dict:
    """This GPU's CONFIG entry for kernels/decode.py: at each tuned batch, the fastest checked Triton
    setting of the final round (of every row, in a CSV without rounds), serving the batches from the
    tuned batch before it (exclusive) up to it, the largest every batch above; the CuPy block size
    fastest at batch 1. Given the GPU's entry as it stands (`old`), the batches the sweep did not tune keep
    their rows (a sweep of the small batches leaves B = 256 and above as they were)."""
    final = [r for r in rows if str(r.get("family", "")).startswith("decode-b")]
    if any(r.get("stage") == "final" for r in final):
        final = [r for r in final if r.get("stage") == "final"]
    top: dict = {}
    for r in final:
        impl = (
            "cupy" if r["name"].startswith("cupy-") else "triton" if r["name"][:4] in ("ptr-", "tma-", "fma-") else None
        )
        key = (int(r["b"]), impl)
        if impl and (key not in top or _score(r) > _score(top[key])):
            top[key] = r
    tuned = {b: _settings(r) for (b, impl), r in top.items() if impl == "triton"}
    entry = {**(old or {}), "triton": merged((old or {}).get("triton") or (), tuned)}
    if (1, "cupy") in top:
        entry["cupy_threads"] = int(top[(1, "cupy")]["name"].removeprefix("cupy-t"))
    return entry


def merged(old_rows, tuned: dict) -> tuple:
    """Decode rows (limit, settings), each serving the batches above the row before it up to its limit, the
    last (None) every batch above: `tuned` at its batches, `old_rows` at the others, the old open row last;
    with no old open row, the largest row serves every batch above."""
    rows = {b: c for b, c in old_rows if b is not None and b not in tuned}
    rows.update(tuned)
    last = next((c for b, c in old_rows if b is None), None)
    if last is None and rows:
        last = rows.pop(max(rows))
    return tuple(sorted(rows.items())) + ((None, last),) if last is not None else ()


def current(gpu: str, path: Path) -> dict | None:
    """The CONFIG line of `gpu` in `path` as it stands, or None."""
    import ast

    head = f'    "{gpu}": '
    line = next((x for x in path.read_text().splitlines() if x.startswith(head)), None)
    return None if line is None else ast.literal_eval("{" + line.strip().rstrip(",") + "}")[gpu]


def read_choice(rows: list[dict]) -> dict:
    """This GPU's CONFIG entry for kernels/read.py: the fastest Triton and CuPy settings of the final round."""
    final = [r for r in rows if r.get("family") == "read" and r.get("stage") == "final" and r.get("cfg")]
    entry = {}
    for impl in ("triton", "cupy"):
        mine = [r for r in final if r["name"].startswith(impl + "-")]
        if mine:
            entry[impl] = json.loads(max(mine, key=_score)["cfg"])
    return entry


def apply_line(entry: dict, gpu: str, path: Path, fallback: str) -> None:
    """Write this GPU's line into CONFIG in `path` (replacing an older one), just above the fallback's."""
    lines = path.read_text().splitlines(keepends=True)
    line = f"    {gpu!r}: {entry!r},\n".replace("'", '"')
    lines = [x for x in lines if not x.startswith(f'    "{gpu}": ')]
    lines.insert(next(i for i, x in enumerate(lines) if x.startswith(fallback)), line)
    path.write_text("".join(lines))
    print(f"settings for {gpu} written to {path}: {entry}")


def apply_decode(entry: dict, gpu: str, path: Path = DECODE) -> None:
    apply_line(entry, gpu, path, '    "*": {"triton": FALLBACK')


def apply_read(entry: dict, gpu: str, path: Path = ROOT / "kernels" / "read.py") -> None:
    apply_line(entry, gpu, path, '    "*": {"triton": {"BLOCK"')
