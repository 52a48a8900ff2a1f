"""Teaching figures from a run directory's files alone: headline, ladder, timeline, roofline, compare.

Every figure states its finding in the title, carries the GPU and date in a corner, labels its axes with
units, and marks a metric the run could not record as unavailable instead of drawing it as 0. Which
row is a baseline, and which ground truth a kernel has (MFU, MBU, link), comes from the summary's own
columns: no scenario name is written here. Each draw function returns the numbers it annotated, so
tests can hold them against summary.csv. Files are written under a temporary name and renamed, and
SVGs carry no date and fixed ids, so re-plotting an unchanged run changes no byte.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from gpubench.metrics import BY_COLUMN, finite, fmt_value  # noqa: E402
from gpubench.summary import row_label  # noqa: E402

matplotlib.rcParams.update({"svg.hashsalt": "gpubench", "font.size": 9})
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


def stamp(fig, manifest):
    gpu = manifest.get("gpu", {}).get("name", "unknown GPU")
    date = (manifest.get("start_wall") or "")[:10]
    partial = "" if manifest.get("completed", True) else f" · partial run ({manifest.get('status')})"
    fig.text(0.995, 0.005, f"{gpu} · {date} · gpubench{partial}", ha="right", va="bottom", fontsize=7, color="#666")


def save(fig, out_dir: Path, name: str) -> list[Path]:
    """PNG and SVG, each written to a temporary name and renamed into place."""
    paths = []
    for ext, kw in (("png", {"dpi": 130}), ("svg", {"metadata": {"Date": None}})):
        final = out_dir / f"{name}.{ext}"
        tmp = out_dir / f".{name}.tmp.{ext}"
        fig.savefig(tmp, bbox_inches="tight", **kw)
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


def pct(v: float) -> str:
    """Percent with as many digits as a small value needs: 89%, 3.1%, 0.76%, 0.003%."""
    if not finite(v):
        return "n/a"
    if v == 0 or abs(v) >= 9.5:
        return f"{v:.0f}%"
    return f"{v:.2g}%" if abs(v) >= 0.01 else f"{v:.1g}%"


def kernel_rows(summary):
    return [r for r in summary if r.get("bound") != "none" or finite(r.get("kernel_ms"))]


def empty(out_dir, name, title, manifest):
    fig, ax = plt.subplots(figsize=(7, 2))
    ax.axis("off")
    ax.text(0.5, 0.5, NO_DATA, ha="center", va="center", fontsize=11, color="#666")
    ax.set_title(title, fontsize=10, loc="left")
    stamp(fig, manifest)
    return save(fig, out_dir, name), {}


# --- 1. headline -----------------------------------------------------------------------------------

HEADLINE = [("gpu_util_pct", "nvidia-smi GPU util"), ("sm_active_pct", "SM active"),
            ("tensor_active_pct", "tensor active"), ("work", "work done (MFU, MBU or link share of peak)")]


def headline(summary, samples, manifest, out_dir):
    rows = kernel_rows(summary)
    if not rows:
        return empty(out_dir, "headline", "What nvidia-smi said, against the work done", manifest)
    n, k = len(rows), len(HEADLINE)
    fig, ax = plt.subplots(figsize=(10, 0.6 * n + 1.9))
    h = 0.8 / k
    notes: dict = {}
    for j, (col, label) in enumerate(HEADLINE):
        for i, row in enumerate(rows):
            y = i + (j - (k - 1) / 2) * h
            name, v = work_fraction(row) if col == "work" else ("", row.get(col))
            if not finite(v):
                ax.text(1, y, "n/a", va="center", fontsize=7, color="#888", style="italic")
                continue
            ax.barh(y, v, height=h, color=C[col], label=label)
            if col in ("gpu_util_pct", "work"):
                ax.text(v + 1, y, f"{name} {pct(v)}".strip(), va="center", fontsize=7.5)
                notes.setdefault(row_label(row), {})["work" if col == "work" else col] = v
    ax.set_yticks(range(n), [row_label(r) for r in rows])
    ax.invert_yaxis()
    ax.set_xlim(0, 118)
    ax.set_xlabel("percent (util and activity: share of time; MFU, MBU, link: share of the datasheet peak)")
    handles, labels = ax.get_legend_handles_labels()
    uniq = dict(zip(labels, handles))
    fig.legend(uniq.values(), uniq.keys(), loc="upper center", ncol=4, fontsize=8, frameon=False,
               bbox_to_anchor=(0.5, 0.0))
    ax.set_title(title(manifest, "headline",
                       "nvidia-smi reads 100% for nearly every kernel; the work done is often near zero"),
                 fontsize=10, loc="left")
    ax.grid(axis="x", alpha=0.3)
    stamp(fig, manifest)
    return save(fig, out_dir, "headline"), notes


# --- 2. ladder -------------------------------------------------------------------------------------

LADDER = [("nvidia-smi\nutil", "gpu_util_pct"), ("SM\nactive", "sm_active_pct"), ("SM\noccupancy", "sm_occupancy_pct"),
          ("tensor\nactive", "tensor_active_pct"), ("DRAM\nactive", "dram_active_pct"),
          ("work done\n(ground truth)", None)]


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
                ax.text(j + 0.5, i + 0.5, f"{label} {pct(v)}".strip(), ha="center", va="center", fontsize=8,
                        color="white" if v > 60 else "black")
            else:
                ax.add_patch(plt.Rectangle((j, i), 1, 1, facecolor="#eee", hatch="//", edgecolor="#ccc"))
                ax.text(j + 0.5, i + 0.5, "n/a", ha="center", va="center", fontsize=8, color="#888")
            notes.setdefault(row_label(r), {})[col or "work"] = v
    ax.set_xlim(0, len(LADDER))
    ax.set_ylim(len(rows), 0)
    ax.set_xticks([j + 0.5 for j in range(len(LADDER))], [h for h, _ in LADDER], fontsize=8)
    ax.xaxis.tick_top()
    ax.set_yticks([i + 0.5 for i in range(len(rows))], [row_label(r) for r in rows], fontsize=8)
    ax.axvline(len(LADDER) - 1, color="black", lw=2)
    ax.set_title(title(manifest, "ladder",
                       "Each rung of the ladder is fooled by some kernel; only the last column measures work done"),
                 fontsize=10, loc="left", pad=34)
    fig.colorbar(plt.cm.ScalarMappable(norm=norm, cmap=cmap), ax=ax, fraction=0.03, pad=0.02, label="percent")
    stamp(fig, manifest)
    return save(fig, out_dir, "ladder"), notes


# --- 3. timeline -----------------------------------------------------------------------------------

PANELS = [("utilization, %", ["gpu_util_pct", "smi_gpu_util_pct"]), ("SM, %", ["sm_active_pct", "sm_occupancy_pct"]),
          ("pipes and DRAM, %", ["tensor_active_pct", "fp32_active_pct", "dram_active_pct"])]


def timeline(summary, samples, manifest, out_dir):
    gpu = manifest.get("gpu", {}).get("nvml_index", summary[0].get("gpu") if summary else 0)
    uuid = manifest.get("gpu", {}).get("uuid")  # under torchrun NVML indices repeat from node to node
    rows = [r for r in samples if r.get("uuid") == uuid] or [r for r in samples if r.get("gpu") == gpu]
    if not rows:
        return empty(out_dir, "timeline", "The run over time", manifest)
    t0 = rows[0]["t_start_s"]
    t = [r["t_end_s"] - t0 for r in rows]
    fig, axes = plt.subplots(4, 1, figsize=(12, 9), sharex=True, gridspec_kw={"hspace": 0.15})
    missing = []
    for ax, (ylabel, cols) in zip(axes, PANELS):
        for col in cols:
            ys = [r.get(col, math.nan) for r in rows]
            label = BY_COLUMN[col].label
            if any(finite(y) for y in ys):
                dashed = col.startswith("smi_")  # drawn over NVML's line: dashed so both show
                ax.plot(t, ys, color=C[col], lw=1.6 if dashed else 1, ls="--" if dashed else "-", label=label)
            else:
                missing.append(col)
                ax.plot([], [], color=C[col], lw=1, ls=":", label=f"{label}: unavailable in this run")
        ax.set_ylim(-3, 108)
        ax.set_ylabel(ylabel, fontsize=8)
        ax.legend(loc="upper left", bbox_to_anchor=(1.005, 1.0), fontsize=7, frameon=False)
    ax = axes[3]
    for r in summary:
        if finite(r.get("tflops")) and finite(r.get("t_start")):
            ax.hlines(r["tflops"], r["t_start"] - t0, r["t_end"] - t0, color=C["work"], lw=2.5)
    ax.set_ylabel("achieved TFLOP/s", fontsize=8)
    ax.set_xlabel("time since the recording started, s")
    _shade_phases(axes, rows, t0)
    fig.suptitle(title(manifest, "timeline", "GPU-Util sits at 100% through almost every phase; SM activity, "
                                             "pipes and TFLOP/s tell them apart"),
                 fontsize=10, x=0.01, ha="left", y=0.995)
    stamp(fig, manifest)
    return save(fig, out_dir, "timeline"), {"missing": missing}


def phase_spans(rows) -> list[tuple[str, float, float]]:
    """Consecutive runs of one phase label: (phase, start, end)."""
    spans: list[list] = []
    for r in rows:
        if spans and spans[-1][0] == r["phase"]:
            spans[-1][2] = r["t_end_s"]
        else:
            spans.append([r["phase"], r["t_start_s"], r["t_end_s"]])
    return [tuple(s) for s in spans]


def _shade_phases(axes, rows, t0):
    named = [s for s in phase_spans(rows) if s[0] != "gap" and not s[0].startswith("setup:")]
    for k, (phase, a, b) in enumerate(named):
        for ax in axes:
            ax.axvspan(a - t0, b - t0, color="#000", alpha=0.07 if k % 2 else 0.035, lw=0)
        axes[0].text((a + b) / 2 - t0, 110, phase, rotation=60, fontsize=6.5, ha="left", va="bottom")


# --- 4. roofline -----------------------------------------------------------------------------------

def roofline(summary, samples, manifest, out_dir):
    peaks = manifest.get("peaks") or {}
    measured, sheet = peaks.get("measured") or {}, peaks.get("datasheet") or {}
    rows = [r for r in kernel_rows(summary) if r.get("bound") in ("dram", "compute") and r.get("bytes_per_call")]
    if not rows:
        return empty(out_dir, "roofline", "Each kernel against this GPU's roofs", manifest)
    fig, ax = plt.subplots(figsize=(9.5, 6))
    bw = measured.get("dram") or sheet.get("dram")
    xs = [10 ** (i / 10) for i in range(-20, 51)]
    for key, label, style in (("bf16_tensor", "bf16 tensor", "-"), ("fp32", "FP32, no tensor cores", "--")):
        peak = measured.get(key) or sheet.get(key)
        if peak and bw:
            src = "measured" if measured.get(key) else "datasheet"
            ax.plot(xs, [min(peak, bw * x) / 1e12 for x in xs], style, color="#444", lw=1,
                    label=f"roof: {label} {peak / 1e12:.0f} TFLOP/s ({src}); DRAM {bw / 1e12:.2f} TB/s")
    notes: dict = {}
    floor = 1e-3  # TFLOP/s: where kernels that do no arithmetic are drawn, on their own marked line
    for k, r in enumerate(rows):
        flops, nbytes, tf = r.get("flops_per_call") or 0, r["bytes_per_call"], r.get("tflops")
        if not finite(tf):
            continue
        x, y = max(flops / nbytes, 1e-2), max(tf, floor)
        color = C["work"] if flops else "#999"
        ax.scatter([x], [y], s=30, color=color, zorder=3)
        ax.annotate(f"{row_label(r)}: util {fmt_value('gpu_util_pct', r.get('gpu_util_pct'))}", (x, y),
                    fontsize=7, xytext=(6, 6 - 10 * (k % 3)), textcoords="offset points", annotation_clip=True)
        notes[row_label(r)] = {"intensity": flops / nbytes, "tflops": tf, "gpu_util_pct": r.get("gpu_util_pct")}
    ax.axhline(floor, color="#bbb", lw=0.6)
    ax.text(1.2e-2, floor * 1.25, "grey dots on this line: kernels that do no arithmetic (0 FLOP/s, intensity 0)",
            fontsize=7, color="#777")
    ax.set(xscale="log", yscale="log", ylim=(floor / 2, 3000), xlim=(0.8e-2, 1e5))
    ax.set_xlabel(f"arithmetic intensity, FLOP per byte ({BYTES_NOTE}; a GEMM's bytes are its minimum traffic)")
    ax.set_ylabel("achieved TFLOP/s")
    ax.legend(loc="upper left", fontsize=7)
    ax.set_title("Each kernel against this GPU's roofs (green: does arithmetic; grey: none); host-to-device "
                 "copies are not on a DRAM roof", fontsize=9, loc="left")
    ax.grid(which="both", alpha=0.2)
    stamp(fig, manifest)
    return save(fig, out_dir, "roofline"), notes


# --- 5. compare: each implementation against its baseline -------------------------------------------

COMPARE = [("time per call, ms", "kernel_ms", 1.0), ("DRAM traffic per call, GB", "traffic_per_call", 1e-9),
           ("useful GB/s", "gbps", 1.0), ("nvidia-smi GPU util, %", "gpu_util_pct", 1.0)]


def baseline_of(row) -> str | None:
    b = row.get("baseline")
    return b if isinstance(b, str) and b else None


def compare_groups(summary) -> list[list[dict]]:
    """Per family, the rows that are a baseline or name one, in suite order."""
    baselines = {baseline_of(r) for r in summary} - {None}
    groups: dict[str, list[dict]] = {}
    for r in summary:
        if r["scenario"] in baselines or baseline_of(r):
            groups.setdefault(r["family"], []).append(r)
    return [g for g in groups.values() if len(g) > 1]


def compare(summary, samples, manifest, out_dir):
    groups = compare_groups(summary)
    if not groups:
        return empty(out_dir, "compare", "Implementations against their baselines", manifest)
    baselines = {baseline_of(r) for r in summary} - {None}
    fig, axes = plt.subplots(len(groups), len(COMPARE), figsize=(13, 3.4 * len(groups)), squeeze=False)
    notes: dict = {}
    for axrow, rows in zip(axes, groups):
        _compare_row(axrow, rows, baselines, notes, (manifest.get("peaks") or {}).get("measured") or {})
    best = max((r for g in groups for r in g if finite(r.get("speedup_vs_baseline"))),
               key=lambda r: r["speedup_vs_baseline"], default=None)
    finding = "Same utilization, different speed"
    if best:
        finding = (f"Every variant reads ~{fmt_value('gpu_util_pct', best.get('gpu_util_pct'))} busy, yet "
                   f"{best['scenario']} runs {best['speedup_vs_baseline']:.1f}x faster than {best['baseline']}")
    fig.suptitle(finding, fontsize=10, x=0.01, ha="left")
    fig.tight_layout()
    stamp(fig, manifest)
    return save(fig, out_dir, "compare"), notes


def _compare_row(axrow, rows, baselines, notes, measured):
    for ax, (title, col, scale) in zip(axrow, COMPARE):
        vals = [r.get(col) * scale if finite(r.get(col)) else math.nan for r in rows]
        colors = [C["baseline"] if r["scenario"] in baselines else C["candidate"] for r in rows]
        bars = ax.bar(range(len(rows)), [v if finite(v) else 0 for v in vals], color=colors)
        for b, v, r in zip(bars, vals, rows):
            ax.text(b.get_x() + b.get_width() / 2, b.get_height(), f"{v:.4g}" if finite(v) else "n/a",
                    ha="center", va="bottom", fontsize=8)
            notes.setdefault(row_label(r), {})[col] = r.get(col)
        if col == "gbps" and measured.get("dram") and rows[0].get("bound") == "dram":
            ax.axhline(measured["dram"] / 1e9, color="#444", ls="--", lw=1)
            ax.text(0, measured["dram"] / 1e9, "measured copy peak", fontsize=7, va="bottom")
        ax.set_xticks(range(len(rows)), [row_label(r) for r in rows], rotation=25, ha="right", fontsize=7.5)
        ax.set_title(title, fontsize=9)
    axrow[0].set_ylabel(f"{rows[0]['family']}\n(red: baseline)", fontsize=9)


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


def plot_run(run_dir, manifest, samples, summary, out_dir=None) -> list[Path]:
    """Every figure of the registry into out_dir (default RUN_DIR/figures)."""
    out = Path(out_dir) if out_dir is not None else Path(run_dir) / "figures"
    out.mkdir(parents=True, exist_ok=True)
    paths = []
    for figure in FIGURES:
        files, _ = figure.draw(summary, samples, manifest, out)
        paths += files
    return paths
