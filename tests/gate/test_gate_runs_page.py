"""docs/gate-runs.md states the adaptive gate's first run on an H200 as its committed checks and log have it
(results/logs/gate-effort-h200-first.json and .log, from tools/gate/effort.py): the table of every benchmark, the
baseline's and an unchanged run's time, and each check that failed. It reads committed files only."""

import json
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
LOGS = ROOT / "results" / "logs"
SUMMARY = json.loads((LOGS / "gate-effort-h200-first.json").read_text())
NUMBERS = SUMMARY["numbers"]
LOG = (LOGS / "gate-effort-h200-first.log").read_text()


def section() -> str:
    page = (ROOT / "docs" / "gate-runs.md").read_text()
    return page[page.index("### The first run, on an H200") : page.index("### The second run")]


def flat() -> str:
    """The section with its lines joined, as a reader reads a paragraph."""
    return re.sub(r"\s*\n\s*", " ", section())


def change(why: str) -> str:
    """The statistic, change and interval a verdict's reason starts with: `median +6.9% [+5.6, +8.5]`."""
    return re.match(r"(?:\w+: )?((?:median|q1|q3|tmean) [+-][\d.]+% \[[^\]]+\])", why)[1]


def failed(step: str, what: str) -> dict:
    return next(c for c in SUMMARY["checks"] if c["step"] == step and c["what"] == what and c["ok"] is False)


def us(x: float) -> str:
    return f"{x:,.2f}" if x < 1000 else f"{x:,.0f}"


def test_the_page_links_the_committed_log_and_checks():
    text = section()
    assert (
        "(../results/logs/gate-effort-h200-first.log)" in text
        and "(../results/logs/gate-effort-h200-first.json)" in text
    )
    assert SUMMARY["gpu"] == "NVIDIA H200"


def test_the_table_is_the_checks_numbers():
    rows = [line for line in section().splitlines() if line.startswith("| `test_")]
    assert len(rows) == len(NUMBERS["benchmarks"]) == 9
    for name, r in NUMBERS["benchmarks"].items():
        b = NUMBERS["baseline"]["benchmarks"][name]
        floor = f"{b['floor_pct']:.2f}" + (f" ({r['floor_pct']:.2f})" if r["floor_pct"] < b["floor_pct"] else "")
        w = r["words"]
        more = [f"`{r[k]['word']}` {r[k]['median']['pct']:+.1f}%" for k in ("more_5", "more_10")]
        want = (
            f"| `{name}` | {us(r['median_us'])} | {r['timed']} | {floor} | {b['processes']} | "
            f"{w['same']} / {w['unsure']} / {w['slower']} / {w['faster']} | {more[0]} | {more[1]} |"
        )
        assert want in rows, want


def test_the_counts_and_times_are_the_checks():
    text, checks = flat(), SUMMARY["checks"]
    passed = sum(c["ok"] is True for c in checks)
    assert f"{passed} of {len(checks)} checks passed and {SUMMARY['failed']} failed" in text
    t, r, b = NUMBERS["time"], NUMBERS["reruns"], NUMBERS["baseline"]
    assert f"The steps took {t['total_s']:.0f} s of the 500 s budget" in text and "budget 500 s" in LOG
    assert f"took {b['wall_s']:.0f} s in {b['processes']} processes" in text
    reruns = [s for k, s in t["steps_s"].items() if k.startswith("c-rerun-") and s]
    assert len(reruns) == r["runs"]
    assert (
        f"{r['runs']} unchanged runs ran, each in {min(reruns):.0f} to {max(reruns):.0f} s "
        f"({t['session_s']:.0f} s the median)"
    ) in text
    told = sum(r[w] for w in ("same", "unsure", "slower", "faster"))
    assert r["unsure"] == r["slower"] == r["faster"] == r["failed"] == 0
    assert f"read `same` {r['same']} times of {told}: no `unsure`, no `slower`, no `faster`, and none failed" in text


def test_what_passed_is_quoted_from_the_checks():
    text, s = flat(), NUMBERS["slowdowns"]
    for step, name in (("s-fp32", "test_matmul_2048"), ("s-grid", "test_fma_1ms")):
        v = s[step][name]
        assert v["word"] == "slower" and change(v["why"]) in text and f'"{v["moved"]}' in text
        assert v["counters"]["baseline"] and v["counters"]["now"]
    for name, v in NUMBERS["part"].items():
        assert v["word"] == "slower" and change(v["why"]) in text
    moved = NUMBERS["benchmarks"]["test_sum_large"]["moved_5"]
    assert moved.endswith("more bytes") and f'"{moved}"' in text
    small = next(c for c in SUMMARY["checks"] if c["step"] == "a-more-work-10pct" and c["what"] == "test_sum_small")
    assert small["ok"] and change(small["got"]) == "q3 +4.0% [+3.1, +4.7]" and "+4.0% [+3.1, +4.7]" in text


def test_every_failed_check_is_on_the_page_with_its_numbers():
    text = flat()
    assert SUMMARY["failed"] == sum(c["ok"] is False for c in SUMMARY["checks"]) == 5
    wall = failed("1-baseline", "the README's recipe, every process of it")
    most = re.match(r"at most (\d+) s", wall["expected"])[1]
    assert f"took {wall['got']}, past the {most} s" in text
    runs = failed("c", "unchanged runs")
    asked = int(runs["expected"].split()[0])
    assert f"**{runs['got'].split()[0]} unchanged runs, not {asked}.**" in text
    skips = re.findall(r"== c-rerun-\d+: skipped, (\d+) s of the budget left and it needs about (\d+) s", LOG)
    assert len(skips) == asked - NUMBERS["reruns"]["runs"] == 6 and len(set(skips)) == 1
    assert f"skipped the last six with {skips[0][0]} s left, each needing about {skips[0][1]} s" in text
    outliers = failed("a-more-work-10pct", "test_sum_outliers")
    m = NUMBERS["benchmarks"]["test_sum_outliers"]["more_10"]["median"]
    assert (
        outliers["got"].startswith("same: ")
        and f"read `same` under 10% more work** ({change(outliers['got'])})" in text
    )
    assert f"Its floor from 8 processes was {m['floor']:.2f}%" in text
    assert NUMBERS["baseline"]["benchmarks"]["test_sum_outliers"]["processes"] == 8
    spread = NUMBERS["baseline"]["benchmarks"]["test_sum_outliers"]["spread_pct"]
    assert f"spread, {spread:.2f}%" in text
    assert f"the change was {m['raw_pct']:+.1f}%" in text and f"sat {m['center']:.1f}% above" in text
    assert failed("e-another-model", "exit status")["got"] == "0"
    assert failed("e-another-model", "the refusal")["got"] == "no ERROR line"
    assert "(exit 0, no ERROR line)" in text
    assert re.search(r"Failed to load \S+/other/h200\.json: 'mean'", LOG) and "'mean'\", in the log" in text


def test_what_is_not_yet_shown_is_said():
    text = flat()
    assert (
        "Not yet shown on a GPU, then: 20 or more unchanged runs in one command, the baseline within 120 s, "
        "and the refusal of another model's baseline."
    ) in text
    assert "has not been run on a GPU yet" not in (ROOT / "docs" / "gate-runs.md").read_text()
