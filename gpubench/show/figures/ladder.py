"""The ladder figure: every rung of the metric ladder per row, and the work done beside them."""

from __future__ import annotations

import matplotlib.pyplot as plt

from gpubench import metrics
from gpubench.metrics import BY_COLUMN, finite, pct
from gpubench.read.summary import row_label

from .common import VALUE_PT, empty, kernel_rows, save, short, shown_rows, title, work_fraction

# the ladder's sampled rungs (metrics.LADDER) under two-line headers, then the ground truth
LADDER = [(BY_COLUMN[c].header.replace(" ", "\n", 1), c) for c in metrics.LADDER] + [
    ("work done\n(ground truth)", None)
]


def draw(summary, samples, manifest, out_dir):
    from matplotlib.colors import Normalize

    rows, cut = shown_rows(kernel_rows(summary), "phases" if manifest.get("kind") == "watch" else "rows")
    if not rows:
        return empty(out_dir, "ladder", "Which metric each kernel fools", manifest)
    fig, ax = plt.subplots(figsize=(9.5, 0.45 * len(rows) + 1.9))
    cmap, norm = plt.get_cmap("YlOrRd"), Normalize(0, 100)
    notes: dict = {}
    for i, r in enumerate(rows):
        for j, (_, col) in enumerate(LADDER):
            label, v = work_fraction(r) if col is None else ("", r.get(col))
            if finite(v):
                ax.add_patch(plt.Rectangle((j, i), 1, 1, color=cmap(norm(min(v, 100)))))
                ax.text(
                    j + 0.5,
                    i + 0.5,
                    f"{label} {pct(v)}".strip(),
                    ha="center",
                    va="center",
                    fontsize=VALUE_PT,
                    color="white" if v > 60 else "black",
                )
            else:
                ax.add_patch(plt.Rectangle((j, i), 1, 1, facecolor="#eee", hatch="//", edgecolor="#ccc"))
                # n/a, or out of range
                ax.text(j + 0.5, i + 0.5, pct(v), ha="center", va="center", fontsize=VALUE_PT, color="#777")
            notes.setdefault(row_label(r), {})[col or "work"] = v
    ax.set_xlim(0, len(LADDER))
    ax.set_ylim(len(rows), 0)
    ax.set_xticks([j + 0.5 for j in range(len(LADDER))], [h for h, _ in LADDER], fontsize=9)
    ax.xaxis.tick_top()
    ax.set_yticks([i + 0.5 for i in range(len(rows))], [short(row_label(r)) for r in rows], fontsize=9)
    ax.axvline(len(LADDER) - 1, color="black", lw=2)
    ax.set_title(
        title(
            manifest,
            "ladder",
            "Each rung of the ladder is fooled by some kernel; only the last column measures work done",
        )
        + (f"\nShown: {cut}" if cut else ""),
        fontsize=11,
        loc="left",
        pad=38,
    )
    fig.colorbar(plt.cm.ScalarMappable(norm=norm, cmap=cmap), ax=ax, fraction=0.03, pad=0.02, label="percent")
    return save(fig, manifest, out_dir, "ladder"), notes
