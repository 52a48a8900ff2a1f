"""Teaching figures from a run directory's files alone: headline, ladder, timeline, roofline, compare,
energy, decode, ranks.

Every figure states its finding in the title, carries the GPU and date in a corner (and PARTIAL RUN
where the run did not complete), labels its axes with units, and marks a metric the run could not
record as unavailable instead of drawing it as 0. Legends sit outside the data, labels inside their
axes, value labels at VALUE_PT or more, and every percentage is written by metrics.pct. Which row is a
baseline, and which ground truth a kernel has (MFU, MBU, link), comes from the summary's own columns: no
scenario name is written here. Each draw function returns the numbers it annotated, so tests can hold
them against summary.csv. plot_run draws every figure into a stage folder (gpubench.show.stage) and
moves them into place only when all succeeded; files carry no date and no library version, so
re-plotting an unchanged run changes no byte.
"""

from __future__ import annotations

import os
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from gpubench.show.stage import commit, stale, staging


def _agg():
    """matplotlib, drawing with Agg whatever MPLBACKEND says: gpubench never opens a window, and matplotlib
    refuses to import at all where MPLBACKEND names a backend it does not know."""
    saved = os.environ.pop("MPLBACKEND", None)
    try:
        import matplotlib
    finally:
        if saved is not None:
            os.environ["MPLBACKEND"] = saved
    matplotlib.use("Agg")  # before any figure module imports pyplot: no display is ever needed


_agg()

from . import compare, decode, energy, headline, ladder, ranks, roofline, timeline  # noqa: E402


def every_run(manifest: dict) -> bool:
    return True


def suite_run(manifest: dict) -> bool:
    """A run of the suite's kernels (gpubench run, alone or under torchrun), not a watched job."""
    return manifest.get("kind") != "watch"


def decode_run(manifest: dict) -> bool:
    """A suite run that ran the decode family."""
    return suite_run(manifest) and "decode" in (manifest.get("families") or {})


def ranked_run(manifest: dict) -> bool:
    """A run under torchrun: several ranks to draw."""
    return bool(manifest.get("distributed"))


@dataclass(frozen=True)
class Figure:
    name: str
    caption: str
    draw: Callable
    drawn_for: Callable[[dict], bool] = every_run  # the kinds of run this figure says something about
    job_caption: str = ""  # the caption in a watched job's report, for a figure drawn for one


FIGURES = (
    Figure(
        "headline",
        "What nvidia-smi said, against the work done",
        headline.draw,
        job_caption="What nvidia-smi said in each phase of the job, against the work done (MFU)",
    ),
    Figure(
        "ladder",
        "Which metric each kernel fools",
        ladder.draw,
        job_caption="The metric ladder of each phase of the job, beside the work done",
    ),
    Figure(
        "timeline",
        "The whole run over time",
        timeline.draw,
        job_caption="The job over time: GPU-Util beside SM activity, the pipes and each phase's TFLOP/s",
    ),
    Figure("roofline", "Each kernel against this GPU's roofs", roofline.draw, suite_run),
    Figure("compare", "Implementations against their baselines", compare.draw, suite_run),
    Figure("energy", "GPU-Util against the useful work each joule bought", energy.draw, suite_run),
    Figure(
        "decode",
        "LLM decode: tokens/s and step time against batch size, with MBU, MFU and GPU-Util",
        decode.draw,
        decode_run,
    ),
    Figure(
        "ranks",
        "Under torchrun: each rank's GPU-Util, SM activity and power, and its arrival at the collective",
        ranks.draw,
        ranked_run,
    ),
)


def own_files() -> set[str]:
    """Every file name a figure of gpubench's may have, whatever the run: what it may replace or remove."""
    return {f"{f.name}.{ext}" for f in FIGURES for ext in ("png", "svg")}


def figures_for(manifest: dict) -> list[Figure]:
    """The figures a run of this kind gets: a watched job has no roofline, a run on one GPU no ranks."""
    return [f for f in FIGURES if f.drawn_for(manifest)]


def figure_files(manifest: dict) -> list[str]:
    """The files plot_run writes for this run, each figure as PNG and SVG."""
    return [f"{f.name}.{ext}" for f in figures_for(manifest) for ext in ("png", "svg")]


def draw_all(manifest, samples, summary, out_dir: Path, notes: dict | None = None) -> list[Path]:
    """Every figure this kind of run gets (figures_for) into out_dir, as it is drawn; notes, where given,
    receives what each figure's draw returned, by figure name. A figure with nothing to draw (its marks say
    "empty", and why) leaves no file: a placeholder beside the run's figures would pass for one of them."""
    Path(out_dir).mkdir(exist_ok=True)
    drawn = []
    for figure in figures_for(manifest):
        with warnings.catch_warnings():
            # A glyph the font lacks (an emoji in a phase's name) is drawn as a box; matplotlib's warning for
            # it, printed with a line of gpubench's source, says nothing the figure does not show.
            warnings.filterwarnings("ignore", message=r"Glyph \d+ .*missing from", category=UserWarning)
            files, marks = figure.draw(summary, samples, manifest, Path(out_dir))
        if isinstance(marks, dict) and isinstance(marks.get("empty"), str):
            for f in files:
                Path(f).unlink(missing_ok=True)
            files = []
        drawn += files
        if notes is not None:
            notes[figure.name] = marks
    return drawn


def plot_run(run_dir, manifest, samples, summary, out_dir=None, notes: dict | None = None) -> list[Path]:
    """Every figure this kind of run gets into out_dir (default RUN_DIR/figures); notes as draw_all's.

    All are drawn into a stage folder first and moved into place only when every one succeeded, so a
    failure leaves out_dir as it was; then the figures of gpubench's own names that this run did not draw
    (another run's, plotted there before) are removed. OSError (a read-only or full disk) reaches the caller.
    """
    out = Path(out_dir) if out_dir is not None else Path(run_dir) / "figures"
    with staging(out) as stage:
        drawn = draw_all(manifest, samples, summary, stage, notes)
        moved = commit(stage, out, [f.name for f in drawn])
        stale(out, own_files(), {p.name for p in moved})
        return moved
