"""The phases a timeline shades and names: their spans, as a watched job's summary cut them or as the samples'
labels run, and where each phase's name goes in the band above the panels."""

from __future__ import annotations

import bisect

import numpy as np

from gpubench.metrics import finite
from gpubench.read.receipt import EDGES  # a watched job's rows before its first step and after its last
from gpubench.read.samples import as_samples

from .common import short

PHASE_LABELS = {"start": "start-up", "peaks": "peak measurement"}
LABEL_ROWS, LABEL_PT = 3, 8.5


def job_spans(manifest, summary, gpu: int) -> list[tuple[str, float, float]]:
    """A watched job's phases as its summary cut them, on one GPU: start-up and teardown from their rows, the
    phases' spans (the manifest's, which a summary made anew rewrites) inside them. The samples' own labels name
    what the job marked while it ran, "run" for the rest: a job that marks nothing is one "run" there, its
    start-up, warm-up, training and teardown only in the summary. [] for a suite run or a summary with no row."""
    if manifest.get("kind") != "watch":
        return []
    mine = [
        r
        for r in summary or []
        if r.get("gpu") == gpu and r.get("phase") and finite(r.get("t_start")) and finite(r.get("t_end"))
    ]
    if not mine:
        return []
    edges = {r["phase"]: (r["t_start"], r["t_end"]) for r in mine if r.get("kind") in EDGES}
    begun = edges.get("start-up", (None, min(r["t_start"] for r in mine)))[1]
    end = edges.get("teardown", (max(r["t_end"] for r in mine), None))[0]
    summarized = {r["phase"] for r in mine}
    out = [(p, a, b) for p, (a, b) in edges.items()]
    for phase in manifest.get("phases") or []:
        if phase.get("name") in summarized:
            out += [
                (phase["name"], max(a, begun), min(b, end))
                for a, b in phase.get("spans") or []
                if min(b, end) > max(a, begun)
            ]
    return sorted(out, key=lambda x: x[1])


def phase_spans(rows) -> list[tuple[str, float, float]]:
    """Consecutive runs of one phase label in one GPU's rows: (phase, start, end)."""
    rows = as_samples(rows)
    if not len(rows):
        return []
    phases, starts, ends = rows.col("phase"), rows.col("t_start_s"), rows.col("t_end_s")
    first = np.r_[0, np.flatnonzero(phases[1:] != phases[:-1]) + 1]
    last = np.r_[first[1:], len(phases)] - 1
    return [(phases[a], float(starts[a]), float(ends[b])) for a, b in zip(first.tolist(), last.tolist())]


def label_layout(named, t0: float, span_s: float, width_in: float):
    """Where each phase's name goes: across, in up to LABEL_ROWS lines, where every phase can be named so;
    else upright, one line of names side by side. The longest span of each phase is named first, then the
    others by length, each where it overlaps no name already placed; a span with no room keeps its shade
    without a name (a name written again must fit inside its span). Returns the way, the names' band height
    in inches, and (label, x, line) in time order."""
    longest: dict = {}
    for span in sorted(named, key=lambda s: s[1] - s[2]):
        longest.setdefault(span[0], span)
    first = set(longest.values())
    order = list(longest.values()) + sorted((s for s in named if s not in first), key=lambda s: s[1] - s[2])
    per_in = span_s / width_in
    char_in = LABEL_PT * 0.55 / 72
    for way, lines, size in (
        ("across", LABEL_ROWS, lambda text: len(text) * char_in + 0.12),
        ("upright", 1, lambda text: LABEL_PT * 1.35 / 72),
    ):
        used = [_Line() for _ in range(lines)]
        placed = []
        for phase, a, b in order:
            label = short(PHASE_LABELS.get(phase, phase))
            half = size(label) * per_in / 2
            if (phase, a, b) not in first and 2 * half > b - a:
                continue  # a phase named once already is named again only inside a span wide enough
            x = min(max((a + b) / 2 - t0, half), span_s - half)
            line = next((k for k, taken in enumerate(used) if taken.free(x - half, x + half)), None)
            if line is not None:
                used[line].take(x - half, x + half)
                placed.append((a, label, x, line))
        if {p[1] for p in placed} == {short(PHASE_LABELS.get(s[0], s[0])) for s in named} or way == "upright":
            break
    rows = 1 + max((p[3] for p in placed), default=0)
    band = (
        0.1 + rows * LABEL_PT * 1.6 / 72
        if way == "across"
        else 0.15 + max((len(p[1]) for p in placed), default=0) * char_in
    )
    return way, band, [p[1:] for p in sorted(placed)]


class _Line:
    """One line of names: the intervals taken so far, sorted, none overlapping; whether an interval is free
    is a binary search, so that thousands of phases are laid out in a blink."""

    def __init__(self):
        self.starts: list[float] = []
        self.ends: list[float] = []

    def free(self, x0: float, x1: float) -> bool:
        k = bisect.bisect_right(self.starts, x0)
        return (k == 0 or self.ends[k - 1] <= x0) and (k == len(self.starts) or self.starts[k] >= x1)

    def take(self, x0: float, x1: float) -> None:
        k = bisect.bisect_right(self.starts, x0)
        self.starts.insert(k, x0)
        self.ends.insert(k, x1)
