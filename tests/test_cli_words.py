"""What the command line says at its edges: help that cannot be written, the sentence on a machine without a
GPU, --out's help against what plot and report accept, phase names no font draws, a summary repeated, the
run directory and the hint to plot and report it at a narrow console."""

import csv
import os
import subprocess
import sys
import warnings
from pathlib import Path
from unittest import mock

import pytest
from synthetic import SCENARIOS, make_run

from gpubench.cli import main
from gpubench.options import parser
from gpubench.record import nvml
from gpubench.record.rundir import read_summary

ROOT = Path(__file__).parents[1]


def shell(command: str) -> subprocess.CompletedProcess:
    """A gpubench command line as a shell runs it, redirections and all (a hang guard only as its bound)."""
    line = command.replace("gpubench", f"{sys.executable} -m gpubench", 1)
    return subprocess.run(
        ["sh", "-c", line], capture_output=True, text=True, timeout=600, env=dict(os.environ, PYTHONPATH=str(ROOT))
    )


@pytest.mark.parametrize("args", ["--help", "--version", "plot --help"])
def test_help_that_cannot_be_written_is_exit_2_in_one_sentence(args):
    if not Path("/dev/full").exists():
        pytest.skip("no /dev/full here")
    r = shell(f"gpubench {args} > /dev/full")
    assert (
        r.returncode == 2 and r.stderr == "gpubench: error: cannot write to standard output: No space left on device\n"
    ), r.stderr


def test_help_is_still_printed_and_exits_0(capsys):
    with pytest.raises(SystemExit) as done:
        main(["--help"])
    assert done.value.code == 0 and "usage: gpubench" in capsys.readouterr().out


def depth(text: str) -> int:
    """The deepest nesting of parentheses in text."""
    level = deepest = 0
    for c in text:
        level += (c == "(") - (c == ")")
        deepest = max(deepest, level)
    return deepest


def test_the_no_gpu_sentence_nests_no_parentheses(capsys):
    with mock.patch.object(nvml.pynvml, "nvmlInit", side_effect=OSError("libnvidia-ml.so.1: cannot open")):
        assert main(["watch", "--", sys.executable, "-c", "pass"]) == 0
    err = capsys.readouterr().err
    assert "no NVIDIA driver found" in err and "could not be loaded" in err, err
    assert depth(err) == 1, err


@pytest.mark.parametrize("command,own", [("plot", "figures"), ("report", "")])
def test_out_help_names_the_one_place_inside_the_run_it_accepts(tmp_path, capsys, command, own):
    sub = parser()._subparsers._group_actions[0].choices[command]
    text = " ".join(next(a.help for a in sub._actions if a.dest == "out").split())
    where = f"RUN_DIR/{own}".rstrip("/")
    assert f"lie outside the run directory unless it is {where} itself" in text, text
    run = make_run(tmp_path / "run", kind="watch", scenarios=[s for s in SCENARIOS if s[0] == "idle"])
    assert main([command, str(run), "--out", str(run / own)]) == 0  # the place the help names
    assert main([command, str(run), "--out", str(run / "elsewhere")]) == 2  # any other inside the run
    assert "lies inside the run directory" in capsys.readouterr().err


def test_glyphs_no_font_draws_print_no_warning(tmp_path):
    gemm = next(s for s in SCENARIOS if s[0] == "gemm-torch")
    run = make_run(tmp_path / "run", kind="watch", scenarios=[("🚀 train 𝛑", *gemm[1:])])
    with warnings.catch_warnings(record=True) as said:
        warnings.simplefilter("always")
        assert main(["plot", str(run)]) == 0
    assert [str(w.message) for w in said] == []
    assert (run / "figures" / "timeline.png").is_file()


def test_a_summary_row_repeated_many_times_is_one_note(tmp_path):
    run = make_run(tmp_path / "run", kind="watch", scenarios=[s for s in SCENARIOS if s[0] in ("idle", "gemm-torch")])
    path = run / "summary.csv"
    with open(path, newline="") as f:
        rows = list(csv.reader(f))
    with open(path, "w", newline="") as f:
        csv.writer(f).writerows(rows + rows[2:3] * 5000)
    notes: list[str] = []
    summary = read_summary(path, notes)
    assert len(summary) == len(rows) - 1
    assert notes == [
        "summary.csv: 5,000 lines repeat earlier rows whole and are left out; the first is line 4, a repeat of line 3"
    ]


@pytest.mark.parametrize("hint", [True, False])
def test_the_run_directory_and_its_hint_are_whole_lines_a_shell_reads_back(tmp_path, hint):
    """run, torchrun and watch end on these lines: a log's 80 columns must not break them, and a folder with a
    space in its name must paste as one argument."""
    import io
    import shlex

    from rich.console import Console

    from gpubench.show.console import say_run_dir

    run_dir = tmp_path / "a run whose name has spaces and is long enough to pass a log's eighty columns"
    out = io.StringIO()
    say_run_dir(Console(file=out, width=80), run_dir, " (interrupted)", hint=hint)
    lines = out.getvalue().splitlines()
    assert lines[0] == f"run directory (interrupted): {run_dir}"
    assert len(lines) == 1 + hint
    if hint:
        plot, report = (shlex.split(c) for c in lines[1].removeprefix("next: ").split(" && "))
        assert plot == ["gpubench", "plot", str(run_dir)] and report == ["gpubench", "report", str(run_dir)]
