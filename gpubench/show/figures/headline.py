"""The headline figure: what nvidia-smi said for each row, against the work done.

Columns, not rows: one group of bars per scenario or phase, side by side, so that the figure is wide and
short and a report can show all of it, legend included, in its first screen. The legend sits above the
bars, under the title."""

from __future__ import annotations

import matplotlib.pyplot as plt
from matplotlib.patches import Patch

from gpubench.metrics import finite, pct
from gpubench.read.summary import row_label

from .common import VALUE_PT, C, empty, kernel_rows, save, short, shown_rows, title, work_fraction

HEADLINE = [
    ("gpu_util_pct", "nvidia-smi GPU util"),
    ("sm_active_pct", "SM active"),
    ("tensor_active_pct", "tensor active"),
    ("work", "work done (MFU, MBU or link share of peak)"),
]
TOP = 100  # bars past it (a link share over 100%) are cut at it, their label inside the bar
YMAX = 135  # room above a full bar for its label, written upright
NOT_RECORDED = "hatched stub: not recorded in this run"


def _value(row, col):
    return work_fraction(row) if col == "work" else ("", row.get(col))


def draw(summary, samples, manifest, out_dir):
    kind = "phases" if manifest.get("kind") == "watch" else "rows"
    drawable = kernel_rows(summary)
    # a row with none of the four values has nothing to show: left out, and named in one line
    blank = [r for r in drawable if not any(finite(_value(r, col)[1]) for col, _ in HEADLINE)]
    rows, cut = shown_rows([r for r in drawable if r not in blank], kind)
    if not rows:
        return empty(out_dir, "headline", "What nvidia-smi said, against the work done", manifest)
    n, k = len(rows), len(HEADLINE)
    # wide and short at any count: a report shows it whole in its first screen, at a size that reads
    width_in = min(max(0.62 * n + 2.5, 10.0), 18.0)
    fig, ax = plt.subplots(figsize=(width_in, 4.2))
    w = 0.84 / k
    notes: dict = {}
    stubs = False
    for j, (col, _) in enumerate(HEADLINE):
        for i, row in enumerate(rows):
            x = i + (j - (k - 1) / 2) * w
            name, v = _value(row, col)
            if not finite(v):  # n/a, or out of range: a hatched stub, never a bar of 0
                ax.bar(x, 4, width=w, bottom=0, facecolor="none", edgecolor=C[col], hatch="////", lw=0.6)
                stubs = True
                continue
            ax.bar(x, min(v, TOP), width=w, color=C[col])
            if col in ("gpu_util_pct", "work"):
                # the work's label starts above the tensor bar beside it, where that one is taller
                beside = row.get("tensor_active_pct") if col == "work" else None
                _bar_label(ax, v, x, f"{name} {pct(v)}".strip(), max(v, beside) if finite(beside) else v)
                notes.setdefault(row_label(row), {})["work" if col == "work" else col] = v
    ax.set_xticks(
        range(n), [short(row_label(r)) for r in rows], rotation=30, ha="right", rotation_mode="anchor", fontsize=9
    )
    ax.set_xlim(-0.6, n - 0.4)
    ax.set_ylim(0, YMAX)
    ax.set_yticks(range(0, TOP + 1, 20))
    ax.set_ylabel("percent\n(util, activity: of time;\nMFU, MBU, link: of peak)", fontsize=9)
    ax.grid(axis="y", alpha=0.3)
    ax.spines[["top", "right"]].set_visible(False)
    handles = [Patch(color=C[col], label=label) for col, label in HEADLINE]
    if stubs:
        handles.append(Patch(facecolor="none", edgecolor="#777", hatch="////", label=NOT_RECORDED))
    ncol = len(handles) if width_in >= 13 else 3 if width_in >= 10 else 2  # the legend no wider than the bars
    ax.legend(
        handles=handles,
        loc="lower left",
        bbox_to_anchor=(0, 1.0),
        ncol=ncol,
        fontsize=9,
        frameon=False,
        borderaxespad=0.3,
        handlelength=1.4,
        columnspacing=1.2,
    )
    legend_rows = -(-len(handles) // ncol)
    said = [f"Shown: {cut}"] if cut else []
    if blank:
        names = ", ".join(short(row_label(r)) for r in blank[:6]) + (
            f" and {len(blank) - 6:,} more" if len(blank) > 6 else ""
        )
        said.append(f"Left out, nothing recorded: {names}")
    ax.set_title(
        "\n".join(
            [
                title(
                    manifest,
                    "headline",
                    "nvidia-smi reads 100% for nearly every kernel; the work done is often near zero",
                ),
                *said,
            ]
        ),
        fontsize=11,
        loc="left",
        pad=8 + 14 * legend_rows,
    )
    return save(fig, manifest, out_dir, "headline"), notes


def _bar_label(ax, v, x, text, base):
    """Upright above base (the bar's end, or a taller neighbour's); inside the bar, in white, where it runs
    past TOP."""
    if v <= TOP:
        ax.annotate(
            text,
            (x, min(base, TOP)),
            xytext=(0, 2),
            textcoords="offset points",
            rotation=90,
            ha="center",
            va="bottom",
            fontsize=VALUE_PT,
        )
    else:
        ax.annotate(
            text + " ▴",
            (x, TOP),
            xytext=(0, -3),
            textcoords="offset points",
            rotation=90,
            ha="center",
            va="top",
            fontsize=VALUE_PT,
            color="white",
            fontweight="bold",
        )
