"""A phase's rate so far: each process's steps since a time, in bounded memory, for the live rows.

A live row's steps/s is its window's (gpubench.job.live: the last 15 s or so), and a job's windows differ by a few
percent (an H200 at its power limit: 24.0 to 25.3 steps/s in windows of one training phase whose final row read
24.6). Beside it the live row gives the phase's rate so far, the number its final row will show: the steps a
process stamped from the phase's start (after its trim) to now, over the time between the first and the last,
as a row's rate is taken (gpubench.job.tally).

Each process keeps a checkpoint where a group of its steps began: the time of its first step and the steps it
had stamped before it. A checkpoint comes at most every SPACING_S seconds, and past KEPT of them every other one
is dropped, so a day of steps holds a few thousand: the rate then starts at the first checkpoint at or after the
time asked, a second or so late, and stays exact between the stamps it counts.
"""

from __future__ import annotations

import math
from bisect import bisect_left

SPACING_S = 1.0
KEPT = 4096


class SoFar:
    def __init__(self, spacing_s: float = SPACING_S, kept: int = KEPT):
        self.spacing_s, self.kept = spacing_s, kept
        self._marks: dict = {}  # stream -> ([t_first of a group], [steps stamped before it])
        self._total: dict = {}  # stream -> (steps stamped, t_last of the latest)
        self._spacing: dict = {}  # stream -> its spacing now (doubled each time its checkpoints are halved)

    def take(self, stream, t_first: float, t_last: float, n: int) -> None:
        """A group of n steps of one process, stamped from t_first to t_last, in the order they came."""
        total, _ = self._total.get(stream, (0, t_last))
        times, before = self._marks.setdefault(stream, ([], []))
        spacing = self._spacing.setdefault(stream, self.spacing_s)
        if not times or t_first - times[-1] >= spacing:
            times.append(t_first)
            before.append(total)
            if len(times) > self.kept:
                del times[1::2], before[1::2]
                self._spacing[stream] = 2 * spacing
        self._total[stream] = (total + n, t_last)

    def rate(self, stream, since: float) -> float:
        """The stream's steps per second from its first checkpoint at or after `since` to its latest step; nan
        where fewer than two steps were stamped between."""
        if stream not in self._marks:
            return math.nan
        times, before = self._marks[stream]
        i = bisect_left(times, since)
        total, t_last = self._total[stream]
        if i >= len(times) or total - before[i] < 2 or t_last <= times[i]:
            return math.nan
        return (total - before[i] - 1) / (t_last - times[i])
