"""No two labels of a figure overlap, and no value label sits on the error bar or the dot it annotates: measured
on the committed runs' figures, re-drawn from results/ (matplotlib's own text extents, after a draw)."""

import math
import os
from pathlib import Path

import matplotlib.text
import pytest
from matplotlib.collections import LineCollection, PathCollection
from matplotlib.container import ErrorbarContainer
from synthetic import drawing_modules

from gpubench.record.rundir import load_run
from gpubench.show.figures import common, figures_for

RESULTS = Path(__file__).resolve().parents[2] / "results"
# One of each kind: the suite's reference run on each GPU, watched jobs on one GPU and on two (each GPU its own
# rows), and a run under torchrun. GPUBENCH_ALL_RUNS=1 checks every committed run (about a minute and a half).
SHOWN = [
    "h100-80gb-hbm3-20261124-232113",
    "h200-20261124-233527",
    "watch-llama-8k-h100-80gb-hbm3",
    "watch-ddp-slow-rank-h200-x2",
    "h200-x2-20261129-154637",
]
SLACK_PX = 1.0  # boxes that only touch are not an overlap


def committed_runs() -> list[str]:
    if os.environ.get("GPUBENCH_ALL_RUNS"):
        return sorted(p.parent.name for p in RESULTS.glob("*/manifest.json"))
    return SHOWN


@pytest.fixture
def drawn(monkeypatch):
    """Each figure as drawn (name -> figure, and the texts matplotlib drew in it), instead of being saved."""
    figures, texts = {}, {}
    drawing: list = []
    original = matplotlib.text.Text.draw

    def draw(self, renderer):  # only what the renderer really draws: visible, non-empty, within a shown axis
        drawing.append(self)
        return original(self, renderer)

    def keep(fig, manifest, out_dir, name):
        common.stamp(fig, manifest)  # as save does: the stamp is drawn with the rest
        drawing.clear()
        fig.canvas.draw()
        figures[name], texts[name] = fig, [t for t in drawing if t.get_visible() and t.get_text().strip()]
        return []

    monkeypatch.setattr(matplotlib.text.Text, "draw", draw)
    for module in drawing_modules():
        monkeypatch.setattr(module, "save", keep)
    yield figures, texts
    for fig in figures.values():
        common.plt.close(fig)


def _box(artist, renderer):
    return artist.get_window_extent(renderer)


def _shape(item, renderer):
    """A label as the rectangle its glyphs fill, turned as it is written: (centre, width, height, angle). A
    turned label's upright box is its rectangle's box, so the two share a centre."""
    box = _box(item, renderer) if hasattr(item, "get_window_extent") else item
    centre = ((box.x0 + box.x1) / 2, (box.y0 + box.y1) / 2)
    angle = item.get_rotation() if isinstance(item, matplotlib.text.Text) else 0.0
    if angle % 180 == 0:
        return centre, box.x1 - box.x0, box.y1 - box.y0, 0.0
    item.set_rotation(0)
    flat = _box(item, renderer)
    item.set_rotation(angle)
    return centre, flat.x1 - flat.x0, flat.y1 - flat.y0, math.radians(angle)


def _corners(shape):
    (cx, cy), w, h, a = shape
    ux, uy, vx, vy = math.cos(a), math.sin(a), -math.sin(a), math.cos(a)
    return [
        (cx + sx * w / 2 * ux + sy * h / 2 * vx, cy + sx * w / 2 * uy + sy * h / 2 * vy)
        for sx, sy in ((-1, -1), (1, -1), (1, 1), (-1, 1))
    ]


def _overlap(a, b) -> bool:
    """Whether two turned rectangles share more than SLACK_PX: no axis of either separates them."""
    ca, cb = _corners(a), _corners(b)
    for shape in (a, b):
        angle = shape[3]
        for axis in ((math.cos(angle), math.sin(angle)), (-math.sin(angle), math.cos(angle))):
            pa = [x * axis[0] + y * axis[1] for x, y in ca]
            pb = [x * axis[0] + y * axis[1] for x, y in cb]
            if min(pa) + SLACK_PX >= max(pb) or min(pb) + SLACK_PX >= max(pa):
                return False
    return True


def label_overlaps(fig, texts) -> list[str]:
    renderer = fig.canvas.get_renderer()
    shapes = [(t, _shape(t, renderer)) for t in texts]
    return [
        f"{a.get_text()!r} overlaps {b.get_text()!r}"
        for i, (a, sa) in enumerate(shapes)
        for b, sb in shapes[i + 1 :]
        if _overlap(sa, sb)
    ]


def marks(ax, renderer):
    """The boxes of what value labels annotate and must leave clear: error bars and their caps, scatter dots."""
    out = []
    for container in ax.containers:
        if isinstance(container, ErrorbarContainer):
            _, caps, bars = container.lines
            out += [_box(c, renderer) for c in caps]
            for collection in bars:
                out += [_segment_box(seg, collection) for seg in collection.get_segments()]
    for collection in ax.collections:
        if isinstance(collection, PathCollection) and not isinstance(collection, LineCollection):
            sizes = collection.get_sizes()
            for k, (x, y) in enumerate(collection.get_offset_transform().transform(collection.get_offsets())):
                r = (sizes[k % len(sizes)] ** 0.5) / 2 * fig_dpi(ax) / 72
                out.append(_Box(x - r, y - r, x + r, y + r))
    return out


def _segment_box(seg, collection):
    pts = collection.get_transform().transform(seg)
    return _Box(pts[:, 0].min(), pts[:, 1].min(), pts[:, 0].max(), pts[:, 1].max())


class _Box:
    def __init__(self, x0, y0, x1, y1):
        self.x0, self.y0, self.x1, self.y1 = x0, y0, x1, y1


def fig_dpi(ax):
    return ax.figure.dpi


def mark_overlaps(fig, texts) -> list[str]:
    renderer = fig.canvas.get_renderer()
    out = []
    for ax in fig.axes:
        mine = [t for t in texts if t in ax.texts]
        for mark in marks(ax, renderer) if mine else ():
            shape = _shape(mark, renderer)
            out += [
                f"{t.get_text()!r} sits on a mark it annotates" for t in mine if _overlap(_shape(t, renderer), shape)
            ]
    return out


def legend_overlaps(fig) -> list[str]:
    """A legend over any axis' ticks or labels (a twin's on the right included) hides what it names."""
    renderer = fig.canvas.get_renderer()
    legends = [ax.get_legend() for ax in fig.axes if ax.get_legend()] + fig.legends
    out = []
    for legend in legends:
        lb = legend.get_window_extent(renderer)
        for k, ax in enumerate(fig.axes):
            for axis in (ax.xaxis, ax.yaxis) if ax.axison else ():
                box = axis.get_tightbbox(renderer)
                if box is not None and box.width and _overlap(_shape(lb, renderer), _shape(box, renderer)):
                    out.append(
                        f"a legend ({legend.texts[0].get_text()!r}, ...) covers axes {k}'s {axis.axis_name} axis"
                    )
    return out


@pytest.mark.parametrize("name", committed_runs())
def test_no_label_overlaps_another_or_the_marks_it_annotates(name, drawn, tmp_path):
    figures, texts = drawn
    manifest, samples, summary = load_run(RESULTS / name)
    for figure in figures_for(manifest):
        figure.draw(summary, samples, manifest, tmp_path)
    assert set(figures) == {f.name for f in figures_for(manifest)}
    problems = [
        f"{fig_name}: {p}"
        for fig_name, fig in figures.items()
        for p in label_overlaps(fig, texts[fig_name]) + mark_overlaps(fig, texts[fig_name]) + legend_overlaps(fig)
    ]
    assert not problems, "\n".join(problems)


def test_the_check_sees_an_overlap(drawn, tmp_path):
    """A figure with two labels on one spot, and a label on an error bar, fails the check."""
    fig, ax = common.plt.subplots()
    ax.bar(0, 10, yerr=[[1], [3]], capsize=3)
    ax.text(0, 10, "10 ms", ha="center", va="bottom")
    ax.text(0.02, 10.1, "10 ms", ha="center", va="bottom")
    _, texts = drawn
    common.save(fig, {}, tmp_path, "probe")
    assert label_overlaps(fig, texts["probe"]) and mark_overlaps(fig, texts["probe"])


def test_the_check_sees_a_legend_over_an_axis(drawn, tmp_path):
    """A legend placed over a twin axis' ticks on the right fails the check; moved clear of them, it passes."""
    fig, ax = common.plt.subplots()
    ax.plot([0, 1], [0, 100], label="GPU-Util, %")
    twin = ax.twinx()
    twin.set_ylim(0, 700)
    twin.set_ylabel("W")
    ax.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0))
    common.save(fig, {}, tmp_path, "probe")
    assert legend_overlaps(fig)
    ax.legend(loc="upper left", bbox_to_anchor=(1.2, 1.0))
    common.save(fig, {}, tmp_path, "probe")
    assert not legend_overlaps(fig)
