"""The regression gate's statistics with synthetic rounds: the change of each statistic with its bootstrap
interval, the verdict's rules, and two sets of reproductions. Against the committed baselines, where the older
rule (the medians against the wider IQR, at least 2%) read `same`; they start from the rounds those baselines
held then (gate_reproduction_rounds.json), so that they stay the same when the baselines are measured anew.
The between-run floor of several processes, and the reproduction of a small call's rounds on an H100 that the
rule before it read `slower`: test_gate_floor.py. The timer's step, outlying rounds and rounds at another
clock: test_gate_rounds.py."""

import json
import statistics
from pathlib import Path

import pytest
from gaterounds import floors, noise

from gpubench.gate.judgement import LEVEL, RULES, Change, decide, judge
from gpubench.stats import STATISTICS, Interval, block_length, change_intervals, quantile

np = pytest.importorskip("numpy")
ROOT = Path(__file__).resolve().parents[2]
H200, H100 = ROOT / "results/benchmarks/h200.json", ROOT / "results/benchmarks/h100-80gb-hbm3.json"
REPRODUCED = json.loads((ROOT / "tests" / "gate" / "gate_reproduction_rounds.json").read_text())["rounds"]
H200_COPY = REPRODUCED["NVIDIA H200: test_copy[torch-1GiB]"]["rounds"]
H100_GEMM = REPRODUCED["NVIDIA H100 80GB HBM3: test_gemm[torch-bf16]"]["rounds"]
OLD_FLOOR_PCT = 2.0  # the old rule's floor, and the floor the reproductions were read against


def old_rule(before: list[float], now: list[float]) -> str:
    """What the gate said before: the change of the median against the wider IQR of the two runs (at least 2%)."""
    iqr = [quantile(r, 0.75) - quantile(r, 0.25) for r in (before, now)]
    base = statistics.median(before)
    diff = statistics.median(now) - base
    return "same" if abs(diff) <= max(*iqr, OLD_FLOOR_PCT / 100 * base) else ("slower" if diff > 0 else "faster")


# --- the change of a statistic with its interval ---------------------------------------------------


def test_a_uniform_slowdown_moves_every_statistic_and_its_interval_excludes_no_change():
    before, now = noise(seed=1), [x * 1.05 for x in noise(seed=2)]
    for name, i in change_intervals(before, now).items():
        assert i.lo < i.pct < i.hi, name
        assert 4.8 < i.lo and i.hi < 5.2 and i.pct == pytest.approx(5.0, abs=0.15), name


def test_the_same_rounds_always_give_the_same_interval():
    assert change_intervals(noise(seed=1), noise(seed=2)) == change_intervals(noise(seed=1), noise(seed=2))


def test_an_interval_of_unchanged_runs_holds_no_change_about_as_often_as_it_says():
    held = [change_intervals(noise(seed=s), noise(seed=100 + s))["median"] for s in range(40)]
    assert sum(i.lo <= 0 <= i.hi for i in held) >= 34  # 95% intervals: 38 expected, 34 leaves room for chance


def test_the_four_intervals_of_a_verdict_together_miss_no_change_about_one_time_in_twenty():
    """The verdict reads four statistics, each at LEVEL: together they must hold a change of zero about 95%
    of the time, or unchanged reruns would read slower or faster too often whenever the floor is small."""
    missed = 0
    for s in range(60):
        intervals = change_intervals(noise(sd=0.05, seed=s), noise(sd=0.05, seed=500 + s), level=LEVEL, reps=1000)
        missed += any(not i.lo <= 0 <= i.hi for i in intervals.values())
    assert missed <= 6  # 3 expected; one in ten leaves room for chance


def test_rounds_that_drift_together_give_a_wider_interval_than_the_same_rounds_shuffled():
    """A clock wave (the H100 GEMM's rounds) is one event, not many independent rounds: the block bootstrap
    keeps neighbours together, so the interval widens instead of pretending to a precision it lacks."""
    wave = H100_GEMM
    shuffled = list(np.random.default_rng(0).permutation(wave))
    width = {k: change_intervals(r, r)["median"] for k, r in (("wave", wave), ("shuffled", shuffled))}
    assert width["wave"].hi - width["wave"].lo > 1.3 * (width["shuffled"].hi - width["shuffled"].lo)
    assert block_length(51) == 4 and block_length(1000) == 10 and block_length(1) == 1


@pytest.mark.parametrize(
    "bad", [([], [1.0, 1.0]), ([1.0], [1.0, 1.0]), ([1.0, 0.0], [1.0, 1.0]), ([1.0, float("nan")], [1.0, 1.0])]
)
def test_a_change_needs_two_runs_of_positive_round_times(bad):
    with pytest.raises(ValueError, match="at least two positive, finite round times"):
        change_intervals(*bad)


# --- the rules -------------------------------------------------------------------------------------


def word(*changes) -> str:
    for w, _, pick, _ in RULES:
        if pick(changes) is not None:
            return w


@pytest.mark.parametrize(
    "changes,expected",
    [
        ([Change("median", 5, 4, 6, 2)], "slower"),
        ([Change("median", -5, -6, -4, 2)], "faster"),
        ([Change("median", 0.5, -1, 1.5, 2)], "same"),
        ([Change("median", 1.5, -1, 3, 2)], "unsure"),  # cannot rule out a change beyond the floor
        ([Change("median", 0.1, -0.5, 0.5, 2), Change("q3", 30, 29, 31, 2)], "slower"),  # part of the rounds
        ([Change("median", 0.1, -0.5, 0.5, 2), Change("q3", 1.0, -3, 5, 2)], "unsure"),
        ([Change("q1", -5, -6, -4, 2), Change("q3", 5, 4, 6, 2)], "slower"),  # a gate reads a slower part first
    ],
)
def test_the_first_rule_that_holds_decides(changes, expected):
    assert word(*changes) == expected


def test_same_is_never_said_of_a_change_the_rounds_cannot_rule_out():
    """Twenty rounds spread 10%, unchanged: they cannot show that no statistic moved more than 2%."""
    words = [judge(noise(n=20, sd=0.1, seed=s), noise(n=20, sd=0.1, seed=50 + s), floors(2.0)) for s in range(10)]
    assert "same" not in [v.word for v in words]
    unsure = [v for v in words if v.word == "unsure"]
    assert len(unsure) >= 8 and all(
        "reaches past its floor of 2.0%" in v.why and "more rounds" in v.why for v in unsure
    )


def test_a_floor_wider_than_the_calls_promise_never_says_same():
    """The H200's test_sum_outliers (14 us): 10% more work moved it +6.9%, inside its floor of 11.3% from the most
    processes. Same would hide what the gate promises to catch from 10 us; below 10 us nothing is promised."""
    widths = {"median": 0.8, "q1": 0.9, "q3": 0.9, "tmean": 0.7}
    moved = {s: Interval(6.9, 6.9 - w, 6.9 + w) for s, w in widths.items()}
    for call_s, floor, expected in (
        (14.4e-6, 11.3, "unsure"),
        (6.2e-6, 11.3, "same"),
        (14.4e-6, 5.9, "slower"),
        (150e-6, 3.5, "slower"),
        (None, 11.3, "same"),
    ):
        v = decide(moved, floors(floor), call_s=call_s)
        assert v.word == expected, (call_s, floor, v.why)
    v = decide({s: Interval(0.2, -0.5, 0.9) for s in widths}, floors(4.0), call_s=150e-6)
    assert v.word == "unsure" and "within its floor of 4.0%, but a floor that wide could hide 5% more work" in v.why
    assert decide({s: Interval(0.2, -0.5, 0.9) for s in widths}, floors(2.9), call_s=150e-6).word == "same"


def test_a_verdict_says_which_statistic_decided_with_its_numbers():
    v = judge(noise(seed=1), [x * 1.05 for x in noise(seed=2)], floors(1.0))
    assert v.word == "slower" and v.why.startswith("median +5.0% [+") and "floor of 1.0%" in v.why
    assert [c.stat for c in v.changes] == list(STATISTICS) and v.median.stat == "median"


# --- reproductions against the committed baselines ------------------------------------------------


def test_half_the_calls_25pct_slower_reads_slower_not_same():
    before = H200_COPY
    now = [x * 1.25 if i % 2 else x for i, x in enumerate(before)]
    assert old_rule(before, now) == "same"
    v = judge(before, now, floors(OLD_FLOOR_PCT))
    assert v.word == "slower" and v.why.startswith("q3 +")


def test_40pct_of_calls_30pct_slower_reads_slower_though_the_median_hardly_moves():
    before = H200_COPY
    slow = np.random.default_rng(0).permutation(len(before)) < round(0.4 * len(before))
    now = [x * 1.3 if s else x for x, s in zip(before, slow)]
    assert old_rule(before, now) == "same"
    v = judge(before, now, floors(OLD_FLOOR_PCT))
    assert v.word == "slower" and abs(v.median.pct) < 1.0 and v.why.startswith(("q3 +", "tmean +"))
    by = {c.stat: c for c in v.changes}
    # the trimmed mean leaves out a tenth of the rounds at each end, the slowest of the slowed ones among them
    assert by["q3"].pct == pytest.approx(30, abs=1) and by["tmean"].pct == pytest.approx(11, abs=1.5)


def test_every_round_of_the_h100_gemm_7pct_slower_reads_slower():
    before = H100_GEMM
    now = [x * 1.07 for x in before]
    assert old_rule(before, now) == "same"
    assert judge(before, now, floors(OLD_FLOOR_PCT)).word == "slower"


@pytest.mark.parametrize("path", [H100, H200], ids=["h100", "h200"])
def test_every_committed_benchmark_against_its_own_rounds_in_another_order_is_never_slower(path):
    """The same rounds, rotated by a third: what an unchanged rerun could look like at best. Never a slowdown."""
    for bench in json.loads(path.read_text())["benchmarks"]:
        before = bench["stats"]["data"]
        k = len(before) // 3
        v = judge(before, before[k:] + before[:k], floors(OLD_FLOOR_PCT))
        assert v.word in ("same", "unsure"), (bench["name"], v.why)
