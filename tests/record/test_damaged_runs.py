"""Run directories as another tool, a spreadsheet or a hostile hand leaves them: a byte-order mark, a number
of 5,001 digits, zeros where a divisor belongs, fields past csv's limit, a folder or a device where a file
belongs, rows out of time order or repeated, a summary emptied, a damaged Arrow batch, control characters in
names, an --out inside the run. Each is read as it is (where it is only a matter of form), said in a note of
the report (where the data is still usable), or refused in one sentence naming the file and the field (exit
2); never a traceback, a crash, or a number averaged from garbage."""

import csv
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
from rundamage import refused
from synthetic import SCENARIOS, make_run

from gpubench.cli import main
from gpubench.read.samples import Samples
from gpubench.record import arrowfile
from gpubench.record.rundir import load_run

ROOT = Path(__file__).resolve().parents[2]
WATCHED = [s for s in SCENARIOS if s[0] in ("idle", "copy-triton", "gemm-torch")]


# The peak resident memory of this process (VmHWM: an exec starts it anew, where ru_maxrss keeps the peak of
# the process it was forked from, here pytest's), in MB.
PEAK = """
def peak_mb():
    for line in open("/proc/self/status"):
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) // 1024
"""


def rewrite(path: Path, change) -> None:
    """A CSV's rows (header first) through change(rows) -> rows."""
    with open(path, newline="") as f:
        rows = list(csv.reader(f))
    with open(path, "w", newline="") as f:
        csv.writer(f).writerows(change(rows))


def report(run: Path, out: Path) -> str:
    assert main(["report", str(run), "--out", str(out)]) == 0
    return (out / "report.md").read_text()


@pytest.mark.parametrize("name", ["samples.csv", "summary.csv", "manifest.json"])
def test_a_byte_order_mark_is_no_part_of_the_file(tmp_path, name):
    """A spreadsheet or an editor saves one; the file reads as it did without it."""
    run = make_run(tmp_path / "run", fmt="csv", kind="watch", scenarios=WATCHED)
    before = report(run, tmp_path / "before")
    path = run / name
    path.write_bytes(b"\xef\xbb\xbf" + path.read_bytes())
    assert report(run, tmp_path / "after") == before


def test_a_number_of_5001_digits_in_the_manifest_is_one_sentence(tmp_path, capsys):
    run = make_run(tmp_path / "run", kind="watch", scenarios=WATCHED)
    path = run / "manifest.json"
    path.write_text(path.read_text().replace('"sm_count": 132', '"sm_count": ' + "9" * 5001))
    refused(
        capsys,
        ["report", str(run), "--out", str(tmp_path / "out")],
        "manifest.json holds a number too long to be one gpubench writes",
    )


@pytest.mark.parametrize("kind", ["run", "watch"])
def test_zero_in_every_number_of_the_summary_is_drawn_never_divided_by(tmp_path, kind):
    """kernel_ms 0 (and every other number 0): no ratio divides by it, and the report is written."""
    run = make_run(tmp_path / "run", kind=kind)

    def zeros(rows):
        def number(text):
            try:
                return text == "" or float(text) == float(text)
            except ValueError:
                return False

        numbers = [k for i, k in enumerate(rows[0]) if all(number(r[i]) for r in rows[1:])]
        return [rows[0]] + [
            [("0" if k in numbers and k not in ("gpu", "t_start", "t_end") else v) for k, v in zip(rows[0], r)]
            for r in rows[1:]
        ]

    rewrite(run / "summary.csv", zeros)
    assert main(["plot", str(run), "--out", str(tmp_path / "figures")]) == 0
    report(run, tmp_path / "out")


def test_a_field_past_csvs_limit_is_one_sentence_naming_the_line(tmp_path, capsys):
    run = make_run(tmp_path / "run", fmt="csv", kind="watch", scenarios=WATCHED)
    rewrite(run / "summary.csv", lambda rows: rows[:2] + [[rows[2][0]] + ["x" * 200_000] + rows[2][2:]] + rows[3:])
    refused(
        capsys,
        ["report", str(run), "--out", str(tmp_path / "out")],
        "summary.csv line 3 is not a summary row (a field longer than 131,072 characters, which no summary holds)",
    )
    for short_row, said in (
        (False, "longer than 1000 characters"),  # pyarrow reads it; the name is too long
        (
            True,
            "samples.csv line 8 is not a sample row (a field longer than 131,072 characters, which no column holds)",
        ),
    ):  # a short row after it: Python's csv names the line
        run = make_run(tmp_path / f"run{short_row}", fmt="csv", kind="watch", scenarios=WATCHED)

        def long_phase(rows):
            rows[7][rows[0].index("phase")] = "p" * 200_000
            if short_row:
                rows[9].pop()
            return rows

        rewrite(run / "samples.csv", long_phase)
        refused(capsys, ["report", str(run), "--out", str(tmp_path / "out")], "samples.csv", said)


def test_a_single_line_of_50_mb_is_one_sentence_read_in_bounded_memory(tmp_path):
    run = make_run(tmp_path / "run", fmt="csv", kind="watch", scenarios=WATCHED)
    with open(run / "samples.csv", "wb") as f:
        for _ in range(50):
            f.write(b"t_start_s," * 100_000)
    r = subprocess.run(
        [
            sys.executable,
            "-c",
            PEAK
            + textwrap.dedent("""
        import sys
        from gpubench.cli import main
        code = main(["report", sys.argv[1], "--out", sys.argv[2]])
        print(code, peak_mb())
    """),
            str(run),
            str(tmp_path / "out"),
        ],
        capture_output=True,
        text=True,
        timeout=600,
        env=dict(os.environ, PYTHONPATH=str(ROOT)),
    )
    code, peak_mb = map(int, r.stdout.split())
    assert code == 2 and r.stderr.endswith(
        "samples.csv line 1 is not a header of sample columns (it runs past 1 MiB)\n"
    ), r.stderr
    assert peak_mb < 400, f"{peak_mb} MB for a file of 50 MB"


@pytest.mark.parametrize(
    "what,said",
    [
        ("folder", "is a folder, not a file gpubench writes"),
        ("device", "is a device, not a file gpubench writes"),
        ("fifo", "is a named pipe, not a file gpubench writes"),
    ],
)
@pytest.mark.parametrize("name", ["samples.arrows", "summary.csv", "manifest.json"])
def test_a_folder_or_a_device_where_a_file_belongs_is_refused_never_passed_over(tmp_path, what, said, name):
    """samples.arrows as a folder never falls back to samples.csv; /dev/zero is never read to its end, and a
    named pipe never waited on."""
    run = make_run(tmp_path / "run", fmt="csv", kind="watch", scenarios=WATCHED)
    path = run / name
    path.unlink(missing_ok=True)
    if what == "folder":
        path.mkdir()
    elif what == "device":
        path.symlink_to("/dev/zero")
    else:
        os.mkfifo(path)
    r = subprocess.run(
        [sys.executable, "-m", "gpubench", "report", str(run), "--out", str(tmp_path / "out")],
        capture_output=True,
        text=True,
        timeout=600,
        env=dict(os.environ, PYTHONPATH=str(ROOT)),
    )
    assert r.returncode == 2 and r.stderr == f"gpubench report: error: {path} {said}\n"
    assert not (tmp_path / "out").exists()


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


def test_an_out_inside_the_run_directory_is_refused_and_the_run_itself_is_no_other_place(tmp_path, capsys):
    run = make_run(tmp_path / "run", kind="watch", scenarios=WATCHED)
    refused(
        capsys,
        ["report", str(run), "--out", str(run / "figures")],
        f"--out {run / 'figures'} lies inside the run directory {run}",
    )
    assert not (run / "figures").exists()
    refused(capsys, ["plot", str(run), "--out", str(run / "mine")], "lies inside the run directory")
    assert main(["report", str(run), "--out", str(run) + "/"]) == 0  # the run's own place, named
    assert (run / "report.md").is_file() and not (run / "figures" / "figures").exists()
    assert main(["plot", str(run), "--out", str(run / "figures")]) == 0


def test_a_long_run_kept_as_csv_plots_in_the_memory_the_arrow_file_needs(tmp_path):
    """A long watch kept as samples.csv alone (older runs, converted ones) is converted a block at a time and
    plotted from the copy, in the memory the same run as samples.arrows needs: never held whole (which took
    5.8 GB for a day of eight GPUs)."""
    from tools.longrun import synthetic as longrun

    peaks = {}
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    for fmt in ("csv", "arrows"):
        run = longrun.generate(tmp_path / fmt, n_gpus=8, hours=1.0, steps_per_s=2.0, csv=fmt == "csv")
        r = subprocess.run(
            [
                sys.executable,
                "-c",
                PEAK
                + textwrap.dedent("""
            import sys
            from gpubench.cli import main
            code = main(["plot", sys.argv[1], "--out", sys.argv[2]])
            print(code, peak_mb())
        """),
                str(run),
                str(tmp_path / f"out-{fmt}"),
            ],
            capture_output=True,
            text=True,
            timeout=600,
            env=dict(os.environ, PYTHONPATH=str(ROOT), OMP_NUM_THREADS="1", TMPDIR=str(scratch)),
        )
        code, peaks[fmt] = map(int, r.stdout.split()[-2:])  # after the paths plot prints
        assert code == 0, r.stderr
    size_mb = (tmp_path / "csv" / "samples.csv").stat().st_size / 2**20
    assert size_mb > 50 and peaks["csv"] < peaks["arrows"] + 50, (peaks, size_mb)
    assert not list(scratch.iterdir())  # the copy went with the process that read it
