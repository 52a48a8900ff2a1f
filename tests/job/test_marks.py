"""gpubench.mark / step inside the user's job, without a GPU: nothing that can ever raise into the job. A
phase name is one short printable line; an unusable value is said once and spoils that value only; an error
inside a call loses that call only; times that are not times are left out and said; a marks file that cannot
be written, or a CUDA that fails, never stops the job. Lines, gathered steps and the reader:
test_marks_lines.py; stamps on the GPU's timeline: test_marks_stamps.py."""

import os

import pytest
from markfakes import child, fake_torch, to_file

import gpubench
from gpubench.inside import linewriter, markwriter
from gpubench.job.markfile import Reader, read_all
from gpubench.job.markreader import Mark, Steps

FIXTURES = (fake_torch, to_file)  # pytest finds them by their names in this module


def test_phase_names_are_one_short_line(to_file):
    gpubench.mark("a\tb\nc" + "x" * 10**6)
    gpubench.mark("")
    names = [e.name for e in read_all(to_file) if isinstance(e, Mark)]
    assert names == ["a b c" + "x" * (markwriter.NAME_MAX - 5), "?"]


@pytest.mark.parametrize("value", ["abc", [1], float("nan"), float("inf"), -5.0, object()])
def test_unusable_flops_are_said_once_and_the_step_is_recorded(to_file, capsys, value):
    for _ in range(3):
        gpubench.step(flops=value)
    gpubench.step(flops=2.0)
    markwriter.flush()
    err = capsys.readouterr().err
    assert err.count("gpubench: gpubench.step() was given a value") == 1
    [s] = [e for e in read_all(to_file) if isinstance(e, Steps)]
    assert (s.n, s.bad, s.counted, s.flops) == (4, 3, 1, 2.0)


@pytest.mark.parametrize("value", ["10**400", "-(10**5000)", "'1e400'", "Raises()"])
def test_a_bad_value_spoils_that_value_only_never_the_later_steps_and_marks(tmp_path, value):
    """A value that overflows a float (or raises in float(), or in .hardware) loses that value alone: the
    step is counted without it, and every later step and mark is recorded."""
    r = child(
        f"""
        import gpubench

        class Raises:
            def __float__(self):
                raise RuntimeError("no float here")
            hardware = property(lambda self: 1 / 0)

        gpubench.mark("warmup")
        gpubench.step(flops={value})
        gpubench.step(flops=2.0, tokens={value})
        gpubench.mark("train")
        gpubench.step(flops=3.0)
        gpubench.step(flops={value}, bytes={value})
        gpubench.mark("eval")
        print("the job went on")
    """,
        tmp_path / "marks.tsv",
    )
    assert r.returncode == 0 and "the job went on" in r.stdout, r.stderr
    assert "marks are off" not in r.stderr and "Traceback" not in r.stderr
    assert r.stderr.count("gpubench.step() was given a value") == 1 and len(r.stderr.splitlines()) == 1, r.stderr
    events = read_all(tmp_path / "marks.tsv")
    assert [e.name for e in events if isinstance(e, Mark)] == ["warmup", "train", "eval"]
    steps = [e for e in events if isinstance(e, Steps)]
    assert sum(s.n for s in steps) == 4 and sum(s.flops for s in steps) == 5.0
    assert sum(s.bad for s in steps) == 2 and sum(s.counted for s in steps) == 2


def test_an_error_inside_a_call_loses_that_call_only(to_file, capsys, monkeypatch):
    """Anything unexpected in one call is said once; marks stay on for the calls after it."""
    real = linewriter._Writer.on_mark
    calls = []

    def flaky(self, t, name):
        calls.append(name)
        if len(calls) == 1:
            raise RuntimeError("a passing fault")
        real(self, t, name)

    monkeypatch.setattr(linewriter._Writer, "on_mark", flaky)
    for name in ("lost", "train", "eval"):
        gpubench.mark(name)
    gpubench.step(flops=1.0)
    markwriter.flush()
    assert [e.name for e in read_all(to_file) if isinstance(e, Mark)] == ["train", "eval"]
    err = capsys.readouterr().err
    assert err.count("a mark or step was lost") == 1 and "marks are off" not in err


def test_control_characters_in_a_phase_name_are_written_out_never_sent(to_file):
    """A name is a label for a terminal and a report: NUL, ESC (a colour, an OSC title), BEL, C1 and bidi
    controls are written as escapes, whoever wrote the line."""
    gpubench.mark("a\x00b\x1b]0;pwned\x07c\x9b2J\u202ed")
    with open(to_file, "a") as f:  # lines another writer left, raw: control characters, 200,000 characters
        f.write("M\t5.0\t\t77\t\thost\tx\x1b[31my\x00z\n")
        f.write("M\t6.0\t\t77\t\thost\t" + "n" * 200_000 + "\n")
    names = [e.name for e in read_all(to_file) if isinstance(e, Mark)]
    assert names == ["a\\x00b\\x1b]0;pwned\\x07c\\x9b2J\\u202ed", "x\\x1b[31my\\x00z", "n" * markwriter.NAME_MAX]
    assert all(n.isprintable() for n in names)


def test_marks_with_times_that_are_not_times_are_left_out_and_said(tmp_path):
    """Negative, NaN and infinite times, a step group that ends before it starts: skipped, counted, and
    said in one sentence naming the file and the first line; a byte-order mark is no part of a line."""
    path = tmp_path / "marks.tsv"
    path.write_bytes(
        "\ufeffM\t10.0\t\t9\t\thost\ttrain\n"
        "M\t-5.0\t\t9\t=\thost\twarmup\n"
        "M\tnan\t\t9\t=\thost\twarmup\n"
        "S\tinf\t\t9\t=\thost\t12.0\t1\t1\t1e12\t1e12\t0\t0\t0\t0\n"
        "S\t11.0\t\t9\t=\thost\t12.0\t2\t2\t2e12\t2e12\t0\t0\t0\tnan\n"
        "S\t11.0\t\t9\t=\thost\t12.0\t2\t2\t2e12\t2e12\t0\t0\t0\t0.0\n"
        "1e20\t0\t9\tmark\tlate\n".encode()
    )
    reader = Reader(path)
    events = reader.poll()
    assert [(type(e).__name__, e.t) for e in events] == [("Mark", 10.0), ("Steps", 11.0)]
    note = reader.note()
    assert (
        note.startswith("marks.tsv: left out ")
        and "4 lines whose time is not a time on the monotonic clock (the first, line 2, reads -5.0)" in note
        and "1 line that is not a line of marks (line 5)" in note
    )


@pytest.mark.parametrize("where", ["missing/dir/marks.tsv", ".", "readonly/marks.tsv"])
def test_a_marks_file_that_cannot_be_written_never_stops_the_job(tmp_path, where):
    (tmp_path / "readonly").mkdir()
    (tmp_path / "readonly").chmod(0o555)
    r = child(
        """
        import gpubench
        for i in range(100):
            gpubench.mark("train"); gpubench.step(flops=1.0)
        print("the job went on")
    """,
        tmp_path / where,
    )
    assert r.returncode == 0 and "the job went on" in r.stdout, r.stderr
    if os.geteuid() != 0 or where != "readonly/marks.tsv":  # root writes anywhere
        assert r.stderr.count("gpubench: the marks file") == 1 and "Traceback" not in r.stderr


def test_a_cuda_that_fails_leaves_the_steps_on_the_host(to_file, fake_torch, capsys):
    def broken(index):
        raise RuntimeError("CUDA error: an illegal memory access was encountered")

    fake_torch.cuda.get_device_properties = broken
    for _ in range(3):
        gpubench.step(flops=1.0)
    markwriter.flush()
    [steps] = [e for e in read_all(to_file) if isinstance(e, Steps)]
    assert steps.n == 3 and steps.clock == "host"
    assert capsys.readouterr().err.count("steps are stamped on the host") == 1
