"""The README's decode tuning table (section `decode-ideas`, written by tools/readme/tables.py): per batch,
the best screened speed over torch of each idea the sweeps tried, and the final round's best setting, from
the committed sweep CSVs (results/tune-decode-<gpu>.csv; a second sweep's tune-decode2-<gpu>.csv beside it)."""

from __future__ import annotations

import csv
from pathlib import Path

from tools.tune.output import IDEAS

GPUS = {"h100-80gb-hbm3": "H100", "h200": "H200"}


def _rows(path: Path) -> list[dict]:
    return list(csv.DictReader(open(path, newline=""))) if path.exists() else []


def _batches(rows: list[dict]) -> list[int]:
    return sorted({int(r["family"].removeprefix("decode-b")) for r in rows if r["family"].startswith("decode-b")})


def _best(rows: list[dict], b: int, stage: str, test) -> dict | None:
    mine = [r for r in rows if r["family"] == f"decode-b{b}" and r.get("stage") == stage and test(r["name"])]
    return max(mine, key=lambda r: float(r["speed_vs_ref"]), default=None)


def _kernel(name: str) -> bool:
    return name[:4] in ("ptr-", "tma-", "fma-")


def ideas_table(results: Path, sweep: str = "decode") -> str:
    """One sweep's table (sweep: "decode" for the first, "decode2" for the second)."""
    runs = {slug: _rows(results / f"tune-{sweep}-{slug}.csv") for slug in GPUS}
    runs = {slug: rows for slug, rows in runs.items() if rows}
    if not runs:
        return "(no sweep committed yet)\n"
    tried = [k for k in IDEAS if any(IDEAS[k](r["name"]) for rows in runs.values() for r in rows)]
    head = ["B"] + tried + [f"{GPUS[s]}: the final round's best, x torch (p10–p90)" for s in runs]
    lines = [
        f"Idea cells: {' / '.join(GPUS[s] for s in runs)}, the best screened speed over torch (higher is "
        "faster; – where the idea had no setting at that batch).",
        "",
        "| " + " | ".join(head) + " |",
        "|" + "---|" * len(head),
    ]
    for b in sorted({b for rows in runs.values() for b in _batches(rows)}):
        cells = [str(b)]
        for idea in tried:
            best = [_best(rows, b, "screen", IDEAS[idea]) for rows in runs.values()]
            cells.append(" / ".join(f"{float(r['speed_vs_ref']):.3f}" if r else "–" for r in best))
        for rows in runs.values():
            top = _best(rows, b, "final", _kernel)
            cells.append(
                f"`{top['name']}` {float(top['speed_vs_ref']):.3f} ({float(top['speed_vs_ref_p10']):.3f}–"
                f"{float(top['speed_vs_ref_p90']):.3f})"
                if top
                else "–"
            )
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def second_ideas_table(results: Path) -> str:
    if not any((results / f"tune-decode2-{slug}.csv").exists() for slug in GPUS):
        return "(the second sweep has not run yet)\n"
    return ideas_table(results, "decode2")
