"""The energy of a window: the joules the energy counter gives between two times, the mean power it reads, and
the energy per call and useful work per joule of a summary row (gpubench.read.summary's energy columns).
numpy loads on the first call, not with this module."""

from __future__ import annotations

import math

from gpubench.metrics import finite


def energy_between(rows, t_start: float, t_end: float) -> tuple[float, float]:
    """Joules the energy counter gives between two times, read on one GPU's rows (in time order), and the
    seconds of [t_start, t_end] its readings cover: the counter is read at each row's end and interpolated
    between readings at the window's two ends; where the window reaches past the first or last reading (the
    recording's own ends), up to that reading. (NaN, 0) where no two readings bound any of it."""
    import numpy as np

    from gpubench.read.samples import as_samples

    rows = as_samples(rows)
    if not len(rows) or not rows.has("energy_j"):
        return math.nan, 0.0
    energy, ends = rows.col("energy_j"), rows.col("t_end_s")
    known = np.isfinite(energy) & np.isfinite(ends)
    energy, ends = energy[known], ends[known]
    a, b = max(t_start, ends[0]) if len(ends) else t_start, min(t_end, ends[-1]) if len(ends) else t_end
    if len(ends) < 2 or not b > a:
        return math.nan, 0.0
    return float(np.interp(b, ends, energy) - np.interp(a, ends, energy)), b - a


def energy_power_w(window) -> float:
    """Mean power over the window from the energy counter: exact where the sampled power trails by a second."""
    import numpy as np

    from gpubench.read.samples import as_samples

    window = as_samples(window)
    energy, ends = window.col("energy_j"), window.col("t_end_s")
    known = np.flatnonzero(np.isfinite(energy))
    if len(known) < 2 or ends[known[-1]] <= ends[known[0]]:
        return math.nan
    first, last = known[0], known[-1]
    return float((energy[last] - energy[first]) / (ends[last] - ends[first]))


def energy_used_j(window) -> float:
    """What the energy counter rose by from the window's first row to its last (Samples, or row dicts)."""
    import numpy as np

    from gpubench.read.samples import as_samples

    window = as_samples(window)
    if not len(window) or not window.has("energy_j"):
        return math.nan
    energy = window.col("energy_j")
    known = energy[np.isfinite(energy)]
    return float(known[-1] - known[0]) if len(known) >= 2 else math.nan


def per_joule(row: dict) -> dict:
    """Energy per call and useful work per joule, from the window's mean power and the time per call.

    The calls run back to back, so a call's energy is the mean power times its GPU time (idle power
    included: it is what the GPU drew to do the work). Work per joule follows the ground truth's rules:
    useful GB per joule where MBU or the link share applies, TFLOP per kJ where MFU does.
    """
    nan = math.nan
    power, ms = row.get("power_w_energy", nan), row.get("kernel_ms", nan)
    j = power * ms / 1e3 if finite(power) and finite(ms) and ms > 0 else nan
    bound, tokens = row.get("bound"), row.get("tokens_per_call", nan)

    def per_j(amount, applies):
        return amount / j if applies and finite(amount) and finite(j) and j > 0 else nan

    return {
        "j_per_call": j,
        "gb_per_j": per_j(row.get("bytes_per_call", nan) / 1e9, bound in ("dram", "both", "link")),
        "tflop_per_kj": per_j(row.get("flops_per_call", nan) / 1e9, bool(row.get("unit")) and bound != "link"),
        "tokens_per_j": per_j(tokens, finite(tokens) and tokens > 0),
        "j_per_token": j / tokens if finite(tokens) and tokens > 0 else nan,
    }


def joules(row: dict) -> dict:
    """The row's energy columns as its summary holds them, or computed from its power and time per call
    where the run was summarized before these columns existed."""
    return {k: row[k] if k in row else v for k, v in per_joule(row).items()}
