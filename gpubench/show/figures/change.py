"""The figure of `gpubench compare`: for each phase or scenario the runs share, what nvidia-smi said beside the
work done, and each run's rate against the first run's with its p10–p90 range: the rate can move while
GPU-Util does not."""

from __future__ import annotations

import math
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np

from gpubench.metrics import finite

from .common import save

COLOURS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd", "#8c564b", "#e377c2")


def draw(c: dict, work, rate, manifest: dict, out_dir: Path) -> list[Path]:
    """c: gpubench.show.compare_runs.compared(); work(row) -> (label, %), rate(row, job) -> (ms, p10, p90)."""
    # top to bottom in the table's order; a row with neither work nor a rate in any run (start-up, teardown) is
    # in the table, not drawn
    names = [n for n in c["rows"] if any(finite(work(r)[1]) or finite(rate(r, c["job"])[0]) for r in c["rows"][n])]
    names = (names or list(c["rows"]))[::-1]
    runs = len(c["names"])
    height = max(2.8, 1.4 + 0.32 * runs * len(names))
    fig, axes = plt.subplots(1, 3, figsize=(12, height), sharey=True, gridspec_kw={"wspace": 0.08})
    y = np.arange(len(names))
    bar = 0.8 / runs
    for k in range(runs):
        at = y + (runs - 1 - 2 * k) * bar / 2
        rows = [c["rows"][n][k] for n in names]
        colour, letter = COLOURS[k % len(COLOURS)], chr(ord("A") + k)
        util = [r.get("gpu_util_pct") if finite(r.get("gpu_util_pct")) else math.nan for r in rows]
        done = [work(r)[1] for r in rows]
        axes[0].barh(at, util, height=bar, color=colour, label=f"{letter}: {c['names'][k]}")
        axes[1].barh(at, [v if finite(v) else math.nan for v in done], height=bar, color=colour)
        base = [rate(c["rows"][n][0], c["job"], c["per_token"][n]) for n in names]
        mine = [rate(r, c["job"], c["per_token"][n]) for r, n in zip(rows, names)]
        # the rate against A's: A's time over this run's (1.0 for A itself), its range from the p90 and p10 times
        rel = [b[0] / m[0] if finite(b[0]) and finite(m[0]) and m[0] > 0 else math.nan for b, m in zip(base, mine)]
        lo = [r - b[0] / m[2] if finite(m[2]) and m[2] > 0 else 0.0 for r, b, m in zip(rel, base, mine)]
        hi = [b[0] / m[1] - r if finite(m[1]) and m[1] > 0 else 0.0 for r, b, m in zip(rel, base, mine)]
        axes[2].barh(at, rel, height=bar, color=colour, xerr=[np.nan_to_num(lo), np.nan_to_num(hi)], capsize=2)
    axes[0].set_xlim(0, 105)
    axes[0].set_xlabel("GPU-Util, % (median)")
    axes[1].set_xlim(0, 105)
    axes[1].set_xlabel("work done, % of peak (MFU or MBU)")
    axes[2].axvline(1.0, color="#555", lw=0.8)
    axes[2].set_xlabel("rate (steps or tokens a second), A's = 1; bars p10–p90", fontsize=9)
    axes[0].set_yticks(y, names, fontsize=9)
    for ax in axes:
        ax.grid(axis="x", alpha=0.3)
    fig.legend(
        loc="lower left", bbox_to_anchor=(0.01, 1.0 - 0.55 / height), ncol=min(runs, 3), fontsize=8.5, frameon=False
    )
    fig.suptitle(
        "Each run beside the first: what nvidia-smi said, the work done, the rate",
        x=0.01,
        ha="left",
        y=1.0 - 0.1 / height,
    )
    fig.subplots_adjust(top=1.0 - 0.85 / height, bottom=0.7 / height, left=0.16, right=0.98)
    return save(fig, manifest, out_dir, "change")
