"""Statistics every part uses alike: one quantile rule for every median, p10 and p90 gpubench prints, and the
change of a statistic between two runs of timed rounds with its bootstrap interval (numpy, imported when used)."""

from __future__ import annotations

from dataclasses import dataclass


def quantile(values: list[float], q: float) -> float:
    """Linear-interpolated quantile (q in [0, 1]) of a non-empty list."""
    data = sorted(values)
    pos = q * (len(data) - 1)
    lo = int(pos)
    hi = min(lo + 1, len(data) - 1)
    return data[lo] + (data[hi] - data[lo]) * (pos - lo)


# --- how a statistic of timed rounds changed between two runs, with its uncertainty -----------------

# Quartiles and the trimmed mean see a slowdown of part of the rounds; the mean is trimmed (TRIM of the rounds
# at each end left out) so that a few outlying rounds (a 650 us round against a 14 us median) move none of them.
STATISTICS = ("median", "q1", "q3", "tmean")
TRIM = 0.1
BOOTSTRAP_REPS = 2000
BOOTSTRAP_SEED = 0  # fixed: the same rounds always give the same interval, and so the same verdict


@dataclass(frozen=True)
class Interval:
    """A change in percent (now over before, minus one) and its confidence interval."""

    pct: float
    lo: float
    hi: float


def block_length(n: int) -> int:
    """Rounds per block of the moving-block bootstrap, about n^(1/3): neighbouring rounds that drift together
    (clocks, temperature) are resampled together, so their drift widens the interval instead of hiding."""
    return max(1, round(n ** (1 / 3)))


def _statistics(samples, names) -> dict:
    """Each named statistic of every row of a 2-D array (one row per resample), by one quantile rule."""
    import numpy as np

    q1, median, q3 = np.quantile(samples, [0.25, 0.5, 0.75], axis=-1)  # linear, as quantile() above
    every = {"q1": q1, "median": median, "q3": q3}
    if "tmean" in names:
        n = samples.shape[-1]
        cut = int(TRIM * n)
        every["tmean"] = np.sort(samples, axis=-1)[..., cut : n - cut].mean(axis=-1)
    if "mean" in names:
        every["mean"] = samples.mean(axis=-1)
    return {name: every[name] for name in names}


def _resampled(values, names, reps: int, rng) -> dict:
    """The statistics of `reps` moving-block bootstrap resamples of values, in chunks of bounded memory."""
    import numpy as np

    n, length = len(values), block_length(len(values))
    blocks = -(-n // length)
    chunk = max(1, 2_000_000 // n)
    parts = []
    for start in range(0, reps, chunk):
        k = min(chunk, reps - start)
        first = rng.integers(0, n - length + 1, size=(k, blocks))
        index = (first[:, :, None] + np.arange(length)).reshape(k, -1)[:, :n]
        parts.append(_statistics(values[index], names))
    return {name: np.concatenate([p[name] for p in parts]) for name in names}


def change_intervals(
    before, now, names=STATISTICS, level: float = 0.95, reps: int = BOOTSTRAP_REPS, seed: int = BOOTSTRAP_SEED
) -> dict[str, Interval]:
    """How each statistic of `now` changed from `before` (two lists of positive round times), in percent,
    with its `level` percentile interval from a moving-block bootstrap over rounds: each run resampled on
    its own, `reps` times, from a fixed seed."""
    import numpy as np

    b, x = np.asarray(before, dtype=float), np.asarray(now, dtype=float)
    if min(b.size, x.size) < 2 or not (
        np.all(np.isfinite(b)) and np.all(np.isfinite(x)) and b.min() > 0 and x.min() > 0
    ):
        raise ValueError("a change interval needs two runs of at least two positive, finite round times")
    rng = np.random.default_rng(seed)
    point_b, point_x = _statistics(b, names), _statistics(x, names)
    boot_b, boot_x = _resampled(b, names, reps, rng), _resampled(x, names, reps, rng)
    tail = (1 - level) / 2
    out = {}
    for name in names:
        lo, hi = np.quantile(100 * (boot_x[name] / boot_b[name] - 1), [tail, 1 - tail])
        out[name] = Interval(float(100 * (point_x[name] / point_b[name] - 1)), float(lo), float(hi))
    return out
