"""docs/gate-runs.md's second run of the adaptive gate on an H200, as its committed checks and log have it
(results/logs/gate-effort-h200.json and .log), and the two-command run before it (gate-effort-h200-split.*),
whose unchanged 6 us matmul read `slower`. It reads committed files only."""

import json
import re

from gaterunpage import LOGS, said, table_missing
from gaterunpage import flat as flattened
from gaterunpage import section as page_section

from gpubench.gate import floor

RUN = json.loads((LOGS / "gate-effort-h200.json").read_text())
SPLIT = json.loads((LOGS / "gate-effort-h200-split.json").read_text())
LOG = (LOGS / "gate-effort-h200.log").read_text()
SPLIT_LOG = (LOGS / "gate-effort-h200-split.log").read_text()


def section() -> str:
    return page_section("### The second run, on an H200", "### The third run, on an H200")


def flat() -> str:
    return flattened(section())


def test_the_counts_times_and_table_are_the_checks():
    text, n = flat(), RUN["numbers"]
    assert [x for x in said(RUN, LOG, 580) if x not in text] == []
    assert table_missing(n, section()) == []


def test_the_unsure_are_the_sums_whose_floors_are_wider_than_they_need():
    text, n = flat(), RUN["numbers"]
    unsure = {k: b for k, b in n["benchmarks"].items() if b["words"]["unsure"]}
    assert sorted(unsure) == ["test_sum_outliers", "test_sum_small"]
    for name, b in unsure.items():
        assert b["words"]["unsure"] == 20 and 6.0 < b["floor_pct"] and 10 <= b["median_us"] < 100
        assert f"{b['floor_pct']:.2f}%" in text and b["more_10"]["word"] == "slower"
    lines = re.findall(
        r"^test_sum_small .* unsure +(median [^\n]*?could hide 10% more work)[^\n]*from 8 processes", LOG, re.M
    )
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
    assert RUN["numbers"]["benchmarks"]["test_matmul_tiny"]["words"] == {
        "same": 20,
        "unsure": 0,
        "slower": 0,
        "faster": 0,
    }
