"""What every figure shares: colours, sizes, the corner stamp, saving with fixed metadata, the empty figure,
and which ground truth a row is judged by."""

from __future__ import annotations

import math
import os
from pathlib import Path

import matplotlib
import matplotlib.pyplot as plt
from matplotlib.transforms import Bbox

from gpubench.metrics import finite
from gpubench.record.rundir import SUMMARY_MISSING, partial
from gpubench.usage import visible

matplotlib.rcParams.update({"svg.hashsalt": "gpubench", "font.size": 10})
BYTES_NOTE = "useful bytes: each input read once, each output written once"
C = {
    "gpu_util_pct": "#d62728",
    "smi_gpu_util_pct": "#ff9896",
    "sm_active_pct": "#ff7f0e",
    "sm_occupancy_pct": "#bcbd22",
    "tensor_active_pct": "#9467bd",
    "dram_active_pct": "#1f77b4",
    "fp32_active_pct": "#8c564b",
    "work": "#2ca02c",
    "baseline": "#d62728",
    "candidate": "#2ca02c",
    "decode": "#e377c2",
    "mfu_pct": "#9467bd",
    "mbu_pct": "#1f77b4",
    "mbu_read_pct": "#17becf",
}
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
# After a line's label, where the samples file held values no GPU reads (below 0, above 100%): not drawn,
# rather than drawn as the edge of the axis (gpubench.record.schema).
LEFT_OUT = "\n(values out of range left out)"
PNG_DPI = 130
VALUE_PT = 9  # value labels: readable where the README shows a figure about 900 pixels wide
# Fixed metadata: no date, no library version, so re-plotting an unchanged run changes no byte.
METADATA = {"png": {"Software": "gpubench"}, "svg": {"Date": None, "Creator": "gpubench"}}


LABEL_MAX = 40  # characters of a row's or a phase's name on a figure: a job may name a phase at length


def printable(text) -> str:
    """text with what no font draws, or a terminal would act on (a NUL, an ESC, a newline from a damaged
    file), written out as an escape (gpubench.usage.visible)."""
    return visible(text)


def short(name: str) -> str:
    """A name as a figure writes it: printable, cut to LABEL_MAX characters, the cut marked."""
    name = printable(name)
    return name if len(name) <= LABEL_MAX else name[: LABEL_MAX - 1] + "…"


def stamp(fig, manifest):
    """The corner stamp added below everything drawn, right-aligned with it; the figure's tight box with it, in
    inches, measured at the PNG's resolution (one layout of the figure, which both files are cut to)."""
    gpu = manifest.get("gpu", {}).get("name") or "unknown GPU"
    date = (manifest.get("start_wall") or "")[:10]
    why = partial(manifest)
    text = printable(f"{gpu} · {date} · gpubench" + (f" · PARTIAL RUN: it {why}" if why else ""))
    fig.set_dpi(PNG_DPI)
    renderer = fig.canvas.get_renderer()
    # below everything drawn so far, axis labels and legends included: it can overlap none
    box = fig.get_tightbbox(renderer)
    width, height = fig.get_size_inches()
    label = fig.text(
        box.x1 / width,
        (box.y0 - 0.06) / height,
        text,
        ha="right",
        va="top",
        fontsize=8,
        color="#b22222" if why else "#666",
    )
    inches = label.get_window_extent(renderer).transformed(fig.dpi_scale_trans.inverted())
    return Bbox.union([box, inches])


def save(fig, manifest, out_dir: Path, name: str) -> list[Path]:
    """The figure stamped, then written as PNG and SVG, each to a temporary name renamed into place."""
    # One tight box for both files: savefig's "tight" lays a figure out twice more for each file it writes,
    # which for a day of samples took as long as drawing it.
    box = stamp(fig, manifest).padded(matplotlib.rcParams["savefig.pad_inches"])
    paths = []
    for ext, kw in (("png", {"dpi": PNG_DPI}), ("svg", {})):
        final = out_dir / f"{name}.{ext}"
        tmp = out_dir / f".{name}.tmp.{ext}"
        fig.savefig(tmp, bbox_inches=box, metadata=METADATA[ext], **kw)
        os.replace(tmp, final)
        paths.append(final)
    plt.close(fig)
    return paths


def work_fraction(row) -> tuple[str, float]:
    """The rung that tells the truth for this row: link share, NVLink share, MBU, or MFU, by its bound; a
    row bound by both roofs (decode) is judged by the nearer one, MBU below the ridge and MFU above it."""
    bound = row.get("bound")
    if bound == "link":
        return "link", row.get("link_pct", math.nan)
    if bound == "interconnect":
        return "NVLink", row.get("nvlink_pct", math.nan)
    if bound == "dram":
        return "MBU", row.get("mbu_pct", math.nan)
    if bound == "both":
        mbu, mfu = row.get("mbu_pct", math.nan), row.get("mfu_pct", math.nan)
        return ("MFU", mfu) if finite(mfu) and not (finite(mbu) and mbu >= mfu) else ("MBU", mbu)
    return "MFU", row.get("mfu_pct", math.nan)


def kernel_rows(summary):
    return [r for r in summary if r.get("bound") != "none" or finite(r.get("kernel_ms"))]


ROWS_MAX = 32  # rows a headline or ladder figure draws: the suite's 21 and more, and a reader can take them in


def length_s(row) -> float:
    """How long a row's window lasted: a watch's seconds, else its start to its end; 0 where unknown."""
    if finite(row.get("seconds")):
        return float(row["seconds"])
    a, b = row.get("t_start"), row.get("t_end")
    return float(b - a) if finite(a) and finite(b) else 0.0


def shown_rows(rows: list, kind: str = "phases") -> tuple[list, str | None]:
    """The rows a figure of one row each draws: all of them, or where there are more than ROWS_MAX (a job
    that marks every epoch has thousands) the ROWS_MAX that lasted longest, in their order, and a note that
    says so."""
    if len(rows) <= ROWS_MAX:
        return rows, None
    keep = set(sorted(range(len(rows)), key=lambda i: (-length_s(rows[i]), i))[:ROWS_MAX])
    return (
        [r for i, r in enumerate(rows) if i in keep],
        f"the {ROWS_MAX} longest of {len(rows):,} {kind}; summary.csv holds every one",
    )


def empty(out_dir, name, title, manifest):
    """A figure with nothing to draw says why, instead of a confident title over empty axes."""
    fig, ax = plt.subplots(figsize=(7, 2))
    ax.axis("off")
    lacking = manifest.get("summary_lacking")
    message = (
        NO_SUMMARY
        if SUMMARY_MISSING in manifest.get("read_notes", [])
        else f"no summary: {lacking}"
        if lacking
        else NO_DATA
    )
    ax.text(0.5, 0.5, message, ha="center", va="center", fontsize=11, color="#666")
    ax.set_title(title, fontsize=10, loc="left")
    return save(fig, manifest, out_dir, name), {"empty": message}


def envelope(t, y, bins: int):
    """A line of any length drawn in at most 2 x bins points, its spikes and dips kept: in each of `bins`
    equal slices of time, the lowest and the highest finite value, in their time order (with a slice per
    pixel it draws as the whole line would). A slice without a finite value breaks the line, as a missing
    value does. Lines of up to 2 x bins points are returned whole. Of equal values, the lowest is the first
    and the highest the last."""
    import numpy as np

    t, y = np.asarray(t, dtype=float), np.asarray(y, dtype=float)
    if len(t) <= 2 * bins or not t[-1] > t[0]:
        return t, y
    width = (t[-1] - t[0]) / bins
    slot = np.minimum(((t - t[0]) / width).astype(np.int64), bins - 1)
    finite = np.isfinite(y)
    if not finite.any():
        return t[[0, -1]], y[[0, -1]]
    lo, hi = _extremes(slot, y if finite.all() else np.where(finite, y, np.nan), bins)
    first, second = np.minimum(lo, hi), np.maximum(lo, hi)
    tx = np.full((bins, 2), np.nan)
    ty = np.full((bins, 2), np.nan)
    filled = slot[first]
    tx[:, 0] = tx[:, 1] = t[0] + (np.arange(bins) + 0.5) * width
    tx[filled, 0], tx[filled, 1] = t[first], t[second]
    ty[filled, 0], ty[filled, 1] = y[first], y[second]
    return tx.ravel(), ty.ravel()


def _extremes(slot, y, bins: int):
    """For each slice that holds a finite value (y: NaN where none): the index of its lowest value (the first
    of equals) and of its highest (the last of equals), slices in order. One GPU's rows are in time order, so
    each slice's rows lie together and a few passes find them (a sort of a day's rows took most of a
    timeline's time); rows in any other order are sorted."""
    import numpy as np

    if np.any(slot[1:] < slot[:-1]):
        keep = np.flatnonzero(~np.isnan(y))
        order = keep[np.lexsort((y[keep], slot[keep]))]  # by slice, then value; stable: equals in row order
        edges = np.flatnonzero(np.diff(slot[order])) + 1
        return order[np.r_[0, edges]], order[np.r_[edges, len(order)] - 1]
    starts = np.searchsorted(slot, np.arange(bins))
    counts = np.diff(np.r_[starts, len(slot)])
    starts = starts[counts > 0]
    low, high = np.fmin.reduceat(y, starts), np.fmax.reduceat(y, starts)  # fmin, fmax: NaN only where all are
    counts = counts[counts > 0]
    at_low = np.flatnonzero(y == np.repeat(low, counts))
    at_high = np.flatnonzero(y == np.repeat(high, counts))
    first_low = at_low[np.r_[True, slot[at_low][1:] != slot[at_low][:-1]]]
    last_high = at_high[np.r_[slot[at_high][1:] != slot[at_high][:-1], True]]
    return first_low, last_high
