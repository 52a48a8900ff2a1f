"""What a reader sees in each figure: no legend over the data, no label outside its axes, no text too
small to read where the README shows it, every percentage formatted alike, and each mark explained."""

import re

import numpy as np
import pytest
from synthetic import drawing_modules, make_run

from gpubench.metrics import pct
from gpubench.record.rundir import load_run
from gpubench.show.figures import FIGURES, common, compare, timeline
from gpubench.show.figures.spans import job_spans, label_layout


@pytest.fixture
def figures(monkeypatch):
    """Each figure as drawn, by name, instead of being saved."""
    drawn = {}

    def keep(fig, manifest, out_dir, name):
        common.stamp(fig, manifest)  # as save does
        fig.canvas.draw()
        drawn[name] = fig
        return []

    for module in drawing_modules():
        monkeypatch.setattr(module, "save", keep)
    yield drawn
    for fig in drawn.values():
        common.plt.close(fig)


@pytest.fixture(params=[True, False], ids=["gpm", "no-gpm"])
def run(request, tmp_path):
    return load_run(make_run(tmp_path / "run", profiling=request.param))


def draw_all(run, out):
    manifest, samples, summary = run
    return {f.name: f.draw(summary, samples, manifest, out)[1] for f in FIGURES}


def texts(fig):
    for ax in fig.axes:
        yield from ((ax, t) for t in ax.texts)
    yield from ((None, t) for t in fig.texts)


def test_no_legend_covers_an_axes_and_no_label_leaves_its_axes(run, figures, tmp_path):
    draw_all(run, tmp_path)
    for name, fig in figures.items():
        boxes = [ax.get_window_extent() for ax in fig.axes if ax.axison or ax.texts]
        legends = [ax.get_legend() for ax in fig.axes if ax.get_legend()] + fig.legends
        for legend in legends:
            lb = legend.get_window_extent()
            assert not any(lb.overlaps(b) for b in boxes), f"{name}: a legend covers an axes"
        for ax, t in texts(fig):
            if ax is None or not t.get_text().strip():
                continue
            tb, ab = t.get_window_extent(), ax.get_window_extent()
            assert tb.x0 >= ab.x0 - 2 and tb.x1 <= ab.x1 + 2 and tb.y0 >= ab.y0 - 2 and tb.y1 <= ab.y1 + 2, (
                f"{name}: {t.get_text()!r} runs out of its axes"
            )


def test_text_is_readable_and_percentages_are_formatted_alike(run, figures, tmp_path):
    draw_all(run, tmp_path)
    for name, fig in figures.items():
        for ax, t in texts(fig):
            assert t.get_fontsize() >= 8, f"{name}: {t.get_text()!r} at {t.get_fontsize()} pt"
            value = re.search(r"\d%|^[\d.<]+$", t.get_text())  # a percentage, or a number alone
            if ax is not None and value and t.get_fontsize() < common.VALUE_PT:
                pytest.fail(f"{name}: value label {t.get_text()!r} smaller than {common.VALUE_PT} pt")
            for number in re.findall(r"(<?[\d.]+)%", t.get_text()):
                if not number.startswith("<"):
                    assert pct(float(number)) == f"{number}%", f"{name}: {number}% is not how pct() writes it"


def test_headline_labels_say_which_ground_truth(run, figures, tmp_path):
    notes = draw_all(run, tmp_path)["headline"]
    labels = [t.get_text() for _, t in texts(figures["headline"]) if "%" in t.get_text()]
    truths = [lab for lab in labels if lab.split()[0] in ("MFU", "MBU", "link")]
    assert len(truths) == sum("work" in marks for marks in notes.values()) > 0
    assert all(lab.split()[0] in ("MFU", "MBU", "link") or re.fullmatch(r"[\d.]+%", lab) for lab in labels)
    assert any(lab.startswith("link 143%") for lab in labels)  # past the axis: drawn inside the bar


def test_timeline_shows_nvml_over_nvidia_smi_and_names_every_phase(tmp_path, figures):
    manifest, samples, summary = load_run(make_run(tmp_path / "run"))
    samples = list(samples)  # rows as dicts, to change; the figure reads them as it reads Samples
    for i, row in enumerate(samples):
        row["smi_gpu_util_pct"] = row["gpu_util_pct"]
        if i < 3:
            row["phase"] = "peaks"
    _, notes = timeline.draw(summary, samples, manifest, tmp_path)
    assert notes["phases"][:2] == ["peak measurement", "idle"]
    assert set(notes["phases"]) >= {r["scenario"] for r in summary}
    lines = {line.get_label(): line for ax in figures["timeline"].axes for line in ax.get_lines()}
    nvml, smi = lines[timeline.LINE_LABELS["gpu_util_pct"]], lines[timeline.LINE_LABELS["smi_gpu_util_pct"]]
    assert nvml.get_zorder() > smi.get_zorder() and smi.get_linewidth() > 2 * nvml.get_linewidth()


def test_roofline_explains_its_colours_and_its_kernels_without_arithmetic(run, figures, tmp_path):
    notes = draw_all(run, tmp_path)["roofline"]
    fig = figures["roofline"]
    ax = fig.axes[0]
    names = [t for t in ax.texts if t.get_text() and not t.get_text().startswith(("No arithmetic", "ridge: "))]
    named = {t.get_text().split(": util")[0] for t in names}
    renderer = fig.canvas.get_renderer()
    lines = [ax.transData.transform_path(x.get_path()) for x in ax.lines]  # the roofs and the ridge
    crossed = [
        t.get_text() for t in names if any(p.intersects_bbox(t.get_window_extent(renderer), False) for p in lines)
    ]
    assert crossed == []  # no roof or ridge runs through a name
    readings = [pct(r.get("gpu_util_pct")) for r in run[2] if r["scenario"] in named]
    usual = max(set(readings), key=readings.count)
    assert 2 * readings.count(usual) > len(readings)  # the synthetic run's kernels mostly read alike
    assert f"nvidia-smi read {usual} busy for every kernel drawn" in ax.get_title(loc="left")
    by = {r["scenario"]: pct(r.get("gpu_util_pct")) for r in run[2]}
    assert all((": util" in t.get_text()) == (by[t.get_text().split(": util")[0]] != usual) for t in names)
    decode = {f"decode-b{b}" for b in (1, 16, 128, 512)}
    assert named == {"softmax-naive-torch", "softmax-fused", "gemm-torch"} | decode  # each dot with FLOPs, named
    box = next(t.get_text() for t in ax.texts if t.get_text().startswith("No arithmetic"))
    assert "copy-triton: " in box and "MBU" in box  # zero FLOPs: listed, not placed at a made-up x
    assert notes["copy-triton"]["intensity"] == 0 and "h2d-copy" not in notes
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert any("judged by MFU" in t for t in legend) and any("judged by MBU" in t for t in legend)
    assert any("left of the ridge" in t for t in legend) and any(t.get_text().startswith("ridge: ") for t in ax.texts)


def test_compare_never_puts_host_link_bytes_on_a_dram_axis(tmp_path, figures):
    manifest, samples, summary = load_run(make_run(tmp_path / "run"))
    h2d = next(r for r in summary if r["bound"] == "link")
    pinned = dict(h2d, scenario="h2d-pinned", baseline="h2d-copy", speedup_vs_baseline=1.0)
    compare.draw([h2d, pinned], samples, manifest, tmp_path)
    titles = [ax.get_title() for ax in figures["compare"].axes if ax.axison]
    assert titles and not any("DRAM" in t for t in titles) and "host link GB/s" in titles


def test_a_figure_without_data_says_so(tmp_path, figures):
    manifest, samples, summary = load_run(make_run(tmp_path / "run"))
    idle_only = [r for r in summary if r["bound"] == "none" and not common.finite(r.get("kernel_ms"))]
    for figure in FIGURES:
        if figure.name != "timeline":
            _, notes = figure.draw(idle_only, samples, manifest, tmp_path)
            assert notes == {"empty": common.NO_DATA}
    shown = [t.get_text() for t in figures["headline"].axes[0].texts]
    assert shown == [common.NO_DATA]


def test_the_stamp_overlaps_nothing_else_in_the_figure(run, figures, tmp_path):
    """The corner stamp (GPU, date, gpubench) lies clear of axis labels, tick labels and legends."""
    from matplotlib.text import Text

    draw_all(run, tmp_path)
    for name, fig in figures.items():
        renderer = fig.canvas.get_renderer()
        stamp = next(t for t in fig.texts if "gpubench" in t.get_text())
        box = stamp.get_window_extent(renderer)
        others = [t for t in fig.findobj(Text) if t is not stamp and t.get_visible() and t.get_text().strip()]
        hits = [t.get_text() for t in others if t.get_window_extent(renderer).overlaps(box)]
        assert hits == [], f"{name}: the stamp overlaps {hits}"


def test_the_phase_names_take_only_the_room_they_need(tmp_path, figures):
    """A watched job of a few phases names them across, in a band of a few lines: no tall empty band."""
    manifest, samples, summary = load_run(make_run(tmp_path / "run"))
    names = ["warmup", "train", "eval"]
    samples = list(samples)
    t0, t1 = samples[0]["t_start_s"], samples[-1]["t_end_s"]
    for i, row in enumerate(samples):
        row["phase"] = names[min(int(3 * (row["t_start_s"] - t0) / (t1 - t0)), 2)]
    _, notes = timeline.draw(summary, samples, dict(manifest, kind="watch"), tmp_path)
    fig = figures["timeline"]
    band, first = fig.axes[0].get_window_extent(), fig.axes[1].get_window_extent()
    assert notes["phases"] == names
    assert band.height < 0.1 * fig.bbox.height and band.height < 0.25 * first.height
    assert all(t.get_rotation() == 0 for t in fig.axes[0].texts)  # written across, not upright


def test_a_phase_that_recurs_is_named_at_least_once_however_many_times_it_recurs(tmp_path):
    spans = []
    for k in range(400):  # a day of train and eval, alternating
        spans.append(("train" if k % 2 == 0 else "eval", 100.0 * k, 100.0 * k + (90 if k % 2 == 0 else 10)))
    way, band_in, placed = label_layout(spans, 0.0, 40_000.0, 8.5)
    assert way == "across" and {label for label, _, _ in placed} == {"train", "eval"}
    assert band_in < 0.7 and len(placed) < 40  # a name where it fits, not one per span


def test_a_watch_on_eight_gpus_draws_the_first_and_those_of_least_and_most_sm_activity():
    """Eight GPUs are too many panels: the timeline keeps GPU 0 and the ones that stand out, such as a
    straggler's idle GPU among busy ones, whatever its index."""
    from gpubench.show.figures.timeline import MAX_GPUS, standing_out

    every = [(i, f"GPU-{i}") for i in range(8)]
    sm = {0: 90.0, 1: 91.0, 2: 92.0, 3: 89.0, 4: 93.0, 5: 35.0, 6: 90.5, 7: 99.0}
    summary = [{"gpu": i, "sm_active_pct": v, "seconds": 10.0} for i, v in sm.items()]
    drawn = standing_out(every, summary)
    assert len(drawn) == MAX_GPUS and [g for g, _ in drawn] == [0, 3, 5, 7]  # first, least (5, 3), most (7)
    assert standing_out(every[:3], summary) == every[:3]
    assert [g for g, _ in standing_out(every, [])] == [0, 1, 2, 3]  # nothing known: the first ones


@pytest.mark.parametrize(
    "run,gpu", [("bound-hf_trainer-h200", 0), ("watch-ddp-even-h200-x2", 0), ("watch-auto-jax-auto-2-h200", None)]
)
def test_a_watched_jobs_timeline_names_the_phases_its_summary_has(tmp_path, run, gpu):
    """Its samples name what the job marked while it ran and "run" for the rest (a job that marks nothing: all of
    it), where its summary cut start-up, warm-up, training and teardown: the figure draws the summary's."""
    from pathlib import Path

    manifest, samples, summary = load_run(Path(__file__).resolve().parents[2] / "results" / run)
    gpu = summary[0]["gpu"] if gpu is None else gpu
    spans = job_spans(manifest, summary, gpu)
    assert [p for p, _, _ in spans if p in ("start-up", "teardown")] == [
        r["phase"] for r in summary if r["gpu"] == gpu and r["kind"] in ("start-up", "teardown")
    ]
    assert {p for p, _, _ in spans} == {r["phase"] for r in summary if r["gpu"] == gpu} and "run" not in {
        p for p, _, _ in spans
    } - {r["phase"] for r in summary}
    assert all(a < b <= c for (_, a, b), (_, c, _) in zip(spans, spans[1:]))  # in order, none overlapping
    _, marks = timeline.draw(summary, samples, manifest, tmp_path)
    assert set(marks["phases"]) <= {p for p, _, _ in spans}


def test_a_distributed_runs_timeline_draws_each_ranks_gpu_and_its_rates_have_room_above(tmp_path, figures):
    """The two-GPU suite ran every scenario on both ranks, and its samples hold both GPUs: the timeline draws each
    rank's GPU, named by rank, not rank 0's alone; and no TFLOP/s line sits on its panel's top frame."""
    from pathlib import Path

    manifest, samples, summary = load_run(Path(__file__).resolve().parents[2] / "results" / "h200-x2-20261129-154637")
    _, notes = timeline.draw(summary, samples, manifest, tmp_path)
    ranks = manifest["distributed"]["ranks"]
    assert [uuid for _, uuid in notes["gpus"]] == [r["gpu"]["uuid"] for r in ranks]
    fig = figures["timeline"]
    labels = [ax.get_ylabel() for ax in fig.axes]
    assert any(label.startswith("rank 1, GPU 1\n") for label in labels), labels
    for ax in (a for a in fig.axes if a.get_ylabel().endswith("achieved TFLOP/s")):
        highest = max((np.nanmax(line.get_ydata(), initial=0) for line in ax.get_lines()), default=0)
        assert highest > 0 and ax.get_ylim()[1] >= 1.1 * highest, ax.get_ylabel()
