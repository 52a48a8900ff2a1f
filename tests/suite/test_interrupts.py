"""Interrupted plot and report: Ctrl-C (exit 130) and SIGTERM (exit 143) leave nothing half-written and
nothing in the way; a stage folder that a killed gpubench left is debris that the next write removes; every
target is checked before anything is written; a reader that goes away ends `gpubench list` quietly."""

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from synthetic import SCENARIOS, make_run

from gpubench.cli import main
from gpubench.show import figures

# A plot or report whose timeline (the last figure of a watched job) waits, drawn, in its stage folder for
# the signal the test sends; the script says "drawn" when it is there. It waits for the signal itself, not
# for a time: a signal that never came fails the test (by the hang bound) instead of letting it finish.
WAITING = textwrap.dedent("""
    import dataclasses, sys, time
    from gpubench.cli import main
    from gpubench.show import figures

    def waiting(draw):
        def wait(*args):
            out = draw(*args)
            print("drawn", flush=True)
            while True:
                time.sleep(3600)
        return wait

    figures.FIGURES = tuple(dataclasses.replace(f, draw=waiting(f.draw)) if f.name == "timeline" else f
                            for f in figures.FIGURES)
    sys.exit(main(sys.argv[1:]))
""")


@pytest.fixture
def run_dir(tmp_path):
    return make_run(tmp_path / "run", kind="watch", scenarios=[s for s in SCENARIOS if s[0] in ("idle", "gemm-torch")])


def snapshot(root: Path) -> dict:
    return {str(p.relative_to(root)): (p.read_bytes() if p.is_file() else None) for p in sorted(root.rglob("*"))}


def stages(root: Path) -> list[Path]:
    return sorted(root.rglob(".gpubench-*"))


def at_a_terminal():
    """Ctrl-C's disposition as a terminal gives it. A shell starts a background job (`pytest &`, a CI step)
    with SIGINT ignored, every child inherits that, and Python then never turns SIGINT into
    KeyboardInterrupt: the signal the test sends would be dropped."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def interrupted(args: list[str], sig: int) -> subprocess.CompletedProcess:
    """gpubench ARGS, sent sig once its timeline is drawn in the stage folder."""
    proc = subprocess.Popen(
        [sys.executable, "-c", WAITING, *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=at_a_terminal,
    )
    try:
        line = proc.stdout.readline()
        assert line.strip() == "drawn", (line, proc.stderr.read() if proc.poll() is not None else "")
        proc.send_signal(sig)
        out, err = proc.communicate(timeout=600)  # hang protection only: the child waits for nothing else
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    done = subprocess.CompletedProcess(proc.args, proc.returncode, out, err)
    done.pid = proc.pid
    return done


@pytest.mark.parametrize(
    "command,sig,code,said,into",
    [
        ("plot", signal.SIGTERM, 143, "SIGTERM", "out"),
        ("report", signal.SIGTERM, 143, "SIGTERM", "run"),
        ("report", signal.SIGINT, 130, "Ctrl-C", "out"),
    ],
)
def test_a_signal_mid_write_leaves_nothing_and_is_one_sentence(run_dir, tmp_path, command, sig, code, said, into):
    before = snapshot(run_dir)
    out = tmp_path / "out"
    r = interrupted([command, str(run_dir)] + (["--out", str(out)] if into == "out" else []), sig)
    assert r.returncode == code, r.stderr
    assert r.stderr == f"gpubench {command}: error: interrupted by {said}; no file was left half-written\n"
    assert not out.exists()  # made by the command, gone with it
    assert snapshot(run_dir) == before and not stages(run_dir)  # the run directory as it was, figures included


def test_a_stage_left_by_a_killed_gpubench_is_debris_the_next_write_removes(run_dir, tmp_path):
    out = tmp_path / "out"
    (out / ".gpubench-k2x9_abc").mkdir(parents=True)  # as gpubench left them before stages carried their process
    (out / "figures" / ".gpubench-7q_ab3cd").mkdir(parents=True)
    r = interrupted(["report", str(run_dir), "--out", str(out)], signal.SIGKILL)
    assert r.returncode == -signal.SIGKILL
    assert [p.name.startswith(f".gpubench-{r.pid}-") for p in stages(out)].count(True) == 1  # its owner, now gone
    assert main(["report", str(run_dir), "--out", str(out)]) == 0
    assert not stages(out) and (out / "report.html").is_file()


def test_a_stage_of_a_live_gpubench_is_left_to_it(run_dir, tmp_path, capsys):
    out = tmp_path / "out"
    out.mkdir()
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        stage = out / f".gpubench-{other.pid}-abcd_123"
        stage.mkdir()
        assert main(["plot", str(run_dir), "--out", str(out)]) == 2
        err = capsys.readouterr().err
        assert (
            err == f"gpubench plot: error: another gpubench (process {other.pid}) is writing into {out}: let it "
            "finish first\n"
        )
        assert stage.is_dir() and [p.name for p in out.iterdir()] == [stage.name]
    finally:
        other.kill()
        other.wait()
    assert main(["plot", str(run_dir), "--out", str(out)]) == 0  # its process gone: debris
    assert not stage.exists() and (out / "timeline.png").is_file()


@pytest.mark.parametrize(
    "command,in_the_way,message",
    [
        ("report", "report.md/", "report.md is a folder, where gpubench would write a file"),
        ("report", "figures", "figures is a file, where gpubench would write figures"),
        ("report", "figures/ladder.svg/", "ladder.svg is a folder, where gpubench would write a file"),
        ("plot", "timeline.png/", "timeline.png is a folder, where gpubench would write a file"),
    ],
)
def test_every_target_is_checked_before_anything_is_written(run_dir, tmp_path, capsys, command, in_the_way, message):
    out = tmp_path / "out"
    out.mkdir()
    path = out / in_the_way.rstrip("/")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.mkdir() if in_the_way.endswith("/") else path.write_text("mine")
    before = snapshot(out)
    assert main([command, str(run_dir), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and message in err and "--out DIR" in err, err
    assert snapshot(out) == before  # no figure written ahead of the refusal


def test_ctrl_c_in_process_is_exit_130_and_leaves_the_run_as_it_was(run_dir, monkeypatch, capsys):
    def pressed(summary, samples, manifest, out_dir):
        raise KeyboardInterrupt

    monkeypatch.setattr(figures, "FIGURES", figures.FIGURES[:1] + (figures.Figure("ladder", "", pressed),))
    before = snapshot(run_dir)
    for command in ("plot", "report"):
        try:
            code = main([command, str(run_dir)])
        except KeyboardInterrupt:
            pytest.fail("Ctrl-C left main as a KeyboardInterrupt, a traceback at a terminal")
        assert code == 130
        assert (
            capsys.readouterr().err == f"gpubench {command}: error: interrupted by Ctrl-C; no file was left "
            "half-written\n"
        )
        assert snapshot(run_dir) == before


def test_sigterm_is_handled_only_while_a_command_runs():
    before = signal.getsignal(signal.SIGTERM)
    assert main(["list"]) == 0
    assert signal.getsignal(signal.SIGTERM) is before


def test_a_reader_that_goes_away_ends_list_quietly(monkeypatch, capsys):
    """`gpubench list | head -1`: head exits after one line and the rest of the output meets a closed pipe."""
    read, write = os.pipe()
    os.close(read)
    pipe = os.fdopen(write, "w")
    monkeypatch.setattr(sys, "stdout", pipe)
    try:
        code = main(["list"])
    finally:
        monkeypatch.undo()
        pipe.close()  # stdout now goes to /dev/null: nothing is left to complain at exit
    assert code == 128 + signal.SIGPIPE  # as a command SIGPIPE ended, which is what `head` expects
    assert capsys.readouterr().err == ""
