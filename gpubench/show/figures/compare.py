"""The compare figure: each implementation against its baseline."""

from __future__ import annotations

import math

import matplotlib.pyplot as plt

from gpubench.metrics import finite, fmt, fmt_value, pct
from gpubench.read.summary import row_label

from .common import VALUE_PT, C, empty, save, short

# The panels of a group, by the bound of its rows: (title, column, scale, format of one value).
# Bytes over the host link are never drawn on a DRAM axis.
TIME = ("time per call, ms", "kernel_ms", 1.0, "{:.3g}")
UTIL = ("nvidia-smi GPU util", "gpu_util_pct", 1.0, pct)
COMPARE = {
    "dram": [
        TIME,
        ("DRAM traffic per call, GB", "traffic_per_call", 1e-9, "{:.3g}"),
        ("useful GB/s", "gbps", 1.0, "{:.0f}"),
        UTIL,
    ],
    "compute": [
        TIME,
        ("achieved TFLOP/s", "tflops", 1.0, "{:.0f}"),
        ("MFU (of the datasheet peak)", "mfu_pct", 1.0, pct),
        UTIL,
    ],
    "link": [TIME, ("host link GB/s", "link_gbps", 1.0, "{:.3g}"), ("link share", "link_pct", 1.0, pct), UTIL],
    "both": [TIME, ("tokens/s", "tokens_per_s", 1.0, "{:,.0f}"), ("useful GB/s", "gbps", 1.0, "{:.0f}"), UTIL],
}


def baseline_of(row) -> str | None:
    b = row.get("baseline")
    return b if isinstance(b, str) and b else None


def baselines_of(summary) -> set[str]:
    return {baseline_of(r) for r in summary} - {None}


def compare_groups(summary) -> list[list[dict]]:
    """Per family, the rows that are a baseline or name one, in suite order."""
    baselines = baselines_of(summary)
    groups: dict[str, list[dict]] = {}
    for r in summary:
        if r["scenario"] in baselines or baseline_of(r):
            groups.setdefault(r["family"], []).append(r)
    return [g for g in groups.values() if len(g) > 1]


def draw(summary, samples, manifest, out_dir):
    groups = compare_groups(summary)
    if not groups:
        return empty(out_dir, "compare", "Implementations against their baselines", manifest)
    baselines = baselines_of(summary)
    fig, axes = plt.subplots(len(groups), 4, figsize=(12, 3.7 * len(groups)), squeeze=False)
    notes: dict = {}
    for axrow, rows in zip(axes, groups):
        _compare_row(axrow, rows, baselines, notes, (manifest.get("peaks") or {}).get("measured") or {})
    best = max(
        (r for g in groups for r in g if finite(r.get("speedup_vs_baseline")) and r["speedup_vs_baseline"] > 0),
        key=lambda r: r["speedup_vs_baseline"],
        default=None,
    )  # a speed-up of 0 is no measurement
    finding = "Same utilization, different speed"
    if best:
        x = best["speedup_vs_baseline"]
        pace = f"runs {x:.1f}x faster than" if x >= 1 else f"takes {1 / x:.1f}x as long as"
        finding = (
            f"Every variant reads ~{fmt_value('gpu_util_pct', best.get('gpu_util_pct'))} busy, yet "
            f"{best['scenario']} {pace} {best['baseline']}"
        )
    fig.suptitle(finding, fontsize=11, x=0.01, ha="left")
    fig.tight_layout()
    return save(fig, manifest, out_dir, "compare"), notes


def _compare_row(axrow, rows, baselines, notes, measured):
    panels = COMPARE.get(rows[0].get("bound"), [TIME, UTIL])
    for ax in axrow[len(panels) :]:
        ax.axis("off")
    for ax, (title, col, scale, form) in zip(axrow, panels):
        vals = [r.get(col) * scale if finite(r.get(col)) else math.nan for r in rows]
        colors = [C["baseline"] if r["scenario"] in baselines else C["candidate"] for r in rows]
        known = [v for v in vals if finite(v)]
        bars = ax.bar(range(len(rows)), [v if finite(v) else 0 for v in vals], color=colors)
        read_peak = measured.get("dram_read") if any(r.get("roof") == "read" for r in rows) else None
        peaks = [p / 1e9 for p in (measured.get("dram"), read_peak) if col == "gbps" and p]
        top = max([*known, *peaks, 0]) * 1.2 or 1
        for b, v, r in zip(bars, vals, rows):
            text = (form(v) if callable(form) else form.format(v)) if finite(v) else fmt(v, "{}")  # n/a, out of range
            if known:
                # a value whose label would sit on a peak's line is written inside its bar, under the line
                inside = finite(v) and any(0 <= p - v < 0.08 * top or 0 <= v - p < 0.04 * top for p in peaks)
                ax.text(
                    b.get_x() + b.get_width() / 2,
                    min(v, *[p for p in peaks if p >= v - 0.04 * top]) if inside else b.get_height(),
                    text,
                    ha="center",
                    va="top" if inside else "bottom",
                    fontsize=VALUE_PT,
                    color="white" if inside else "black",
                )
            notes.setdefault(row_label(r), {})[col] = r.get(col)
        for peak, style, color in zip(peaks, ("--", ":"), ("#444", "#17becf")):
            ax.axhline(peak, color=color, ls=style, lw=1)
        if known:
            ax.set_ylim(0, top)
            if max(known) >= 1e5:  # tokens/s: "1.25M" on the axis, never an offset over the title
                ax.yaxis.set_major_formatter(lambda y, _: f"{y / 1e6:g}M" if y else "0")
        else:
            ax.set_yticks([])
            ax.text(
                0.5,
                0.6,
                "not known for these\nimplementations",
                transform=ax.transAxes,
                ha="center",
                fontsize=VALUE_PT,
                color="#777",
            )
        # upright: slanted names of neighbouring bars run into each other
        ax.set_xticks(range(len(rows)), [short(row_label(r)) for r in rows], rotation=90, fontsize=8.5)
        # the peaks' lines are named in the title, where no bar's value label can run into the name
        lines = (["dashed: copy peak"] if col == "gbps" and measured.get("dram") else []) + (
            ["dotted: read peak"] if col == "gbps" and read_peak else []
        )
        ax.set_title("\n".join([title, *lines]), fontsize=10)
    key = "(red: baseline)" if any(r["scenario"] in baselines for r in rows) else "(its baseline not run)"
    axrow[0].set_ylabel(f"{rows[0]['family']}\n{key}".strip(), fontsize=10)
