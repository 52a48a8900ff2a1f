"""Run directories that are damaged, read-only or partial, and plot/report --out: one sentence and exit 2
where nothing can be done, and nothing written half-way."""

import csv
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from synthetic import drawing_modules, make_run

from gpubench.cli import main
from gpubench.read.samples import Samples
from gpubench.record import arrowfile, preflight
from gpubench.record.rundir import SAMPLE_KEYS, load_run
from gpubench.show import figures, stage
from gpubench.show.figures import common
from gpubench.show.report import blocks, to_markdown


def snapshot(root: Path) -> dict:
    """Every file and folder under root, with the bytes of each file."""
    return {str(p.relative_to(root)): (p.read_bytes() if p.is_file() else None) for p in sorted(root.rglob("*"))}


def refused(capsys, args, *message):
    """main(args) exits 2 with one sentence on stderr that holds every part of message."""
    assert main(args) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err, err
    for part in message:
        assert part in err, err
    return err


@pytest.fixture
def run_dir(tmp_path):
    return make_run(tmp_path / "run", fmt="csv")  # damaged line by line below (samples.arrows: test_samples_file.py)


def set_line(path: Path, number: int, text: str | None):
    """Replace line `number` (1 = the header) of a CSV, or drop it where text is None."""
    lines = path.read_text().splitlines(keepends=True)
    lines[number - 1:number] = [] if text is None else [text + "\n"]
    path.write_text("".join(lines))


def set_field(path: Path, **fields):
    """Replace fields of a JSON object's file."""
    path.write_text(json.dumps({**json.loads(path.read_text()), **fields}))


def lines(path: Path) -> int:
    return len(path.read_text().splitlines())


def drop_column(path: Path, column: str):
    with open(path, newline="") as f:
        rows = list(csv.reader(f))
    at = rows[0].index(column)
    with open(path, "w", newline="") as f:
        csv.writer(f).writerows(row[:at] + row[at + 1:] for row in rows)


def set_cell(path: Path, number: int, column: str, text: str):
    """Replace one cell of line `number` of a CSV."""
    with open(path, newline="") as f:
        rows = list(csv.reader(f))
    rows[number - 1][rows[0].index(column)] = text
    with open(path, "w", newline="") as f:
        csv.writer(f).writerows(rows)


@pytest.mark.parametrize("command", ["plot", "report"])
@pytest.mark.parametrize("damage,message", [
    (lambda d: (d / "manifest.json").write_text('{"gpu": {"name": "H'), "manifest.json is not valid JSON"),
    (lambda d: set_field(d / "manifest.json", gpu="H200"), "manifest.json is damaged: its 'gpu' is not"),
    (lambda d: set_line(d / "samples.csv", 5, "\x00\x00garbage"), "samples.csv line 5 is not a sample row"),
    (lambda d: set_line(d / "samples.csv", 7, "1,2,3,zero,GPU-x,idle,a,b,c,d,e,f,g,h"), "samples.csv line 7 is not"),
    (lambda d: set_line(d / "summary.csv", 3, "garbage"), "summary.csv line 3 does not have the header's fields"),
    (lambda d: set_cell(d / "summary.csv", 3, "kernel_ms", "abc"),
     "summary.csv line 3 is not a summary row (kernel_ms is not a number)"),
    # a single time that is not one: the first row's start, the last row's end
    (lambda d: set_cell(d / "samples.csv", 2, "t_start_s", "inf"),
     "samples.csv is damaged: line 2: its t_start_s is inf"),
    (lambda d: set_cell(d / "samples.csv", lines(d / "samples.csv"), "t_end_s", "nan"),
     "its t_end_s is nan, not a time"),
    (lambda d: set_cell(d / "samples.csv", 9, "t_end_s", "-3"), "samples.csv is damaged: line 9: its t_end_s is -3"),
    (lambda d: drop_column(d / "samples.csv", "phase"), "samples.csv is damaged: it lacks the column phase"),
    (lambda d: drop_column(d / "samples.csv", "t_start_s"), "samples.csv is damaged: it lacks the column t_start_s"),
    # manifest fields of the wrong type, wherever plot and report read them
    (lambda d: set_field(d / "manifest.json", peaks={"datasheet": {"dram": "4.8e12"}}),
     "manifest.json is damaged: its 'peaks.datasheet.dram' is not a number"),
    (lambda d: set_field(d / "manifest.json", gpu={"name": "H200", "sm_count": "132"}),
     "manifest.json is damaged: its 'gpu.sm_count' is not a whole number"),
    (lambda d: set_field(d / "manifest.json", warnings=["ok", 7]),
     "manifest.json is damaged: its 'warnings[1]' is not text"),
    (lambda d: set_field(d / "manifest.json", families={"copy": {"story": ["{said:999999999f}"]}}),
     "manifest.json is damaged: its 'families.copy.story[0]' is not a sentence to fill"),
    (lambda d: (d / "manifest.json").write_text("[" * 100_000 + "]" * 100_000), "manifest.json is nested too deeply"),
])
def test_a_damaged_run_directory_is_one_sentence_and_nothing_is_written(run_dir, capsys, command, damage, message):
    damage(run_dir)
    before = snapshot(run_dir)
    refused(capsys, [command, str(run_dir)], message)
    assert snapshot(run_dir) == before


def test_a_torn_last_line_is_skipped_with_a_note_that_the_report_shows(run_dir):
    samples = run_dir / "samples.csv"
    whole = samples.read_text().count("\n") - 1
    samples.write_text(samples.read_text() + "177.2000,177.3000,17")  # a crash mid-write
    manifest, rows, summary = load_run(run_dir)
    assert len(rows) == whole
    md = to_markdown(blocks(manifest, summary, set()))
    assert "Note: samples.csv: its last line was cut off mid-write (the run was killed) and is skipped" in md


def test_a_torn_line_that_is_not_the_last_is_refused(run_dir, capsys):
    set_line(run_dir / "samples.csv", 4, "177.2000,177.3000,17")
    refused(capsys, ["plot", str(run_dir)], "samples.csv line 4 is not a sample row")


@pytest.mark.parametrize("command", ["plot", "report"])
def test_figures_being_a_file_is_refused_and_left_alone(run_dir, capsys, command):
    (run_dir / "figures").write_text("not figures")
    before = snapshot(run_dir)
    refused(capsys, [command, str(run_dir)], f"{run_dir / 'figures'} is a file", "--out DIR")
    assert snapshot(run_dir) == before


def _read_only(run_dir: Path, args: list[str]) -> subprocess.CompletedProcess:
    """gpubench ARGS with run_dir read-only, as it is to a user: a read-only bind mount where this runs as
    root (root writes through file modes), else the directory's mode."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    cmd = [sys.executable, "-m", "gpubench", *args]
    if os.geteuid() != 0:
        run_dir.chmod(0o555)
        try:
            return subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=600)
        finally:
            run_dir.chmod(0o755)
    if not shutil.which("unshare"):
        pytest.skip("no unshare to make a read-only mount as root")
    script = 'mount --bind "$1" "$1" && mount -o remount,ro,bind "$1" && shift && exec "$@"'
    r = subprocess.run(["unshare", "-m", "sh", "-c", script, "sh", str(run_dir), *cmd], capture_output=True,
                       text=True, env=env, timeout=600)
    if "mount" in r.stderr and r.returncode != 2:
        pytest.skip(f"cannot make a read-only mount here: {r.stderr.strip()}")
    return r


def test_a_read_only_run_directory_says_to_use_out(run_dir, tmp_path):
    before = snapshot(run_dir)
    for command in ("plot", "report"):
        r = _read_only(run_dir, [command, str(run_dir)])
        assert r.returncode == 2 and "Traceback" not in r.stderr and r.stderr.count("\n") == 1, r.stderr
        assert "is not writable; write elsewhere with --out DIR" in r.stderr
    r = _read_only(run_dir, ["report", str(run_dir), "--out", str(tmp_path / "elsewhere")])
    assert r.returncode == 0, r.stderr
    assert snapshot(run_dir) == before
    assert (tmp_path / "elsewhere" / "report.html").is_file()


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


def test_out_leaves_the_run_untouched_and_can_be_written_again(run_dir, tmp_path):
    before = snapshot(run_dir)
    out = tmp_path / "explore"
    assert main(["report", str(run_dir), "--out", str(out)]) == 0
    assert main(["report", str(run_dir), "--out", str(out)]) == 0  # its own files may be replaced
    assert snapshot(run_dir) == before
    drawn = figures.figures_for(load_run(run_dir)[0])
    assert {p.name for p in (out / "figures").glob("*.png")} == {f"{f.name}.png" for f in drawn}
    assert "figures/headline.png" in (out / "report.md").read_text()


@pytest.mark.parametrize("command", ["plot", "report"])
def test_out_refuses_a_folder_with_other_files_or_a_kernel_file_system(run_dir, tmp_path, capsys, command):
    other = tmp_path / "other"
    other.mkdir()
    (other / "notes.txt").write_text("mine")
    refused(capsys, [command, str(run_dir), "--out", str(other)], "already holds files (notes.txt)")
    assert [p.name for p in other.iterdir()] == ["notes.txt"]
    refused(capsys, [command, str(run_dir), "--out", "/sys/gpubench"], "lies under /sys")


def test_the_no_gpu_hint_names_a_command_that_works(tmp_path, monkeypatch):
    run = make_run(tmp_path / "results" / "h200-20261121-114933")
    monkeypatch.chdir(tmp_path)
    # no runs of the checkout
    monkeypatch.setattr(preflight, "__file__", str(tmp_path / "gpubench" / "record" / "preflight.py"))
    monkeypatch.setattr(preflight, "EXPLORE_DIR", tmp_path / "explore")
    hint = preflight.reference_hint()
    assert hint.endswith(f"gpubench report {run.resolve()} --out {tmp_path / 'explore'}"), hint
    before = snapshot(run)
    assert main(hint.split("gpubench ", 1)[1].split()) == 0
    assert snapshot(run) == before and (tmp_path / "explore" / "report.html").is_file()


def test_the_no_gpu_hint_names_the_newest_full_suite_run_of_the_reference_gpu(tmp_path, monkeypatch):
    results = tmp_path / "results"
    full = {f"family{k}": {} for k in range(9)}
    for name, gpu, start, kind, families in (
            ("h100-80gb-hbm3-20261120-090000", preflight.REFERENCE_GPU, "2026-11-20T09:00:00+0000", "run", full),
            ("h100-80gb-hbm3-20261124-013259", preflight.REFERENCE_GPU, "2026-11-24T01:32:59+0000", "run", full),
            # newer, but a comparison of a few families
            ("profiling-gpm-h100-80gb-hbm3", preflight.REFERENCE_GPU, "2026-11-25T00:00:00+0000", "run",
             dict(list(full.items())[:5])),
            ("h200-20261130-120000", "NVIDIA H200", "2026-11-30T12:00:00+0000", "run", full),  # newer, another GPU
            ("watch-tiny-batch-h100-80gb-hbm3", preflight.REFERENCE_GPU, "2026-12-01T00:00:00+0000", "watch", {})):
        run = make_run(results / name, kind=kind, scenarios=[])
        set_field(run / "manifest.json", gpu={"name": gpu}, start_wall=start, families=families)
    (results / "zz-damaged").mkdir()
    (results / "zz-damaged" / "manifest.json").write_text("{")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(preflight, "__file__", str(tmp_path / "gpubench" / "record" / "preflight.py"))
    assert f"gpubench report {results.resolve() / 'h100-80gb-hbm3-20261124-013259'} --out" in preflight.reference_hint()


def test_replotting_an_unchanged_run_changes_no_byte(run_dir):
    assert main(["plot", str(run_dir)]) == 0
    first = snapshot(run_dir / "figures")
    assert main(["plot", str(run_dir)]) == 0
    assert snapshot(run_dir / "figures") == first
    png, svg = first["headline.png"], first["headline.svg"]
    assert b"Software\x00gpubench" in png and b"Matplotlib" not in png  # no library version in the file
    assert b"<dc:date>" not in svg and b"Matplotlib" not in svg


def _stamps(monkeypatch) -> list[str]:
    """The text of every figure's stamp, collected where the figures would be saved (they are not)."""
    texts = []

    def keep(fig, manifest, out_dir, name):
        common.stamp(fig, manifest)  # as save does
        texts.extend(t.get_text() for t in fig.texts if "gpubench" in t.get_text())
        common.plt.close(fig)
        return []

    for module in drawing_modules():
        monkeypatch.setattr(module, "save", keep)
    return texts


def test_a_killed_run_is_plotted_and_reported_as_partial(tmp_path, monkeypatch):
    """kill -9: the manifest still says running and there is no summary; the samples are all there."""
    run_dir = make_run(tmp_path / "killed")
    manifest = json.loads((run_dir / "manifest.json").read_text())
    manifest.update(completed=False, status="running")
    (run_dir / "manifest.json").write_text(json.dumps(manifest))
    for name in ("summary.csv", "summary.json"):
        (run_dir / name).unlink()
    stamps = _stamps(monkeypatch)
    out = tmp_path / "out"
    assert main(["plot", str(run_dir), "--out", str(out)]) == 0
    assert len(stamps) == len(figures.figures_for(load_run(run_dir)[0]))
    assert all("PARTIAL RUN: it did not finish (its manifest still says running" in s for s in stamps)
    monkeypatch.undo()
    assert main(["report", str(run_dir), "--out", str(out)]) == 0
    md = (out / "report.md").read_text()
    assert "**a partial run**: it did not finish" in md
    assert "Note: summary.csv is missing: the run ended before it was written" in md
    assert "figures/timeline.png" in md and "figures/headline.png" not in md  # only figures with data
    assert (f"Not drawn for this run ({common.NO_SUMMARY}): headline, ladder, roofline, compare, energy, "
            "decode.") in md


def test_an_interrupted_run_says_so_on_every_figure(tmp_path, monkeypatch):
    run_dir = make_run(tmp_path / "interrupted", completed=False)
    stamps = _stamps(monkeypatch)
    assert main(["plot", str(run_dir)]) == 0
    assert len(stamps) == len(figures.figures_for(load_run(run_dir)[0]))
    assert all("PARTIAL RUN: it was interrupted before it finished" in s for s in stamps)


@pytest.mark.parametrize("command", ["run", "watch", "plot", "report"])
@pytest.mark.parametrize("where,said", [("loop", "leads into a loop of symbolic links"),
                                        ("a" * 300, "cannot be used: file name too long")])
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
@pytest.mark.parametrize("fmt,damage,said", [
    ("csv", lambda d: (d / "samples.csv").write_text((d / "samples.csv").read_text().splitlines()[0] + "\n"),
     "holds no samples, so there is nothing to plot or report: samples.csv has no rows"),
    ("arrows", lambda d: arrowfile.write(d / "samples.arrows", Samples({n: [] for n in SAMPLE_KEYS}), SAMPLE_KEYS),
     "samples.arrows has no rows, though its manifest says the run completed"),
    ("csv", lambda d: (d / "samples.csv").write_text("time,value\n1,2\n3,4\n"),
     "samples.csv is damaged: it lacks the columns t_start_s, t_end_s, gpu, phase"),
    ("csv", lambda d: (d / "manifest.json").write_text("{}"), "manifest.json is damaged: it has no 'kind'"),
])
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
    monkeypatch.setattr(figures.timeline, "save", lambda fig, manifest, out, name: labels.update(
        {line.get_label(): line for ax in fig.axes for line in ax.get_lines()}) or [])
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
