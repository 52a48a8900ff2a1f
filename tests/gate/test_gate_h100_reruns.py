"""The floor model against twenty real unchanged runs of the gate's own benchmarks on an H100
(tests/gate/gate_h100_reruns.json: each run's change of every statistic from the baseline's process, with its
interval, as the gate computed them from the rounds). That baseline held one process (its 50 ms FMA check
failed, so its other seven never ran), every run was held against the 1% least floor, and 13 of the 20 read
some benchmark `slower` or `faster`. A baseline of eight processes holds its first and seven unchanged runs:
here, seven of these runs become its reruns, as --gpu-measure-floor adds them, and the other thirteen are
judged against the floors they give, as a run against that baseline would be (same rounds, same intervals).
"""

import json
import random
from pathlib import Path

import gatecalls
import pytest

from gpubench.gate import floor
from gpubench.gate.judgement import LEAST_FLOOR_PCT, decide
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
    return decide(
        intervals(record),
        floor.floors(baseline, name, LEAST_FLOOR_PCT),
        tuple(record.get("clocks_mhz", (None, None))),
        record["resolution_pct"],
    )


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


# --- 30% more work in 40% of the calls, timed back to back ----------------------------------------------------

ROOT = Path(__file__).resolve().parents[2]
PART = DATA["part_of_calls"]
BACK = DATA["back_to_back"]
LEAST = {stat: floor.Floor(LEAST_FLOOR_PCT) for stat in ("median", "q1", "q3", "tmean")}


def part_min_time() -> float:
    """The --gpu-min-time of the script's step b (PART_MIN_TIME's default)."""
    import re

    found = re.search(r"PART_MIN_TIME:-([0-9.]+)", (ROOT / "tools" / "gate" / "baseline.sh").read_text())
    assert found, "tools/gate/baseline.sh sets no PART_MIN_TIME for step b"
    return float(found.group(1))


def burst_rounds(name: str, calls: int, min_time_s: float, phase: int) -> list[float]:
    """The rounds a run of step b times: the gate set's bursts (tests/gate_benchmarks), starting `phase` calls
    into their cycle, each call the baseline's median or 30% more, each round carrying the baseline's own
    round-to-round noise, as many rounds as --gpu-min-time asks (at least the fixture's ten)."""
    import math

    from gpubench.gate.fixture import MIN_ROUNDS

    base = BACK[name]["baseline_rounds_s"]
    fast = sorted(base)[len(base) // 2]
    times = []
    call = gatecalls.bursts(lambda: times.append(fast), lambda: times.append(fast * 1.3), 0.4)
    for _ in range(phase):
        call()
    times.clear()
    rounds = max(MIN_ROUNDS, math.ceil(min_time_s / (calls * fast * (1 + 0.4 * 0.3))))
    for _ in range(rounds * calls):
        call()
    return [sum(times[r * calls : (r + 1) * calls]) / calls * base[r % len(base)] / fast for r in range(rounds)]


def test_the_h100_part_of_the_calls_run_had_too_few_rounds_for_the_saxpy():
    """11 rounds of 23 calls (0.2 s), five of them slowed whole: the median moved 11.7%, but a resample of those
    few rounds can hold none of the slow ones, and the run read `unsure`; so do most runs of the bursts below at
    0.2 s, wherever in their cycle the rounds start."""
    from gpubench.gate.judgement import judge

    saxpy, base = PART["test_saxpy"], BACK["test_saxpy"]["baseline_rounds_s"]
    assert saxpy["word"] == "unsure" and len(saxpy["rounds_s"]) == 11 and saxpy["calls_per_round"] == 23
    assert judge(base, saxpy["rounds_s"], LEAST).word == "unsure"
    cycle = gatecalls.BURST * gatecalls.PERIOD
    short = [judge(base, burst_rounds("test_saxpy", 23, 0.2, phase), LEAST).word for phase in range(0, cycle, 8)]
    assert short.count("unsure") > len(short) / 2


@pytest.mark.parametrize("name", ["test_saxpy", "test_sum_large"])
def test_part_of_the_calls_reads_slower_at_step_b_min_time_wherever_its_bursts_start(name):
    """At step b's --gpu-min-time, 30% more work in 40% of the calls reads `slower` for both calls timed back to
    back, with the calls per round of the baseline and of the run (the slowed warm-up plans fewer), wherever in
    the bursts' cycle the rounds start."""
    from gpubench.gate.judgement import judge

    cycle = gatecalls.BURST * gatecalls.PERIOD
    base = BACK[name]["baseline_rounds_s"]
    for calls in (BACK[name]["calls_per_round"], PART[name]["calls_per_round"]):
        words = [
            judge(base, burst_rounds(name, calls, part_min_time(), phase), LEAST).word for phase in range(0, cycle, 8)
        ]
        assert words == ["slower"] * len(words), (calls, words)
