"""The regression gate's statistics with synthetic rounds: the change of each statistic with its bootstrap
interval, the verdict's rules, the between-run floor of several processes, the timer's step, outlying
rounds, and two sets of reproductions. Against the committed baselines, where the older rule (the medians
against the wider IQR, at least 2%) read `same`; they start from the rounds those baselines held then
(gate_reproduction_rounds.json), so that they stay the same when the baselines are measured anew. And rounds as a
small call's come on an H100 (steps of 32 ns, a process effect of a few percent), where the rule before
this floor (the largest interval end of two reruns, intervals of no width) read unchanged code `slower`."""

import json
import math
import statistics
from pathlib import Path

import pytest

from gpubench.gate import floor
from gpubench.gate.judgement import LEVEL, RULES, Change, clock_explains, judge
from gpubench.gate.rounds import DOCUMENTED_STEP_S, MAX_LATE_SHARE, resolution_pct, timer_step, usable
from gpubench.stats import (
    STATISTICS,
    Interval,
    block_length,
    change_intervals,
    quantile,
)

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


# --- the between-run floor of several processes ---------------------------------------------------

def rerun_of(**medians) -> dict:
    """One rerun's changes, each statistic moved as the median (lo, hi given per benchmark)."""
    return {name: {s: Interval(pct, lo, hi) for s in STATISTICS} for name, (pct, lo, hi) in medians.items()}


def test_the_floor_is_the_bound_on_the_next_process_that_the_baselines_processes_give():
    base = {"benchmarks": []}
    data = base
    for i, pct in enumerate((1.0, -1.0, 0.5)):
        data, moved = floor.with_rerun(data, rerun_of(a=(pct, pct - 0.2, pct + 0.2)), f"t{i}", "GPU-1")
        assert moved == []
    f = floor.floors(data, "a", 0.0)["median"]
    points = [0.0, 1.0, -1.0, 0.5]  # the first process, then each rerun's change from it
    logs = [math.log1p(p / 100) for p in points]
    assert f.processes == 4 and f.center == pytest.approx(100 * math.expm1(statistics.mean(logs)))
    assert f.spread == pytest.approx(100 * statistics.stdev(logs))
    assert f.width == pytest.approx(12.924 * math.sqrt(1.25) * f.spread)
    assert floor.floors(data, "a", 50.0)["median"].width == 50.0  # never below the least floor
    assert floor.floors(data, "c", 1.0)["q3"] == floor.Floor(1.0, 0.0, 1, None)  # never measured: the least floor
    assert data["gpubench"]["processes"] == 4 and data["gpubench"]["floor_pct"]["a"]["median"] == f.width
    assert [r["datetime"] for r in floor.reruns(data)] == ["t0", "t1", "t2"] and base == {"benchmarks": []}


def test_a_rerun_that_moved_far_is_kept_and_named():
    data, moved = floor.with_rerun({"benchmarks": []}, rerun_of(a=(1.0, 0.5, 1.5), b=(12.0, 11.0, 13.0)), "t", None)
    assert moved == ["b"] and set(data["gpubench"]["reruns"][0]["benchmarks"]) == {"a", "b"}


def test_a_rerun_saved_before_the_trimmed_mean_lends_it_its_median():
    old = {"benchmarks": [], "gpubench": {"reruns": [
        {"benchmarks": {"a": {s: [p, p, p] for s in ("median", "q1", "q3", "mean")}}} for p in (1.0, -1.0)]}}
    fs = floor.floors(old, "a", 0.0)
    assert fs["tmean"] == fs["median"] and fs["tmean"].processes == 3


@pytest.mark.parametrize("k, expected", [(2, 779.7), (4, 14.45), (6, 7.42), (8, 5.74), (10, 5.01), (31, 3.70),
                                         (200, 3.35)])
def test_a_floor_of_few_processes_is_wide_and_of_many_near_the_normal_bound(k, expected):
    assert floor.multiplier(k) == pytest.approx(expected, rel=0.005)


def test_the_t_quantiles_are_students():
    stats = pytest.importorskip("scipy.stats")
    for df in (1, 2, 5, 7, 29, 30, 31, 45, 120):
        assert floor.t_quantile(df) == pytest.approx(stats.t.ppf(1 - floor.FALSE_ALARM / 2, df), rel=1e-3)


def test_an_unchanged_process_lands_beyond_the_floor_about_as_rarely_as_it_says():
    """8 processes whose effects are normal with any spread: the next lands beyond the floor of the eight about
    FALSE_ALARM of the time (0.1%), whatever the eight happened to be."""
    rng = np.random.default_rng(7)
    worlds, beyond = 20_000, 0
    effects = rng.normal(0, 1.5, size=(worlds, 9))  # percent; the ninth is the next process
    for row in effects:
        f = floor.floor_of(list(100 * np.expm1(np.log1p(row[:8] / 100) - np.log1p(row[0] / 100))), 0.0)
        nxt = floor.recenter(100 * (math.expm1(math.log1p(row[8] / 100) - math.log1p(row[0] / 100))), f.center)
        beyond += abs(nxt) > f.width
    assert beyond / worlds < 3 * floor.FALSE_ALARM


def test_a_floor_survives_its_file_and_a_failed_write_leaves_the_old_file(tmp_path, monkeypatch):
    path = tmp_path / "h100.json"
    path.write_text(json.dumps({"benchmarks": []}))
    updated, _ = floor.with_rerun({"benchmarks": []}, rerun_of(a=(1.0, 0.5, 1.5)), "t1", "GPU-1")
    floor.write(path, updated)
    assert floor.floors(json.loads(path.read_text()), "a", 0.0)["median"].processes == 2
    assert [p.name for p in tmp_path.iterdir()] == ["h100.json"]

    def fail(*args):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(floor.os, "replace", fail)
    with pytest.raises(OSError):
        floor.write(path, {"benchmarks": [], "gpubench": {}})
    assert "gpubench" in json.loads(path.read_text())  # the file as it was


def test_a_change_is_taken_from_the_center_of_the_processes():
    """The baseline's first process ran 2% fast against the others: a run like the others reads `same`."""
    before, now = noise(n=200, seed=1), [x * 1.02 for x in noise(n=200, seed=2)]
    centered = floor.Floor(width=1.5, center=2.0, processes=8, spread=0.25)
    v = judge(before, now, {s: centered for s in STATISTICS})
    assert v.word == "same" and abs(v.median.pct) < 0.2 and v.raw["median"].pct == pytest.approx(2.0, abs=0.2)
    assert judge(before, now, floors(1.5)).word == "slower"  # from the first process alone


# --- the timer's step --------------------------------------------------------------------------------

STEP_US = 0.032  # CUDA events on an H100 and an H200 tick in steps of 32 ns


def quantized(true_us: float, n: int, rng, jitter_us: float = 0.01, outliers_us: tuple = ()) -> list[float]:
    """Rounds of one call per round, as an H100 times them: the call's time plus a little jitter, read in steps
    of the timer, in seconds; outliers_us replace as many rounds spread through the run."""
    x = np.round((true_us + jitter_us * rng.standard_normal(n)) / STEP_US) * STEP_US
    for i, us in enumerate(outliers_us):
        x[(i + 1) * n // (len(outliers_us) + 1)] = us
    return list(x * 1e-6)


def test_the_timers_step_is_found_in_the_rounds():
    rng = np.random.default_rng(0)
    rounds = quantized(6.2, 300, rng)
    assert timer_step(rounds) == pytest.approx(STEP_US * 1e-6, rel=1e-6)
    assert resolution_pct(rounds) == pytest.approx(100 * STEP_US / 6.208, rel=0.01)
    continuous = list(1e-3 * (1 + 0.01 * rng.standard_normal(300)))
    assert resolution_pct(continuous) < 0.01
    assert timer_step([6.208e-6] * 50, calls=1) == DOCUMENTED_STEP_S  # one value shows no step: CUDA's own
    assert timer_step([6.208e-6] * 50, calls=1000) == DOCUMENTED_STEP_S / 1000


def test_an_interval_of_rounds_on_one_step_is_never_narrower_than_the_step():
    """Two runs whose rounds nearly all read 6.208 us: the bootstrap alone says the median moved by exactly 0%."""
    rng = np.random.default_rng(3)
    a, b = quantized(6.21, 300, rng, jitter_us=0.005), quantized(6.21, 300, rng, jitter_us=0.005)
    raw = change_intervals(a, b, level=LEVEL)["median"]
    assert raw.lo == raw.hi == 0.0
    v = judge(a, b, floors(0.0))
    assert v.median.lo <= -0.5 and v.median.hi >= 0.5  # a step of either run: 0.52% each
    assert v.word == "unsure"  # with no floor at all, the timer cannot say `same`


# --- outlying rounds -----------------------------------------------------------------------------------

def test_outlying_rounds_decide_no_verdict_and_hide_none():
    """A 14 us sum whose run has a dozen rounds of about 650 us among 300 (the host held up): the mean more than
    doubles and its interval lies above any floor; the trimmed mean, the quartiles and the median do not move.
    A real 5% slowdown among the same outliers still reads `slower`."""
    rng = np.random.default_rng(5)
    outliers = tuple(600.0 + 5 * i for i in range(12))
    before = quantized(14.0, 300, rng, jitter_us=0.05)
    now = quantized(14.0, 300, rng, jitter_us=0.05, outliers_us=outliers)
    mean = change_intervals(before, now, names=("mean",), level=LEVEL)["mean"]
    assert mean.lo > 50.0  # the untrimmed mean, as the gate read it before, would call this `slower`
    assert judge(before, now, floors(2.0)).word == "same"
    slower = quantized(14.7, 300, rng, jitter_us=0.05, outliers_us=outliers)
    assert judge(before, slower, floors(2.0)).word == "slower"


def test_rounds_the_host_was_late_for_are_left_out_while_they_are_few():
    rounds = [1.0] * 100
    late = {"rounds_host_late": [3, 50, 99, 400, -1, True, "x"]}  # out of range and not indices are ignored
    assert len(usable(rounds, late)) == 97
    many = {"rounds_host_late": list(range(int(MAX_LATE_SHARE * 100) + 1))}
    assert usable(rounds, many) == rounds  # most rounds late: the call waits on the host, and that counts
    assert usable(rounds, {}) == rounds and usable(rounds, None) == rounds


# --- between processes: a small call's time on an H100 --------------------------------------------------

def old_verdicts(base: list[float], floor_runs: list[list[float]], runs: list[list[float]]) -> list[str]:
    """The rule before this floor: two unchanged reruns give each statistic's floor as the largest end of
    their intervals (at least 1%), and each run's intervals, as the bootstrap gives them, are held against it
    from the baseline's one process."""
    names = ("median", "q1", "q3", "mean")
    ends = [change_intervals(base, r, names=names, level=LEVEL) for r in floor_runs]
    old = {s: max([1.0, *(max(abs(i[s].lo), abs(i[s].hi)) for i in ends)]) for s in names}
    words = []
    for r in runs:
        i = change_intervals(base, r, names=names, level=LEVEL)
        words.append("slower" if any(i[s].lo > old[s] for s in names) else
                     "faster" if any(i[s].hi < -old[s] for s in names) else "same or unsure")
    return words


def processes(true_us: float, shifts_pct, rng, n: int = 300, **kw) -> list[list[float]]:
    """One run per process: the call's time moved by that process's effect, then quantized."""
    return [quantized(true_us * (1 + s / 100), n, rng, **kw) for s in shifts_pct]


def baseline_of(runs: list[list[float]]) -> dict:
    """A baseline file of the first run, with the others as its reruns (as --gpu-baseline-runs leaves it)."""
    changes = [{"t": change_intervals(runs[0], r, level=LEVEL)} for r in runs[1:]]
    data = {"benchmarks": []}
    for c in changes:
        data, _ = floor.with_rerun(data, c, "t", None)
    return data


def test_unchanged_processes_of_a_small_call_read_slower_on_the_old_floor_and_never_on_this_one():
    """The 6 us matmul: rounds in steps of 32 ns that all but sit on one or two steps within a process, and a
    process effect of 1.5% (it moved -2.6% to +3.2% between processes). Two reruns and intervals of no width
    read unchanged runs `slower` or `faster`; eight processes and the timer's step read none so."""
    rng = np.random.default_rng(33)
    shifts = rng.normal(0, 1.5, size=8 + 20)
    runs = processes(6.2, shifts, rng)
    old = old_verdicts(runs[0], runs[1:3], runs[8:])
    assert old.count("slower") + old.count("faster") >= 3
    base = baseline_of(runs[:8])
    words = [judge(runs[0], r, floor.floors(base, "t", 1.0)).word for r in runs[8:]]
    assert "slower" not in words and "faster" not in words


def test_against_eight_processes_a_small_calls_slowdown_is_never_same():
    """A 14 us call whose processes move by 0.5%: 10% more time reads `slower` or `unsure`, never `same`,
    and 25% more reads `slower`."""
    rng = np.random.default_rng(14)
    base = processes(14.0, rng.normal(0, 0.5, size=8), rng, jitter_us=0.05)
    data = baseline_of(base)
    fs = floor.floors(data, "t", 1.0)
    assert fs["median"].width < 8.0
    for pct, allowed in ((10, ("slower", "unsure")), (25, ("slower",))):
        run = processes(14.0 * (1 + pct / 100), rng.normal(0, 0.5, size=3), rng, jitter_us=0.05)
        assert all(judge(base[0], r, fs).word in allowed for r in run), pct


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
    from gpubench.gate.against_baseline import compare_run

    before, now = noise(n=200, seed=1), [x * 1.026 for x in noise(n=200, seed=2)]
    for events, expected in (({"power cap": 1.0}, "unsure"), ({}, "slower"), ({"power cap": 0.2}, "slower")):
        base = {"benchmarks": [{"fullname": "t", "stats": {"median": 1e-3, "data": before},
                                "extra_info": {"sm_clock_mhz_rounds": 1620.0, "clock_events_rounds": events}}]}
        run = {"t": {"name": "t", "rounds": now,
                     "extra_info": {"sm_clock_mhz_rounds": 1440.0, "clock_events_rounds": events}}}
        (c,) = compare_run({**base, "gpubench": {"reruns": [
            {"benchmarks": {"t": {st: [0.0, -1.6, 1.6] for st in ("median", "q1", "q3", "mean")}}}]}}, run, 1.0)
        assert c.verdict.word == expected, events
