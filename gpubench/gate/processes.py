"""How many processes measure each benchmark's floor: as few as its floor's own estimate needs.

A process costs its whole start (Python, the GPU's context, every benchmark's set-up), so `--gpu-save-baseline`
runs further processes only for the benchmarks whose floor still needs them; a floor process leaves the others
out (gate.configure.deselect_settled) and the command stops once none is left (gate.runs). A benchmark's floor
is settled:

- at the most processes the command allows (--gpu-baseline-runs, the baseline's processes_max), or
- from MIN_PROCESSES on, once its floor of the median is within what the benchmark needs (DUTIES) or at the
  least floor, where more processes cannot narrow it.

Stopping once a floor happened to come out narrow is a choice made on the spread itself, which lets an
unchanged process past the floor more often than the bound says; a floor from fewer processes than the most is
therefore the bound at FALSE_ALARM_EARLY (gate.floor), which brings it back to about one time in a thousand
(tests/gate/test_gate_processes.py simulates the rule).

How sure a floor is: the spread of k processes is known only within a factor that chi-square gives for k - 1
degrees of freedom; sure_range turns it into the range (90%) in which the floor of endless processes lies, the
normal bound Z * spread. A floor from few processes lies above that range's middle: its bound pays for the doubt.
"""

from __future__ import annotations

import math

from gpubench.gate import floor as benchfloor

MIN_PROCESSES = 4  # below, a spread of 2 degrees of freedom or fewer: floors of 30 spreads or more
# The floor of the median each benchmark needs, by its median time: from 100 us, 5% more work must read `slower`
# (the run's interval, at most a quarter of its floor wide, and its process's own effect must fit between the
# floor and 5%); from 10 us, 10% more must never read `same` (so the floor stays well below 10%); below 10 us
# nothing is promised, and 12% keeps a floor useful without a process per percent.
# A floor wider than its promise could hide the change named beside it, so a verdict within it is `unsure`, never
# `same` (gate.judgement), and the baseline keeps adding processes up to the most.
PROMISES = ((100e-6, 3.0, "5% more work"), (10e-6, 6.0, "10% more work"))
DUTIES = (
    (*PROMISES[0][:2], "5% more work must read slower"),
    (*PROMISES[1][:2], "10% more work must not read same"),
    (0.0, benchfloor.SHORT_LEAST_PCT, "under 10 us nothing is promised"),
)
# chi-square at 5% and 95% for 1..30 degrees of freedom (scipy.stats.chi2.ppf); beyond, Wilson-Hilferty
CHI2_05 = (
    0.0039,
    0.1026,
    0.3518,
    0.7107,
    1.1455,
    1.6354,
    2.1673,
    2.7326,
    3.3251,
    3.9403,
    4.5748,
    5.226,
    5.8919,
    6.5706,
    7.2609,
    7.9616,
    8.6718,
    9.3905,
    10.117,
    10.8508,
    11.5913,
    12.338,
    13.0905,
    13.8484,
    14.6114,
    15.3792,
    16.1514,
    16.9279,
    17.7084,
    18.4927,
)
CHI2_95 = (
    3.8415,
    5.9915,
    7.8147,
    9.4877,
    11.0705,
    12.5916,
    14.0671,
    15.5073,
    16.919,
    18.307,
    19.6751,
    21.0261,
    22.362,
    23.6848,
    24.9958,
    26.2962,
    27.5871,
    28.8693,
    30.1435,
    31.4104,
    32.6706,
    33.9244,
    35.1725,
    36.415,
    37.6525,
    38.8851,
    40.1133,
    41.3371,
    42.557,
    43.773,
)
Z90 = 1.6448536  # the normal quantile at 95%


def duty(median_s: float) -> tuple[float, str]:
    """The floor of the median a benchmark of this median time needs, in percent, and why."""
    return next((pct, why) for least, pct, why in DUTIES if median_s >= least)


def chi2(df: int, upper: bool) -> float:
    table, z = (CHI2_95, Z90) if upper else (CHI2_05, -Z90)
    if df <= len(table):
        return table[df - 1]
    return df * (1 - 2 / (9 * df) + z * math.sqrt(2 / (9 * df))) ** 3


def sure_range(f: benchfloor.Floor) -> tuple[float, float] | None:
    """The range (90%) in which the floor of endless processes lies, given this floor's spread and processes;
    None for a floor of one process (no spread)."""
    if f.spread is None or f.processes < 2:
        return None
    df = f.processes - 1
    return (
        benchfloor.Z * f.spread * math.sqrt(df / chi2(df, True)),
        benchfloor.Z * f.spread * math.sqrt(df / chi2(df, False)),
    )


def status(baseline: dict, fullname: str, least_pct: float) -> tuple[bool, str]:
    """Whether a benchmark's floor is settled (no further process measures it), and why, in a clause."""
    most = benchfloor.processes_max(baseline)
    f = benchfloor.floors(baseline, fullname, least_pct)["median"]
    if most is None:
        return False, "the baseline sets no most processes: every floor process measures it"
    if f.processes >= most:
        return True, f"measured by the most processes, {most}"
    if f.processes < MIN_PROCESSES:
        return False, f"{f.processes} processes: a floor needs {MIN_PROCESSES} or more"
    median_s = benchfloor.call_s(baseline, fullname)
    wanted, why = duty(median_s) if median_s else (least_pct, "")
    least = benchfloor.least_for(baseline, fullname, least_pct)
    if f.width <= least:
        return True, f"at the least floor, {least:g}%, which more processes cannot narrow"
    if f.width <= wanted:
        return True, f"within the {wanted:g}% it needs ({why})"
    return False, f"wider than the {wanted:g}% it needs ({why})"


def names(baseline: dict) -> list[str]:
    return [b["fullname"] for b in baseline.get("benchmarks") or [] if isinstance(b, dict) and "fullname" in b]


def unsettled(baseline: dict, least_pct: float) -> list[str]:
    """The benchmarks whose floors still need a process."""
    return [n for n in names(baseline) if not status(baseline, n, least_pct)[0]]


def summary(baseline: dict, least_pct: float) -> list[str]:
    """One line per benchmark: its floor of the median, from how many processes, how sure, and why it stopped."""
    out = []
    for fullname in names(baseline):
        f = benchfloor.floors(baseline, fullname, least_pct)["median"]
        sure = sure_range(f)
        lo, hi = (f"{max(least_pct, x):.2g}" for x in sure) if sure else ("", "")
        said = f"; 90% sure endless processes would give {lo if lo == hi else f'{lo}-{hi}'}%" if sure else ""
        level = f" (bound at 1 in {1 / benchfloor.FALSE_ALARM_EARLY:,.0f})" if f.early else ""
        out.append(
            f"  {fullname.rsplit('::', 1)[-1]}: floor {f.width:.2f}% from {f.processes} process"
            f"{'es' * (f.processes != 1)}{level}{said}; {status(baseline, fullname, least_pct)[1]}"
        )
    return out
