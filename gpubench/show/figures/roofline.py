"""The roofline figure: each kernel against this GPU's roofs."""

from __future__ import annotations

import matplotlib.pyplot as plt
import matplotlib.transforms as mtransforms

from gpubench.metrics import finite, fmt_value, pct
from gpubench.read.summary import ridge_flop_per_byte, row_label

from .common import BYTES_NOTE, VALUE_PT, C, empty, kernel_rows, save, short

# A dot's colour says which ground truth judges the kernel.
DOTS = {
    "compute": (C["tensor_active_pct"], "compute-bound kernel, judged by MFU"),
    "dram": (C["dram_active_pct"], "memory-bound kernel, judged by MBU"),
    "both": (C["decode"], "decode: MBU left of the ridge, MFU right of it"),
}


def draw(summary, samples, manifest, out_dir):
    peaks = manifest.get("peaks") or {}
    measured, sheet = peaks.get("measured") or {}, peaks.get("datasheet") or {}
    rows = [
        r
        for r in kernel_rows(summary)
        if r.get("bound") in DOTS and r.get("bytes_per_call") and finite(r.get("tflops"))
    ]
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
            ax.plot(
                xs,
                [min(peak, bw * x) / 1e12 for x in xs],
                style,
                color="#444",
                lw=1,
                label=f"roof: {label} {peak / 1e12:.0f} TFLOP/s ({src}), DRAM {bw / 1e12:.2f} TB/s",
            )
            top = max(top, peak / 1e12)
    read_bw, bf16 = measured.get("dram_read"), measured.get("bf16_tensor") or sheet.get("bf16_tensor")
    if read_bw and bf16:  # the read ceiling beside the copy's: what a kernel that writes little can reach
        ax.plot(
            xs,
            [min(bf16, read_bw * x) / 1e12 for x in xs],
            ":",
            color=C["mbu_read_pct"],
            lw=1.2,
            label=f"roof: DRAM read {read_bw / 1e12:.2f} TB/s (measured; the copy's counts reads and writes)",
        )
    intensity = [r["flops_per_call"] / r["bytes_per_call"] for r in dots]
    ax.set(
        xscale="log",
        yscale="log",
        xlim=(min([*intensity, 1e-2]) / 3, 1e5),
        ylim=(min([r["tflops"] for r in dots] + [1e-2]) / 5, top * 4),
    )
    for bound, (color, label) in DOTS.items():
        mine = [(x, r["tflops"]) for x, r in zip(intensity, dots) if r["bound"] == bound]
        if mine:
            ax.scatter(*zip(*mine), s=34, color=color, zorder=3, label=label)
    ridge = ridge_flop_per_byte(peaks) if any(r["bound"] == "both" for r in dots) else None
    if ridge:  # where the decode sweep crosses from the memory roof to the compute roof
        ax.axvline(ridge, color=C["decode"], ls=":", lw=1.2, zorder=1)
        ax.text(
            ridge * 1.08,
            0.4,
            f"ridge: {ridge:.0f} FLOP per byte",
            rotation=90,
            color=C["decode"],
            fontsize=VALUE_PT,
            ha="left",
            va="center",
            transform=mtransforms.blended_transform_factory(ax.transData, ax.transAxes),
        )
    if flat:
        ax.text(
            0.985,
            0.025,
            "No arithmetic (0 FLOP per byte), so no point on log axes:\n"
            + "\n".join(
                f"{short(row_label(r))}: {fmt_value('gbps', r.get('gbps'))} GB/s useful, MBU {pct(r.get('mbu_pct'))}, "
                f"nvidia-smi {pct(r.get('gpu_util_pct'))}"
                for r in flat
            ),
            transform=ax.transAxes,
            ha="right",
            va="bottom",
            fontsize=VALUE_PT,
            bbox={"fc": "white", "ec": "#bbb", "alpha": 0.9},
        )
    notes = {
        row_label(r): {
            "intensity": r["flops_per_call"] / r["bytes_per_call"],
            "tflops": r["tflops"],
            "gpu_util_pct": r.get("gpu_util_pct"),
        }
        for r in rows
    }
    for r in dots if ridge else ():
        if r["bound"] == "both":
            notes[row_label(r)]["ridge"] = ridge
    ax.set_xlabel(
        f"arithmetic intensity, FLOP per byte ({BYTES_NOTE}; a GEMM's bytes are its minimum traffic)", fontsize=9
    )
    ax.set_ylabel("achieved TFLOP/s")
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.17), ncol=2, fontsize=8.5, frameon=False)
    usual, utils = _usual_util(dots), {pct(r.get("gpu_util_pct")) for r in dots}
    ax.set_title(
        "Each kernel against this GPU's roofs; a host-to-device copy is judged by the host link, so it is not here"
        + (f"\nnvidia-smi read {usual} busy for every kernel drawn" if usual else "")
        + (" but those whose name gives another reading" if usual and len(utils) > 1 else ""),
        fontsize=10,
        loc="left",
    )
    ax.minorticks_off()  # over ten decades a grid line per decade reads best
    ax.grid(alpha=0.25)
    _label_dots(ax, intensity, dots)  # last: the names are placed in the axes as they will be drawn
    return save(fig, manifest, out_dir, "roofline"), notes


def _usual_util(dots) -> str | None:
    """The GPU-Util most of the dots read, as written, where more than half read it."""
    readings = [pct(r.get("gpu_util_pct")) for r in dots]
    most = max(set(readings), key=readings.count, default=None)
    return most if most is not None and 2 * readings.count(most) > len(readings) else None


def _label_dots(ax, intensity, dots):
    """Name each dot beside it, where the name (as the renderer measures it) overlaps no name placed before and
    no dot: to its right, or its left in the right part of the axes, then a line further down or up, with a
    thin leader back to the dot; the highest dots are named first."""
    fig = ax.figure
    renderer = fig.canvas.get_renderer()
    frame = ax.get_window_extent(renderer)
    line = (VALUE_PT + 3) * fig.dpi / 72
    pts = ax.transData.transform(list(zip(intensity, [r["tflops"] for r in dots])))
    radius = 34**0.5 / 2 * fig.dpi / 72 + 1  # the dots' s=34 points², and a pixel of air
    taken = [mtransforms.Bbox.from_extents(x - radius, y - radius, x + radius, y + radius) for x, y in pts]
    taken += [t.get_window_extent(renderer) for t in ax.texts]  # the ridge's name, the box of flat kernels
    lines = [ax.transData.transform_path(x.get_path()) for x in ax.lines]  # the roofs and the ridge: no name on them
    usual = _usual_util(dots)  # the title says it once; a name says only a reading that differs
    for i in sorted(range(len(dots)), key=lambda i: -pts[i][1]):
        r, (px, py) = dots[i], pts[i]
        util = pct(r.get("gpu_util_pct"))
        text = short(row_label(r)) if util == usual else f"{short(row_label(r))}: util {util}"
        prefer_left = px > frame.x0 + 0.62 * frame.width
        label = ax.annotate(
            text, (intensity[i], r["tflops"]), xytext=(8, 0), textcoords="offset points", va="center", fontsize=VALUE_PT
        )
        for dy, left in _candidates(prefer_left):
            label.set_position((-8 if left else 8, dy * line * 72 / fig.dpi))
            label.set_ha("right" if left else "left")
            box = label.get_window_extent(renderer)
            inside = frame.x0 <= box.x0 and box.x1 <= frame.x1 and frame.y0 <= box.y0 and box.y1 <= frame.y1
            crossed = any(path.intersects_bbox(box, filled=False) for path in lines)
            if inside and not crossed and not any(box.overlaps(t) for t in taken):
                break
        taken.append(box)
        if dy:  # a leader from the name's near edge to its dot
            end = ((box.x1 if left else box.x0) - px, (box.y0 + box.y1) / 2 - py)
            ax.annotate(
                "",
                (intensity[i], r["tflops"]),
                xytext=(end[0] * 72 / fig.dpi, end[1] * 72 / fig.dpi),
                textcoords="offset points",
                arrowprops={
                    "arrowstyle": "-",
                    "color": "#999",
                    "lw": 0.6,
                    "shrinkA": 0,
                    "shrinkB": radius * 72 / fig.dpi,
                },
            )


def _candidates(prefer_left: bool):
    """(lines down, to the left) in the order a name tries them: beside its dot first, then further away."""
    for step in range(0, 13):
        for dy in (0,) if step == 0 else (-step, step):
            yield dy, prefer_left
            yield dy, not prefer_left
