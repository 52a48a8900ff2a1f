"""Phases shorter than the counters' lag: never dropped unsaid. Phases that alternate faster than a sample
are one row over the stretch where they alternate, with a note; a lone short phase keeps a row too short to
measure; and the hint after a watch names only commands that work on its run directory."""

import math
import os
import sys
import textwrap
from pathlib import Path

import pytest
from fakes import GPU, FakeSource
from jobs import PEAKS, every, gpus, mark, rows, stamps

from gpubench.cli import main
from gpubench.job import watchcmd as watch
from gpubench.job.markreader import Stream
from gpubench.job.phases import summarize_watch
from gpubench.job.watcher import Watch, WatchOptions
from gpubench.read.summary import TRIM_S, windows_of
from gpubench.record.config import RecordingConfig
from gpubench.record.rundir import load_run

ROOT = Path(__file__).resolve().parents[2]
INFO = {"nvml_index": 0, "name": GPU.name, "uuid": GPU.uuid, "memory_mib": 81559, "driver": "580.0"}
BUSY = {"gpu_util_pct": 100.0, "sm_active_pct": 90.0, "tensor_active_pct": 30.0, "power_w": 500.0}

# 100 phases of about 30 ms each, train and eval in turn, a step in each: all of them shorter than TRIM_S
ALTERNATING = [
    sys.executable,
    "-c",
    textwrap.dedent("""
    import time, gpubench
    for i in range(100):
        gpubench.mark("train" if i % 2 == 0 else "eval")
        time.sleep(0.03)
        gpubench.step(flops=1e9)
"""),
]


@pytest.fixture(autouse=True)
def _children_import_this_gpubench(monkeypatch):
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))


def test_phases_alternating_faster_than_the_counters_are_one_row_with_a_note(tmp_path, capsys):
    config = RecordingConfig(interval_s=0.05, sources=[FakeSource(lambda n: BUSY)], command=["gpubench", "watch"])
    code, w = watch.run(WatchOptions(tmp_path / "run", [GPU], INFO, config), ALTERNATING)
    assert code == 0
    manifest, _, summary = load_run(tmp_path / "run")
    rows_by = {r["phase"]: r for r in summary}
    both = rows_by["train + eval"]  # neither phase is lost: they are measured together
    assert both["kind"] == "phase" and both["n_samples"] > 0 and both["verdict_rules"] != "too-short"
    assert both["gpu_util_pct"] == 100.0 and both["sm_active_pct"] == 90.0
    assert 0 < both["steps"] <= 100 and both["steps_per_s"] > 0
    assert both["mfu_pct"] <= both["gpu_util_mean_pct"]  # MFU within the share of time the GPU was busy
    [(a, b)] = windows_of(both["windows"])  # one window: the stretch they alternated in, less one trim
    first = min(p["spans"][0][0] for p in manifest["phases"] if p["name"] == "train + eval")
    assert a >= first + TRIM_S - 1e-9 and b <= both["t_end"]
    [note] = [m for m in manifest["warnings"] if "alternated" in m]
    assert note.startswith("train and eval alternated ") and "one row, 'train + eval'" in note
    spans = int(note.split(" alternated ")[1].split(" times")[0])
    assert 2 <= spans <= 100
    watch.show(w)
    said = capsys.readouterr().out
    assert "train + eval" in said
    assert main(["report", str(tmp_path / "run")]) == 0
    assert f"Note: {note}" in (tmp_path / "run" / "report.md").read_text()  # the report says it too


def test_a_lone_short_phase_keeps_its_row_and_long_neighbours_keep_theirs():
    """Train for 4 s, eval for 0.3 s, train again, then eval and train in turn every 0.1 s: the lone eval is a
    row too short to measure, and only the fast stretch is merged."""
    g = gpus(1)
    a = Stream(None, 101)
    events = [
        mark(0.0, a, "train"),
        mark(4.0, a, "eval"),
        mark(4.3, a, "train"),
        *[mark(t, a, "eval" if i % 2 == 0 else "train") for i, t in enumerate(every(8.0, 9.9, 0.1))],
        *stamps(a, g[0].uuid, every(0.05, 11.0, 0.05), flops=1e12),
    ]
    samples = rows(1, 0.0, 12.0, lambda t, _: BUSY)
    out = summarize_watch(
        samples,
        events,
        g,
        0.0,
        12.0,
        PEAKS,
        "bf16",
        list(BUSY) + ["energy_j", "sm_occupancy_pct", "dram_active_pct"],
        {0: {101}},
    )
    by = {r["phase"]: r for r in out.summary}
    assert [r["phase"] for r in out.summary if r["kind"] == "phase"] == ["train", "eval", "eval + train"]
    assert by["eval"]["verdict_rules"] == "too-short" and not math.isfinite(by["eval"]["steps_per_s"])
    assert windows_of(by["eval + train"]["windows"]) == [(8.0 + TRIM_S, pytest.approx(9.9, abs=0.06))]
    assert all(b <= 8.0 or a >= 9.9 for a, b in windows_of(by["train"]["windows"]))  # no fast span in train's row
    [note] = out.notes
    assert note.startswith("eval and train alternated 19 times in 1.9 s")


def test_the_hint_names_only_commands_that_work_on_the_run(tmp_path, capsys):
    """After a watch, `next:` names plot and report only where they will run; each named one then does."""
    config = RecordingConfig(interval_s=0.05, sources=[FakeSource()], command=["gpubench", "watch"])
    # a space, and a name long enough to pass a log's 80 columns: the hint's commands must still be whole
    run_dir = tmp_path / "a run whose name is long enough that the hint to plot and report it passes 80 columns"
    code, w = watch.run(WatchOptions(run_dir, [GPU], INFO, config), [sys.executable, "-c", "pass"])
    assert code == 0
    watch.show(w)
    [hint] = [line for line in capsys.readouterr().out.splitlines() if line.startswith("next: ")]
    import shlex

    commands = [shlex.split(c) for c in hint.removeprefix("next: ").split(" && ")]
    assert [c[:2] for c in commands] == [["gpubench", "plot"], ["gpubench", "report"]]
    for c in commands:
        assert main(c[1:]) == 0
    empty = Watch(run_dir, run_dir / "marks.tsv", w.rec, samples=0)  # nothing sampled: plot would refuse it
    watch.show(empty)
    said = capsys.readouterr().out
    assert "gpubench plot" not in said and "nothing to plot or report: no sample was recorded" in said


def test_short_phases_that_come_once_each_are_not_merged():
    """warmup, train and eval once each, every one short (a tiny job on a fast machine): no phase came back,
    so none alternated; each keeps its own row, whatever the machine's speed made their lengths."""
    from types import SimpleNamespace

    from gpubench.job import fleeting

    phases = [
        SimpleNamespace(name=n, spans=[(a, a + 0.2)]) for n, a in (("warmup", 0.0), ("train", 0.2), ("eval", 0.4))
    ]
    kept, notes = fleeting.merge(phases, 0.5, lambda name, spans: SimpleNamespace(name=name, spans=spans))
    assert [p.name for p in kept] == ["warmup", "train", "eval"] and notes == []
    again = phases + [SimpleNamespace(name="train", spans=[(0.6, 0.8)])]
    again[1].spans.append(again.pop().spans[0])
    merged, notes = fleeting.merge(again, 0.5, lambda name, spans: SimpleNamespace(name=name, spans=spans))
    assert [p.name for p in merged] == ["warmup + train + eval"] and len(notes) == 1
