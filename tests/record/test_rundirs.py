"""Run directories that are damaged, empty, foreign or out of range, and an --out the file system cannot look
up or a disk that refuses mid-write: one sentence and exit 2 where nothing can be done, and nothing written
half-way. Read-only runs and --out: test_rundirs_out.py; partial runs: test_rundirs_partial.py."""

import csv

import numpy as np
import pytest
from rundamage import drop_column, lines, refused, run_dir, set_cell, set_field, set_line, snapshot
from synthetic import make_run

from gpubench.cli import main
from gpubench.read.samples import Samples
from gpubench.record import arrowfile
from gpubench.record.rundir import SAMPLE_KEYS, load_run
from gpubench.show import figures, stage

FIXTURES = (run_dir,)  # pytest finds it by its name in this module


@pytest.mark.parametrize("command", ["plot", "report"])
@pytest.mark.parametrize(
    "damage,message",
    [
        (lambda d: (d / "manifest.json").write_text('{"gpu": {"name": "H'), "manifest.json is not valid JSON"),
        (lambda d: set_field(d / "manifest.json", gpu="H200"), "manifest.json is damaged: its 'gpu' is not"),
        (lambda d: set_line(d / "samples.csv", 5, "\x00\x00garbage"), "samples.csv line 5 is not a sample row"),
        (
            lambda d: set_line(d / "samples.csv", 7, "1,2,3,zero,GPU-x,idle,a,b,c,d,e,f,g,h"),
            "samples.csv line 7 is not",
        ),
        (lambda d: set_line(d / "summary.csv", 3, "garbage"), "summary.csv line 3 does not have the header's fields"),
        (
            lambda d: set_cell(d / "summary.csv", 3, "kernel_ms", "abc"),
            "summary.csv line 3 is not a summary row (kernel_ms is not a number)",
        ),
        # a single time that is not one: the first row's start, the last row's end
        (
            lambda d: set_cell(d / "samples.csv", 2, "t_start_s", "inf"),
            "samples.csv is damaged: line 2: its t_start_s is inf",
        ),
        (
            lambda d: set_cell(d / "samples.csv", lines(d / "samples.csv"), "t_end_s", "nan"),
            "its t_end_s is nan, not a time",
        ),
        (
            lambda d: set_cell(d / "samples.csv", 9, "t_end_s", "-3"),
            "samples.csv is damaged: line 9: its t_end_s is -3",
        ),
        (lambda d: drop_column(d / "samples.csv", "phase"), "samples.csv is damaged: it lacks the column phase"),
        (
            lambda d: drop_column(d / "samples.csv", "t_start_s"),
            "samples.csv is damaged: it lacks the column t_start_s",
        ),
        # manifest fields of the wrong type, wherever plot and report read them
        (
            lambda d: set_field(d / "manifest.json", peaks={"datasheet": {"dram": "4.8e12"}}),
            "manifest.json is damaged: its 'peaks.datasheet.dram' is not a number",
        ),
        (
            lambda d: set_field(d / "manifest.json", gpu={"name": "H200", "sm_count": "132"}),
            "manifest.json is damaged: its 'gpu.sm_count' is not a whole number",
        ),
        (
            lambda d: set_field(d / "manifest.json", warnings=["ok", 7]),
            "manifest.json is damaged: its 'warnings[1]' is not text",
        ),
        (
            lambda d: set_field(d / "manifest.json", families={"copy": {"story": ["{said:999999999f}"]}}),
            "manifest.json is damaged: its 'families.copy.story[0]' is not a sentence to fill",
        ),
        (
            lambda d: (d / "manifest.json").write_text("[" * 100_000 + "]" * 100_000),
            "manifest.json is nested too deeply",
        ),
    ],
)
def test_a_damaged_run_directory_is_one_sentence_and_nothing_is_written(run_dir, capsys, command, damage, message):
    damage(run_dir)
    before = snapshot(run_dir)
    refused(capsys, [command, str(run_dir)], message)
    assert snapshot(run_dir) == before


def test_a_torn_line_that_is_not_the_last_is_refused(run_dir, capsys):
    set_line(run_dir / "samples.csv", 4, "177.2000,177.3000,17")
    refused(capsys, ["plot", str(run_dir)], "samples.csv line 4 is not a sample row")


@pytest.mark.parametrize("command", ["plot", "report"])
def test_figures_being_a_file_is_refused_and_left_alone(run_dir, capsys, command):
    (run_dir / "figures").write_text("not figures")
    before = snapshot(run_dir)
    refused(capsys, [command, str(run_dir)], f"{run_dir / 'figures'} is a file", "--out DIR")
    assert snapshot(run_dir) == before


def test_a_disk_that_refuses_mid_write_is_one_sentence_and_leaves_no_figures(run_dir, capsys, monkeypatch):
    def full(*a, **k):
        raise OSError(28, "No space left on device", str(run_dir / "figures"))

    monkeypatch.setattr(stage.tempfile, "mkdtemp", full)
    refused(capsys, ["plot", str(run_dir)], "No space left on device; write elsewhere with --out DIR")
    assert not (run_dir / "figures").exists()


def test_a_figure_that_fails_leaves_the_old_figures_as_they_were(run_dir, monkeypatch):
    monkeypatch.setattr(figures, "FIGURES", figures.FIGURES[:2])
    assert main(["plot", str(run_dir)]) == 0
    before = snapshot(run_dir)

    def broken(summary, samples, manifest, out_dir):
        raise RuntimeError("a bug in a figure")

    monkeypatch.setattr(figures, "FIGURES", figures.FIGURES[:2] + (figures.Figure("broken", "", broken),))
    with pytest.raises(RuntimeError):
        figures.plot_run(run_dir, *load_run(run_dir))
    assert snapshot(run_dir) == before  # no figure replaced, no hidden folder left


@pytest.mark.parametrize("command", ["run", "watch", "plot", "report"])
@pytest.mark.parametrize(
    "where,said", [("loop", "leads into a loop of symbolic links"), ("a" * 300, "cannot be used: file name too long")]
)
def test_an_out_the_file_system_cannot_look_up_is_one_sentence(run_dir, tmp_path, capsys, command, where, said):
    if where == "loop":
        (tmp_path / "loop").symlink_to(tmp_path / "pool")
        (tmp_path / "pool").symlink_to(tmp_path / "loop")
    out = tmp_path / where / "run"
    args = {"run": ["run"], "watch": ["watch"], "plot": ["plot", str(run_dir)], "report": ["report", str(run_dir)]}
    before = snapshot(run_dir)
    refused(capsys, args[command] + ["--out", str(out)] + (["--", "true"] if command == "watch" else []), said)
    assert snapshot(run_dir) == before


@pytest.mark.parametrize("command", ["plot", "report"])
@pytest.mark.parametrize(
    "fmt,damage,said",
    [
        (
            "csv",
            lambda d: (d / "samples.csv").write_text((d / "samples.csv").read_text().splitlines()[0] + "\n"),
            "holds no samples, so there is nothing to plot or report: samples.csv has no rows",
        ),
        (
            "arrows",
            lambda d: arrowfile.write(d / "samples.arrows", Samples({n: [] for n in SAMPLE_KEYS}), SAMPLE_KEYS),
            "samples.arrows has no rows, though its manifest says the run completed",
        ),
        (
            "csv",
            lambda d: (d / "samples.csv").write_text("time,value\n1,2\n3,4\n"),
            "samples.csv is damaged: it lacks the columns t_start_s, t_end_s, gpu, phase",
        ),
        ("csv", lambda d: (d / "manifest.json").write_text("{}"), "manifest.json is damaged: it has no 'kind'"),
    ],
)
def test_an_empty_or_foreign_run_is_refused_never_reported_completed(tmp_path, capsys, command, fmt, damage, said):
    run = make_run(tmp_path / "run", fmt=fmt)
    damage(run)
    before = snapshot(run)
    refused(capsys, [command, str(run)], said)
    assert snapshot(run) == before


def test_values_out_of_range_are_flagged_not_shown_as_numbers(run_dir, tmp_path, monkeypatch):
    rows = {r[0]: n for n, r in enumerate(csv.reader(open(run_dir / "summary.csv")), 1)}
    set_cell(run_dir / "summary.csv", rows["h2d-copy"], "gpu_util_pct", "-1000")
    set_cell(run_dir / "summary.csv", rows["spin-1thread"], "kernel_ms", "-2")
    copy_line = next(n for n, r in enumerate(csv.reader(open(run_dir / "samples.csv")), 1) if r[5] == "copy-triton")
    set_cell(run_dir / "samples.csv", copy_line, "gpu_util_pct", "-1000")
    manifest, samples, summary = load_run(run_dir)
    assert np.isnan(samples.col("gpu_util_pct")[copy_line - 2])  # not drawn, as no GPU reads so
    labels = {}
    monkeypatch.setattr(
        figures.timeline,
        "save",
        lambda fig, manifest, out, name: (
            labels.update({line.get_label(): line for ax in fig.axes for line in ax.get_lines()}) or []
        ),
    )
    figures.timeline.draw(summary, samples, manifest, tmp_path)
    assert "GPU util, through NVML\n(values out of range left out)" in labels  # the figure says so
    monkeypatch.undo()
    out = tmp_path / "out"
    assert main(["report", str(run_dir), "--out", str(out)]) == 0
    md = (out / "report.md").read_text()
    table = {line.split(" | ")[0][2:]: line for line in md.splitlines() if line.startswith("| ")}
    assert table["h2d-copy"].startswith("| h2d-copy | out of range |") and "-1000" not in table["h2d-copy"]
    assert table["spin-1thread"].endswith("| out of range |")  # kernel ms
    assert "Note: samples.csv: values of gpu_util_pct below 0 (such as -1000) are left out of the figures" in md
    assert "Note: summary.csv: its gpu_util_pct of h2d-copy is -1000, below 0: shown as out of range" in md
    assert "Note: summary.csv: its kernel_ms of spin-1thread is -2, below 0: shown as out of range" in md
    assert "nvidia-smi's GPU-Util reading was out of range" in md and "-1000%" not in md
