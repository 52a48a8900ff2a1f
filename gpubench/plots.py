"""Teaching figures from a run directory's files alone: headline, timeline, roofline, softmax, ladder.

Every figure states its finding in the title, carries the GPU and date in a corner, labels its axes
with units, and marks a metric the run could not record as unavailable instead of drawing it as 0.
Each plot function returns the numbers it annotated, so tests can hold them against summary.csv.
"""

from __future__ import annotations

import math
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.colors import Normalize  # noqa: E402

from gpubench.summary import finite  # noqa: E402

BYTES_NOTE = "bytes counted as read + written"
C_UTIL, C_SM, C_OCC, C_TENSOR, C_MFU, C_MBU, C_DRAM, C_FP32 = (
    "#d62728", "#ff7f0e", "#bcbd22", "#9467bd", "#2ca02c", "#17becf", "#1f77b4", "#8c564b")


def _stamp(fig, manifest):
    gpu = manifest.get("gpu", {}).get("name", "unknown GPU")
    date = (manifest.get("start_wall") or "")[:10]
    fig.text(0.995, 0.005, f"{gpu} · {date} · gpubench", ha="right", va="bottom", fontsize=7, color="#666")


def _save(fig, out_dir: Path, name: str) -> list[Path]:
    paths = []
    for ext in ("png", "svg"):
        p = out_dir / f"{name}.{ext}"
        fig.savefig(p, dpi=120 if ext == "png" else None, bbox_inches="tight")
        paths.append(p)
    plt.close(fig)
    return paths


def work_fraction(row) -> tuple[str, float]:
    """The rung that tells the truth for this scenario: MBU for DRAM-bound kernels, else MFU."""
    if row.get("dram_bound") is True and finite(row.get("mbu_pct")):
        return "MBU", row["mbu_pct"]
    return "MFU", row.get("mfu_pct", math.nan)


def _kernel_rows(summary):
    return [r for r in summary if r.get("family") != "idle"]


# --- 1. headline -----------------------------------------------------------------------------------

HEADLINE_SERIES = [("nvidia-smi GPU util", "gpu_util_pct", C_UTIL), ("SM active", "sm_active_pct", C_SM),
                   ("tensor active", "tensor_active_pct", C_TENSOR), ("MFU", "mfu_pct", C_MFU),
                   ("MBU (memory-bound kernels)", "mbu_pct", C_MBU)]


def headline(summary, manifest, out_dir):
    rows = _kernel_rows(summary)
    n, k = len(rows), len(HEADLINE_SERIES)
    fig, ax = plt.subplots(figsize=(10, 0.55 * n + 1.8))
    h = 0.8 / k
    notes = {}
    for j, (label, col, color) in enumerate(HEADLINE_SERIES):
        for i, row in enumerate(rows):
            y = i + (j - (k - 1) / 2) * h
            v = row.get(col)
            if col == "mbu_pct" and row.get("dram_bound") is not True:
                continue
            if finite(v):
                ax.barh(y, v, height=h, color=color, label=label)
                if col in ("gpu_util_pct", "mfu_pct", "mbu_pct"):
                    ax.text(v + 1, y, f"{v:.0f}%" if v >= 1 or v == 0 else f"{v:.2f}%", va="center", fontsize=6)
                    notes.setdefault(row["scenario"], {})[col] = v
            else:
                ax.text(1, y, "n/a", va="center", fontsize=6, color="#888", style="italic")
    ax.set_yticks(range(n), [r["scenario"] for r in rows])
    ax.invert_yaxis()
    ax.set_xlim(0, 112)
    ax.set_xlabel(f"percent (util and activity: share of time; MFU/MBU: share of datasheet peak; {BYTES_NOTE})")
    handles, labels = ax.get_legend_handles_labels()
    uniq = dict(zip(labels, handles))
    ax.legend(uniq.values(), uniq.keys(), loc="lower right", fontsize=7, framealpha=0.9)
    ax.set_title("nvidia-smi reads 100% for nearly every kernel; the work done (MFU, MBU) is often near zero",
                 fontsize=10, loc="left")
    ax.grid(axis="x", alpha=0.3)
    _stamp(fig, manifest)
    return _save(fig, out_dir, "headline"), notes


# --- 2. timeline -----------------------------------------------------------------------------------

def timeline(samples, summary, manifest, out_dir):
    gpu = manifest.get("gpu", {}).get("index", 0)
    rows = [r for r in samples if r.get("gpu") == gpu]
    t0 = rows[0]["t_mono_s"] if rows else 0.0
    t = [r["t_mono_s"] - t0 for r in rows]
    panels = [
        ("utilization, %", [("nvidia-smi GPU util (NVML)", "gpu_util_pct", C_UTIL),
                            ("nvidia-smi process", "smi_gpu_util_pct", "#ff9896")]),
        ("SM, %", [("SM active", "sm_active_pct", C_SM), ("SM occupancy", "sm_occupancy_pct", C_OCC)]),
        ("pipes and DRAM, %", [("tensor active", "tensor_active_pct", C_TENSOR), ("FP32 active", "fp32_active_pct", C_FP32),
                               ("DRAM active", "dram_active_pct", C_DRAM)]),
    ]
    fig, axes = plt.subplots(4, 1, figsize=(12, 8.5), sharex=True, gridspec_kw={"hspace": 0.12})
    missing = []
    for ax, (ylabel, series) in zip(axes, panels):
        for label, col, color in series:
            ys = [r.get(col, math.nan) for r in rows]
            if any(finite(y) for y in ys):
                ax.plot(t, ys, color=color, lw=1, label=label)
            else:
                missing.append(col)
                ax.plot([], [], color=color, lw=1, ls=":", label=f"{label}: unavailable on this run")
        ax.set_ylim(-3, 105)
        ax.set_ylabel(ylabel, fontsize=8)
        ax.legend(loc="upper right", fontsize=6, ncol=3, framealpha=0.9)
    ax = axes[3]
    for r in _kernel_rows(summary):
        if finite(r.get("tflops")):
            ax.hlines(r["tflops"], r["t_start"] - t0, r["t_end"] - t0, color=C_MFU, lw=2.5)
    ax.set_ylabel("achieved TFLOP/s", fontsize=8)
    ax.set_xlabel("time since the run started, s")
    for k, r in enumerate(_kernel_rows(summary)):
        for a in axes:
            a.axvspan(r["t_start"] - t0, r["t_end"] - t0, color="#000", alpha=0.06 if k % 2 else 0.03, lw=0)
        axes[0].text((r["t_start"] + r["t_end"]) / 2 - t0, 107, r["scenario"], rotation=60, fontsize=6,
                     ha="left", va="bottom")
    fig.suptitle("GPU-Util sits at 100% through almost every scenario; SM activity, pipes and TFLOP/s tell them apart",
                 fontsize=10, x=0.01, ha="left", y=1.02)
    _stamp(fig, manifest)
    return _save(fig, out_dir, "timeline"), {"missing": missing}


# --- 3. roofline -----------------------------------------------------------------------------------

def roofline(summary, manifest, out_dir):
    peaks = manifest.get("peaks") or {}
    measured = peaks.get("measured") or {}
    sheet = peaks.get("datasheet") or {}
    bw = measured.get("dram") or sheet.get("dram")
    fig, ax = plt.subplots(figsize=(9, 6))
    xs = [10 ** (i / 10) for i in range(-40, 51)]
    if bw:
        for key, label, style in (("bf16_tensor", "bf16 tensor", "-"), ("fp32", "FP32 (no tensor cores)", "--")):
            peak = measured.get(key) or sheet.get(key)
            if peak:
                src = "measured" if measured.get(key) else "datasheet"
                ax.plot(xs, [min(peak, bw * x) / 1e12 for x in xs], style, color="#444", lw=1,
                        label=f"roof: {label} {peak / 1e12:.0f} TFLOP/s ({src}), DRAM {bw / 1e12:.2f} TB/s")
    floor = 1e-6  # TFLOP/s: where kernels that do no arithmetic are drawn
    notes, placed = {}, []
    for r in _kernel_rows(summary):
        flops, nbytes, tf = r.get("flops_per_call", 0), r.get("bytes_per_call", 0), r.get("tflops")
        if not finite(tf) or not nbytes:
            continue  # spin kernels move no bytes: no intensity to place them at
        x = flops / nbytes if flops else 1e-4
        y = max(tf, floor)
        ax.scatter([x], [y], s=30, color=C_UTIL if flops else "#999", zorder=3)
        util = r.get("gpu_util_pct")
        # points that land on top of each other get their labels stacked, not overprinted
        near = sum(1 for px, py in placed if abs(math.log10(px / x)) < 0.4 and abs(math.log10(py / y)) < 0.4)
        placed.append((x, y))
        label = f"{r['scenario']}: util {util:.0f}%" if finite(util) else r["scenario"]
        ax.annotate(label, (x, y), fontsize=6, xytext=(6, 4 - 9 * near), textcoords="offset points")
        notes[r["scenario"]] = {"intensity": x, "tflops": tf, "gpu_util_pct": util}
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_ylim(floor / 3, 3000)
    ax.set_xlim(1e-4 / 3, 1e5)
    ax.axhline(floor, color="#bbb", lw=0.5)
    ax.text(3e1, floor * 1.3, "zero or under 1e-6 TFLOP/s: drawn on this line", fontsize=7, color="#888")
    ax.set_xlabel(f"arithmetic intensity, FLOP per byte of DRAM traffic ({BYTES_NOTE})")
    ax.set_ylabel("achieved TFLOP/s")
    ax.legend(loc="upper left", fontsize=7)
    ax.set_title("Each kernel against this GPU's roofs: most sit far below, at the same 100% utilization",
                 fontsize=10, loc="left")
    ax.grid(which="both", alpha=0.2)
    _stamp(fig, manifest)
    return _save(fig, out_dir, "roofline"), notes


# --- 4. softmax ------------------------------------------------------------------------------------

def softmax_figure(summary, manifest, out_dir):
    rows = [r for r in summary if r.get("family") == "softmax"]
    if not rows:
        return [], {}
    names = [r["scenario"].replace("softmax-", "") for r in rows]
    copy_bw = ((manifest.get("peaks") or {}).get("measured") or {}).get("dram")
    panels = [("time per call, ms", "kernel_ms", 1.0), ("bytes moved per call, GB", "bytes_per_call", 1e-9),
              ("achieved bandwidth, GB/s", "gbps", 1.0), ("nvidia-smi GPU util, %", "gpu_util_pct", 1.0)]
    fig, axes = plt.subplots(1, 4, figsize=(13, 3.6))
    notes = {}
    for ax, (title, col, scale) in zip(axes, panels):
        vals = [r.get(col) * scale if finite(r.get(col)) else math.nan for r in rows]
        bars = ax.bar(range(len(rows)), [v if finite(v) else 0 for v in vals],
                      color=[C_UTIL if "naive" in n else C_MFU for n in names])
        for b, v, r in zip(bars, vals, rows):
            ax.text(b.get_x() + b.get_width() / 2, b.get_height(), f"{v:.4g}" if finite(v) else "n/a",
                    ha="center", va="bottom", fontsize=7)
            notes.setdefault(r["scenario"], {})[col] = r.get(col)
        if col == "gbps" and copy_bw:
            ax.axhline(copy_bw / 1e9, color="#444", ls="--", lw=1)
            ax.text(0, copy_bw / 1e9, "measured copy", fontsize=6, va="bottom")
        ax.set_xticks(range(len(rows)), names, rotation=30, ha="right", fontsize=7)
        ax.set_title(title + (f"\n({BYTES_NOTE})" if col in ("gbps", "bytes_per_call") else ""), fontsize=8)
    fused = next((r for r in rows if r["scenario"] == "softmax-fused"), None)
    naive = next((r for r in rows if r["scenario"] == "softmax-naive-torch"), None)
    finding = "Same utilization, very different speed"
    if fused and naive and finite(fused.get("kernel_ms")) and finite(naive.get("kernel_ms")):
        finding = (f"Softmax: every variant reads ~100% busy, yet the fused kernel is "
                   f"{naive['kernel_ms'] / fused['kernel_ms']:.1f}x faster than the naive sequence")
    fig.suptitle(finding, fontsize=10, x=0.01, ha="left", y=1.04)
    fig.tight_layout()
    _stamp(fig, manifest)
    return _save(fig, out_dir, "softmax"), notes


# --- 5. ladder -------------------------------------------------------------------------------------

LADDER = [("nvidia-smi\nutil", "gpu_util_pct"), ("SM\nactive", "sm_active_pct"), ("SM\noccupancy", "sm_occupancy_pct"),
          ("tensor\nactive", "tensor_active_pct"), ("DRAM\nactive", "dram_active_pct"), ("MFU or MBU\n(ground truth)", None)]


def ladder(summary, manifest, out_dir):
    rows = _kernel_rows(summary)
    fig, ax = plt.subplots(figsize=(9, 0.42 * len(rows) + 1.8))
    cmap = plt.get_cmap("YlOrRd")
    norm = Normalize(0, 100)
    notes = {}
    for i, r in enumerate(rows):
        for j, (_, col) in enumerate(LADDER):
            if col is None:
                label, v = work_fraction(r)
            else:
                label, v = "", r.get(col)
            if finite(v):
                ax.add_patch(plt.Rectangle((j, i), 1, 1, color=cmap(norm(min(v, 100)))))
                text = f"{v:.0f}%" if v >= 9.5 or v == 0 else f"{v:.1f}%" if v >= 0.1 else f"{v:.2f}%"
                ax.text(j + 0.5, i + 0.5, f"{label} {text}".strip(), ha="center", va="center", fontsize=7,
                        color="white" if v > 60 else "black")
            else:
                ax.add_patch(plt.Rectangle((j, i), 1, 1, facecolor="#eee", hatch="//", edgecolor="#ccc"))
                ax.text(j + 0.5, i + 0.5, "n/a", ha="center", va="center", fontsize=7, color="#888")
            notes.setdefault(r["scenario"], {})[col or "work"] = v
    ax.set_xlim(0, len(LADDER))
    ax.set_ylim(len(rows), 0)
    ax.set_xticks([j + 0.5 for j in range(len(LADDER))], [h for h, _ in LADDER], fontsize=8)
    ax.xaxis.tick_top()
    ax.set_yticks([i + 0.5 for i in range(len(rows))], [r["scenario"] for r in rows], fontsize=8)
    ax.axvline(len(LADDER) - 1, color="black", lw=2)
    ax.set_title("Each rung of the ladder is fooled by some kernel; only the last column measures work done",
                 fontsize=10, loc="left", pad=34)
    fig.colorbar(plt.cm.ScalarMappable(norm=norm, cmap=cmap), ax=ax, fraction=0.03, pad=0.02, label="percent")
    _stamp(fig, manifest)
    return _save(fig, out_dir, "ladder"), notes


def plot_run(run_dir, manifest, samples, summary) -> list[Path]:
    out = Path(run_dir) / "figures"
    out.mkdir(exist_ok=True)
    paths = []
    for make in (lambda: headline(summary, manifest, out), lambda: timeline(samples, summary, manifest, out),
                 lambda: roofline(summary, manifest, out), lambda: softmax_figure(summary, manifest, out),
                 lambda: ladder(summary, manifest, out)):
        files, _ = make()
        paths += files
    return paths
