"""The optimizer hook's steps of a process whose optimizers step in a pattern (gpubench.inside.steprule), as
its P lines say them (gpubench.inside.markline): the steps they take back left out, and each step given the
pattern it is one of and the FLOPs counted over that pattern, never over another.

A P line counts the hook's steps of its process (its A and C lines), not time: a step stamped on the GPU may
be stamped after the P line that follows it. So a process's A and C lines are put in time order (their
stamps keep the order in which they were taken) and numbered step by step; a line that a P line's place cuts
is split there, its steps' stamps spread evenly from its first to its last, its sums shared by its steps.
Each pattern's FLOPs are those of its own C line, given to every step of that pattern (the steps of a line cut
in two may have carried two patterns' values; a pattern whose count failed, or was never taken, has none).
"""

from __future__ import annotations

from dataclasses import replace

from gpubench.job.markreader import Pattern, Steps

OPTIMIZER, COUNTED = "optimizer", "counted"  # markline.ORIGINS: the hook's optimizer steps, and its counted one


def told(events: list, leave=frozenset()) -> dict:
    """Each process's P lines, in the order of the steps they name (those of the streams in `leave`: none)."""
    out: dict = {}
    for e in events:
        if isinstance(e, Pattern) and e.stream not in leave:
            out.setdefault(e.stream, []).append(e)
    return {s: sorted(found, key=lambda p: p.written) for s, found in out.items()}


def mine(e, told_of: dict) -> bool:
    """Whether e is a step of the optimizer hook in a process that told a pattern: apply() gives it."""
    return isinstance(e, Steps) and e.origin in (OPTIMIZER, COUNTED) and e.stream in told_of


def apply(events: list, told_of: dict) -> list[Steps]:
    """The hook's steps of the processes in told_of, with their P lines applied."""
    lines: dict = {}
    for e in events:
        if mine(e, told_of):
            lines.setdefault(e.stream, []).append(e)
    out = []
    for stream, found in lines.items():
        out.extend(_one(sorted(found, key=lambda e: e.t_first), told_of[stream]))
    return out


def _one(lines: list[Steps], said: list[Pattern]) -> list[Steps]:
    cuts = sorted({p.written - p.back for p in said} | {p.written for p in said})
    pieces, at = [], 0  # (the number of the piece's first step, the piece)
    for e in lines:
        inner = [c - at for c in cuts if at < c < at + e.n]
        for offset, piece in split(e, inner):
            pieces.append((at + offset, piece))
        at += e.n
    kept, counts = [], {}
    for first, e in pieces:
        last = first + e.n  # the piece holds steps first .. last - 1
        if e.origin == OPTIMIZER and any(p.written - p.back <= first and last <= p.written for p in said):
            continue  # taken back: parts of a pattern's first step (a counted step never is: it stays out of rates)
        epoch = sum(p.written <= first for p in said)  # 0: before the first P line, a pattern of one optimizer
        if e.origin == COUNTED and e.counted:
            counts[epoch] = (e.flops / e.counted, e.hw_flops / e.counted)
        kept.append((epoch, e))
    out = []
    for epoch, e in kept:
        if e.origin == OPTIMIZER:  # the count of its own pattern alone (a line a P line cut may hold two patterns')
            model, hardware = counts.get(epoch, (0.0, 0.0))
            e = replace(e, counted=e.n if epoch in counts else 0, flops=model * e.n, hw_flops=hardware * e.n)
        out.append(replace(e, pattern=said[epoch - 1].name) if epoch else e)
    return out


def split(e: Steps, at: list[int]) -> list[tuple[int, Steps]]:
    """A line cut before each of its steps numbered in `at` (0 < a < n): (the number of each piece's first step,
    the piece)."""
    if not at:
        return [(0, e)]
    bounds = [0, *at, e.n]
    span = (e.t_last - e.t_first) / (e.n - 1) if e.n > 1 else 0.0
    out = []
    for a, b in zip(bounds, bounds[1:]):
        share = (b - a) / e.n
        out.append(
            (
                a,
                replace(
                    e,
                    t_first=e.t_first + a * span,
                    t_last=e.t_first + (b - 1) * span,
                    n=b - a,
                    counted=round(e.counted * share),
                    flops=e.flops * share,
                    hw_flops=e.hw_flops * share,
                    bytes=e.bytes * share,
                    tokens=e.tokens * share,
                    bad=round(e.bad * share),
                ),
            )
        )
    return out
