"""The timeline figure: the whole run over time, its phases shaded and named."""

from __future__ import annotations

import math

import matplotlib.pyplot as plt

from gpubench.metrics import BY_COLUMN, finite

from .common import C, empty, save, stamp, title

PANELS = [("utilization, %", ["gpu_util_pct", "smi_gpu_util_pct"]), ("SM, %", ["sm_active_pct", "sm_occupancy_pct"]),
          ("pipes and DRAM, %", ["tensor_active_pct", "fp32_active_pct", "dram_active_pct"])]
# Both rows read the same counter: NVML's line is drawn thin on top of the nvidia-smi process's wide one.
LINE_LABELS = {"gpu_util_pct": "GPU util, through NVML",
               "smi_gpu_util_pct": "GPU util, nvidia-smi process\n(wide light line)"}
PHASE_LABELS = {"start": "start-up", "peaks": "peak measurement"}


def draw(summary, samples, manifest, out_dir):
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
