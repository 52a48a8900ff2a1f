"""The regression gate's statistics with synthetic rounds: the change of each statistic with its bootstrap
interval, the verdict's rules, the between-run floor, and the reproductions of issue 20 against the
committed baselines, where the old rule (the medians against the wider IQR, at least 2%) read `same`.
The reproductions start from the rounds those baselines held when the issue was written
(issue20_rounds.json), so that they stay the issue's when the baselines are measured anew."""

import json
import statistics
from pathlib import Path

import pytest

from gpubench.gate import floor
from gpubench.gate.verdict import LEVEL, RULES, Change, clock_explains, judge
from gpubench.stats import (
    STATISTICS,
    Interval,
    block_length,
    change_intervals,
    quantile,
)

np = pytest.importorskip("numpy")
ROOT = Path(__file__).resolve().parents[1]
H200, H100 = ROOT / "results/benchmarks/h200.json", ROOT / "results/benchmarks/h100-80gb-hbm3.json"
ISSUE = json.loads((ROOT / "tests" / "issue20_rounds.json").read_text())["rounds"]
H200_COPY = ISSUE["NVIDIA H200: test_copy[torch-1GiB]"]["rounds"]
H100_GEMM = ISSUE["NVIDIA H100 80GB HBM3: test_gemm[torch-bf16]"]["rounds"]
OLD_FLOOR_PCT = 2.0  # the old rule's floor, and the floor the issue's reproductions were read against


def old_rule(before: list[float], now: list[float]) -> str:
    """What the gate said before: the change of the median against the wider IQR of the two runs (at least 2%)."""
    iqr = [quantile(r, 0.75) - quantile(r, 0.25) for r in (before, now)]
    base = statistics.median(before)
    diff = statistics.median(now) - base
    return "same" if abs(diff) <= max(*iqr, OLD_FLOOR_PCT / 100 * base) else ("slower" if diff > 0 else "faster")


def floors(pct: float) -> dict:
    return {s: pct for s in STATISTICS}


def noise(n=60, sd=0.002, seed=1) -> list[float]:
    return list(1e-3 * (1 + sd * np.random.default_rng(seed).standard_normal(n)))


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


@pytest.mark.parametrize("bad", [([], [1.0, 1.0]), ([1.0], [1.0, 1.0]), ([1.0, 0.0], [1.0, 1.0]),
                                 ([1.0, float("nan")], [1.0, 1.0])])
def test_a_change_needs_two_runs_of_positive_round_times(bad):
    with pytest.raises(ValueError, match="at least two positive, finite round times"):
        change_intervals(*bad)


# --- the rules -------------------------------------------------------------------------------------

def word(*changes) -> str:
    for w, _, pick, _ in RULES:
        if pick(changes) is not None:
            return w


@pytest.mark.parametrize("changes,expected", [
    ([Change("median", 5, 4, 6, 2)], "slower"),
    ([Change("median", -5, -6, -4, 2)], "faster"),
    ([Change("median", 0.5, -1, 1.5, 2)], "same"),
    ([Change("median", 1.5, -1, 3, 2)], "unsure"),  # cannot rule out a change beyond the floor
    ([Change("median", 0.1, -0.5, 0.5, 2), Change("q3", 30, 29, 31, 2)], "slower"),  # part of the rounds
    ([Change("median", 0.1, -0.5, 0.5, 2), Change("q3", 1.0, -3, 5, 2)], "unsure"),
    ([Change("q1", -5, -6, -4, 2), Change("q3", 5, 4, 6, 2)], "slower"),  # a gate reads a slower part first
])
def test_the_first_rule_that_holds_decides(changes, expected):
    assert word(*changes) == expected


def test_same_is_never_said_of_a_change_the_rounds_cannot_rule_out():
    """Twenty rounds spread 10%, unchanged: they cannot show that no statistic moved more than 2%."""
    words = [judge(noise(n=20, sd=0.1, seed=s), noise(n=20, sd=0.1, seed=50 + s), floors(2.0)) for s in range(10)]
    assert "same" not in [v.word for v in words]
    unsure = [v for v in words if v.word == "unsure"]
    assert len(unsure) >= 8 and all("reaches past its floor of 2.0%" in v.why and "more rounds" in v.why
                                    for v in unsure)


def test_a_verdict_says_which_statistic_decided_with_its_numbers():
    v = judge(noise(seed=1), [x * 1.05 for x in noise(seed=2)], floors(1.0))
    assert v.word == "slower" and v.why.startswith("median +5.0% [+") and "floor of 1.0%" in v.why
    assert [c.stat for c in v.changes] == list(STATISTICS) and v.median.stat == "median"


# --- issue 20's reproductions against the committed baselines ---------------------------------------

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
    assert v.word == "slower" and abs(v.median.pct) < 1.0 and v.why.startswith(("q3 +", "mean +"))
    by = {c.stat: c for c in v.changes}
    assert by["q3"].pct == pytest.approx(30, abs=1) and by["mean"].pct == pytest.approx(12, abs=1.5)


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


# --- the between-run floor -------------------------------------------------------------------------

def rerun_of(**medians) -> dict:
    """One rerun's changes, each statistic moved as the median (lo, hi given per benchmark)."""
    return {name: {s: Interval(pct, lo, hi) for s in STATISTICS} for name, (pct, lo, hi) in medians.items()}


def test_the_floor_is_the_largest_change_unchanged_reruns_could_not_rule_out():
    base = {"benchmarks": []}
    one, left = floor.with_rerun(base, rerun_of(a=(1.0, 0.5, 1.5), b=(12.0, 11.0, 13.0)), "t1", "GPU-1")
    assert left == ["b"]  # a rerun that moved 12% was not unchanged
    two, _ = floor.with_rerun(one, rerun_of(a=(-2.0, -2.6, -1.4)), "t2", "GPU-1")
    assert floor.floors(two, "a", 0.0) == (floors(2.6), 2)
    assert floor.floors(two, "a", 3.0) == (floors(3.0), 2)  # never below the least floor
    assert floor.floors(two, "c", 1.0) == (floors(1.0), 0)  # never measured: the least floor alone
    assert two["gpubench"]["floor_pct"]["a"]["median"] == 2.6
    assert [r["datetime"] for r in floor.reruns(two)] == ["t1", "t2"] and base == {"benchmarks": []}


def test_a_floor_survives_its_file_and_a_failed_write_leaves_the_old_file(tmp_path, monkeypatch):
    path = tmp_path / "h100.json"
    path.write_text(json.dumps({"benchmarks": []}))
    updated, _ = floor.with_rerun({"benchmarks": []}, rerun_of(a=(1.0, 0.5, 1.5)), "t1", "GPU-1")
    floor.write(path, updated)
    assert floor.floors(json.loads(path.read_text()), "a", 0.0) == (floors(1.5), 1)
    assert [p.name for p in tmp_path.iterdir()] == ["h100.json"]

    def fail(*args):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(floor.os, "replace", fail)
    with pytest.raises(OSError):
        floor.write(path, {"benchmarks": [], "gpubench": {}})
    assert "gpubench" in json.loads(path.read_text())  # the file as it was


# --- rounds at another clock -----------------------------------------------------------------------

def test_a_change_no_larger_than_the_fall_of_the_clock_explains_is_unsure_not_slower():
    """The H100 triton GEMM, unchanged: the baseline's rounds ran at a median 1620 MHz, a rerun's at 1440 MHz
    (the GPU warmer, at its power limit), 2.6% slower, past a floor of 1.6% from two reruns."""
    before, now = noise(n=200, seed=1), [x * 1.026 for x in noise(n=200, seed=2)]
    assert judge(before, now, floors(1.6)).word == "slower"  # blind to the clocks
    v = judge(before, now, floors(1.6), clocks=(1620.0, 1440.0))
    assert v.word == "unsure"
    assert "within the +12.5% that the SM clock explains (1620 -> 1440 MHz)" in v.why


@pytest.mark.parametrize("clocks, factor, expected", [
    ((1620.0, 1440.0), 1.20, "slower"),  # 20% slower: more than a 12.5% clock explains
    ((1440.0, 1620.0), 1.026, "slower"),  # the clock rose: it explains no slowdown
    ((1620.0, 1440.0), 0.95, "faster"),  # the clock fell: it explains no speed-up
    ((1440.0, 1620.0), 0.95, "unsure"),  # the clock rose 12.5%: a 5% speed-up is within it
    ((1620.0, 1440.0), 1.12, "unsure"),  # 12% slower: within the floor and the 12.5% the clock explains
    ((1980.0, 1965.0), 1.026, "slower"),  # one 15 MHz step: not another clock
    ((None, 1440.0), 1.026, "slower"),  # a clock unknown: nothing explained
])
def test_the_clock_explains_only_a_change_in_its_own_direction_and_size(clocks, factor, expected):
    before, now = noise(n=200, seed=1), [x * factor for x in noise(n=200, seed=2)]
    assert judge(before, now, floors(1.6), clocks=clocks).word == expected


def test_what_a_clock_explains_is_the_inverse_of_its_change():
    assert clock_explains(1620.0, 1440.0) == pytest.approx(12.5)
    assert clock_explains(1440.0, 1620.0) == pytest.approx(-11.11, abs=0.01)
    assert clock_explains(1980.0, 1980.0) == clock_explains(float("nan"), 1.0) == clock_explains(0.0, 1.0) == 0.0


def test_the_clock_sentence_is_said_only_of_an_interval_the_clock_can_cover():
    v = judge(noise(n=200, seed=1), [x * 1.026 for x in noise(n=200, seed=2)], floors(1.6), (1620.0, 1440.0))
    assert "SM clock explains" in v.why
    wide = Change("median", 10.0, 2.0, 20.0, 1.6, clock_pct=12.5)  # could be more than the clock explains
    assert not wide.clocked and not wide.above and not wide.within


def test_the_clock_is_held_against_a_change_only_where_a_limit_swayed_it():
    from gpubench.gate.report import compare_run

    before, now = noise(n=200, seed=1), [x * 1.026 for x in noise(n=200, seed=2)]
    for events, expected in (({"power cap": 1.0}, "unsure"), ({}, "slower"), ({"power cap": 0.2}, "slower")):
        base = {"benchmarks": [{"fullname": "t", "stats": {"median": 1e-3, "data": before},
                                "extra_info": {"sm_clock_mhz_rounds": 1620.0, "clock_events_rounds": events}}]}
        run = {"t": {"name": "t", "rounds": now,
                     "extra_info": {"sm_clock_mhz_rounds": 1440.0, "clock_events_rounds": events}}}
        (c,) = compare_run({**base, "gpubench": {"reruns": [
            {"benchmarks": {"t": {st: [0.0, -1.6, 1.6] for st in ("median", "q1", "q3", "mean")}}}]}}, run, 1.0)
        assert c.verdict.word == expected, events
