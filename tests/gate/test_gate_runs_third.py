"""docs/gate-runs.md's third run of the adaptive gate on an H200, with --gpu-baseline-seconds, as its committed
checks and logs have it (results/logs/gate-effort-h200-third.json and .log), and the two baselines alone after it
(gate-effort-h200-baseline-2.*, -3.*), the second of which the limit stopped. It reads committed files only."""

import json
import re

from gaterunpage import LOGS, flat, said, section, table_missing

RUN = json.loads((LOGS / "gate-effort-h200-third.json").read_text())
LOG = (LOGS / "gate-effort-h200-third.log").read_text()
ALONE = {
    i: (
        json.loads((LOGS / f"gate-effort-h200-baseline-{i}.json").read_text()),
        (LOGS / f"gate-effort-h200-baseline-{i}.log").read_text(),
    )
    for i in (2, 3)
}
TEXT = section("### The third run, on an H200", "## The fixed effort")


def test_every_check_passed_and_the_page_says_the_runs_numbers():
    text, n = flat(TEXT), RUN["numbers"]
    assert RUN["failed"] == 0 and all(c["ok"] is True for c in RUN["checks"])
    assert [x for x in said(RUN, LOG, 545) if x not in text] == []
    assert table_missing(n, TEXT) == []
    for name in ("test_sum_small", "test_sum_outliers"):
        assert f"{n['baseline']['benchmarks'][name]['floor_pct']:.2f}%" in text


def test_what_moved_is_quoted_from_the_log():
    for quoted in re.findall(r'\("([^"]+)"\)', flat(TEXT)):
        assert quoted in LOG or any(quoted in log for _, log in ALONE.values()), quoted


def test_every_baseline_of_the_recipe_took_120_s_at_most_and_the_limit_is_said_where_it_stopped_one():
    times = [RUN["numbers"]["baseline"]["wall_s"]] + [j["numbers"]["baseline"]["wall_s"] for j, _ in ALONE.values()]
    assert max(times) <= 120
    text = flat(TEXT)
    assert f"Three baselines of {times[0]:.0f}, {times[1]:.0f} and {times[2]:.0f} s, each within 120 s" in text
    for checks, log in ALONE.values():
        b = checks["numbers"]["baseline"]
        assert f"{b['wall_s']:.0f} s in {b['processes']}" in text
        assert f"== 1-baseline: exit 0 ({b['wall_s']:.0f} s)" in log
    stopped = [log for _, log in ALONE.values() if "would end past --gpu-baseline-seconds" in log]
    assert len(stopped) == 1 and ALONE[3][0]["numbers"]["baseline"]["processes"] == 7
