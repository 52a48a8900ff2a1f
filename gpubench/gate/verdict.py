"""The verdict of one benchmark against its baseline: how the median, the quartiles and the mean of its
rounds changed, each with a 99% interval (gpubench.stats.change_intervals: a moving-block bootstrap over
rounds with a fixed seed), held against the between-run floor of that statistic (gpubench.gate.floor).
99% each, so that the four together miss a change of zero about one time in twenty (measured on
unchanged synthetic rounds; tests/test_gate_verdict.py).

A statistic whose whole interval lies above its floor has slowed by more than unchanged reruns move; one
whose interval lies within +-floor has not changed by more than they do. The verdict is the first rule of
RULES that holds, so `same` needs every interval inside its floor: a change the data cannot rule out is
never called `same`, and a slowdown of part of the rounds, which leaves the median where it was, moves
a quartile or the mean and reads `slower`.
"""

from __future__ import annotations

from dataclasses import dataclass

from gpubench.stats import STATISTICS, change_intervals

LEAST_FLOOR_PCT = 1.0  # --gpu-noise-floor's default: a smaller change is never worth a verdict
LEVEL = 0.99  # of each statistic's interval


@dataclass(frozen=True)
class Change:
    """One statistic's change in percent, its interval, and the floor it is held against."""

    stat: str
    pct: float
    lo: float
    hi: float
    floor: float

    @property
    def above(self) -> bool:
        return self.lo > self.floor

    @property
    def below(self) -> bool:
        return self.hi < -self.floor

    @property
    def within(self) -> bool:
        return -self.floor <= self.lo and self.hi <= self.floor

    def text(self) -> str:
        return f"{self.stat} {self.pct:+.1f}% [{self.lo:+.1f}, {self.hi:+.1f}]"


# (word, when, what it says): read top to bottom, the first rule whose condition holds decides, and its
# sentence is filled with the statistic that triggered it. The README's table is made from this one.
RULES = (
    ("slower", "some statistic's interval lies wholly above its floor",
     lambda cs: next((c for c in cs if c.above), None),
     "{change}: slower by more than its floor of {floor:.1f}%"),
    ("faster", "some statistic's interval lies wholly below minus its floor",
     lambda cs: next((c for c in cs if c.below), None),
     "{change}: faster by more than its floor of {floor:.1f}%"),
    ("same", "every statistic's interval lies within plus or minus its floor",
     lambda cs: cs[0] if all(c.within for c in cs) else None,
     "{change}: every interval within its floor"),
    ("unsure", "otherwise: an interval reaches past its floor",
     lambda cs: next(c for c in cs if not c.within),
     "{change} reaches past its floor of {floor:.1f}%: the rounds can neither show nor rule out a change of "
     "that size (more rounds, --gpu-min-time, narrow the interval)"),
)


@dataclass(frozen=True)
class Verdict:
    word: str
    why: str  # the rule's sentence with the numbers that triggered it
    changes: tuple[Change, ...]

    @property
    def median(self) -> Change:
        return next(c for c in self.changes if c.stat == "median")


def judge(before: list[float], now: list[float], floors: dict[str, float]) -> Verdict:
    """slower, faster, same or unsure: the rounds of a run against the baseline's, each statistic against its
    floor in percent (floors names every statistic of gpubench.stats.STATISTICS)."""
    intervals = change_intervals(before, now, level=LEVEL)
    changes = tuple(Change(s, intervals[s].pct, intervals[s].lo, intervals[s].hi, floors[s]) for s in STATISTICS)
    for word, _, pick, sentence in RULES:
        change = pick(changes)
        if change is not None:
            return Verdict(word, sentence.format(change=change.text(), floor=change.floor), changes)
    raise AssertionError("the last rule always holds")
