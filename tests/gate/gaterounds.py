"""Synthetic rounds for the gate's statistics (test_gate_verdict.py, test_gate_floor.py, test_gate_rounds.py):
an unchanged run's rounds with a little noise, a floor of one value for every statistic, and rounds of one call
each as an H100's timer reads them, in steps of 32 ns."""

import pytest

from gpubench.stats import STATISTICS

np = pytest.importorskip("numpy")


def floors(pct: float) -> dict:
    return {s: pct for s in STATISTICS}


def noise(n=60, sd=0.002, seed=1) -> list[float]:
    return list(1e-3 * (1 + sd * np.random.default_rng(seed).standard_normal(n)))


STEP_US = 0.032  # CUDA events on an H100 and an H200 tick in steps of 32 ns


def quantized(true_us: float, n: int, rng, jitter_us: float = 0.01, outliers_us: tuple = ()) -> list[float]:
    """Rounds of one call per round, as an H100 times them: the call's time plus a little jitter, read in steps
    of the timer, in seconds; outliers_us replace as many rounds spread through the run."""
    x = np.round((true_us + jitter_us * rng.standard_normal(n)) / STEP_US) * STEP_US
    for i, us in enumerate(outliers_us):
        x[(i + 1) * n // (len(outliers_us) + 1)] = us
    return list(x * 1e-6)
