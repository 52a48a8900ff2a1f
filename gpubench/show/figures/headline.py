"""The headline figure: what nvidia-smi said for each row, against the work done."""

from __future__ import annotations

import matplotlib.pyplot as plt

from gpubench.metrics import finite, pct
from gpubench.read.summary import row_label

from .common import VALUE_PT, C, empty, kernel_rows, save, short, shown_rows, stamp, title, work_fraction

HEADLINE = [("gpu_util_pct", "nvidia-smi GPU util"), ("sm_active_pct", "SM active"),
            ("tensor_active_pct", "tensor active"), ("work", "work done (MFU, MBU or link share of peak)")]


def draw(summary, samples, manifest, out_dir):
    rows, cut = shown_rows(kernel_rows(summary), "phases" if manifest.get("kind") == "watch" else "rows")
    if not rows:
        return empty(out_dir, "headline", "What nvidia-smi said, against the work done", manifest)
    n, k = len(rows), len(HEADLINE)
    fig, ax = plt.subplots(figsize=(10, 0.62 * n + 2.0))
    h, xmax = 0.8 / k, 118
    notes: dict = {}
    for j, (col, label) in enumerate(HEADLINE):
        for i, row in enumerate(rows):
            y = i + (j - (k - 1) / 2) * h
            name, v = work_fraction(row) if col == "work" else ("", row.get(col))
            if not finite(v):
                ax.text(1, y, pct(v), va="center", fontsize=VALUE_PT - 1, color="#777", style="italic")  # n/a, out of range
                continue
            ax.barh(y, min(v, xmax), height=h, color=C[col], label=label)
            if col in ("gpu_util_pct", "work"):
                _bar_label(ax, v, y, f"{name} {pct(v)}".strip(), xmax)
                notes.setdefault(row_label(row), {})["work" if col == "work" else col] = v
    ax.set_yticks(range(n), [short(row_label(r)) for r in rows])
    ax.invert_yaxis()
    ax.set_xlim(0, xmax)
    ax.set_xlabel("percent (util and activity: share of time; MFU, MBU, link: share of the datasheet peak)")
    handles, labels = ax.get_legend_handles_labels()
    uniq = dict(zip(labels, handles))
    fig.legend(uniq.values(), uniq.keys(), loc="upper center", ncol=4, fontsize=9, frameon=False,
               bbox_to_anchor=(0.5, 0.0))
    ax.set_title(title(manifest, "headline",
                       "nvidia-smi reads 100% for nearly every kernel; the work done is often near zero") +
                 (f"\nShown: {cut}" if cut else ""), fontsize=11, loc="left")
    ax.grid(axis="x", alpha=0.3)
    stamp(fig, manifest)
    return save(fig, out_dir, "headline"), notes


def _bar_label(ax, v, y, text, xmax):
    """After the bar's end; inside it, in white, where the bar runs past the axis."""
    if v < xmax - 12:
        ax.text(v + 1, y, text, va="center", fontsize=VALUE_PT)
    else:
        ax.text(xmax - 1, y, text + " ▸", va="center", ha="right", fontsize=VALUE_PT, color="white",
                fontweight="bold")
