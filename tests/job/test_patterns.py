"""The pattern told in the marks (a P line, gpubench.inside.markline) and read back (gpubench.job.patterns,
provenance.resolve): steps taken back, each step given its own pattern's count and no other's, lines cut
where a P line falls inside them; the hook telling it from a real job's optimizers, in this process."""

import pytest
import torch
from torch import nn

from gpubench.inside import autohook, markwriter
from gpubench.inside.markline import PATTERN, PATTERN_LINE, line_of
from gpubench.job import patterns, provenance
from gpubench.job.markfile import Reader, read_all
from gpubench.job.markreader import Pattern, Steps, Stream

S, OTHER = Stream(None, 7), Stream(None, 8)


def line(t0, t1, n, flops=0.0, origin="optimizer", stream=S):
    counted = n if flops else 0
    return Steps(t0, stream, "", "host", t1, n, counted, flops * n, flops * n, 0.0, 0.0, 0, 0.0, origin)


def told(written, back, name, t=0.0):
    return Pattern(t, S, "", "host", written, back, name)


def test_a_p_line_is_written_and_read_through_its_spec(tmp_path):
    text = PATTERN_LINE.write(
        letter=PATTERN,
        t=1.5,
        rank=2,
        pid=7,
        uuid="GPU-x",
        clock="gpu",
        written=5,
        back=5,
        pattern="5 × Adam #1, 1 × Adam #2",
    )
    assert line_of("P") is PATTERN_LINE and PATTERN_LINE.read(text)["pattern"] == "5 × Adam #1, 1 × Adam #2"
    bad = text.replace("\t5\t5\t", "\t5\t6\t")  # takes back more than was written: no line of marks
    path = tmp_path / "marks.tsv"
    path.write_text(text + bad)
    reader = Reader(path)
    (found,) = reader.poll()
    assert found == Pattern(1.5, Stream(2, 7), "GPU-x", "gpu", 5, 5, "5 × Adam #1, 1 × Adam #2")
    assert "not a line of marks" in reader.note()


def test_steps_taken_back_are_left_out_and_a_line_cut_where_a_pattern_begins():
    events = [line(1.0, 1.2, 3), line(1.3, 1.4, 2), told(4, 4, "4 × SGD, 1 × Adam", t=1.35), line(2.0, 2.0, 1)]
    kept = [e for e in provenance.resolve(events) if isinstance(e, Steps)]
    assert [(e.t_first, e.t_last, e.n, e.pattern) for e in kept] == [
        (1.4, 1.4, 1, "4 × SGD, 1 × Adam"),
        (2.0, 2.0, 1, "4 × SGD, 1 × Adam"),
    ]
    assert not any(isinstance(e, Pattern) for e in provenance.resolve(events))


def test_each_step_gets_its_own_patterns_count_and_never_another():
    one, both = 10.0, 30.0
    events = [
        line(1, 1.9, 10),
        line(2.0, 2.0, 1, one, "counted"),
        line(2.1, 2.5, 5, one),  # alone, counted
        told(16, 0, "1 × SGD #1, 1 × SGD #2"),
        line(3.0, 3.9, 10),
        line(4.0, 4.0, 1, both, "counted"),
        line(4.1, 4.9, 9, both),  # the pair's pattern, counted on its own
        told(36, 0, "2 × SGD #1, 1 × SGD #2"),
        line(5.0, 5.9, 8),  # a third pattern, never counted
        line(1.0, 9.0, 40, stream=OTHER),
        line(9.5, 9.5, 1, 7.0, "counted", stream=OTHER),
    ]  # told nothing
    kept = [e for e in provenance.resolve(events) if isinstance(e, Steps)]
    per = {}
    for e in kept:
        if e.stream == S:
            per.setdefault(e.pattern, set()).add(e.flops / e.n if e.counted else None)
    assert per == {"": {one}, "1 × SGD #1, 1 × SGD #2": {both}, "2 × SGD #1, 1 × SGD #2": {None}}
    assert sum(e.n for e in kept if e.stream == S) == 44
    assert all(e.counted == e.n and e.flops == 7.0 * e.n for e in kept if e.stream == OTHER)  # as always


def test_a_row_and_the_manifest_name_the_patterns_of_its_steps():
    groups = [line(1, 2, 3, 5.0, "optimizer")]
    groups = [
        *groups,
        *(provenance.resolve([line(0, 0.5, 2), told(2, 0, "5 × Adam #1, 1 × Adam #2"), line(3, 4, 4, 5.0)])),
    ]
    row = {**provenance.sources(groups), "scenario": "train"}
    assert row["steps_pattern"] == "5 × Adam #1, 1 × Adam #2"
    assert provenance.sentence(row).startswith(
        "Steps from the job's optimizer steps (no code change), one step per "
        "pattern of 5 × Adam #1, 1 × Adam #2; FLOPs counted by gpubench"
    )
    two = dict(row, steps_pattern=provenance.THEN.join(["1 × SGD", "1 × SGD #1, 1 × SGD #2"]))
    assert "one step per pattern of 1 × SGD, then of 1 × SGD #1, 1 × SGD #2;" in provenance.sentence(two)
    events = [line(0, 1, 6), told(6, 5, "5 × Adam #1, 1 × Adam #2"), line(2, 3, 4)]
    facts = provenance.facts(events, [row], {"hook": "on"}, "activity")
    (process,) = facts["processes"]
    assert process["steps"] == 5 and process["patterns"] == [
        {"after_steps": 1, "pattern": "5 × Adam #1, 1 × Adam #2", "taken_back": 5}
    ]
    assert facts["rows"]["train"]["pattern"] == "5 × Adam #1, 1 × Adam #2"


def test_split_keeps_the_steps_and_shares_the_sums():
    parts = patterns.split(line(1.0, 2.0, 5, 4.0), [2, 3])
    assert [(a, e.n, e.t_first, e.t_last, e.flops, e.counted) for a, e in parts] == [
        (0, 2, 1.0, 1.25, 8.0, 2),
        (2, 1, 1.5, 1.5, 4.0, 1),
        (3, 2, 1.75, 2.0, 8.0, 2),
    ]


def test_the_hook_counts_a_model_alone_then_beside_another_as_two_patterns(tmp_path, monkeypatch):
    """A model trained alone, then a second beside it (each optimizer stepped in turn): each process step of
    the pair carries the FLOPs of both models' work, counted over one whole pattern, those of the one alone its
    own."""
    import gpubench

    monkeypatch.setattr(autohook, "_on", True)
    monkeypatch.setattr(markwriter, "own_steps", False)
    path = tmp_path / "marks.tsv"
    markwriter.target(path)
    torch.manual_seed(0)
    a, b = nn.Linear(16, 16), nn.Linear(16, 64)
    opt_a, opt_b = torch.optim.SGD(a.parameters()), torch.optim.SGD(b.parameters())
    x = torch.randn(4, 16)
    try:
        hook = autohook.Steps()

        def step(model, opt):  # the hooks as torch calls them around opt.step(), which counts no FLOPs
            model(x).square().mean().backward()
            hook.pre(opt, (), {})
            hook.post(opt, (), {})
            opt.zero_grad()

        for _ in range(15):
            step(a, opt_a)
        for _ in range(50):
            step(a, opt_a)
            step(b, opt_b)
        markwriter.flush()
    finally:
        markwriter.target(None)
    alone = gpubench.count_flops(lambda: a(x).square().mean().backward())
    pair = alone + gpubench.count_flops(lambda: b(x).square().mean().backward())
    events = read_all(path)
    (said,) = [e for e in events if isinstance(e, Pattern)]
    assert said.back == 0 and said.name == "1 × SGD #1, 1 × SGD #2" and said.written > 15
    kept = [e for e in provenance.resolve(events) if isinstance(e, Steps)]
    assert sum(e.n for e in kept) == 65  # each iteration one step: a's alone, then a's and b's
    for e in kept:
        assert e.counted == e.n
        expected = pair if e.pattern else alone
        assert e.flops / e.n == pytest.approx(expected, rel=0.01), e
    assert len([e for e in kept if e.origin == "counted"]) == 2
