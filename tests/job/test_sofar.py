"""A phase's rate so far (gpubench.job.sofar): exact between the stamps it counts, bounded in memory."""

import math

import pytest

from gpubench.job.sofar import SoFar


def fed(times, kept: int = 4096) -> SoFar:
    s = SoFar(kept=kept)
    for t in times:
        s.take("p", t, t, 1)
    return s


def test_the_rate_is_the_steps_between_the_first_checkpoint_after_since_and_the_last_step():
    times = [0.6 + 0.1 * i for i in range(195)]  # 10/s from 0.6 s to 20 s
    s = fed(times + [20.0 + 0.2 * i for i in range(1, 201)])  # then 5/s to 60 s
    assert s.rate("p", 0.5) == pytest.approx(394 / 59.4)  # 395 steps from 0.6 to 60 s
    assert s.rate("p", 20.5) == pytest.approx(5.0)  # a checkpoint a second at most: from 21.0 s on
    assert s.rate("p", 25.05) == pytest.approx(5.0)


def test_groups_of_steps_count_each_step_and_a_late_start_is_said_as_nan():
    s = SoFar()
    s.take("p", 0.0, 0.9, 10)  # ten steps stamped 0.0 ... 0.9
    s.take("p", 1.0, 1.9, 10)
    assert s.rate("p", 0.0) == pytest.approx(19 / 1.9)
    assert math.isnan(s.rate("p", 5.0)) and math.isnan(s.rate("q", 0.0))
    assert math.isnan(fed([3.0]).rate("p", 0.0))  # one step: no rate


def test_a_day_of_steps_keeps_few_checkpoints_and_a_steady_rate_stays_exact():
    s = fed((0.05 * i for i in range(200_000)), kept=64)  # 20/s for 10,000 s
    times, _ = s._marks["p"]
    assert len(times) <= 65
    assert s.rate("p", 0.0) == pytest.approx(20.0) and s.rate("p", 5000.0) == pytest.approx(20.0)
    since = 5000.0
    first = min(t for t in times if t >= since)
    assert since <= first <= since + 2 * 10_000 / 64  # the start comes no later than a spacing after `since`
