"""What one step is where optimizers step at different rates (gpubench.inside.steprule), on sequences of
optimizer keys alone: one step per iteration for 1:1, 5:1 and 3:2, gradient accumulation unchanged, a step
that raised, an optimizer that joins or leaves later, an iteration that runs long once; the work and memory
of each step bounded."""

import random

import pytest

from gpubench.inside import steprule
from gpubench.inside.steprule import MAX_PERIOD, MAX_RUN, Rule, describe, least_rotation


def run(keys, dead=()):
    """The rule over a sequence: (which steps ended a step, [(index, pattern, back)] of its news)."""
    rule = Rule(alive=lambda k: k not in dead)
    ends, news = [], []
    for i, key in enumerate(keys):
        ends.append(rule.step(key))
        if rule.news is not None:
            news.append((i, *rule.news))
            rule.news = None
    return ends, news, rule


def steps(ends, news) -> int:
    """The steps a reader keeps: those written, less those taken back."""
    return sum(ends) - sum(back for _, _, back in news)


@pytest.mark.parametrize("iteration", ["DG", "CCCCCG", "CCG", "DGE", "C" * MAX_RUN + "G"])
def test_each_iteration_of_a_steady_pattern_is_one_step_from_the_first(iteration):
    keys = iteration * 30
    ends, news, rule = run(keys)
    assert steps(ends, news) == 30
    if len(set(iteration)) == 2:  # the first optimizer's steps before the second's: taken back, one step ends
        assert news == [(len(iteration) - 1, tuple(iteration), len(iteration) - 1)]
    else:  # a third optimizer breaks the guess; the old anchor ends each iteration until the pattern settles
        assert news[0] == (1, ("D", "G"), 1) and news[1:] == [(18, ("E", "D", "G"), 0)]
    # once the pattern holds, one step at the end of each iteration, never at a step of the critic alone
    late = [i for i, e in enumerate(ends) if e and i > 6 * len(iteration)]
    assert all(keys[i] == keys[late[0]] for i in late) and len(late) == 30 - 6
    assert rule.mode == steprule.SET


def test_three_steps_of_one_and_two_of_another_are_one_step_once_learnt():
    keys = "AABAB" * 30  # for i: A.step(); if i % 3: B.step()
    ends, news, rule = run(keys)
    assert news[0] == (2, ("A", "A", "B"), 2)  # the first guess: A A then B
    ((i, pattern, back),) = news[1:]
    assert sorted(pattern) == list("AAABB") and back == 0 and i < 5 * 8
    # learning, the guess's anchor B ends each of its steps (no FLOPs are counted while learning); learnt, one
    # step every five optimizer steps, always at the same place of the pattern
    assert all(keys[j] == "B" for j, e in enumerate(ends) if e and j > 2)
    after = [j for j, e in enumerate(ends) if e and j > i]
    assert [b - a for a, b in zip(after, after[1:])] == [5] * (len(after) - 1)
    assert rule.canon == least_rotation(tuple("AABAB"))


def test_gradient_accumulation_and_one_optimizer_change_nothing():
    ends, news, rule = run("A" * 500)
    assert all(ends) and news == [] and rule.pattern == ("A",)


def test_a_critic_step_that_raised_leaves_one_iteration_one_step():
    keys = "CCCCCG" * 6 + "CCCCG" + "CCCCCG" * 10  # the post-hook of one critic step never came
    ends, news, _ = run(keys)
    assert steps(ends, news) == 17 and len(news) == 1  # learnt again: the same pattern, no news
    assert all(keys[i] == "G" for i, e in enumerate(ends) if e and i > 5)


def test_a_generator_step_that_raised_merges_two_iterations_into_one_step():
    keys = "CCCCCG" * 6 + "CCCCC" + "CCCCCG" * 10
    ends, news, _ = run(keys)
    assert steps(ends, news) == 16 and len(news) == 1


def test_a_critic_given_a_hundred_steps_once_keeps_one_step_an_iteration():
    keys = "CCCCCG" * 8 + "C" * 100 + "G" + "CCCCCG" * 8
    ends, news, _ = run(keys)
    assert steps(ends, news) == 17 and len(news) == 1


def test_a_second_model_fine_tuned_later_joins_the_pattern():
    keys = "A" * 40 + "AB" * 40  # trained alone, then beside a second model
    ends, news, rule = run(keys)
    assert all(ends[:40])  # alone: each step a step, never taken back (more than MAX_RUN of them)
    ((i, pattern, back),) = news
    assert back == 0 and sorted(pattern) == ["A", "B"] and 40 < i < 40 + 2 * (MAX_PERIOD + 4)
    assert steps(ends, news) == 80  # the old anchor A ended each iteration while the pattern was learnt
    assert [keys[j] for j, e in enumerate(ends) if e and j >= 40] == ["A"] * 40


def test_a_model_dropped_leaves_the_other_alone_after_a_bounded_pause():
    ends, news, rule = run("AB" * 20 + "A" * 60, dead={"B"})
    assert news[-1][1:] == (("A",), 0) and rule.pattern == ("A",)
    quiet = ends[40:].index(True)
    assert quiet <= MAX_PERIOD + 1  # learnt from the first steps of A alone: B's anchor is gone
    assert all(ends[40 + quiet :])


def test_a_pattern_longer_than_the_rule_learns_gives_no_step_of_a_whole_pattern_and_no_news():
    ends, news, rule = run(("C" * 20 + "G") * 6)
    assert news == [] and rule.pattern == ("C",)  # the critic's steps stay steps of a pattern of one optimizer
    assert not any(e for k, e in zip(("C" * 20 + "G") * 6, ends) if k == "G")


def test_the_work_and_memory_of_a_step_are_bounded():
    rule = Rule()
    for i in range(20000):  # a new optimizer every few steps (one an epoch), never a steady pattern
        rule.step(i // 3 if i % 7 else -1)
        rule.news = None
    assert len(rule.ring) == 2 * MAX_PERIOD and len(rule.run) == MAX_PERIOD + 1
    assert len(rule.last) <= 4 * MAX_PERIOD + 1


def test_any_sequence_ends_at_most_one_step_per_optimizer_step_and_never_raises():
    rng = random.Random(7)
    for _ in range(300):
        alphabet = "ABCDE"[: rng.randint(1, 5)]
        keys = [rng.choice(alphabet) for _ in range(rng.randint(1, 300))]
        ends, news, rule = run(keys, dead=set(rng.sample(alphabet, 1)) if rng.random() < 0.2 else ())
        assert steps(ends, news) >= 0 and all(0 <= back <= i + 1 for i, _, back in news)
        assert all(len(p) <= max(MAX_PERIOD, MAX_RUN + 1) for _, p, _ in news)


def test_a_pattern_in_words_names_each_optimizer_by_its_class():
    assert describe(tuple("CCCCCG"), {"C": "Adam", "G": "Adam"}) == "5 × Adam #1, 1 × Adam #2"
    assert describe(tuple("AABAB"), {"A": "SGD", "B": "AdamW"}) == "3 × SGD, 2 × AdamW"
    assert describe(("x",), {}) == "1 × optimizer"
