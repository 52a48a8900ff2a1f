"""One registry of summary columns (gpubench.record.columns): each family declares the columns it makes, the
writer and the reader of summary.csv both go by it, and the registry names no column of a room above its own."""

import ast
import math
from pathlib import Path

import pytest

from gpubench.record import columns
from gpubench.record.rundir import read_summary, write_summary
from gpubench.record.summaryfile import numeric

ROOT = Path(__file__).resolve().parents[2]


def test_a_column_a_family_declares_reads_back_as_text(tmp_path):
    """kernels/allreduce.py declares msg_text: a "42" in it is the word 42, never the number; an undeclared
    column reads its cells as they look, as it always did ("42" is the number 42, "True" the bool)."""
    assert "msg_text" in ast.literal_eval(_literal(ROOT / "kernels" / "allreduce.py"))
    assert columns.kind("msg_text") == columns.TEXT
    row = {"scenario": "allreduce-8kib", "gpu": 0, "uuid": "GPU-0", "msg_text": "42", "regime_text": "True",
           "undeclared_words": "42", "other": "True", "t_start": 12.345678, "kernel_ms": 0.0123456789012}
    write_summary(tmp_path, [row])
    written = (tmp_path / "summary.csv").read_text().splitlines()[1]
    assert written == "allreduce-8kib,0,GPU-0,42,True,42,True,12.3457,0.0123456789"  # t_start a time, to 0.1 ms
    [back] = read_summary(tmp_path / "summary.csv")
    assert back["msg_text"] == "42" and back["regime_text"] == "True"
    assert back["undeclared_words"] == 42 and back["other"] is True
    assert back["t_start"] == 12.3457 and back["gpu"] == 0


def test_a_number_where_a_declared_number_belongs_is_checked(tmp_path):
    """n_calls is the suite's (declared int by truth/timing.py): words in it are refused naming the line."""
    (tmp_path / "summary.csv").write_text("scenario,gpu,n_calls\ncopy,0,many\n")
    with pytest.raises(Exception, match="line 2 is not a summary row \\(n_calls is not a number\\)"):
        read_summary(tmp_path / "summary.csv")
    assert numeric("n_calls") and numeric("gpu_util_pct_p90") and not numeric("msg_text")


def test_every_text_column_of_the_committed_runs_is_declared():
    """A column of words a family forgot to declare would read "0" as a number: every committed summary's
    columns that hold words (beyond a number's spelling) are declared text, or read as they look today."""
    looks = {"roof", "timing_window", "ranks"}  # undeclared, words in committed runs: read cell by cell, as always
    text = columns.text_columns()
    for path in sorted(ROOT.glob("results/**/summary.csv")):
        for row in read_summary(path):
            words = {k for k, v in row.items() if isinstance(v, str)}
            assert words <= text | looks, (path, words - text - looks)


def test_the_registry_names_no_column_of_a_room_above_it():
    """Its own words are the summary's key and the samples' (scenario, phase, uuid, gpu); every other
    column comes from a declaration in the module that makes it."""
    tree = ast.parse((ROOT / "gpubench" / "record" / "columns.py").read_text())
    words = {n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)}
    others = set(columns.declared()) - set(columns.OWN)
    assert others and not words & others
    declared_in = {p.relative_to(ROOT).as_posix() for root in ("gpubench", "kernels")
                   for p in (ROOT / root).rglob("*.py") if columns.declarations(p)}
    assert {"kernels/allreduce.py", "gpubench/job/phases.py", "gpubench/ranks/merge.py",
            "gpubench/truth/ceiling.py"} <= declared_in


def test_two_kinds_for_one_column_are_refused(tmp_path):
    (tmp_path / "a.py").write_text('SUMMARY_COLUMNS = {"node": "text"}\n')
    (tmp_path / "b.py").write_text('SUMMARY_COLUMNS = {"node": "int"}\n')
    with pytest.raises(columns.Conflict, match="'node' is text in"):
        columns.collect([tmp_path])
    (tmp_path / "b.py").write_text('SUMMARY_COLUMNS = {"node": "words"}\n')
    with pytest.raises(ValueError, match="not names and kinds"):
        columns.collect([tmp_path])


def test_cells_are_written_by_kind():
    assert columns.cell(math.nan, "msg_text") == "" and columns.cell(1.23456789, "t_end") == "1.2346"
    assert columns.cell(1.23456789, "kernel_ms") == "1.23456789" and columns.cell("x", "t_end") == "x"


def _literal(path: Path) -> str:
    tree = ast.parse(path.read_text())
    [node] = [n for n in tree.body if isinstance(n, ast.Assign) and getattr(n.targets[0], "id", "") == columns.NAME]
    return ast.unparse(node.value)
