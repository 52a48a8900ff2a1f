"""The between-run floor of a baseline: how far a statistic of a benchmark lands from one process to the next
on this GPU, which the rounds of one process cannot show. A process's buffers land elsewhere in memory, its
launches and its graph sit elsewhere, its GPU starts warmer or cooler: a flushed 6 us matmul's quartiles
moved by up to 3% between processes on unchanged code, while within each process they did not move at all.

The model: a statistic of a run is the benchmark's own value, shifted by an effect of its process (one draw
per process, shared by all its rounds), plus the noise of its rounds. A baseline measured in k processes (the
first saves it, each other adds a rerun: `--gpu-baseline-runs`, or `--gpu-measure-floor` by hand) holds k
draws of that effect for every statistic: their mean is the center, where an unchanged process lands on
average (the first process is one draw, not the truth), and their spread s estimates the effect's size. The
floor is the prediction bound for the next process, t(k-1) * s * sqrt(1 + 1/k), with the t quantile at
FALSE_ALARM two-sided: an unchanged process lands beyond it one time in a thousand per statistic, the doubt
in s from few processes included (few processes, a wide floor: 4 give 14.4 s, 8 give 5.7 s, endless ones
3.3 s). It is never below the least floor (--gpu-noise-floor), and a baseline of one process has that alone.

A benchmark measured in fewer processes than its baseline allows (processes_max: gate.processes stops measuring
a floor once it is as narrow as the benchmark needs) gets the bound at FALSE_ALARM_EARLY instead: stopping when
the spread happened to come out small would otherwise let an unchanged process past the floor up to 2.2 times as
often (simulated in tests/gate/test_gate_processes.py); at the stricter level, 1.1 times in a thousand at most,
as for a fixed count.

A call under SHORT_CALL_S has a floor of at least SHORT_LEAST_PCT: there, what a process does has a longer tail
than eight processes show. On an H200 a flushed 6 us matmul's eight processes gave a floor of 5.5% (its first
quartile) and one of twenty unchanged processes after them landed at +7.2%; the gate promises nothing of such
calls but that unchanged code never reads `slower`.

`--gpu-measure-floor DIR` adds a rerun to DIR/<gpu>.json under the key "gpubench": for each benchmark and
statistic, the change from the first process and its interval. A baseline saved anew starts with no reruns.
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass
from pathlib import Path

from gpubench.stats import STATISTICS, Interval

KEY = "gpubench"
FALSE_ALARM = 0.001  # an unchanged process lands beyond a statistic's floor this often
MOVED_PCT = 10.0  # a rerun whose median moved more than this is said: its code may have changed
# t quantiles at 1 - FALSE_ALARM / 2 for 1..30 degrees of freedom (scipy.stats.t.ppf(0.9995, df)); beyond,
# the Cornish-Fisher expansion around the normal quantile Z is within 0.1% of it.
T_QUANTILE = (
    636.6192,
    31.5991,
    12.924,
    8.6103,
    6.8688,
    5.9588,
    5.4079,
    5.0413,
    4.7809,
    4.5869,
    4.437,
    4.3178,
    4.2208,
    4.1405,
    4.0728,
    4.015,
    3.9651,
    3.9216,
    3.8834,
    3.8495,
    3.8193,
    3.7921,
    3.7676,
    3.7454,
    3.7251,
    3.7066,
    3.6896,
    3.6739,
    3.6594,
    3.646,
)
Z = 3.2905267  # the normal quantile at 1 - FALSE_ALARM / 2
FALSE_ALARM_EARLY = 0.0001  # a floor from fewer processes than the baseline allows (gate.processes)
T_QUANTILE_EARLY = (
    6366.1977,
    99.9925,
    28.0001,
    15.5441,
    11.1777,
    9.0823,
    7.8846,
    7.12,
    6.5937,
    6.2111,
    5.9212,
    5.6945,
    5.5125,
    5.3634,
    5.2391,
    5.1339,
    5.0438,
    4.9657,
    4.8975,
    4.8373,
    4.7839,
    4.7361,
    4.6932,
    4.6544,
    4.6191,
    4.587,
    4.5575,
    4.5305,
    4.5055,
    4.4824,
)
Z_EARLY = 3.8905919
SHORT_CALL_S = 10e-6  # a call shorter than this is promised nothing but no false `slower`
SHORT_LEAST_PCT = 12.0


def t_quantile(df: int, early: bool = False) -> float:
    """Student's t at 1 - FALSE_ALARM / 2 (early: at FALSE_ALARM_EARLY) for df degrees of freedom."""
    if df < 1:
        raise ValueError("a t quantile needs one degree of freedom or more")
    table, z = (T_QUANTILE_EARLY, Z_EARLY) if early else (T_QUANTILE, Z)
    if df <= len(table):
        return table[df - 1]
    return z + (z**3 + z) / (4 * df) + (5 * z**5 + 16 * z**3 + 3 * z) / (96 * df**2)


def multiplier(processes: int, early: bool = False) -> float:
    """How many spreads of k processes' values a next process may land from their mean: t(k-1) sqrt(1 + 1/k)."""
    return t_quantile(processes - 1, early) * math.sqrt(1 + 1 / processes)


@dataclass(frozen=True)
class Floor:
    """One statistic's floor: how far (percent) from its center (percent from the baseline's first process)
    an unchanged process may land, from how many processes, and their spread (percent; None for one)."""

    width: float
    center: float = 0.0
    processes: int = 1
    spread: float | None = None
    early: bool = False  # fewer processes than the baseline allows: the bound at FALSE_ALARM_EARLY


def floor_of(points: list[float], least_pct: float, early: bool = False) -> Floor:
    """The floor of one statistic from its value in each process, as percent changes from the first process."""
    logs = [math.log1p(p / 100) for p in points]
    k = len(logs)
    if k < 2:
        return Floor(least_pct, 0.0, max(k, 1), None, early)
    mean = sum(logs) / k
    spread = 100 * math.sqrt(sum((x - mean) ** 2 for x in logs) / (k - 1))
    return Floor(max(least_pct, multiplier(k, early) * spread), 100 * math.expm1(mean), k, spread, early)


def recenter(pct: float, center: float) -> float:
    """A change from the first process (percent) as a change from the center of the baseline's processes."""
    return 100 * ((1 + pct / 100) / (1 + center / 100) - 1)


def reruns(baseline: dict) -> list[dict]:
    return list((baseline.get(KEY) or {}).get("reruns") or [])


def processes_max(baseline: dict) -> int | None:
    """The most processes the baseline's command allowed (--gpu-baseline-runs), where it says."""
    most = (baseline.get(KEY) or {}).get("processes_max")
    return most if isinstance(most, int) and not isinstance(most, bool) and most > 0 else None


def started(baseline: dict, most: int) -> dict:
    """A baseline just saved, with the most processes its command allows and no reruns yet."""
    return {**baseline, KEY: {"processes_max": most, "reruns": []}}


def measured(baseline: dict, fullname: str) -> list[dict]:
    """The rerun changes of one benchmark: {statistic: [change, lo, hi]} per rerun that ran it."""
    return [
        r["benchmarks"][fullname]
        for r in reruns(baseline)
        if isinstance(r, dict) and isinstance(r.get("benchmarks"), dict) and fullname in r["benchmarks"]
    ]


def _point(change: dict, stat: str) -> float | None:
    """A rerun's change of one statistic; a rerun saved before the statistic existed gives its median's (a
    process's effect moves all of its statistics alike)."""
    value = change.get(stat) or change.get("median")
    return float(value[0]) if isinstance(value, list) and value else None


def call_s(baseline: dict, fullname: str) -> float | None:
    """The median time per call (s) the baseline saved for one benchmark, where it holds a positive one."""
    for bench in baseline.get("benchmarks") or []:
        if isinstance(bench, dict) and bench.get("fullname") == fullname:
            median = (bench.get("stats") or {}).get("median")
            ok = isinstance(median, (int, float)) and not isinstance(median, bool) and median > 0
            return median if ok else None
    return None


def least_for(baseline: dict, fullname: str, least_pct: float) -> float:
    """The least floor of one benchmark: --gpu-noise-floor's, and at least SHORT_LEAST_PCT for a short call."""
    t = call_s(baseline, fullname)
    return max(least_pct, SHORT_LEAST_PCT) if t is not None and t < SHORT_CALL_S else least_pct


def floors(baseline: dict, fullname: str, least_pct: float) -> dict[str, Floor]:
    """Each statistic's floor for one benchmark, from the baseline's first process and its reruns."""
    runs = measured(baseline, fullname)
    most = processes_max(baseline)
    least = least_for(baseline, fullname, least_pct)
    out = {}
    for stat in STATISTICS:
        points = [0.0] + [p for p in (_point(r, stat) for r in runs) if p is not None and p > -100]
        out[stat] = floor_of(points, least, early=most is not None and len(points) < most)
    return out


def with_rerun(
    baseline: dict, changes: dict[str, dict[str, Interval]], when: str, uuid: str | None
) -> tuple[dict, list[str]]:
    """The baseline with one more unchanged rerun, and the benchmarks whose median moved more than MOVED_PCT in
    it (kept: leaving a far rerun out would narrow the floor below what processes do; said, since a changed
    code would widen it)."""
    kept = {name: {s: [i.pct, i.lo, i.hi] for s, i in intervals.items()} for name, intervals in changes.items()}
    runs = [*reruns(baseline), {"datetime": when, "gpu_uuid": uuid, "benchmarks": kept}]
    section = {**(baseline.get(KEY) or {}), "reruns": runs}
    out = {**baseline, KEY: section}
    # for a reader of the file: the floors as measured so far (the verdict computes them from the reruns)
    names = sorted({n for r in runs if isinstance(r.get("benchmarks"), dict) for n in r["benchmarks"]})
    measured_floors = {n: floors(out, n, 0.0) for n in names}
    section["floor_pct"] = {n: {s: f.width for s, f in fs.items()} for n, fs in measured_floors.items()}
    section["floor_center_pct"] = {n: {s: f.center for s, f in fs.items()} for n, fs in measured_floors.items()}
    section["floor_processes"] = {n: fs["median"].processes for n, fs in measured_floors.items()}
    section["processes"] = len(runs) + 1
    moved = sorted(n for n, i in changes.items() if abs(i["median"].pct) > MOVED_PCT)
    return out, moved


def write(path: str | Path, data: dict) -> None:
    """Replace a baseline file only once the new one is written in full."""
    path = Path(path)
    partial = path.with_name(f".{path.name}.partial")
    partial.write_text(json.dumps(data, indent=4, ensure_ascii=True))
    os.replace(partial, path)
