"""Busy work without steps, cut where its kind changes (gpubench.job.activity): the mean SM, tensor and DRAM
activity of any run of seconds, and the cuts where it moves by CHANGE_PTS points or more for MIN_PART_S."""

from __future__ import annotations

import math

BIN_S = 1.0  # activity is read a second at a time
CHANGE_PTS = 15.0  # SM, tensor or DRAM activity moving this many points ...
MIN_PART_S = 5.0  # ... for this long: the work changed
MAX_PARTS = 8  # kinds of busy work told apart at most
BUSY = "busy"


class Signature:
    """The mean SM, tensor and DRAM activity of any run of seconds, from running sums (a day of seconds
    is cut as fast as a minute)."""

    def __init__(self, sums, counts):
        import numpy as np

        zero = np.zeros((1, sums.shape[1]))
        self.sums, self.counts = np.vstack([zero, np.cumsum(sums, 0)]), np.vstack([zero, np.cumsum(counts, 0)])
        self.n = len(sums)

    def mean(self, i: int, j: int):
        """The mean of seconds i to j (excluded) per metric: NaN where none was recorded."""
        import numpy as np

        i, j = max(0, min(i, self.n)), max(0, min(j, self.n))
        c = self.counts[j] - self.counts[i]
        return np.divide(self.sums[j] - self.sums[i], c, out=np.full(c.shape, np.nan), where=c > 0)

    def best_cut(self, i: int, j: int, need: int) -> tuple[float, int | None]:
        """The second k in [i + need, j - need] where the means before and after differ most; (gap, k)."""
        import numpy as np

        ks = np.arange(i + need, j - need + 1)
        if not len(ks):
            return 0.0, None
        with np.errstate(invalid="ignore", divide="ignore"):
            left = (self.sums[ks] - self.sums[i]) / (self.counts[ks] - self.counts[i])
            right = (self.sums[j] - self.sums[ks]) / (self.counts[j] - self.counts[ks])
        gaps = np.abs(left - right)
        gaps[~np.isfinite(gaps)] = -1.0
        best = gaps.max(axis=1)
        k = int(best.argmax())
        return float(best[k]), int(ks[k])


def name_busy(segments: list[list], sig, t0, base: str) -> list[tuple[str, float, float]]:
    """Busy work without steps cut where its kind changes; kinds told apart by name where there are several."""
    parts: list[list] = []
    for name, a, b, _ in segments:
        if name != BUSY:
            parts.append([name, a, b, None])
            continue
        for pa, pb in _split(sig, t0, a, b):
            parts.append([BUSY, pa, pb, _mean(sig, t0, pa, pb)])
    kinds: list[tuple] = []
    for p in parts:
        if p[3] is None:
            continue
        found = next((i for i, k in enumerate(kinds) if _alike(k, p[3])), None)
        if found is None:
            found = len(kinds) if len(kinds) < MAX_PARTS else min(range(len(kinds)), key=lambda i: _gap(kinds[i], p[3]))
            if found == len(kinds):
                kinds.append(p[3])
        p[0] = f"{base} {found + 1}"
    if len(kinds) <= 1:
        for p in parts:
            if p[3] is not None:
                p[0] = base
    return [(name, a, b) for name, a, b, _ in parts]


def _split(sig, t0, a, b, depth: int = 0) -> list[tuple[float, float]]:
    """[a, b] cut at the second where its activity changes most, while that change is CHANGE_PTS or more
    and each side lasts MIN_PART_S; then each side again."""
    i, j = int((a - t0) // BIN_S), int(math.ceil((b - t0) / BIN_S - 1e-9))
    gap, where = sig.best_cut(i, j, int(MIN_PART_S / BIN_S))
    if where is None or gap < CHANGE_PTS or depth >= MAX_PARTS:
        return [(a, b)]
    cut = t0 + where * BIN_S
    return _split(sig, t0, a, cut, depth + 1) + _split(sig, t0, cut, b, depth + 1)


def _mean(sig, t0, a, b) -> tuple:
    return tuple(sig.mean(int((a - t0) // BIN_S), int(math.ceil((b - t0) / BIN_S - 1e-9))).tolist())


def _gap(x: tuple, y: tuple) -> float:
    """The largest difference of two kinds' activities, in points (0 where neither was recorded)."""
    return max((abs(p - q) for p, q in zip(x, y) if math.isfinite(p) and math.isfinite(q)), default=0.0)


def _alike(x: tuple, y: tuple) -> bool:
    return _gap(x, y) < CHANGE_PTS
