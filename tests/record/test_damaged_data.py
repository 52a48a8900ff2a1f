"""Run directories whose data is damaged where a reader could average garbage: rows out of time order or
repeated, a summary row repeated or a summary emptied, a damaged Arrow batch, control characters in names. Each
is said in a note of the report (where the data is still usable) or refused in one sentence naming the file and
the row (exit 2); never a crash, or a number averaged from garbage."""

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from rundamage import WATCHED, refused, report, rewrite
from synthetic import make_run

from gpubench.read.samples import Samples
from gpubench.record import arrowfile
from gpubench.record.rundir import load_run

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("fmt", ["csv", "arrows"])
@pytest.mark.parametrize("how", ["reversed", "repeated"])
def test_rows_out_of_time_order_or_repeated_are_refused_naming_the_row(tmp_path, capsys, fmt, how):
    """Averaged, a repeated row counts twice and a reversed one lands in another window: no recording
    writes either, so the file is refused, naming the first such row."""
    run = make_run(tmp_path / "run", fmt=fmt, kind="watch", scenarios=WATCHED)
    if fmt == "csv":
        rewrite(
            run / "samples.csv",
            lambda rows: rows[:1] + (rows[1:][::-1] if how == "reversed" else rows[1:30] + rows[25:]),
        )
        where = "line 3" if how == "reversed" else "line 31"
    else:
        from gpubench.record.rundir import read_samples

        cols = read_samples(run / "samples.arrows").columns()
        order = np.arange(len(cols["gpu"]))[::-1] if how == "reversed" else np.r_[np.arange(30), np.arange(25, 75)]
        arrowfile.write(run / "samples.arrows", Samples({k: v[order] for k, v in cols.items()}), list(cols))
        where = "row 2" if how == "reversed" else "row 31"
    refused(
        capsys,
        ["report", str(run), "--out", str(tmp_path / "out")],
        f"samples.{fmt} is damaged: {where}: its t_start_s",
        "comes before the end of GPU 0's previous row",
        "rows out of time order, or repeated",
    )
    assert not (tmp_path / "out").exists()


def test_a_repeated_summary_row_is_left_out_with_a_note_and_a_conflicting_one_refused(tmp_path, capsys):
    run = make_run(tmp_path / "run", kind="watch", scenarios=WATCHED)
    clean = report(run, tmp_path / "clean")
    rewrite(run / "summary.csv", lambda rows: rows + rows[2:3])
    md = report(run, tmp_path / "out")
    note = "Note: summary.csv: line 5 repeats line 3 and is left out\n\n"
    assert note in md and md.replace(note, "") == clean  # counted once, said once
    util = None

    def conflicting(rows):
        nonlocal util
        util = rows[0].index("gpu_util_pct")
        other = list(rows[2])
        other[util] = "55"
        return rows[:-1] + [other]

    rewrite(run / "summary.csv", conflicting)
    refused(
        capsys,
        ["report", str(run), "--out", str(tmp_path / "out2")],
        "summary.csv line 5 is a second row for 'copy-triton' on GPU 0 (line 3 is the first) with other numbers",
    )


def test_an_emptied_summary_is_never_reported_completed(tmp_path):
    run = make_run(tmp_path / "run", kind="watch", scenarios=WATCHED)
    (run / "summary.csv").write_bytes(b"")
    md = report(run, tmp_path / "out")
    assert "completed, but **its summary.csv is empty**, so no phase is summarized here" in md
    assert "Note: summary.csv is empty (no byte in it)" in md and ", completed." not in md
    manifest, _, _ = load_run(run)
    assert manifest["summary_lacking"] == "its summary.csv is empty"
    # a summary of no row, where the manifest lists what the run summarized
    path = run / "manifest.json"
    path.write_text(path.read_text().replace('"warnings": []', '"warnings": [], "scenarios_done": ["a", "b"]'))
    (run / "summary.csv").write_text("\r\n")
    md = report(run, tmp_path / "out2")
    assert "completed, but **its summary.csv holds no row, though its manifest lists 2 scenarios done**" in md


DAMAGE_SCAN = """
import sys
from pathlib import Path
from gpubench.record.rundir import RunDirError, read_samples
src = Path(sys.argv[1]).read_bytes()
work = Path(sys.argv[2])
seen = {}
for i in range(0, len(src) - 8, int(sys.argv[3])):
    for pattern in (b"\\x7f\\x7f\\x7f\\x7f\\x7f\\x7f\\x7f\\x70", b"\\xff", b"\\x00\\x00\\x00\\x00"):
        data = bytearray(src)
        data[i:i + len(pattern)] = pattern
        work.write_bytes(bytes(data))
        try:
            samples = read_samples(work, [])
            for name in samples.names:
                samples.col(name)
            said = "read"
        except RunDirError as err:
            said = "refused: " + str(err)
        seen.setdefault(said.split(" is damaged: ")[-1], i)
for said in seen:
    print(said)
"""


def test_a_damaged_arrow_batch_is_one_sentence_never_a_crash(tmp_path):
    """Bytes of samples.arrows overwritten one place after another: every column is read or the file is
    refused in a sentence; a damaged offset or length never reads outside its buffer (a crash), and never
    surfaces as "malloc of size ... failed"."""
    run = make_run(tmp_path / "run", kind="watch", scenarios=WATCHED)
    r = subprocess.run(
        [sys.executable, "-c", DAMAGE_SCAN, str(run / "samples.arrows"), str(tmp_path / "x.arrows"), "3"],
        capture_output=True,
        text=True,
        timeout=600,
        env=dict(os.environ, PYTHONPATH=str(ROOT)),
    )
    assert r.returncode == 0, (r.returncode, r.stderr[-2000:])  # -11: a crash
    said = r.stdout.splitlines()
    assert "read" in said and any(s.startswith("batch 1 of its rows is damaged (") for s in said), said
    assert not [s for s in said if "malloc" in s or "flatbuffer" in s.lower() or "Buffer #" in s], said


def test_control_characters_in_names_are_written_out_in_the_report(tmp_path):
    """A NUL or an ESC in a phase, a GPU's name or a warning: visible as an escape in report.md and
    report.html, never put into them."""
    run = make_run(tmp_path / "run", fmt="csv", kind="watch", scenarios=WATCHED)

    def rename(rows):
        at = rows[0].index("phase") if "phase" in rows[0] else rows[0].index("scenario")
        for r in rows[1:]:
            r[at] = r[at].replace("copy-triton", "copy\x00\x1b]0;x\x07triton")
        return rows

    rewrite(run / "samples.csv", rename)
    rewrite(run / "summary.csv", rename)
    path = run / "manifest.json"
    path.write_text(
        path.read_text()
        .replace('"NVIDIA H200"', '"NVIDIA\\u001b[31m H200"')
        .replace('"warnings": []', '"warnings": ["a\\u0000b"]')
    )
    out = tmp_path / "out"
    md = report(run, out)
    html = (out / "report.html").read_text()
    for text in (md, html):
        assert not {c for c in text if ord(c) < 32 and c not in "\n\t"} | ({"\x7f"} & set(text))
    assert "copy\\\\x00\\\\x1b]0;x\\\\x07triton" in md and "NVIDIA\\\\x1b[31m H200" in md and "Note: a\\\\x00b" in md
    assert "copy\\x00\\x1b]0;x\\x07triton" in html
