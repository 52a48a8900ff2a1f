"""One spec of a marks line (gpubench.inside.markline): the writer writes through it, the reader reads the places
it gives, and every line of the committed runs reads back through it and is written again to the same bytes."""

import ast
import itertools
from pathlib import Path

import pytest

from gpubench.inside import linewriter, markline, markwriter
from gpubench.inside.markline import MARK_LINE, SAME, STEPS_LINE, line_of
from gpubench.job.markfile import read_all
from gpubench.job.markreader import Mark, Steps

ROOT = Path(__file__).resolve().parents[2]
UUID = "GPU-a7bf0bb4-c4b0-2abb-5034-6d549663e8da"


@pytest.fixture
def to_file(tmp_path, monkeypatch):
    path = tmp_path / "marks.tsv"
    clock = itertools.count(1000)
    monkeypatch.setattr(linewriter.time, "monotonic", lambda: next(clock) / 64)  # exact to the microsecond: 15.625, ...
    monkeypatch.setenv("RANK", "3")
    markwriter.target(path)
    yield path
    markwriter.target(None)


def test_a_line_the_writer_writes_reads_back_field_by_field(to_file):
    writer = markwriter._writer()
    writer.uuid = UUID
    writer.mark("train")
    for flops in (1e12, 2e12, "x"):
        writer.step(flops, 4e9, 8)
    writer.mark("eval")
    markwriter.flush()
    lines = to_file.read_text().splitlines(keepends=True)
    assert [line[0] for line in lines] == ["M", "S", "M"]
    fields = [line_of(line[0]).read(line) for line in lines]
    pid = writer.pid
    assert fields[0] == {
        "letter": "M",
        "t": 15.640625,
        "rank": "3",
        "pid": pid,
        "uuid": UUID,
        "clock": "host",
        "name": "train",
    }
    steps = fields[1]
    assert steps == {
        "letter": "S",
        "t_first": 15.65625,
        "rank": "3",
        "pid": pid,
        "uuid": SAME,
        "clock": "host",
        "t_last": 15.6875,
        "n": 3,
        "counted": 2,
        "flops": 3e12,
        "hw_flops": 3e12,
        "bytes": 12e9,
        "tokens": 24.0,
        "bad": 1,
        "lead_s": 0.0,
    }
    assert fields[2]["uuid"] == SAME and fields[2]["name"] == "eval"
    # the reader finds the same values at the places the spec gives
    mark, group, _ = read_all(to_file)
    assert isinstance(mark, Mark) and (mark.t, mark.stream.rank, mark.stream.pid, mark.uuid, mark.name) == (
        15.640625,
        3,
        pid,
        UUID,
        "train",
    )
    assert isinstance(group, Steps) and group.uuid == UUID
    for name in STEPS_LINE.names[6:]:
        assert getattr(group, name) == steps[name], name
    # and every line is what the spec writes from its own fields: the writer adds nothing of its own
    assert all(line_of(f["letter"]).write(**f) == line for f, line in zip(fields, lines))


def test_the_writer_never_builds_a_line_by_hand():
    """No tab and no SAME token of its own in the writer's source: each line comes from the spec's write."""
    tree = ast.parse((ROOT / "gpubench" / "inside" / "linewriter.py").read_text())
    texts = [n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)]
    assert not [t for t in texts if markline.SEP in t or t == SAME]
    writes = [n for n in ast.walk(tree) if isinstance(n, ast.Call) and getattr(n.func, "attr", "") == "_write"]
    assert len(writes) == 2
    assert all(ast.unparse(w.args[0].func) in ("MARK_LINE.write", "STEPS_LINE.write") for w in writes)


def test_the_spec_refuses_a_line_it_does_not_describe():
    with pytest.raises(KeyError):
        MARK_LINE.write(letter="M", t=1.0, rank="", pid=1, uuid="", clock="host")  # no name
    assert STEPS_LINE.read("M\t1.0\t\t1\t\thost\tx\n") is None
    assert line_of("x") is None and line_of("A") is STEPS_LINE


def test_every_committed_marks_line_reads_and_writes_back_to_the_same_bytes():
    """The format is the committed runs' own: read through the spec and written again, each line is unchanged."""
    files = sorted(ROOT.glob("results/*/marks.tsv"))
    assert files
    n = 0
    for path in files:
        for line in path.read_text().splitlines(keepends=True):
            spec = line_of(line[0])
            if spec is None:
                continue  # a line of the earlier one-line-per-call format
            assert spec.write(**spec.read(line)) == line, (path, line)
            n += 1
    assert n > 1000
