"""The between-run floor of a baseline: how far each statistic of a benchmark moves between unchanged runs
on this GPU, which the rounds of one run cannot show (clocks and temperature that differ from run to run,
where the buffers landed, what the compiler chose).

`--gpu-measure-floor DIR` reruns the benchmarks, unchanged, against DIR/<gpu>.json and adds the rerun to
that file, under the key "gpubench": for each benchmark and statistic, the change and its interval. The
floor of a statistic is the largest change an unchanged rerun could not rule out, the largest end of
its intervals in absolute value over every rerun, and never less than the least floor (--gpu-noise-floor).
A baseline saved anew starts with no reruns.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from gpubench.stats import STATISTICS, Interval

KEY = "gpubench"
MAX_RERUN_CHANGE_PCT = 10.0  # a rerun whose median moved more than this was not unchanged: left out


def reruns(baseline: dict) -> list[dict]:
    return list((baseline.get(KEY) or {}).get("reruns") or [])


def measured(baseline: dict, fullname: str) -> list[dict]:
    """The rerun changes of one benchmark: {statistic: [change, lo, hi]} per rerun that ran it."""
    return [r["benchmarks"][fullname] for r in reruns(baseline)
            if isinstance(r, dict) and fullname in (r.get("benchmarks") or {})]


def floors(baseline: dict, fullname: str, least_pct: float) -> tuple[dict[str, float], int]:
    """Each statistic's floor in percent for one benchmark, and how many reruns measured it (0: the least
    floor alone)."""
    runs = measured(baseline, fullname)
    return {s: max([least_pct, *(max(abs(r[s][1]), abs(r[s][2])) for r in runs if s in r)])
            for s in STATISTICS}, len(runs)


def with_rerun(baseline: dict, changes: dict[str, dict[str, Interval]], when: str,
               uuid: str | None) -> tuple[dict, list[str]]:
    """The baseline with one more unchanged rerun, and the benchmarks left out of it because their median
    moved too far for a rerun of unchanged code."""
    kept = {name: {s: [i.pct, i.lo, i.hi] for s, i in intervals.items()} for name, intervals in changes.items()
            if abs(intervals["median"].pct) <= MAX_RERUN_CHANGE_PCT}
    runs = [*reruns(baseline), {"datetime": when, "gpu_uuid": uuid, "benchmarks": kept}]
    section = {**(baseline.get(KEY) or {}), "reruns": runs}
    out = {**baseline, KEY: section}
    # for a reader of the file: the floors as measured so far (the verdict computes them from the reruns)
    names = sorted({n for r in runs for n in r["benchmarks"]})
    section["floor_pct"] = {n: floors(out, n, 0.0)[0] for n in names}
    return out, sorted(set(changes) - set(kept))


def write(path: str | Path, data: dict) -> None:
    """Replace a baseline file only once the new one is written in full."""
    path = Path(path)
    partial = path.with_name(f".{path.name}.partial")
    partial.write_text(json.dumps(data, indent=4, ensure_ascii=True))
    os.replace(partial, path)
