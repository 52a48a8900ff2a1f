"""How long a benchmark's rounds run: until what they say is well inside the floor it will be held against.

nvbench stops a benchmark once its noise is below a target; its newer versions judge on the median and the
interquartile range. The gate does the same on the statistics its verdict reads: rounds go on until the 99%
interval of the median, the first and the third quartile is within a target (in percent) on either side, or
until the most rounds. A statistic's interval here needs no bootstrap, so it is checked as the rounds run:

- the distribution-free interval of a quantile: the rounds of ranks n p -+ z sqrt(n p (1 - p)), whatever the
  rounds' shape, outlying rounds included (they move a rank, not a value);
- and half the gap between the statistic of the first half of the rounds and of the second: rounds that
  drift together (a clock still moving, a GPU warming) are not independent, and the ranks alone would
  narrow as though they were; a drift keeps the rounds going to the most.

Rounds on one step of the timer give an interval of no width here: the verdict widens every interval by
the step (gate.rounds), and more rounds cannot narrow that.

The target, by what the run knows (gate.targets picks it):
- held against a baseline: a quarter of each statistic's floor (FLOOR_SHARE), so that its interval takes
  little of the room between the floor and the change the gate must catch;
- measuring a floor, once the benchmark's processes so far show their spread: that spread, so that the rounds
  add little to what processes move (an interval that wide is a standard error of 0.39 spreads, which widens
  the spread the next floor sees by 7% at most);
- the baseline's first process, and a floor process before two processes show a spread: a quarter of the floor
  the call's time needs (gate.processes.duty: 3% from 100 us, 6% from 10 us, 12% below), never less than a
  quarter of the least floor. A floor settles once it is within that need, so rounds narrower than a quarter of
  it buy little, and the short calls, whose rounds narrow slowest, were where a baseline spent its time;
- otherwise (a run with no baseline): a quarter of the least floor.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Callable

from gpubench.gate import processes
from gpubench.gate.rounds import usable

FLOOR_SHARE = 0.25
Z99 = 2.5758293  # the normal quantile at 99.5%: a 99% interval, as the verdict's
JUDGED = (("median", 0.5), ("q1", 0.25), ("q3", 0.75))
GROWTH = 1.2  # the rule is checked again once the rounds have grown by a fifth
MIN_STEP = 5  # and by at least this many


@dataclass(frozen=True)
class Target:
    """The half-width (percent) each judged statistic's interval must reach, and what set it."""

    pct: dict = field(default_factory=dict)
    why: str = ""
    by_call: float | None = None  # the least floor, where the target waits for the call's time (Target.at)

    def at(self, call_s: float) -> Target:
        """This target once the call's time (s) is known: a quarter of the floor that time needs, where it waits."""
        return self if self.by_call is None else duty_target(self.by_call, call_s)


def least_target(least_pct: float) -> Target:
    pct = FLOOR_SHARE * least_pct
    return Target({s: pct for s, _ in JUDGED}, f"a quarter of the least floor ({least_pct:g}%)")


def duty_target(least_pct: float, call_s: float | None = None) -> Target:
    """A quarter of the floor a call of call_s needs (gate.processes.duty), at least a quarter of the least floor;
    without call_s, one that waits for the call's time."""
    if call_s is None:
        return Target(least_target(least_pct).pct, "a quarter of the floor its time needs", by_call=least_pct)
    need = max(least_pct, processes.duty(call_s)[0])
    return Target(
        {s: FLOOR_SHARE * need for s, _ in JUDGED},
        f"a quarter of the {need:g}% floor a call of {call_s * 1e6:.3g} us needs",
    )


def floor_target(floors: dict, least_pct: float) -> Target:
    """Against a baseline: a quarter of each statistic's floor (gate.floor.Floor)."""
    pct = {s: FLOOR_SHARE * max(floors[s].width, least_pct) for s, _ in JUDGED}
    return Target(pct, f"a quarter of its floor ({floors['median'].width:.2g}% for the median)")


def spread_target(floors: dict, least_pct: float, most_pct: float = math.inf) -> Target:
    """Measuring a floor: the spread of the benchmark's processes so far (gate.floor.Floor.spread), at most
    most_pct (a quarter of the floor the benchmark needs: a spread that came out wide from a few processes
    must not let the rounds' own noise widen the next ones)."""
    pct = {s: max(FLOOR_SHARE * least_pct, min(floors[s].spread or 0.0, most_pct)) for s, _ in JUDGED}
    return Target(
        pct, f"the spread of its {floors['median'].processes} processes so far ({pct['median']:.2g}% for the median)"
    )


def _quantile(data: list[float], q: float) -> float:
    pos = q * (len(data) - 1)
    lo = int(pos)
    hi = min(lo + 1, len(data) - 1)
    return data[lo] + (data[hi] - data[lo]) * (pos - lo)


def order_width(data: list[float], q: float, z: float = Z99) -> float:
    """Half the distribution-free interval of the q-quantile of sorted data, as a share of it: the rounds of
    ranks n q -+ z sqrt(n q (1 - q)), clamped to the data."""
    n = len(data)
    spread = z * math.sqrt(n * q * (1 - q))
    lo = max(0, math.floor(n * q - spread) - 1)
    hi = min(n - 1, math.ceil(n * q + spread) - 1)
    value = _quantile(data, q)
    return (data[hi] - data[lo]) / 2 / value if value > 0 else math.inf


def widths(rounds: list[float]) -> dict[str, float]:
    """Each judged statistic's half-width in percent: its distribution-free interval, or half the gap between
    the two halves of the rounds where that is wider."""
    ordered = sorted(rounds)
    half = len(rounds) // 2
    first, second = sorted(rounds[:half]), sorted(rounds[half:])
    out = {}
    for stat, q in JUDGED:
        value = _quantile(ordered, q)
        drift = abs(_quantile(second, q) - _quantile(first, q)) / 2 / value if half and value > 0 else 0.0
        out[stat] = float(100 * max(order_width(ordered, q), drift))
    return out


def converged(rounds: list[float], target: Target) -> tuple[bool, dict[str, float]]:
    w = widths(rounds)
    return all(w[s] <= target.pct.get(s, math.inf) for s in w), w


@dataclass
class Stopped:
    """The rounds one benchmark ran, and why they stopped."""

    rounds: list[float]
    why: str
    widths: dict = field(default_factory=dict)


def run_rounds(
    one_round: Callable[[], float],
    target: Target,
    bounds: Callable[[], tuple[int, int]],
    late: Callable[[], list[bool]] = lambda: [],
) -> Stopped:
    """Rounds of one_round (each returns a round's time per call) until the judged statistics' intervals are
    within the target, at least the first number of bounds() and at most the second (read again at each
    check, never per round: a limit seen in the rounds raises both). late: per round, whether the host was
    late for it (such rounds are left out while few, as the verdict leaves them)."""
    rounds: list[float] = []
    check = 0
    least, most = bounds()
    while True:
        if len(rounds) >= min(max(check, least), max(most, least)):
            least, most = bounds()  # read at checks only: a limit seen in the rounds raises both
            most = max(most, least)
        if len(rounds) >= min(max(check, least), most):
            flags = late()
            kept = usable(rounds, {"rounds_host_late": [i for i, x in enumerate(flags) if x]})
            ok, w = converged(kept, target) if len(kept) >= 2 else (False, {})
            worst = max(w, key=lambda s: w[s] - target.pct.get(s, 0.0)) if w else "median"
            said = f"{worst} within +-{w.get(worst, math.inf):.2g}%" if w else "too few rounds"
            if ok:
                return Stopped(rounds, f"{said} after {len(rounds)} rounds: the target was {target.why}", w)
            if len(rounds) >= most:
                return Stopped(
                    rounds,
                    f"the most rounds ({most}), {said} against a target of "
                    f"{target.pct.get(worst, math.inf):.2g}% ({target.why})",
                    w,
                )
            check = max(len(rounds) + MIN_STEP, math.ceil(len(rounds) * GROWTH))
        rounds.append(one_round())
