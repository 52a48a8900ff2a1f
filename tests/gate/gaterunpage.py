"""A section of docs/gate-runs.md and the table of a committed run of tools/gate/effort.py, for the tests that hold
the page to its runs' checks and logs."""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
LOGS = ROOT / "results" / "logs"


def section(title: str, end: str) -> str:
    page = (ROOT / "docs" / "gate-runs.md").read_text()
    return page[page.index(title) : page.index(end)]


def flat(text: str) -> str:
    return re.sub(r"\s*\n\s*", " ", text)


def us(x: float) -> str:
    return f"{x:,.2f}" if x < 1000 else f"{x:,.0f}"


def table_missing(numbers: dict, text: str) -> list[str]:
    """The benchmarks whose row of the section's table does not say what the run's numbers do."""
    rows = [line for line in text.splitlines() if line.startswith("| `test_")]
    assert len(rows) == len(numbers["benchmarks"]) == 9
    missing = []
    for name, b in numbers["benchmarks"].items():
        base = numbers["baseline"]["benchmarks"][name]
        fl = f"{base['floor_pct']:.2f}" + (f" ({b['floor_pct']:.2f})" if b["floor_pct"] < base["floor_pct"] else "")
        w = b["words"]
        more = [f"`{b[k]['word']}` {b[k]['median']['pct']:+.1f}%" for k in ("more_5", "more_10")]
        if (
            f"| `{name}` | {us(b['median_us'])} | {b['timed']} | {fl} | {base['processes']} | {w['same']} / "
            f"{w['unsure']} / {w['slower']} / {w['faster']} | {more[0]} | {more[1]} |"
        ) not in rows:
            missing.append(name)
    return missing


def said(checks: dict, log: str, budget_s: int) -> list[str]:
    """What a section says of a whole run (its checks, steps, baseline and unchanged runs), as the run has it."""
    n = checks["numbers"]
    reruns = [s for k, s in n["time"]["steps_s"].items() if k.startswith("c-rerun-") and s]
    r = n["reruns"]
    assert len(reruns) == r["runs"] == 20 and r["slower"] == r["faster"] == r["failed"] == 0
    assert f"budget {budget_s} s" in log
    passed = sum(c["ok"] is True for c in checks["checks"])
    told = sum(r[w] for w in ("same", "unsure", "slower", "faster"))
    return [
        f"{passed} of {len(checks['checks'])} checks passed and {checks['failed']} failed",
        f"The steps took {n['time']['total_s']:.0f} s of the {budget_s} s budget",
        f"The baseline took {n['baseline']['wall_s']:.0f} s in {n['baseline']['processes']} processes",
        f"each in {min(reruns):.0f} to {max(reruns):.0f} s ({n['time']['session_s']:.0f} s the median)",
        f"read `same` {r['same']} times and `unsure` {r['unsure']} times of {told}",
    ]
