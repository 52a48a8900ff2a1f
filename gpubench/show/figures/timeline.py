"""The timeline figure: the whole run over time, its phases shaded and named.

However long the run, each line is drawn from its envelope (the lowest and highest value of each pixel's
slice of time), so a day-long run's figure is as large, and as quick to draw, as a minute's, and a spike
or a dip of one sample still shows. The time axis is in seconds, minutes or hours, as the run's length
asks."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np

from gpubench.metrics import BY_COLUMN, finite
from gpubench.read.samples import as_samples, load_together

from .common import LEFT_OUT, PNG_DPI, C, empty, envelope, save, title
from .spans import LABEL_PT, job_spans, label_layout, phase_spans

PANELS = [
    ("utilization, %", ["gpu_util_pct", "smi_gpu_util_pct"]),
    ("SM, %", ["sm_active_pct", "sm_occupancy_pct"]),
    ("pipes and DRAM, %", ["tensor_active_pct", "fp32_active_pct", "dram_active_pct"]),
]
# Both rows read the same counter: NVML's line is drawn thin on top of the nvidia-smi process's wide one.
LINE_LABELS = {
    "gpu_util_pct": "GPU util, through NVML",
    "smi_gpu_util_pct": "GPU util, nvidia-smi process\n(wide light line)",
}
PANEL_IN = 2.05  # each panel's height
PANEL_WIDTH_IN = 11 * 0.775  # the panels' width: matplotlib's default margins of an 11-inch figure
BINS = round(PANEL_WIDTH_IN * PNG_DPI)  # one slice of time per pixel of the PNG
UNITS = ((600, 1, "s"), (3 * 3600, 60, "min"), (float("inf"), 3600, "h"))  # up to 10 min in s, 3 h in min


MAX_GPUS = 4  # GPUs a timeline draws, each its own panels; a larger job shows those that stand out, and says so


def gpus_drawn(samples, manifest, summary) -> list[tuple[int, str | None]]:
    """The GPUs the timeline draws, as (NVML index, UUID): every GPU a watched job's samples hold, or each rank's
    GPU of a distributed run whose samples hold them, each its own panels; else the GPU the run is about."""
    gpu = manifest.get("gpu") or {}
    own = (gpu.get("nvml_index", summary[0].get("gpu") if summary else 0), gpu.get("uuid"))
    samples = as_samples(samples)
    if manifest.get("distributed"):
        return _ranks_gpus(samples, manifest) or [own]
    if manifest.get("kind") != "watch" or not samples.has("gpu") or not len(samples):
        return [own]
    import numpy as np

    index = samples.col("gpu")
    seen = (
        [int(i) for i in np.unique(index[np.isfinite(index)])]
        if index.dtype.kind == "f"
        else [int(i) for i in np.unique(index)]
    )
    if len(seen) <= 1:
        return [own]
    uuid = {r.get("gpu"): r.get("uuid") for r in summary}
    return [(i, uuid.get(i) if i != own[0] else own[1]) for i in seen]


def _ranks_gpus(samples, manifest) -> list[tuple[int, str | None]]:
    """Each rank's GPU whose rows the samples hold, in rank order, by UUID (under torchrun NVML indices repeat
    from node to node); none where the samples name no UUIDs."""
    if not samples.has("uuid") or not len(samples):
        return []
    held = set(samples.col("uuid").tolist())
    gpus = [(r["gpu"].get("nvml_index"), r["gpu"].get("uuid")) for r in manifest["distributed"].get("ranks") or ()]
    return [g for g in dict.fromkeys(gpus) if g[1] in held]


def standing_out(every: list, summary) -> list:
    """At most MAX_GPUS of the GPUs, in their order: the first, then those whose phases' SM activity is least and
    most, in turn (a straggler's idle GPU among eight busy ones is the one to see)."""
    if len(every) <= MAX_GPUS:
        return every
    sm: dict = {}  # GPU (its UUID, else its NVML index) -> (SM activity × seconds, seconds) over its phases
    for r in summary:
        if finite(r.get("sm_active_pct")) and finite(r.get("seconds")) and r.get("seconds") > 0:
            key = r.get("uuid") or r.get("gpu")
            a, w = sm.get(key, (0.0, 0.0))
            sm[key] = (a + r["sm_active_pct"] * r["seconds"], w + r["seconds"])
    known = {g: g[1] if g[1] in sm else g[0] for g in every}
    ranked = sorted((g for g in every[1:] if known[g] in sm), key=lambda g: sm[known[g]][0] / sm[known[g]][1])
    chosen = [every[0]]
    while len(chosen) < MAX_GPUS and ranked:
        chosen.append(ranked.pop(0))  # the least active left
        if ranked and len(chosen) < MAX_GPUS:
            chosen.append(ranked.pop())  # the most active left
    chosen += [g for g in every if g not in chosen][: MAX_GPUS - len(chosen)]  # no SM activity known: in order
    return sorted(chosen, key=every.index)


def rows_of_gpu(samples, manifest, summary, which=None):
    """The rows of one GPU (which: (NVML index, UUID); default the GPU the run is about): by UUID (under
    torchrun NVML indices repeat from node to node), else by NVML index."""
    samples = as_samples(samples)
    gpu, uuid = which or (
        manifest.get("gpu", {}).get("nvml_index", summary[0].get("gpu") if summary else 0),
        manifest.get("gpu", {}).get("uuid"),
    )
    rows = samples.of("uuid", uuid) if uuid is not None and samples.has("uuid") else None
    return rows if rows is not None and len(rows) else samples.of("gpu", gpu)


def draw(summary, samples, manifest, out_dir):
    samples = as_samples(samples)
    if len(manifest.get("gpus_sampled") or ()) <= 1 or manifest.get("distributed"):
        samples.load("gpu", "uuid")  # in one pass: which GPUs the rows hold, and the GPU's rows by UUID
    every = gpus_drawn(samples, manifest, summary)
    # several GPUs of one host (gpus_drawn found them by NVML index, each index one GPU) are cut by index: a
    # day's text column of UUIDs, compared row by row for each GPU, took longer than its numbers
    by_index = len(every) > 1 and not manifest.get("distributed")
    gpus = [
        (g, samples.of("gpu", g[0]) if by_index else rows_of_gpu(samples, manifest, summary, g))
        for g in standing_out(every, summary)
    ]
    gpus = [(g, rows) for g, rows in gpus if len(rows)]
    if not gpus:
        return empty(out_dir, "timeline", "The run over time", manifest)
    load_together([rows for _, rows in gpus], "t_start_s", "t_end_s", "phase", *(c for _, cols in PANELS for c in cols))
    rows = gpus[0][1]
    t0 = min(float(r.col("t_start_s")[0]) for _, r in gpus)
    length_s = max(float(np.max(r.col("t_end_s")) - t0) for _, r in gpus) * 1.005
    _, scale, unit = next(u for u in UNITS if length_s <= u[0])
    span_s = length_s / scale
    spans = job_spans(manifest, summary, gpus[0][0][0]) or [
        (p, a, b) for p, a, b in phase_spans(rows) if p != "gap" and not p.startswith("setup:")
    ]
    named = [(p, (a - t0) / scale, (b - t0) / scale) for p, a, b in spans]
    way, band_in, placed = label_layout(named, 0.0, span_s, PANEL_WIDTH_IN)
    many = len(gpus) > 1
    panel_in = PANEL_IN if not many else max(1.1, PANEL_IN * 1.6 / len(gpus))
    count = 4 * len(gpus)
    height = band_in + count * panel_in + 1.2 + (0.25 if many else 0)
    # the top row holds the phases' names: as tall as they need, no taller
    fig, axes = plt.subplots(
        count + 1,
        1,
        figsize=(11, height),
        sharex=True,
        gridspec_kw={"hspace": 0.12, "height_ratios": [band_in] + [panel_in] * count},
    )
    fig.subplots_adjust(top=1 - (0.55 + (0.25 if many else 0)) / height, bottom=0.6 / height)
    names, panels = axes[0], list(axes[1:])
    missing = []
    for k, (_, mine) in enumerate(gpus):
        _gpu_panels(
            panels[4 * k : 4 * k + 4],
            mine,
            t0,
            scale,
            manifest,
            missing if k == 0 else [],
            legend=k == 0,
            who=_who(manifest, gpus[k][0]) if many else "",
        )
        work = [
            (r["tflops"], r["t_start"], r["t_end"])
            for r in of_gpu(summary, manifest, gpus[k][0])
            if finite(r.get("tflops")) and finite(r.get("t_start")) and finite(r.get("t_end"))
        ]
        ax = panels[4 * k + 3]
        if work:  # one line, broken between phases: thousands of phases draw as fast, and as small, as a few
            y, a, b = (np.array(v, dtype=np.float64) for v in zip(*work))
            gap = np.full(len(y), np.nan)
            ax.plot(
                np.column_stack([(a - t0) / scale, (b - t0) / scale, gap]).ravel(),
                np.column_stack([y, y, gap]).ravel(),
                color=C["work"],
                lw=2.5,
                solid_capstyle="butt",
            )
        # a rate read against zero, not against the narrow band it moved in, with room above its highest line
        ax.set_ylim(0, 1.15 * max((w[0] for w in work), default=0) or None)
        ax.set_ylabel(_ylabel("achieved TFLOP/s", _who(manifest, gpus[k][0]) if many else ""), fontsize=9)
    ax = panels[-1]
    ax.set_xlabel(f"time since the recording started, {unit}")
    ax.set_xlim(0, span_s)
    labelled = _shade_phases(panels, names, named, span_s / BINS, way, placed)
    phases = len({p for p, _, _ in named})
    gpus_said = (
        (
            f"each of its {len(every)} GPUs its own panels"
            if len(gpus) == len(every)
            else f"{len(gpus)} of its {len(every)} GPUs (GPU {every[0][0]} and those of least and most SM "
            "activity), each its own panels"
        )
        if many
        else ""
    )
    fig.suptitle(
        title(
            manifest,
            "timeline",
            "GPU-Util sits at 100% through almost every phase; SM activity, pipes and TFLOP/s tell them apart",
        )
        + (f" ({len(labelled):,} of {phases:,} phases named: no room for more)" if len(labelled) < phases else "")
        + (f"\n{gpus_said}" if gpus_said else ""),
        fontsize=11,
        x=0.01,
        ha="left",
        y=0.995,
    )
    return save(fig, manifest, out_dir, "timeline"), {
        "missing": missing,
        "phases": labelled,
        "gpus": [g for g, _ in gpus],
    }


def _who(manifest, gpu) -> str:
    """A GPU's name on its panels: its NVML index, and its rank where the run was distributed."""
    ranks = (manifest.get("distributed") or {}).get("ranks") or ()
    rank = next((r["rank"] for r in ranks if (r.get("gpu") or {}).get("uuid") == gpu[1]), None)
    return f"rank {rank}, GPU {gpu[0]}" if rank is not None else f"GPU {gpu[0]}"


def _ylabel(text: str, who: str) -> str:
    return f"{who}\n{text}" if who else text


def _gpu_panels(panels, rows, t0, scale, manifest, missing, legend, who):
    """One GPU's lines in its three panels of percentages; the legend beside the first GPU's only."""
    t = (rows.col("t_end_s") - t0) / scale
    for ax, (ylabel, cols) in zip(panels, PANELS):
        for col in cols:
            ys = rows.col(col)
            label = LINE_LABELS.get(col, BY_COLUMN[col].label)
            label += LEFT_OUT if col in manifest.get("left_out", ()) else ""
            if np.isfinite(ys).any():
                wide = col.startswith("smi_")
                ax.plot(
                    *envelope(t, ys, BINS),
                    color=C[col],
                    lw=4.5 if wide else 1.2,
                    alpha=0.6 if wide else 1,
                    zorder=1 if wide else 3,
                    label=label,
                )
            else:
                missing.append(col)
                ax.plot([], [], color=C[col], lw=1, ls=":", label=f"{label}: unavailable in this run")
        ax.set_ylim(-3, 108)
        ax.set_ylabel(_ylabel(ylabel, who), fontsize=9)
        if legend:
            ax.legend(loc="upper left", bbox_to_anchor=(1.005, 1.0), fontsize=8.5, frameon=False)


def of_gpu(summary, manifest, which=None) -> list[dict]:
    """The summary's rows of one GPU (which: (NVML index, UUID); default the GPU the run is about): by UUID,
    else by NVML index."""
    gpu = manifest.get("gpu", {})
    index, uuid = which or (gpu.get("nvml_index", summary[0].get("gpu") if summary else 0), gpu.get("uuid"))
    mine = [r for r in summary if uuid is not None and r.get("uuid") == uuid]
    return mine or [r for r in summary if r.get("gpu") == index] or (summary if which is None else [])


def _shade_phases(panels, names, named, pixel, way, placed) -> list[str]:
    """Shade each named phase across the panels (x in the axis' units; a span narrower than a pixel would
    not show, and is left out, so that a job marking every few seconds does not swell the figure), every
    other one darker, as two collections a panel however many phases there are; and write the names
    label_layout placed in the band above."""
    from matplotlib.collections import PolyCollection

    names.axis("off")
    names.set_ylim(0, 1)
    shades: list[list] = [[], []]
    for k, (phase, a, b) in enumerate(named):
        if b - a < pixel and len(named) > BINS:
            continue
        shades[k % 2].append([(a, 0), (b, 0), (b, 1), (a, 1)])
    for ax in panels:
        for k, boxes in enumerate(shades):
            if boxes:  # x in data, y across the whole axis, as axvspan draws
                ax.add_collection(
                    PolyCollection(
                        boxes, transform=ax.get_xaxis_transform(), facecolor="#000", alpha=0.07 if k else 0.035, lw=0
                    ),
                    autolim=False,
                )
    lines = 1 + max((line for _, _, line in placed), default=0)
    for label, x, line in placed:
        if way == "across":
            names.text(x, (line + 0.2) / lines, label, ha="center", va="bottom", fontsize=LABEL_PT)
        else:
            names.text(x, 0.02, label, rotation=90, ha="center", va="bottom", fontsize=LABEL_PT)
    return list(dict.fromkeys(label for label, _, _ in placed))
