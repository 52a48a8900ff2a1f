"""The floor model against twenty real unchanged runs of the gate's own benchmarks on an H100
(tests/gate_h100_reruns.json: each run's change of every statistic from the baseline's process, with its
interval, as the gate computed them from the rounds). That baseline held one process (its 50 ms FMA check
failed, so its other seven never ran), every run was held against the 1% least floor, and 13 of the 20 read
some benchmark `slower` or `faster`. A baseline of eight processes holds its first and seven unchanged runs:
here, seven of these runs become its reruns, as --gpu-measure-floor adds them, and the other thirteen are
judged against the floors they give, as a run against that baseline would be (same rounds, same intervals).
"""

import json
import random
from pathlib import Path

import pytest

from gpubench.gate import floor
from gpubench.gate.verdict import LEAST_FLOOR_PCT, decide
from gpubench.stats import Interval

DATA = json.loads((Path(__file__).parent / "gate_h100_reruns.json").read_text())
RUNS = DATA["reruns"]
NAMES = list(RUNS[0])
FLOOR_RUNS = 7  # with the baseline's own process: the eight of --gpu-baseline-runs' default


def intervals(record: dict) -> dict:
    return {stat: Interval(*change) for stat, change in record["changes"].items()}


def baseline_with(runs: list[int]) -> dict:
    """The baseline's one process with these runs added as its unchanged reruns."""
    data = {"benchmarks": []}
    for i in runs:
        data, _ = floor.with_rerun(data, {n: intervals(RUNS[i][n]) for n in NAMES}, "then", None)
    return data


def verdict(baseline: dict, run: int, name: str):
    record = RUNS[run][name]
    return decide(intervals(record), floor.floors(baseline, name, LEAST_FLOOR_PCT),
                  tuple(record.get("clocks_mhz", (None, None))), record["resolution_pct"])


def words_against(floor_runs: list[int]) -> dict[str, int]:
    """The words of every run left out of floor_runs, against the baseline those runs measured."""
    baseline, words = baseline_with(floor_runs), {}
    for run in (r for r in range(len(RUNS)) if r not in floor_runs):
        for name in NAMES:
            word = verdict(baseline, run, name).word
            words[word] = words.get(word, 0) + 1
            if word in ("slower", "faster"):
                words.setdefault("false", []).append(f"run {run + 1}: {name} {verdict(baseline, run, name).why}")
    return words


def test_against_one_process_the_runs_read_as_they_did_and_thirteen_cried_wolf():
    one = baseline_with([])
    assert all(verdict(one, r, n).word == RUNS[r][n]["word"] for r in range(len(RUNS)) for n in NAMES)
    alarmed = [r for r in range(len(RUNS)) if any(verdict(one, r, n).word in ("slower", "faster") for n in NAMES)]
    assert len(RUNS) == 20 and len(alarmed) == 13


@pytest.mark.parametrize("start", range(len(RUNS) - FLOOR_RUNS + 1))
def test_against_eight_processes_no_run_reads_slower_or_faster(start):
    """Seven runs in a row measure the floor, as the baseline's processes run one after another."""
    words = words_against(list(range(start, start + FLOOR_RUNS)))
    assert "false" not in words, words["false"]
    assert words.get("same", 0) + words.get("unsure", 0) == (len(RUNS) - FLOOR_RUNS) * len(NAMES)


def test_against_eight_processes_picked_at_random_no_run_reads_slower_or_faster():
    pick = random.Random(0)
    for _ in range(100):
        words = words_against(pick.sample(range(len(RUNS)), FLOOR_RUNS))
        assert "false" not in words, words["false"]


def test_the_floors_are_what_these_processes_moved():
    """The floors the first eight processes give: wide where the H100 moved a call between processes (the 6 us
    matmul by 1.2% and the CuPy sum with outliers by 1.1% in their medians), narrow where it did not (the sum of
    2^27 and the saxpy, at the least floor)."""
    baseline = baseline_with(list(range(FLOOR_RUNS)))
    median = {n: floor.floors(baseline, n, LEAST_FLOOR_PCT)["median"] for n in NAMES}
    assert all(f.processes == FLOOR_RUNS + 1 for f in median.values())
    assert median["test_matmul_tiny"].width > 4 and median["test_sum_outliers"].width > 4
    assert median["test_saxpy"].width == median["test_sum_large"].width == LEAST_FLOOR_PCT
