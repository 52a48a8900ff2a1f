"""The verdict of one benchmark against its baseline: how the median, the quartiles and the trimmed mean of its
rounds changed, each with a 99% interval (gpubench.stats.change_intervals: a moving-block bootstrap over
rounds with a fixed seed), held against the between-run floor of that statistic (gpubench.gate.floor).
99% each, so that the four together miss a change of zero about one time in twenty (measured on
unchanged synthetic rounds; tests/gate/test_gate_verdict.py).

Each change is taken from the center of the baseline's processes, not from its first process alone (one
draw of what a process does), and its interval is widened by one step of the timer on either side
(gpubench.gate.rounds): rounds that all sit on one step of the clock say nothing finer than the step. A
statistic whose whole interval lies above its floor has slowed by more than unchanged processes move; one
whose interval lies within +-floor has not changed by more than they do. Where the rounds ran at another SM
clock than the baseline's (a GPU at its power limit runs slower as it warms: an unchanged H100 GEMM rerun
went from 1620 to 1440 MHz and read 2.6% slower), a change is no longer the code's until it also exceeds
what the clock explains (time per call in inverse proportion to the clock, the most a clock can account
for): within that, `unsure`, with the clocks in the sentence. Only where a limit that sways the clock
(a power cap, a thermal limit) held in the rounds of either run: a clock that moved for no such reason
explains nothing. The price: code that draws more power, and so runs at a lower clock under the cap,
reads `unsure` rather than `slower` for the part of its slowdown the clock accounts for.

The verdict is the first rule of RULES that holds, so `same` needs every interval inside its floor: a change
the data cannot rule out is never called `same`, and a slowdown of part of the rounds, which leaves the
median where it was, moves a quartile or the trimmed mean and reads `slower`.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, field

from gpubench.gate.floor import Floor, recenter
from gpubench.gate.processes import PROMISES
from gpubench.gate.rounds import resolution_pct
from gpubench.metrics import finite
from gpubench.stats import STATISTICS, change_intervals

LEAST_FLOOR_PCT = 1.0  # --gpu-noise-floor's default: a smaller change is never worth a verdict
LEVEL = 0.99  # of each statistic's interval
CLOCK_DIFF = 0.02  # median SM clocks of the rounds 2% apart (about two of NVML's 15 MHz steps on an H100) differ


@dataclass(frozen=True)
class Change:
    """One statistic's change in percent, its interval, and the floor it is held against."""

    stat: str
    pct: float
    lo: float
    hi: float
    floor: float
    clock_pct: float = 0.0  # the change the SM clock explains: + where it fell, - where it rose
    center: float = 0.0  # where unchanged processes land, in percent from the baseline's first process
    processes: int = 1  # how many processes measured the floor
    resolution: float = 0.0  # the timer's step (both runs'), in percent: the interval is widened by it
    needs: float = math.inf  # the widest floor that keeps the promise for a call of this time (gate.processes.duty)

    @property
    def above(self) -> bool:
        return self.lo > self.floor + max(self.clock_pct, 0.0)

    @property
    def below(self) -> bool:
        return self.hi < -self.floor + min(self.clock_pct, 0.0)

    @property
    def clocked(self) -> bool:
        """Past its floor, but wholly within the floor widened by what the change of the clock explains."""
        past = self.lo > self.floor or self.hi < -self.floor
        inside = -self.floor + min(self.clock_pct, 0.0) <= self.lo and self.hi <= self.floor + max(self.clock_pct, 0.0)
        return past and inside

    @property
    def wide(self) -> bool:
        """A floor wider than the call's time needs: within it hides a change the gate promises to catch."""
        return self.floor > self.needs

    @property
    def within(self) -> bool:
        return -self.floor <= self.lo and self.hi <= self.floor

    def text(self) -> str:
        return f"{self.stat} {self.pct:+.1f}% [{self.lo:+.1f}, {self.hi:+.1f}]"


# (word, when, what it says): read top to bottom, the first rule whose condition holds decides, and its
# sentence is filled with the statistic that triggered it. The README's table is made from this one.
RULES = (
    (
        "slower",
        "some statistic's interval lies wholly above its floor",
        lambda cs: next((c for c in cs if c.above), None),
        "{change}: slower by more than its floor of {floor:.1f}%",
    ),
    (
        "faster",
        "some statistic's interval lies wholly below minus its floor",
        lambda cs: next((c for c in cs if c.below), None),
        "{change}: faster by more than its floor of {floor:.1f}%",
    ),
    (
        "unsure",
        "every statistic's interval lies within its floor, but that floor is wider than the call's time "
        "needs for the change the gate promises to catch (10% more work from 10 us, 5% from 100 us)",
        lambda cs: cs[0] if all(c.within for c in cs) and cs[0].wide else None,
        "{change} is within its floor of {floor:.1f}%, but a floor that wide could hide {hides}: more baseline "
        "processes (--gpu-baseline-runs) or a longer call narrow it",
    ),
    (
        "same",
        "every statistic's interval lies within plus or minus its floor",
        lambda cs: cs[0] if all(c.within for c in cs) else None,
        "{change}: every interval within its floor",
    ),
    (
        "unsure",
        "a statistic's interval lies past its floor, but no further than the rounds' other SM clock explains",
        lambda cs: next((c for c in cs if c.clocked), None),
        "{change} is past its floor of {floor:.1f}%, but within the {clock_pct:+.1f}% that the SM clock explains "
        "({clocks}): the GPU's clock, not the code, may account for it",
    ),
    (
        "unsure",
        "otherwise: an interval reaches past its floor",
        lambda cs: next(c for c in cs if not c.within),
        "{change} reaches past its floor of {floor:.1f}%: the rounds can neither show nor rule out a change of "
        "that size (more rounds, --gpu-min-time, narrow the interval)",
    ),
)


@dataclass(frozen=True)
class Verdict:
    word: str
    why: str  # the rule's sentence with the numbers that triggered it
    changes: tuple[Change, ...]
    raw: dict = field(default_factory=dict)  # statistic -> Interval from the baseline's first process, unwidened

    @property
    def median(self) -> Change:
        return next(c for c in self.changes if c.stat == "median")


def clock_explains(before_mhz, now_mhz) -> float:
    """The change in percent of a time per call in inverse proportion to the SM clock, from the baseline's
    median clock of the rounds to this run's; 0 where they are within CLOCK_DIFF or either is unknown."""
    if not (finite(before_mhz) and finite(now_mhz)) or before_mhz <= 0 or now_mhz <= 0:
        return 0.0
    if abs(now_mhz - before_mhz) < CLOCK_DIFF * before_mhz:
        return 0.0
    return (before_mhz / now_mhz - 1) * 100


def judge(
    before: list[float], now: list[float], floors: dict, clocks: tuple = (None, None), calls: tuple = (1, 1)
) -> Verdict:
    """slower, faster, same or unsure: the rounds of a run against the baseline's first process, each statistic
    taken from the center of the baseline's processes and held against its floor (floors names every
    statistic of gpubench.stats.STATISTICS: a gate.floor.Floor, or a width in percent alone), and against
    what the change of the rounds' median SM clock explains (clocks: the baseline's and this run's, MHz).
    calls: the calls per round of each, for the timer's step where rounds show none."""
    intervals = change_intervals(before, now, level=LEVEL)
    res = resolution_pct(before, calls[0]) + resolution_pct(now, calls[1])
    return decide(intervals, floors, clocks, res, statistics.median(before) if before else None)


def promise(call_s: float | None) -> tuple[float, str]:
    """The widest floor of the median that keeps the gate's promise for a call of this time (in seconds), and the
    change it would otherwise hide; no limit where nothing is promised (under 10 us, or no time known)."""
    for least_s, pct, hides in PROMISES:
        if call_s is not None and call_s >= least_s:
            return pct, hides
    return math.inf, ""


def decide(
    intervals: dict,
    floors: dict,
    clocks: tuple = (None, None),
    resolution_pct: float = 0.0,
    call_s: float | None = None,
) -> Verdict:
    """The verdict from each statistic's change from the baseline's first process and its interval
    (gpubench.stats.Interval, unwidened), the floors, the clocks (as judge), the timer's step of both runs in
    percent, by which every interval is widened on either side, and the baseline's time per call (s), which sets
    how wide a floor may be before `same` could hide a change the gate promises to catch."""
    clock_pct = clock_explains(*clocks)
    needs, hides = promise(call_s)
    changes = []
    for s in STATISTICS:
        f = floors[s] if isinstance(floors[s], Floor) else Floor(float(floors[s]))
        i = intervals[s]
        changes.append(
            Change(
                s,
                recenter(i.pct, f.center),
                recenter(i.lo, f.center) - resolution_pct,
                recenter(i.hi, f.center) + resolution_pct,
                f.width,
                clock_pct,
                f.center,
                f.processes,
                resolution_pct,
                needs,
            )
        )
    said = f"{clocks[0]:.0f} -> {clocks[1]:.0f} MHz" if clock_pct else ""
    for word, _, pick, sentence in RULES:
        change = pick(changes)
        if change is not None:
            why = sentence.format(
                change=change.text(), floor=change.floor, clock_pct=clock_pct, clocks=said, hides=hides
            )
            return Verdict(word, why, tuple(changes), intervals)
    raise AssertionError("the last rule always holds")
