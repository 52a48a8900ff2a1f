"""Comparisons of implementations: settled first, then in turns, each window paired with its neighbours'."""

from unittest import mock

import pytest

from gpubench.truth import timing
from gpubench.truth.timing import Comparison, Timings


def test_implementations_take_turns_and_ratios_pair_windows():
    order = []
    clock_mhz = iter(range(2000, 0, -7))  # a clock that falls with every window, as at the power limit

    def fake_loop(run, calls_per_timing=1, duration_s=None, groups=None):
        if duration_s is None:  # settling
            return Timings([1.0], 1)
        order.append(run.__name__)
        slowdown = 2000 / next(clock_mhz)
        return Timings([run.base_ms * slowdown], 1)

    def impl(name, base_ms):
        def run():
            pass

        run.__name__, run.base_ms = name, base_ms
        return run

    with (
        mock.patch.object(timing, "time_loop", side_effect=fake_loop),
        mock.patch.object(timing, "warm_up", return_value=1.0),
    ):
        cmp = timing.interleaved({"a": impl("a", 1.0), "b": impl("b", 2.0)}, rounds=4, settle_s=0.0)
    assert order == ["a", "b", "b", "a", "a", "b", "b", "a"]  # ABBA: neither side always goes first
    # b takes twice as long as a; window by window the drift cancels, so the paired ratio is ~2
    speed, lo, hi = cmp.speed("a", "b")
    assert speed == pytest.approx(2.0, rel=0.01) and lo == pytest.approx(2.0, rel=0.02)


def test_speed_is_reference_time_over_candidate_time():
    cmp = Comparison({"x": [1.0, 1.0, 1.1], "ref": [2.0, 2.2, 2.2]})
    assert cmp.ratios("x", "ref") == pytest.approx([2.0, 2.2, 2.0])
    assert cmp.speed("x", "ref")[0] == pytest.approx(2.0)
    assert cmp.median_ms("ref") == 2.2
