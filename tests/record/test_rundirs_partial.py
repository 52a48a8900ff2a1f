"""Partial run directories: a last line torn mid-write skipped with a note, and a run killed or interrupted
plotted and reported as partial, said on every figure."""

import json

from rundamage import run_dir
from synthetic import drawing_modules, make_run

from gpubench.cli import main
from gpubench.record.rundir import load_run
from gpubench.show import figures
from gpubench.show.figures import common
from gpubench.show.report import blocks, to_markdown

FIXTURES = (run_dir,)  # pytest finds it by its name in this module


def test_a_torn_last_line_is_skipped_with_a_note_that_the_report_shows(run_dir):
    samples = run_dir / "samples.csv"
    whole = samples.read_text().count("\n") - 1
    samples.write_text(samples.read_text() + "177.2000,177.3000,17")  # a crash mid-write
    manifest, rows, summary = load_run(run_dir)
    assert len(rows) == whole
    md = to_markdown(blocks(manifest, summary, set()))
    assert "Note: samples.csv: its last line was cut off mid-write (the run was killed) and is skipped" in md


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
    assert (f"Not drawn for this run ({common.NO_SUMMARY}): headline, ladder, roofline, compare, energy, decode.") in md


def test_an_interrupted_run_says_so_on_every_figure(tmp_path, monkeypatch):
    run_dir = make_run(tmp_path / "interrupted", completed=False)
    stamps = _stamps(monkeypatch)
    assert main(["plot", str(run_dir)]) == 0
    assert len(stamps) == len(figures.figures_for(load_run(run_dir)[0]))
    assert all("PARTIAL RUN: it was interrupted before it finished" in s for s in stamps)
