"""The live phase has the summary's name: a job that marks nothing is cut by what its GPUs did in the live window
too (gpubench.job.activity), so its steps read `warmup` then `train`, its forwards `eval` after training and
`inference` in a job that never trains, long after their first steps left the live buffers. Synthetic rows and
steps are fed to gpubench.job.live as a watch feeds them, a second at a time, on a fake clock."""

import pytest
from jobs import COLUMNS, PEAKS, every, gpus, rows, stamps

from gpubench.job.live import Live
from gpubench.job.markreader import Stream
from gpubench.job.phases import summarize_watch

R = Stream(None, 4242)
G = gpus(1)
TRAIN = {
    "gpu_util_pct": 98.0,
    "sm_active_pct": 85.0,
    "tensor_active_pct": 40.0,
    "dram_active_pct": 30.0,
    "power_w": 600.0,
}
EVAL = {
    "gpu_util_pct": 95.0,
    "sm_active_pct": 70.0,
    "tensor_active_pct": 12.0,
    "dram_active_pct": 55.0,
    "power_w": 450.0,
}


class Clock:
    def __init__(self):
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


def replay(samples, events, t1: float, every_s: float = 1.0) -> dict:
    """{time: (live phase, live row or None)}: the rows and steps handed to Live as they would arrive (a row
    once it ends, a group of steps once its last is stamped), a snapshot each every_s."""
    clock = Clock()
    live = Live(G, COLUMNS, PEAKS, "bf16", clock)
    samples = sorted(samples, key=lambda r: r["t_end_s"])
    events = sorted(events, key=lambda e: e.t_last)
    seen, i, j = {}, 0, 0
    for t in every(every_s, t1, every_s):
        clock.t = t
        while i < len(samples) and samples[i]["t_end_s"] <= t + 1e-9:
            live.take_row(samples[i])
            i += 1
        arrived = []
        while j < len(events) and events[j].t_last <= t:
            arrived.append(events[j])
            j += 1
        live.take_events(arrived)
        snap = live.snapshot()
        seen[round(t, 3)] = (snap.phase, snap.rows[0] if snap.rows else None)
    assert live.errors == []
    return seen


def final(samples, events, t1: float) -> dict:
    """{phase: its row} of the summary of the whole job."""
    result = summarize_watch(samples, events, G, 0.0, t1, PEAKS, "bf16", COLUMNS, {})
    return {r["phase"]: r for r in result.summary}


def optimizer(times, origin="optimizer"):
    return stamps(R, G[0].uuid, times, flops=5e13, origin=origin)


def forwards(times, origin="forward"):
    return stamps(R, G[0].uuid, times, flops=2e12, nbytes=4e8, tokens=4096.0, origin=origin)


def test_an_unmarked_training_job_reads_warmup_then_train_as_its_summary_does():
    def state(t, g):
        return TRAIN if 2.0 <= t < 60.0 else {}

    events = optimizer(every(2.1, 59.95, 0.1))  # ten steps a second from 2.1 s: its tenth at 3.0 s
    samples = rows(1, 0.0, 62.0, state)
    rows_of = final(samples, events, 62.0)
    assert list(rows_of) == ["start-up", "warmup", "train", "teardown"]
    seen = replay(samples, events, 59.0)
    assert seen[1.0][0] == "start-up" and seen[3.0][0] == "warmup"
    assert {seen[t][0] for t in every(4.0, 59.0, 1.0)} == {"train"}  # the endpoint said `run` here
    late = seen[59.0][1]  # the first steps left the buffers long ago: still train, not warm-up again
    assert late["steps_per_s"] == pytest.approx(rows_of["train"]["steps_per_s"], rel=1e-6)
    assert late["mfu_pct"] == pytest.approx(rows_of["train"]["mfu_pct"], rel=1e-6)
    assert late["steps_source"] == rows_of["train"]["steps_source"] == "optimizer"


def test_warmup_ends_at_the_counted_step_and_the_counted_step_is_in_no_live_row():
    def state(t, g):
        return TRAIN if 2.0 <= t < 40.0 else {}

    # the third step was counted (slower: gpubench counted its FLOPs), the steps around it ten a second
    events = optimizer([2.1, 2.2]) + optimizer([2.9], origin="counted") + optimizer(every(3.0, 39.95, 0.1))
    samples = rows(1, 0.0, 42.0, state)
    rows_of = final(samples, events, 42.0)
    assert rows_of["warmup"]["t_end"] == pytest.approx(2.2)  # warm-up ends where the counted step's time began
    seen = replay(samples, events, 39.0)
    assert seen[2.0][0] == "start-up" and {seen[t][0] for t in every(3.0, 39.0, 1.0)} == {"train"}
    assert seen[5.0][1]["steps_per_s"] == pytest.approx(10.0, rel=1e-6)  # the slow step's time left out


def test_forwards_after_training_are_eval_and_a_job_that_never_trains_infers():
    def state(t, g):
        return TRAIN if 2.0 <= t < 40.0 or 60.0 <= t < 70.0 else EVAL if 40.0 <= t < 60.0 else {}

    events = (
        optimizer(every(2.1, 39.95, 0.1))
        + forwards([40.1], origin="forward counted")
        + forwards(every(40.2, 59.9, 0.05))
        + optimizer(every(60.1, 69.95, 0.1))
    )
    samples = rows(1, 0.0, 72.0, state)
    assert {"train", "eval"} <= set(final(samples, events, 72.0))
    seen = replay(samples, events, 70.0)
    # 20 s into the evaluation no training step is left in the buffers: eval all the same, never inference
    assert {seen[t][0] for t in every(42.0, 60.0, 1.0)} == {"eval"}
    assert seen[59.0][1]["steps_per_s"] == pytest.approx(20.0, rel=1e-6)
    assert {seen[t][0] for t in every(62.0, 70.0, 1.0)} == {"train"}

    def serving(t, g):
        return TRAIN if 5.0 <= t < 45.0 else {}

    events = forwards([5.1], origin="forward counted") + forwards(every(5.2, 44.95, 0.05))
    samples = rows(1, 0.0, 47.0, serving)
    assert list(final(samples, events, 47.0)) == ["start-up", "warmup", "inference", "teardown"]
    seen = replay(samples, events, 45.0)
    assert seen[4.0][0] == "start-up" and {seen[t][0] for t in every(7.0, 45.0, 1.0)} == {"inference"}


def test_idle_after_work_is_idle_and_work_without_steps_is_run():
    def state(t, g):
        return TRAIN if 2.0 <= t < 20.0 else {}

    samples = rows(1, 0.0, 40.0, state)
    assert "run" in final(samples, [], 40.0)
    seen = replay(samples, [], 40.0)
    assert seen[1.0][0] == "start-up" and {seen[t][0] for t in every(4.0, 20.0, 1.0)} == {"run"}
    assert {seen[t][0] for t in every(24.0, 40.0, 1.0)} == {"idle"}  # work ended: idle, never start-up again
