"""Run directories as another tool, a spreadsheet or a hostile hand leaves them: a byte-order mark, a number
of 5,001 digits, zeros where a divisor belongs, fields past csv's limit, a line of 50 MB, a folder or a device
where a file belongs, an --out inside the run. Each is read as it is (where it is only a matter of form) or
refused in one sentence naming the file and the field (exit 2); never a traceback or a crash. A long run kept
as samples.csv plots in the memory its samples.arrows needs. The damage a reader could average (rows out of
order, a damaged Arrow batch) is test_damaged_data.py's."""

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from rundamage import WATCHED, refused, report, rewrite
from synthetic import make_run

from gpubench.cli import main

ROOT = Path(__file__).resolve().parents[2]


# The peak resident memory of this process (VmHWM: an exec starts it anew, where ru_maxrss keeps the peak of
# the process it was forked from, here pytest's), in MB.
PEAK = """
def peak_mb():
    for line in open("/proc/self/status"):
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) // 1024
"""


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
