"""The regression gate and what its rounds hold besides the change, with synthetic rounds: the timer's step,
found in the rounds, under which no interval narrows; outlying rounds and rounds the host was late for; and
rounds at another SM clock, which explains a change only in its own direction and size."""

import pytest
from gaterounds import STEP_US, floors, noise, quantized

from gpubench.gate.judgement import LEVEL, Change, clock_explains, judge
from gpubench.gate.rounds import DOCUMENTED_STEP_S, MAX_LATE_SHARE, resolution_pct, timer_step, usable
from gpubench.stats import change_intervals

np = pytest.importorskip("numpy")


# --- the timer's step --------------------------------------------------------------------------------


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


# --- rounds at another clock -----------------------------------------------------------------------


def test_a_change_no_larger_than_the_fall_of_the_clock_explains_is_unsure_not_slower():
    """The H100 triton GEMM, unchanged: the baseline's rounds ran at a median 1620 MHz, a rerun's at 1440 MHz
    (the GPU warmer, at its power limit), 2.6% slower, past a floor of 1.6% from two reruns."""
    before, now = noise(n=200, seed=1), [x * 1.026 for x in noise(n=200, seed=2)]
    assert judge(before, now, floors(1.6)).word == "slower"  # blind to the clocks
    v = judge(before, now, floors(1.6), clocks=(1620.0, 1440.0))
    assert v.word == "unsure"
    assert "within the +12.5% that the SM clock explains (1620 -> 1440 MHz)" in v.why


@pytest.mark.parametrize(
    "clocks, factor, expected",
    [
        ((1620.0, 1440.0), 1.20, "slower"),  # 20% slower: more than a 12.5% clock explains
        ((1440.0, 1620.0), 1.026, "slower"),  # the clock rose: it explains no slowdown
        ((1620.0, 1440.0), 0.95, "faster"),  # the clock fell: it explains no speed-up
        ((1440.0, 1620.0), 0.95, "unsure"),  # the clock rose 12.5%: a 5% speed-up is within it
        ((1620.0, 1440.0), 1.12, "unsure"),  # 12% slower: within the floor and the 12.5% the clock explains
        ((1980.0, 1965.0), 1.026, "slower"),  # one 15 MHz step: not another clock
        ((None, 1440.0), 1.026, "slower"),  # a clock unknown: nothing explained
    ],
)
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
        base = {
            "benchmarks": [
                {
                    "fullname": "t",
                    "stats": {"median": 1e-3, "data": before},
                    "extra_info": {"sm_clock_mhz_rounds": 1620.0, "clock_events_rounds": events},
                }
            ]
        }
        run = {
            "t": {
                "name": "t",
                "rounds": now,
                "extra_info": {"sm_clock_mhz_rounds": 1440.0, "clock_events_rounds": events},
            }
        }
        (c,) = compare_run(
            {
                **base,
                "gpubench": {
                    "reruns": [{"benchmarks": {"t": {st: [0.0, -1.6, 1.6] for st in ("median", "q1", "q3", "mean")}}}]
                },
            },
            run,
            1.0,
        )
        assert c.verdict.word == expected, events
