"""docs/gate-runs.md's second run of the adaptive gate on an H200, as its committed checks and log have it
(results/logs/gate-effort-h200.json and .log), and the two-command run before it (gate-effort-h200-split.*),
whose unchanged 6 us matmul read `slower`. It reads committed files only."""

import json
import re
from pathlib import Path

from gpubench.gate import floor

ROOT = Path(__file__).resolve().parents[2]
LOGS = ROOT / "results" / "logs"
RUN = json.loads((LOGS / "gate-effort-h200.json").read_text())
SPLIT = json.loads((LOGS / "gate-effort-h200-split.json").read_text())
LOG = (LOGS / "gate-effort-h200.log").read_text()
SPLIT_LOG = (LOGS / "gate-effort-h200-split.log").read_text()


def section() -> str:
    page = (ROOT / "docs" / "gate-runs.md").read_text()
    return page[page.index("### The second run, on an H200"):page.index("## The fixed effort")]


def flat() -> str:
    return re.sub(r"\s*\n\s*", " ", section())


def us(x: float) -> str:
    return f"{x:,.2f}" if x < 1000 else f"{x:,.0f}"


def test_the_counts_times_and_table_are_the_checks():
    text, n = flat(), RUN["numbers"]
    passed = sum(c["ok"] is True for c in RUN["checks"])
    assert f"{passed} of {len(RUN['checks'])} checks passed and {RUN['failed']} failed" in text
    assert f"The steps took {n['time']['total_s']:.0f} s of the 580 s budget" in text and "budget 580 s" in LOG
    assert f"The baseline took {n['baseline']['wall_s']:.0f} s in {n['baseline']['processes']} processes" in text
    reruns = [s for k, s in n["time"]["steps_s"].items() if k.startswith("c-rerun-") and s]
    r = n["reruns"]
    assert len(reruns) == r["runs"] == 20 and r["slower"] == r["faster"] == r["failed"] == 0
    assert f"each in {min(reruns):.0f} to {max(reruns):.0f} s ({n['time']['session_s']:.0f} s the median)" in text
    told = sum(r[w] for w in ("same", "unsure", "slower", "faster"))
    assert f"read `same` {r['same']} times and `unsure` {r['unsure']} times of {told}" in text
    rows = [line for line in section().splitlines() if line.startswith("| `test_")]
    assert len(rows) == len(n["benchmarks"]) == 9
    for name, b in n["benchmarks"].items():
        base = n["baseline"]["benchmarks"][name]
        fl = f"{base['floor_pct']:.2f}" + (f" ({b['floor_pct']:.2f})" if b["floor_pct"] < base["floor_pct"] else "")
        w = b["words"]
        more = [f"`{b[k]['word']}` {b[k]['median']['pct']:+.1f}%" for k in ("more_5", "more_10")]
        assert (f"| `{name}` | {us(b['median_us'])} | {b['timed']} | {fl} | {base['processes']} | {w['same']} / "
                f"{w['unsure']} / {w['slower']} / {w['faster']} | {more[0]} | {more[1]} |") in rows, name


def test_the_unsure_are_the_sums_whose_floors_are_wider_than_they_need():
    text, n = flat(), RUN["numbers"]
    unsure = {k: b for k, b in n["benchmarks"].items() if b["words"]["unsure"]}
    assert sorted(unsure) == ["test_sum_outliers", "test_sum_small"]
    for name, b in unsure.items():
        assert b["words"]["unsure"] == 20 and 6.0 < b["floor_pct"] and 10 <= b["median_us"] < 100
        assert f"{b['floor_pct']:.2f}%" in text and b["more_10"]["word"] == "slower"
    lines = re.findall(r"^test_sum_small .* unsure +(median [^\n]*?could hide 10% more work)[^\n]*from 8 processes",
                       LOG, re.M)
    assert len(lines) == 20  # and the page quotes one of them
    line = next(x for x in lines if x in text)
    assert f'("{line}")' in text


def test_the_failure_and_the_earlier_run_are_said_with_their_numbers():
    text = flat()
    failed = [c for c in RUN["checks"] if c["ok"] is False]
    assert [(c["step"], c["got"]) for c in failed] == [("1-baseline", f"{RUN['numbers']['baseline']['wall_s']:.0f} s")]
    assert f"**the baseline took {failed[0]['got']}, past the 120 s.**" in text
    split = SPLIT["numbers"]
    assert f"took {split['baseline']['wall_s']:.0f} s in {split['baseline']['processes']} processes" in text
    assert "--steps e-,1-,c-" in SPLIT_LOG.split("\n", 5)[0] + text and "resumed: " in SPLIT_LOG
    bad = [c for c in SPLIT["checks"] if c["ok"] is False and c["what"] == "every benchmark"]
    assert len(bad) == 1 and "test_matmul_tiny slower: q1 +7.2% [+6.2, +8.2]" in bad[0]["got"]
    assert "q1 +7.2% [+6.2, +8.2] against a floor of 5.5% from 8 processes" in text
    assert f"at least {floor.SHORT_LEAST_PCT:.0f}%" in text
    assert RUN["numbers"]["benchmarks"]["test_matmul_tiny"]["words"] == {"same": 20, "unsure": 0, "slower": 0,
                                                                         "faster": 0}
