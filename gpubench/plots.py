"""Teaching figures from a run directory's files alone: headline, ladder, timeline, roofline, compare.

Every figure states its finding in the title, carries the GPU and date in a corner (and PARTIAL RUN
where the run did not complete), labels its axes with units, and marks a metric the run could not
record as unavailable instead of drawing it as 0. Legends sit outside the data, labels inside their
axes, value labels at VALUE_PT or more, and every percentage is written by metrics.pct. Which row is a
baseline, and which ground truth a kernel has (MFU, MBU, link), comes from the summary's own columns: no
scenario name is written here. Each draw function returns the numbers it annotated, so tests can hold
them against summary.csv. plot_run draws every figure into a hidden folder and moves them into place
only when all succeeded; files carry no date and no library version, so re-plotting an unchanged run
changes no byte.
"""

from __future__ import annotations

import math
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from gpubench import metrics  # noqa: E402
from gpubench.metrics import BY_COLUMN, finite, fmt_value, pct  # noqa: E402
from gpubench.rundir import SUMMARY_MISSING, partial  # noqa: E402
from gpubench.summary import row_label  # noqa: E402

matplotlib.rcParams.update({"svg.hashsalt": "gpubench", "font.size": 10})
BYTES_NOTE = "useful bytes: each input read once, each output written once"
C = {"gpu_util_pct": "#d62728", "smi_gpu_util_pct": "#ff9896", "sm_active_pct": "#ff7f0e",
     "sm_occupancy_pct": "#bcbd22", "tensor_active_pct": "#9467bd", "dram_active_pct": "#1f77b4",
     "fp32_active_pct": "#8c564b", "work": "#2ca02c", "baseline": "#d62728", "candidate": "#2ca02c"}
NO_DATA = "no scenarios of this kind in this run"
# A watch run (gpubench watch) is one job's phases, not the suite's kernels: its figures say so.
WATCH_TITLES = {
    "headline": "What nvidia-smi said in each phase of the job, against the work done (MFU)",
    "ladder": "The metric ladder of each phase of the job; only the last column measures work done",
    "timeline": "The job over time: GPU-Util beside SM activity, the pipes and each phase's TFLOP/s",
}


def title(manifest, figure: str, suite_title: str) -> str:
    return WATCH_TITLES[figure] if manifest.get("kind") == "watch" else suite_title


NO_SUMMARY = "no summary: the run stopped before it wrote summary.csv"
VALUE_PT = 9  # value labels: readable where the README shows a figure about 900 pixels wide
# Fixed metadata: no date, no library version, so re-plotting an unchanged run changes no byte.
METADATA = {"png": {"Software": "gpubench"}, "svg": {"Date": None, "Creator": "gpubench"}}


def stamp(fig, manifest):
    gpu = manifest.get("gpu", {}).get("name", "unknown GPU")
    date = (manifest.get("start_wall") or "")[:10]
    why = partial(manifest)
    text = f"{gpu} · {date} · gpubench" + (f" · PARTIAL RUN: it {why}" if why else "")
    fig.text(0.995, 0.005, text, ha="right", va="bottom", fontsize=8, color="#b22222" if why else "#666")


def save(fig, out_dir: Path, name: str) -> list[Path]:
    """PNG and SVG, each written to a temporary name and renamed into place."""
    paths = []
    for ext, kw in (("png", {"dpi": 130}), ("svg", {})):
        final = out_dir / f"{name}.{ext}"
        tmp = out_dir / f".{name}.tmp.{ext}"
        fig.savefig(tmp, bbox_inches="tight", metadata=METADATA[ext], **kw)
        os.replace(tmp, final)
        paths.append(final)
    plt.close(fig)
    return paths


def work_fraction(row) -> tuple[str, float]:
    """The rung that tells the truth for this row: link share, NVLink share, MBU, or MFU, by its bound."""
    bound = row.get("bound")
    if bound == "link":
        return "link", row.get("link_pct", math.nan)
    if bound == "interconnect":
        return "NVLink", row.get("nvlink_pct", math.nan)
    if bound == "dram":
        return "MBU", row.get("mbu_pct", math.nan)
    return "MFU", row.get("mfu_pct", math.nan)


def kernel_rows(summary):
    return [r for r in summary if r.get("bound") != "none" or finite(r.get("kernel_ms"))]


def empty(out_dir, name, title, manifest):
    """A figure with nothing to draw says why, instead of a confident title over empty axes."""
    fig, ax = plt.subplots(figsize=(7, 2))
    ax.axis("off")
    message = NO_SUMMARY if SUMMARY_MISSING in manifest.get("read_notes", []) else NO_DATA
    ax.text(0.5, 0.5, message, ha="center", va="center", fontsize=11, color="#666")
    ax.set_title(title, fontsize=10, loc="left")
    stamp(fig, manifest)
    return save(fig, out_dir, name), {"empty": message}


# --- 1. headline -----------------------------------------------------------------------------------

HEADLINE = [("gpu_util_pct", "nvidia-smi GPU util"), ("sm_active_pct", "SM active"),
            ("tensor_active_pct", "tensor active"), ("work", "work done (MFU, MBU or link share of peak)")]


def headline(summary, samples, manifest, out_dir):
    rows = kernel_rows(summary)
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
                ax.text(1, y, "n/a", va="center", fontsize=VALUE_PT - 1, color="#777", style="italic")
                continue
            ax.barh(y, min(v, xmax), height=h, color=C[col], label=label)
            if col in ("gpu_util_pct", "work"):
                _bar_label(ax, v, y, f"{name} {pct(v)}".strip(), xmax)
                notes.setdefault(row_label(row), {})["work" if col == "work" else col] = v
    ax.set_yticks(range(n), [row_label(r) for r in rows])
    ax.invert_yaxis()
    ax.set_xlim(0, xmax)
    ax.set_xlabel("percent (util and activity: share of time; MFU, MBU, link: share of the datasheet peak)")
    handles, labels = ax.get_legend_handles_labels()
    uniq = dict(zip(labels, handles))
    fig.legend(uniq.values(), uniq.keys(), loc="upper center", ncol=4, fontsize=9, frameon=False,
               bbox_to_anchor=(0.5, 0.0))
    ax.set_title(title(manifest, "headline",
                       "nvidia-smi reads 100% for nearly every kernel; the work done is often near zero"),
                 fontsize=11, loc="left")
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


# --- 2. ladder -------------------------------------------------------------------------------------

# the ladder's sampled rungs (metrics.LADDER) under two-line headers, then the ground truth
LADDER = [(BY_COLUMN[c].header.replace(" ", "\n", 1), c) for c in metrics.LADDER] + [("work done\n(ground truth)", None)]


def ladder(summary, samples, manifest, out_dir):
    from matplotlib.colors import Normalize

    rows = kernel_rows(summary)
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
                ax.text(j + 0.5, i + 0.5, f"{label} {pct(v)}".strip(), ha="center", va="center",
                        fontsize=VALUE_PT, color="white" if v > 60 else "black")
            else:
                ax.add_patch(plt.Rectangle((j, i), 1, 1, facecolor="#eee", hatch="//", edgecolor="#ccc"))
                ax.text(j + 0.5, i + 0.5, "n/a", ha="center", va="center", fontsize=VALUE_PT, color="#777")
            notes.setdefault(row_label(r), {})[col or "work"] = v
    ax.set_xlim(0, len(LADDER))
    ax.set_ylim(len(rows), 0)
    ax.set_xticks([j + 0.5 for j in range(len(LADDER))], [h for h, _ in LADDER], fontsize=9)
    ax.xaxis.tick_top()
    ax.set_yticks([i + 0.5 for i in range(len(rows))], [row_label(r) for r in rows], fontsize=9)
    ax.axvline(len(LADDER) - 1, color="black", lw=2)
    ax.set_title(title(manifest, "ladder",
                       "Each rung of the ladder is fooled by some kernel; only the last column measures work done"),
                 fontsize=11, loc="left", pad=38)
    fig.colorbar(plt.cm.ScalarMappable(norm=norm, cmap=cmap), ax=ax, fraction=0.03, pad=0.02, label="percent")
    stamp(fig, manifest)
    return save(fig, out_dir, "ladder"), notes


# --- 3. timeline -----------------------------------------------------------------------------------

PANELS = [("utilization, %", ["gpu_util_pct", "smi_gpu_util_pct"]), ("SM, %", ["sm_active_pct", "sm_occupancy_pct"]),
          ("pipes and DRAM, %", ["tensor_active_pct", "fp32_active_pct", "dram_active_pct"])]
# Both rows read the same counter: NVML's line is drawn thin on top of the nvidia-smi process's wide one.
LINE_LABELS = {"gpu_util_pct": "GPU util, through NVML",
               "smi_gpu_util_pct": "GPU util, nvidia-smi process\n(wide light line)"}
PHASE_LABELS = {"start": "start-up", "peaks": "peak measurement"}


def timeline(summary, samples, manifest, out_dir):
    gpu = manifest.get("gpu", {}).get("nvml_index", summary[0].get("gpu") if summary else 0)
    uuid = manifest.get("gpu", {}).get("uuid")  # under torchrun NVML indices repeat from node to node
    rows = [r for r in samples if r.get("uuid") == uuid] or [r for r in samples if r.get("gpu") == gpu]
    if not rows:
        return empty(out_dir, "timeline", "The run over time", manifest)
    t0 = rows[0]["t_start_s"]
    t = [r["t_end_s"] - t0 for r in rows]
    fig, axes = plt.subplots(5, 1, figsize=(11, 10.5), sharex=True,
                             gridspec_kw={"hspace": 0.12, "height_ratios": [0.75, 1, 1, 1, 1]})
    fig.subplots_adjust(top=0.95, bottom=0.06)
    names, panels = axes[0], axes[1:]
    missing = []
    for ax, (ylabel, cols) in zip(panels, PANELS):
        for col in cols:
            ys = [r.get(col, math.nan) for r in rows]
            label = LINE_LABELS.get(col, BY_COLUMN[col].label)
            if any(finite(y) for y in ys):
                wide = col.startswith("smi_")
                ax.plot(t, ys, color=C[col], lw=4.5 if wide else 1.2, alpha=0.6 if wide else 1,
                        zorder=1 if wide else 3, label=label)
            else:
                missing.append(col)
                ax.plot([], [], color=C[col], lw=1, ls=":", label=f"{label}: unavailable in this run")
        ax.set_ylim(-3, 108)
        ax.set_ylabel(ylabel, fontsize=9)
        ax.legend(loc="upper left", bbox_to_anchor=(1.005, 1.0), fontsize=8.5, frameon=False)
    ax = panels[3]
    for r in summary:
        if finite(r.get("tflops")) and finite(r.get("t_start")):
            ax.hlines(r["tflops"], r["t_start"] - t0, r["t_end"] - t0, color=C["work"], lw=2.5)
    ax.set_ylabel("achieved TFLOP/s", fontsize=9)
    ax.set_xlabel("time since the recording started, s")
    ax.set_xlim(0, max(t) * 1.005)
    labelled = _shade_phases(panels, names, rows, t0)
    fig.suptitle(title(manifest, "timeline", "GPU-Util sits at 100% through almost every phase; SM activity, "
                                             "pipes and TFLOP/s tell them apart"),
                 fontsize=11, x=0.01, ha="left", y=0.995)
    stamp(fig, manifest)
    return save(fig, out_dir, "timeline"), {"missing": missing, "phases": labelled}


def phase_spans(rows) -> list[tuple[str, float, float]]:
    """Consecutive runs of one phase label: (phase, start, end)."""
    spans: list[list] = []
    for r in rows:
        if spans and spans[-1][0] == r["phase"]:
            spans[-1][2] = r["t_end_s"]
        else:
            spans.append([r["phase"], r["t_start_s"], r["t_end_s"]])
    return [tuple(s) for s in spans]


def _shade_phases(panels, names, rows, t0) -> list[str]:
    """Shade each named phase across the panels and write its name, upright, in the row above them;
    a name too close to the one before moves right so that none overlaps."""
    named = [s for s in phase_spans(rows) if s[0] != "gap" and not s[0].startswith("setup:")]
    names.axis("off")
    names.set_ylim(0, 1)
    lo, hi = panels[0].get_xlim()
    width_pt = names.get_position().width * names.figure.get_figwidth() * 72
    step = 11.5 / width_pt * (hi - lo)  # one line of 8.5 pt text, in seconds
    last, labels = -math.inf, []
    for k, (phase, a, b) in enumerate(named):
        for ax in panels:
            ax.axvspan(a - t0, b - t0, color="#000", alpha=0.07 if k % 2 else 0.035, lw=0)
        x = max((a + b) / 2 - t0, last + step)
        label = PHASE_LABELS.get(phase, phase)
        names.text(x, 0.02, label, rotation=90, ha="center", va="bottom", fontsize=8.5)
        last = x
        labels.append(label)
    return labels


# --- 4. roofline -----------------------------------------------------------------------------------

# A dot's colour says which ground truth judges the kernel.
DOTS = {"compute": (C["tensor_active_pct"], "compute-bound kernel, judged by MFU"),
        "dram": (C["dram_active_pct"], "memory-bound kernel, judged by MBU")}


def roofline(summary, samples, manifest, out_dir):
    peaks = manifest.get("peaks") or {}
    measured, sheet = peaks.get("measured") or {}, peaks.get("datasheet") or {}
    rows = [r for r in kernel_rows(summary) if r.get("bound") in DOTS and r.get("bytes_per_call")
            and finite(r.get("tflops"))]
    if not rows:
        return empty(out_dir, "roofline", "Each kernel against this GPU's roofs", manifest)
    dots = [r for r in rows if r.get("flops_per_call")]
    flat = [r for r in rows if not r.get("flops_per_call")]  # intensity 0: no place on log axes
    fig, ax = plt.subplots(figsize=(9.5, 6.5))
    bw = measured.get("dram") or sheet.get("dram")
    xs = [10 ** (i / 10) for i in range(-40, 51)]
    top = 1.0
    for key, label, style in (("bf16_tensor", "bf16 tensor", "-"), ("fp32", "FP32, no tensor cores", "--")):
        peak = measured.get(key) or sheet.get(key)
        if peak and bw:
            src = "measured" if measured.get(key) else "datasheet"
            ax.plot(xs, [min(peak, bw * x) / 1e12 for x in xs], style, color="#444", lw=1,
                    label=f"roof: {label} {peak / 1e12:.0f} TFLOP/s ({src}), DRAM {bw / 1e12:.2f} TB/s")
            top = max(top, peak / 1e12)
    intensity = [r["flops_per_call"] / r["bytes_per_call"] for r in dots]
    ax.set(xscale="log", yscale="log", xlim=(min([*intensity, 1e-2]) / 3, 1e5),
           ylim=(min([r["tflops"] for r in dots] + [1e-2]) / 5, top * 4))
    for bound, (color, label) in DOTS.items():
        mine = [(x, r["tflops"]) for x, r in zip(intensity, dots) if r["bound"] == bound]
        if mine:
            ax.scatter(*zip(*mine), s=34, color=color, zorder=3, label=label)
    _label_dots(ax, intensity, dots)
    notes = {row_label(r): {"intensity": r["flops_per_call"] / r["bytes_per_call"], "tflops": r["tflops"],
                             "gpu_util_pct": r.get("gpu_util_pct")} for r in rows}
    if flat:
        ax.text(0.985, 0.025, "No arithmetic (0 FLOP per byte), so no point on log axes:\n" + "\n".join(
            f"{row_label(r)}: {fmt_value('gbps', r.get('gbps'))} GB/s useful, MBU {pct(r.get('mbu_pct'))}, "
            f"nvidia-smi {pct(r.get('gpu_util_pct'))}" for r in flat), transform=ax.transAxes, ha="right",
            va="bottom", fontsize=VALUE_PT, bbox={"fc": "white", "ec": "#bbb", "alpha": 0.9})
    ax.set_xlabel(f"arithmetic intensity, FLOP per byte ({BYTES_NOTE}; a GEMM's bytes are its minimum traffic)",
                  fontsize=9)
    ax.set_ylabel("achieved TFLOP/s")
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.17), ncol=2, fontsize=8.5, frameon=False)
    ax.set_title("Each kernel against this GPU's roofs; a host-to-device copy is judged by the host link, "
                 "so it is not here", fontsize=10, loc="left")
    ax.minorticks_off()  # over ten decades a grid line per decade reads best
    ax.grid(alpha=0.25)
    stamp(fig, manifest)
    return save(fig, out_dir, "roofline"), notes


def _label_dots(ax, intensity, dots):
    """Name each dot beside it: labels that would overlap move down a line, with a thin leader; labels in
    the right part of the axes go to the left of their dot, so none runs out of the axes."""
    dpi = ax.figure.dpi
    box = ax.get_window_extent()
    line = (VALUE_PT + 3) * dpi / 72
    placed: list[tuple[float, float, float]] = []  # x0, x1, y of each label, in pixels
    pts = ax.transData.transform(list(zip(intensity, [r["tflops"] for r in dots])))
    for i in sorted(range(len(dots)), key=lambda i: -pts[i][1]):
        r, (px, py) = dots[i], pts[i]
        text = f"{row_label(r)}: util {pct(r.get('gpu_util_pct'))}"
        width = len(text) * VALUE_PT * 0.55 * dpi / 72
        left = px > box.x0 + 0.62 * box.width
        x0, x1 = (px - 8 - width, px - 8) if left else (px + 8, px + 8 + width)
        y = min(py, box.y1 - line)
        while any(a < x1 and x0 < b and abs(y - c) < line for a, b, c in placed):
            y -= line
        placed.append((x0, x1, y))
        offset = (((x1 if left else x0) - px) * 72 / dpi, (y - py) * 72 / dpi)
        ax.annotate(text, (intensity[i], r["tflops"]), xytext=offset, textcoords="offset points",
                    ha="right" if left else "left", va="center", fontsize=VALUE_PT,
                    arrowprops={"arrowstyle": "-", "color": "#999", "lw": 0.6} if abs(y - py) > 3 else None)


# --- 5. compare: each implementation against its baseline -------------------------------------------

# The panels of a group, by the bound of its rows: (title, column, scale, format of one value).
# Bytes over the host link are never drawn on a DRAM axis.
TIME = ("time per call, ms", "kernel_ms", 1.0, "{:.3g}")
UTIL = ("nvidia-smi GPU util", "gpu_util_pct", 1.0, pct)
COMPARE = {"dram": [TIME, ("DRAM traffic per call, GB", "traffic_per_call", 1e-9, "{:.3g}"),
                    ("useful GB/s", "gbps", 1.0, "{:.0f}"), UTIL],
           "compute": [TIME, ("achieved TFLOP/s", "tflops", 1.0, "{:.0f}"), ("MFU (of the datasheet peak)", "mfu_pct", 1.0, pct), UTIL],
           "link": [TIME, ("host link GB/s", "link_gbps", 1.0, "{:.3g}"), ("link share", "link_pct", 1.0, pct), UTIL]}


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


def compare(summary, samples, manifest, out_dir):
    groups = compare_groups(summary)
    if not groups:
        return empty(out_dir, "compare", "Implementations against their baselines", manifest)
    baselines = baselines_of(summary)
    fig, axes = plt.subplots(len(groups), 4, figsize=(12, 3.7 * len(groups)), squeeze=False)
    notes: dict = {}
    for axrow, rows in zip(axes, groups):
        _compare_row(axrow, rows, baselines, notes, (manifest.get("peaks") or {}).get("measured") or {})
    best = max((r for g in groups for r in g if finite(r.get("speedup_vs_baseline"))),
               key=lambda r: r["speedup_vs_baseline"], default=None)
    finding = "Same utilization, different speed"
    if best:
        x = best["speedup_vs_baseline"]
        pace = f"runs {x:.1f}x faster than" if x >= 1 else f"takes {1 / x:.1f}x as long as"
        finding = (f"Every variant reads ~{fmt_value('gpu_util_pct', best.get('gpu_util_pct'))} busy, yet "
                   f"{best['scenario']} {pace} {best['baseline']}")
    fig.suptitle(finding, fontsize=11, x=0.01, ha="left")
    fig.tight_layout()
    stamp(fig, manifest)
    return save(fig, out_dir, "compare"), notes


def _compare_row(axrow, rows, baselines, notes, measured):
    panels = COMPARE.get(rows[0].get("bound"), [TIME, UTIL])
    for ax in axrow[len(panels):]:
        ax.axis("off")
    for ax, (title, col, scale, form) in zip(axrow, panels):
        vals = [r.get(col) * scale if finite(r.get(col)) else math.nan for r in rows]
        colors = [C["baseline"] if r["scenario"] in baselines else C["candidate"] for r in rows]
        known = [v for v in vals if finite(v)]
        bars = ax.bar(range(len(rows)), [v if finite(v) else 0 for v in vals], color=colors)
        for b, v, r in zip(bars, vals, rows):
            text = (form(v) if callable(form) else form.format(v)) if finite(v) else "n/a"
            if known:
                ax.text(b.get_x() + b.get_width() / 2, b.get_height(), text, ha="center", va="bottom",
                        fontsize=VALUE_PT)
            notes.setdefault(row_label(r), {})[col] = r.get(col)
        if col == "gbps" and measured.get("dram"):
            ax.axhline(measured["dram"] / 1e9, color="#444", ls="--", lw=1)
            ax.text(len(rows) - 0.6, measured["dram"] / 1e9, "copy peak", fontsize=8, va="bottom", ha="right")
        if known:
            ax.set_ylim(0, max(max(known), measured.get("dram", 0) / 1e9 if col == "gbps" else 0) * 1.2 or 1)
        else:
            ax.set_yticks([])
            ax.text(0.5, 0.6, "not known for these\nimplementations", transform=ax.transAxes, ha="center",
                    fontsize=VALUE_PT, color="#777")
        ax.set_xticks(range(len(rows)), [row_label(r) for r in rows], rotation=25, ha="right", fontsize=8.5)
        ax.set_title(title, fontsize=10)
    axrow[0].set_ylabel(f"{rows[0]['family']}\n(red: baseline)", fontsize=10)


@dataclass(frozen=True)
class Figure:
    name: str
    caption: str
    draw: Callable


def ranks(summary, samples, manifest, out_dir):
    from gpubench.rankplot import draw  # the figure of runs under torchrun, in a file of its own

    return draw(summary, samples, manifest, out_dir)


FIGURES = (
    Figure("headline", "What nvidia-smi said, against the work done", headline),
    Figure("ladder", "Which metric each kernel fools", ladder),
    Figure("timeline", "The whole run over time", timeline),
    Figure("roofline", "Each kernel against this GPU's roofs", roofline),
    Figure("compare", "Implementations against their baselines", compare),
    Figure("ranks", "Under torchrun: each rank's GPU-Util, SM activity and power, and its arrival at the collective",
           ranks),
)


def plot_run(run_dir, manifest, samples, summary, out_dir=None, notes: dict | None = None) -> list[Path]:
    """Every figure of the registry into out_dir (default RUN_DIR/figures); notes, where given, receives
    what each figure's draw returned, by figure name.

    All are drawn into a hidden folder first and moved into place only when every one succeeded, so a
    failure leaves out_dir as it was. OSError (a read-only or full disk) reaches the caller.
    """
    out = Path(out_dir) if out_dir is not None else Path(run_dir) / "figures"
    made = not out.exists()
    out.mkdir(parents=True, exist_ok=True)
    stage = None
    try:
        stage = Path(tempfile.mkdtemp(prefix=".gpubench-", dir=out))
        drawn = []
        for figure in FIGURES:
            files, marks = figure.draw(summary, samples, manifest, stage)
            drawn += files
            if notes is not None:
                notes[figure.name] = marks
        paths = []
        for f in drawn:
            os.replace(f, out / f.name)
            paths.append(out / f.name)
        return paths
    except BaseException:
        if made:
            shutil.rmtree(out, ignore_errors=True)
        raise
    finally:
        if stage is not None:
            shutil.rmtree(stage, ignore_errors=True)
