"""The regression gate's between-run floor of several processes, with synthetic rounds: the bound on the next
process that the baseline's processes give, the reruns a baseline's file keeps, and the change taken from the
center of the processes. And rounds as a small call's come on an H100 (steps of 32 ns, a process effect of a
few percent), where the rule before this floor (the largest interval end of two reruns, intervals of no
width) read unchanged code `slower`."""

import json
import math
import statistics

import pytest
from gaterounds import floors, noise, quantized

from gpubench.gate import floor
from gpubench.gate.judgement import LEVEL, judge
from gpubench.stats import STATISTICS, Interval, change_intervals

np = pytest.importorskip("numpy")


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
    old = {
        "benchmarks": [],
        "gpubench": {
            "reruns": [
                {"benchmarks": {"a": {s: [p, p, p] for s in ("median", "q1", "q3", "mean")}}} for p in (1.0, -1.0)
            ]
        },
    }
    fs = floor.floors(old, "a", 0.0)
    assert fs["tmean"] == fs["median"] and fs["tmean"].processes == 3


@pytest.mark.parametrize(
    "k, expected", [(2, 779.7), (4, 14.45), (6, 7.42), (8, 5.74), (10, 5.01), (31, 3.70), (200, 3.35)]
)
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
        words.append(
            "slower"
            if any(i[s].lo > old[s] for s in names)
            else "faster"
            if any(i[s].hi < -old[s] for s in names)
            else "same or unsure"
        )
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


def test_a_short_calls_floor_is_never_narrower_than_its_least():
    """The H200's flushed 6.3 us matmul: its eight processes' first quartiles (from the first) gave 5.5%, and the
    twentieth unchanged process after them landed +7.2% from their center; under 10 us the least floor is 12%."""
    q1 = [-1.56, -1.04, -0.52, -1.56, -1.56, 1.04, -1.56]
    for median_s, least in ((6.3e-6, floor.SHORT_LEAST_PCT), (14e-6, 1.0)):
        data = {"benchmarks": [{"fullname": "t", "name": "t", "stats": {"median": median_s}}]}
        data = floor.started(data, 8)
        for p in q1:
            data, _ = floor.with_rerun(data, {"t": {s: Interval(p, p, p) for s in STATISTICS}}, "when", None)
        f = floor.floors(data, "t", 1.0)["q1"]
        assert f.processes == 8 and f.width == max(least, f.width), (median_s, f)
        assert (f.width < 7.2) is (median_s > 10e-6), (median_s, f)  # that process is past it only from 10 us
