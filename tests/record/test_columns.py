"""One registry of summary columns (gpubench.record.columns): each family declares the columns it makes, the
registry imports the declaring modules from its one list (DECLARERS), the writer and the reader of summary.csv
both go by it, and the registry names no column of a room above its own."""

import ast
import math
import re
import subprocess
import sys
from pathlib import Path

import pytest

from gpubench.record import columns
from gpubench.record.rundir import read_summary, write_summary
from gpubench.record.summaryfile import numeric

ROOT = Path(__file__).resolve().parents[2]


def test_a_column_a_family_declares_reads_back_as_text(tmp_path):
    """kernels/allreduce.py declares msg_text (in kernels/columns.py): a "42" in it is the word 42, never the number;
    an undeclared column reads its cells as they look, as it always did ("42" is the number 42, "True" the bool)."""
    from gpubench.kernels import columns as kernel_columns

    assert "msg_text" in kernel_columns.ALLREDUCE and "msg_text" in kernel_columns.SUMMARY_COLUMNS
    assert columns.kind("msg_text") == columns.TEXT
    row = {
        "scenario": "allreduce-8kib",
        "gpu": 0,
        "uuid": "GPU-0",
        "msg_text": "42",
        "regime_text": "True",
        "undeclared_words": "42",
        "other": "True",
        "t_start": 12.345678,
        "kernel_ms": 0.0123456789012,
    }
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
    assert {"gpubench.kernels.columns", "gpubench.job.phases", "gpubench.ranks.merge", "gpubench.truth.ceiling"} <= set(
        columns.DECLARERS
    )
    assert all(columns.declarations(m) for m in columns.DECLARERS)


def test_two_kinds_for_one_column_are_refused(tmp_path, monkeypatch):
    """Modules planted on the path and named to collect(), as DECLARERS names the package's."""
    planted = {
        "planted_columns_a": '{"node": "text"}',
        "planted_columns_b": '{"node": "int"}',
        "planted_columns_c": '{"node": "words"}',
        "planted_columns_d": None,
    }
    for name, literal in planted.items():
        (tmp_path / f"{name}.py").write_text(f"SUMMARY_COLUMNS = {literal}\n" if literal else "OTHER = 1\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    try:
        with pytest.raises(columns.Conflict, match="'node' is text in planted_columns_a and int in planted_columns_b"):
            columns.collect(["planted_columns_a", "planted_columns_b"])
        with pytest.raises(ValueError, match="not names and kinds"):
            columns.collect(["planted_columns_a", "planted_columns_c"])
        with pytest.raises(ValueError, match="planted_columns_d is in gpubench.record.columns.DECLARERS but has no"):
            columns.collect(["planted_columns_d"])
        assert columns.collect(["planted_columns_a"]) == {**columns.OWN, "node": "text"}
    finally:
        for name in planted:
            sys.modules.pop(name, None)


def test_every_declaration_in_the_source_is_in_the_registrys_list():
    """A module that assigns SUMMARY_COLUMNS at its top, read as text, is named in DECLARERS (else its columns
    would go unread); one that takes the name from another module takes it from one DECLARERS names; and every
    module DECLARERS names holds a declaration."""
    assigned, taken = set(), set()
    for folder, package in ((ROOT / "gpubench", "gpubench"), (ROOT / "kernels", "gpubench.kernels")):
        for path in sorted(folder.rglob("*.py")):
            module = ".".join([package, *path.relative_to(folder).with_suffix("").parts]).removesuffix(".__init__")
            text = path.read_text()
            if re.search(r"^SUMMARY_COLUMNS\s*=", text, re.M):
                assigned.add(module)
            for source in re.findall(r"^from (\S+) import \w+ as SUMMARY_COLUMNS\b", text, re.M):
                dots = len(source) - len(source.lstrip("."))
                base = module.rsplit(".", dots)[0] if dots else ""
                taken.add(f"{base}.{source[dots:]}" if dots else source)
    assert {"gpubench.kernels.columns", "gpubench.read.summary"} <= assigned
    assert taken == {"gpubench.kernels.columns"}
    assert assigned | taken <= set(columns.DECLARERS), (assigned | taken) - set(columns.DECLARERS)
    assert set(columns.DECLARERS) <= assigned, set(columns.DECLARERS) - assigned
    assert len(set(columns.DECLARERS)) == len(columns.DECLARERS)


def test_collecting_the_columns_loads_no_torch_triton_or_cupy():
    """Plotting a run reads its summary: the registry and every module it imports leave the heavy libraries out,
    and importing the registry alone imports none of the declaring modules."""
    code = (
        "import sys, gpubench.record.columns as c\n"
        "early = [m for m in c.DECLARERS if m in sys.modules]\n"
        "assert len(c.declared()) > len(c.OWN)\n"
        "print(early, sorted(m for m in ('torch', 'triton', 'cupy') if m in sys.modules))"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "[] []", r.stdout


# what the registry collected when it read the SUMMARY_COLUMNS literals from the package's source with ast,
# before it imported its modules by name: a new declaration adds its line here
COLLECTED_FROM_SOURCE = {
    "baseline": "text",
    "bound": "text",
    "check": "text",
    "family": "text",
    "flop_convention": "text",
    "flops_source": "text",
    "gpu": "int",
    "hfu_unknown": "text",
    "impl": "text",
    "kind": "text",
    "launch": "text",
    "link_gbps": "float",
    "msg_text": "text",
    "n_calls": "int",
    "n_samples": "int",
    "n_timings": "int",
    "node": "text",
    "phase": "text",
    "provenance": "text",
    "rate_withheld": "text",
    "regime_text": "text",
    "scenario": "text",
    "timed_s": "float",
    "sizes": "text",
    "speedup_vs_baseline": "float",
    "step_clock": "text",
    "steps_pattern": "text",
    "steps_source": "text",
    "straggler_note": "text",
    "straggler_text": "text",
    "stream_rates": "text",
    "t_end": "time",
    "t_start": "time",
    "tensor_ceiling_basis": "text",
    "tensor_ceiling_dtype": "text",
    "unit": "text",
    "uuid": "text",
    "verdict": "text",
    "verdict_rules": "text",
    "wait_signature": "text",
    "windows": "text",
}


def test_the_registry_collects_the_columns_and_kinds_the_source_scan_did():
    assert columns.declared() == COLLECTED_FROM_SOURCE


def test_cells_are_written_by_kind():
    assert columns.cell(math.nan, "msg_text") == "" and columns.cell(1.23456789, "t_end") == "1.2346"
    assert columns.cell(1.23456789, "kernel_ms") == "1.23456789" and columns.cell("x", "t_end") == "x"
