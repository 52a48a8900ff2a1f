"""Phases that alternate faster than the counters can tell apart: one row for the stretch where they alternate.

A phase's numbers begin TRIM_S into each of its spans, because NVML's utilization and power still carry what
ran before; a span no longer than that leaves its phase no window at all. A job that switches between train
and eval every 30 ms would so lose both phases, and no cut of those samples could give either its own numbers:
every sample row covers several spans of each. Consecutive such spans are therefore measured together, as one
phase named by their phases in order ("train + eval"), whose window is the stretch they fill after one trim;
a note says which phases, how many spans and over how long. A short span between long ones (a 0.3 s eval
between minutes of train) is not merged: its neighbours keep their own numbers, and it keeps its row, too
short to measure.
"""

from __future__ import annotations

JOIN = " + "


def merge(phases: list, trim_s: float, make, apart: str = "") -> tuple[list, list[str]]:
    """The phases (gpubench.job.phases.Phase, in order of first appearance) with each run of consecutive
    spans no longer than trim_s, of at least two phases one of which comes back, made one span of a phase named
    by those phases (make(name, spans) builds it); and a note for each merged phase. Spans of the phase `apart` (what
    ran before the first mark: the job's start-up) are never merged."""
    spans = sorted(((p.name, a, b) for p in phases for a, b in p.spans), key=lambda s: s[1])
    runs, current = [], []
    for span in spans:
        short = span[2] - span[1] <= trim_s and span[0] != apart
        if short and current and abs(current[-1][2] - span[1]) < 1e-9:  # cut's spans meet end to start
            current.append(span)
            continue
        runs.append(current)
        current = [span] if short else []
    runs.append(current)
    merged: dict[str, list] = {}  # merged name -> its runs
    taken = set()
    for run in runs:
        names = list(dict.fromkeys(name for name, _, _ in run))
        # alternating: a phase came back (warmup, train and eval once each, however short, is no alternation)
        if len(names) >= 2 and len(run) > len(names):
            merged.setdefault(JOIN.join(names), []).append(run)
            taken.update(run)
    if not merged:
        return phases, []
    out, placed = [], set()
    for span in spans:  # in time order: a merged phase appears where its first run began
        if span not in taken:
            name = span[0]
        else:
            name = next(n for n, rs in merged.items() if any(span in r for r in rs))
        if name not in placed:
            placed.add(name)
            out.append(name)
    kept = {p.name: [(a, b) for a, b in p.spans if (p.name, a, b) not in taken] for p in phases}
    result = [make(n, [(r[0][1], r[-1][2]) for r in merged[n]] if n in merged else kept[n]) for n in out]
    notes = [_note(name, rs, trim_s) for name, rs in merged.items()]
    return [p for p in result if p.spans], notes


def _note(name: str, runs: list, trim_s: float) -> str:
    names = list(dict.fromkeys(n for r in runs for n, _, _ in r))
    spans = sum(len(r) for r in runs)
    seconds = sum(r[-1][2] - r[0][1] for r in runs)
    listed = ", ".join(names[:-1]) + f" and {names[-1]}"
    return (
        f"{listed} alternated {spans} times in {seconds:.3g} s, each time for no longer than the {trim_s:g} s "
        f"that NVML's counters lag: no sample tells them apart, so they are one row, {name!r}, over the time "
        "they alternated"
    )
