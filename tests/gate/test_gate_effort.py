"""The gate's effort on synthetic rounds: when a benchmark's rounds stop (gate.effort), and that a baseline whose
rounds stop so and whose processes stop once its floors are settled (gate.processes) keeps every promise the
fixed effort kept: no unchanged run reads `slower` or `faster`, 5% more work reads `slower` from 100 us, 10%
more never reads `same` from 10 us. The rounds come as a GPU gives them: in steps of the timer, with outlying
rounds (the host held up, a call that now and then does 8 times the work) and with clocks that drift."""

import pytest

from gpubench.gate import effort, floor

np = pytest.importorskip("numpy")
LEAST = 1.0  # --gpu-noise-floor's default


def replay(values):
    """one_round for run_rounds from a list, and the late flags of the rounds it gave."""
    it = iter(values)
    return lambda: next(it)


def stop(values, target=None, least=10, most=10_000, late=()):
    flags = list(late)
    return effort.run_rounds(
        replay(values), target or effort.least_target(LEAST), lambda: (least, most), late=lambda: flags
    )


# --- the stopping rule ---------------------------------------------------------------------------------------


def test_quiet_rounds_stop_at_the_least_and_noisy_ones_once_their_interval_is_within_the_target():
    rng = np.random.default_rng(0)
    quiet = stop(list(1e-3 * (1 + 0.0005 * rng.standard_normal(20_000))), least=50)
    assert len(quiet.rounds) == 50 and quiet.why.startswith(("median within", "q1 within", "q3 within"))
    noisy = stop(list(1e-3 * np.exp(0.05 * rng.standard_normal(20_000))), least=50)
    # a quantile's 99% interval of n rounds spread 5%: about 2.58 x 1.25 x 5% / sqrt(n), within 0.25% from ~4000
    assert 3_000 < len(noisy.rounds) < 8_000 and max(noisy.widths.values()) <= 0.25
    assert "a quarter of the least floor (1%)" in noisy.why


def test_rounds_that_never_narrow_enough_stop_at_the_most_and_say_so():
    rng = np.random.default_rng(1)
    s = stop(list(1e-3 * np.exp(0.2 * rng.standard_normal(5_000))), least=10, most=300)
    assert len(s.rounds) == 300 and s.why.startswith("the most rounds (300)") and "against a target of 0.25%" in s.why


def test_rounds_on_one_step_of_the_timer_stop_though_a_step_is_half_a_percent():
    """A 6 us call timed one per round reads in steps of 32 ns (0.5%): its quantiles sit on a step and their
    interval has no width here; the verdict widens it by the step (gate.rounds), which more rounds cannot."""
    rng = np.random.default_rng(2)
    x = np.round((6.2 + 0.004 * rng.standard_normal(5_000)) / 0.032) * 0.032e-6
    s = stop(list(x), least=100)
    assert len(s.rounds) == 100 and max(s.widths.values()) == 0.0


def test_outlying_rounds_do_not_keep_the_rounds_going_and_late_ones_are_left_out():
    rng = np.random.default_rng(3)
    base = 1e-3 * (1 + 0.0005 * rng.standard_normal(5_000))
    held = base.copy()
    held[::40] += 0.6e-3  # the host held up in one round of forty: 60% longer
    heavy = base.copy()
    heavy[::97] *= 8  # a call that does 8 times the work now and then
    late = [i % 40 == 0 for i in range(5_000)]
    assert len(stop(list(held), least=200, late=late).rounds) == 200
    assert len(stop(list(heavy), least=200).rounds) == 200
    # past a tenth of the rounds, late ones are what the call costs: kept, and they count
    assert stop(list(held), least=200, late=[True] * 5_000).widths["q3"] >= 0.0


def test_a_drifting_clock_keeps_the_rounds_going_until_the_drift_is_a_small_part_of_them():
    """A GPU reaching its power limit during the rounds: the first 150 rounds slow by 4% as its clock falls, then
    hold. Rounds taken as independent would stop at the least, 50, their interval 0.1% wide; the halves of the
    rounds disagree while the fall is a large part of them."""
    rng = np.random.default_rng(4)
    n = 20_000
    clock = np.minimum(np.arange(n) / 150, 1.0)
    x = 1e-3 * (1 + 0.04 * clock) * (1 + 0.0005 * rng.standard_normal(n))
    s = stop(list(x), least=50)
    assert len(s.rounds) > 300
    assert np.median(s.rounds) > 1.035e-3  # what it stopped on is the clock the GPU holds
    flat = stop(list(1e-3 * (1 + 0.0005 * rng.standard_normal(n))), least=50)
    assert len(flat.rounds) == 50


def test_a_limit_seen_in_the_rounds_raises_the_least_rounds():
    seen = {"sway": False}
    calls = []

    def one():
        calls.append(1)
        seen["sway"] = len(calls) >= 5  # a power cap shows from the fifth round
        return 1e-3

    s = effort.run_rounds(one, effort.least_target(LEAST), lambda: (40, 400) if seen["sway"] else (10, 100))
    assert len(s.rounds) == 40


def test_the_target_is_a_quarter_of_the_floor_against_a_baseline_and_the_spread_while_measuring_one():
    fs = {s: floor.Floor(width=4.0, processes=5, spread=0.3) for s in ("median", "q1", "q3", "tmean")}
    assert effort.floor_target(fs, LEAST).pct == {"median": 1.0, "q1": 1.0, "q3": 1.0}
    assert effort.spread_target(fs, LEAST).pct["median"] == 0.3
    quiet = {s: floor.Floor(width=1.0, processes=5, spread=0.01) for s in fs}
    assert effort.spread_target(quiet, LEAST).pct["median"] == 0.25  # never below a quarter of the least floor
    assert effort.spread_target(fs, LEAST, 0.2).pct["median"] == 0.25  # a cap below that gives way to it
    wide = {s: floor.Floor(width=40.0, processes=3, spread=2.0) for s in fs}
    assert effort.spread_target(wide, LEAST, 0.75).pct["median"] == 0.75
    assert effort.least_target(LEAST).pct == {"median": 0.25, "q1": 0.25, "q3": 0.25}


def test_a_baselines_first_rounds_stop_at_a_quarter_of_the_floor_the_calls_time_needs():
    waiting = effort.duty_target(LEAST)
    assert waiting.pct["median"] == 0.25 and waiting.at(1e-3).pct["median"] == 0.75  # 3% from 100 us
    assert waiting.at(27e-6).pct == {"median": 1.5, "q1": 1.5, "q3": 1.5}  # 6% from 10 us
    assert waiting.at(6e-6).pct["median"] == 3.0 and "12% floor a call of 6 us" in waiting.at(6e-6).why
    assert effort.duty_target(20.0, 1e-3).pct["median"] == 5.0  # never below a quarter of the least floor
    assert effort.least_target(LEAST).at(6e-6) == effort.least_target(LEAST)  # a run with no baseline: as it was


def test_the_distribution_free_interval_holds_a_quantile_about_as_often_as_it_says():
    rng = np.random.default_rng(5)
    held = 0
    for _ in range(400):
        x = sorted(rng.lognormal(0, 0.1, 200))
        w = effort.order_width(x, 0.5) * effort._quantile(x, 0.5)
        held += abs(effort._quantile(x, 0.5) - 1.0) <= w
    assert held >= 390  # 99% intervals: 396 expected
