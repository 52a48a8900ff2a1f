"""Phases of a job that marks nothing, from synthetic samples: start-up until the first busy second, the busy
span cut by the optimizer's steps and where the work changes, teardown; no row reads a median of 0 where its
GPU was busy a third of the time; where each row's numbers came from."""

import random

import pytest
from jobs import PEAKS, every, gpus, mark, rows, stamps

from gpubench.job import provenance
from gpubench.job.activity import phases_of
from gpubench.job.markreader import Steps, Stream
from gpubench.job.phases import summarize_watch
from gpubench.metrics import finite
from gpubench.read.samples import as_samples

R = Stream(None, 4242)
G = gpus(2)
COLUMNS = [
    "gpu_util_pct",
    "power_w",
    "energy_j",
    "sm_active_pct",
    "sm_occupancy_pct",
    "tensor_active_pct",
    "dram_active_pct",
]
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


def summary(samples, events, t1, n_gpus=1):
    return summarize_watch(samples, events, G[:n_gpus], 0.0, t1, PEAKS, "bf16", COLUMNS, {}, False)


def optimizer_steps(times, flops=None):
    return stamps(R, G[0].uuid, times, origin="optimizer", flops=flops)


def counted(t, flops):
    (s,) = stamps(R, G[0].uuid, [t], flops=flops, origin="counted")
    return s


def by_name(result):
    return {r["scenario"]: r for r in result.summary}


def trainer_job():
    """The issue's Trainer run: 26 s of start-up with the GPU idle but for a burst at 12 s (weights copied
    over), steps every 0.1 s from 26 to 40 s (the 11th counted, slower), an evaluation to 44 s, 2 s of
    teardown."""

    def state(t, g):
        if 12.0 <= t < 12.3:
            return {"gpu_util_pct": 100.0, "sm_active_pct": 20.0, "power_w": 200.0}
        if 26.0 <= t < 40.0:
            return TRAIN
        if 40.0 <= t < 44.0:
            return EVAL
        return {}

    times = every(26.1, 27.1, 0.1)  # the first eleven steps, the last of them the one before the count
    after = every(27.4, 40.0, 0.1)
    events = optimizer_steps(times) + [counted(27.3, 5e13)] + optimizer_steps(after, flops=5e13)
    return rows(1, 0.0, 46.0, state), events


def test_an_unmarked_trainer_job_reads_its_busy_span_not_its_idle_start_up():
    samples, events = trainer_job()
    result = summary(samples, events, 46.0)
    assert result.phases_from == "activity"
    got = by_name(result)
    assert list(got) == ["start-up", "warmup", "train", "busy", "teardown"]
    train = got["train"]
    assert train["sm_active_pct"] == 85.0 and train["tensor_active_pct"] == 40.0
    assert train["steps_per_s"] == pytest.approx(10.0, rel=0.01)
    assert train["mfu_pct"] == pytest.approx(100 * 5e14 / 989.4e12, rel=0.01)
    # the counted step's time is in no row: train begins at its stamp
    assert train["t_start"] >= 27.3 and got["warmup"]["t_end"] <= 27.2
    assert got["busy"]["tensor_active_pct"] == 12.0 and got["busy"]["steps"] == 0
    assert got["start-up"]["t_end"] == pytest.approx(26.0) and got["teardown"]["t_start"] == pytest.approx(44.0)
    assert train["steps_source"] == "optimizer" and train["flops_source"] == "one step counted"
    assert "counted by gpubench from one step" in train["provenance"]
    # the warm-up steps before the count are given its FLOPs too
    assert got["warmup"]["flops_source"] == "one step counted"


def test_without_steps_the_work_is_cut_where_it_changes_and_a_kind_that_recurs_is_one_row():
    def state(t, g):
        if 5 <= t < 15 or 25 <= t < 35:
            return TRAIN
        if 15 <= t < 21:
            return EVAL
        return {}

    result = summary(rows(1, 0.0, 38.0, state), [], 38.0)
    got = by_name(result)
    assert list(got) == ["start-up", "run 1", "run 2", "idle", "teardown"]
    assert result.phases[[p.name for p in result.phases].index("run 1")].spans == [(5.0, 15.0), (25.0, 35.0)]
    assert got["run 1"]["tensor_active_pct"] == 40.0 and got["run 2"]["tensor_active_pct"] == 12.0
    assert got["idle"]["sm_active_pct"] == 0.0


def test_work_in_bursts_keeps_its_busy_seconds_apart_from_the_idle_ones():
    def state(t, g):  # busy one second in two, and in that second 90% of the intervals: its last 0.4 s, all
        # that a row's GPU-Util may read of it after the trim and NVML's trail (gpubench.read.summary.TRAIL_S)
        return TRAIN if 4 <= t < 24 and int(t) % 2 == 0 and (t % 1.0) >= 0.1 else {}

    result = summary(rows(1, 0.0, 28.0, state), [], 28.0)
    got = by_name(result)
    assert got["run"]["sm_active_pct"] == 85.0 and got["run"]["gpu_util_mean_pct"] >= 50
    run = next(p for p in result.phases if p.name == "run")
    assert all(b - a <= 1.0 + 1e-9 for a, b in run.spans) and len(run.spans) >= 8  # the busy seconds alone


def test_work_without_steps_ends_where_its_gpu_stopped_not_at_the_end_of_that_second():
    """A JAX job that exits 0.6 s into a second: the idle rest of that second is teardown, not work whose
    means (the tensor ceiling above all) it would lower."""
    result = summary(rows(1, 0.0, 20.0, lambda t, g: TRAIN if 5.0 <= t < 14.6 else {}), [], 20.0)
    got = by_name(result)
    assert got["run"]["t_end"] == pytest.approx(14.6) and got["teardown"]["t_start"] == pytest.approx(14.6)
    assert got["run"]["gpu_util_mean_pct"] == pytest.approx(TRAIN["gpu_util_pct"])


def test_a_job_whose_gpu_is_busy_throughout_is_one_phase():
    result = summary(rows(1, 0.0, 10.0, lambda t, g: TRAIN), [], 10.0)
    assert [r["scenario"] for r in result.summary] == ["run"]


def test_a_job_that_marks_is_cut_by_its_marks():
    samples, events = trainer_job()
    assert phases_of(as_samples(samples), events + [mark(26.0, R, "train")], G[:1], 0.0, 46.0) is None
    own = stamps(R, G[0].uuid, every(26.1, 40.0, 0.1))
    assert phases_of(as_samples(samples), own, G[:1], 0.0, 46.0) is None


def test_a_start_up_busy_a_third_of_its_time_is_no_start_up():
    def state(t, g):  # a short start-up that keeps the GPU busy in bursts 40% of the time
        return TRAIN if t >= 4.0 or (t % 1.0) < 0.4 else {}

    got = by_name(summary(rows(1, 0.0, 14.0, state), [], 14.0))
    assert "start-up" not in got and got["run"]["sm_active_pct"] > 0


def test_the_busiest_gpu_cuts_the_phases():
    def state(t, g):
        return TRAIN if g == 1 and 6 <= t < 16 else {}

    events = stamps(Stream(1, 7), G[1].uuid, every(6.5, 16.0, 0.5))  # a rank's own steps: cut by them, not here
    assert phases_of(as_samples(rows(2, 0.0, 20.0, state)), [], G[:2], 0.0, 20.0)[1] == (6.0, 16.0)
    assert phases_of(as_samples(rows(2, 0.0, 20.0, state)), events, G[:2], 0.0, 20.0) is None


def random_job(seed: int):
    """Spans of work (the GPU busy in 85-100% of its sample intervals, drawn one by one) and of waiting (in
    0-20%), of random lengths from 1 to 12 s in random order, the optimizer stepping through half the work."""
    rng = random.Random(seed)
    segments, t = [], 0.0
    while t < 60:
        length, dense = rng.uniform(1.0, 12.0), rng.random() < 0.6
        segments.append(
            (t, t + length, dense, rng.uniform(0.1, 0.9), rng.uniform(*((0.85, 1.0) if dense else (0, 0.2))))
        )
        t += length
    draws = {}

    def state(time, g):
        for a, b, _, level, p in segments:
            if a <= time < b:
                busy = draws.setdefault(round(time, 2), rng.random()) < p
                return (
                    {
                        "gpu_util_pct": 100.0,
                        "sm_active_pct": 100.0 * level,
                        "tensor_active_pct": 50.0 * level,
                        "power_w": 300.0,
                    }
                    if busy
                    else {}
                )
        return {}

    events = []
    for a, b, dense, _, _ in segments:
        if dense and b - a > 1 and rng.random() < 0.5:
            events += optimizer_steps(every(a + 0.3, b - 0.3, 0.2))
    return rows(1, 0.0, t, state), sorted(events, key=lambda e: e.t_first), t


@pytest.mark.parametrize("seed", range(40))
def test_no_row_reads_a_median_of_zero_where_its_gpu_was_busy_a_third_of_the_time(seed):
    samples, events, t1 = random_job(seed)
    result = summary(samples, events, t1)
    assert result.phases_from == "activity"
    for r in result.summary:  # GPU-Util is 100 where the GPU is busy, else 0: its mean is the busy share
        if r["n_samples"] and r["gpu_util_mean_pct"] >= 100 / 3:
            assert r["sm_active_pct"] > 0, (seed, r["scenario"], r["gpu_util_mean_pct"])


def test_each_row_says_where_its_numbers_came_from():
    samples, events = trainer_job()
    own = stamps(Stream(None, 99), G[0].uuid, every(26.1, 40.0, 0.1), flops=4e13)
    rows_ = [
        {"kind": "phase", "steps_source": "", "flops_source": "", "tensor_ceiling_pct": 12.5},
        {"kind": "phase", "steps_source": "", "flops_source": ""},
        {"kind": "phase", "steps_source": "step()", "flops_source": "step()"},
    ]
    labelled = provenance.label(rows_)
    assert labelled[0]["flops_source"] == "counters" and "the counters bound them" in labelled[0]["provenance"]
    assert labelled[1]["provenance"] == ""
    assert labelled[2]["provenance"] == (
        "Steps from the job's own gpubench.step(); FLOPs counted by the job's own step()"
    )
    mixed = provenance.resolve(events + own)
    assert {e.origin for e in mixed if isinstance(e, Steps)} == {"optimizer", "counted", "step"}
    facts = provenance.facts(events, summary(samples, events, 46.0).summary, {"hook": "on"}, "activity")
    (process,) = facts["processes"]
    assert process["steps"] == sum(e.n for e in events) and process["counted"]["model_flops"] == 5e13
    assert facts["rows"]["train"] == {"steps": "optimizer", "flops": "one step counted"}
    assert facts["phases_from"] == "activity" and len(facts["counted_steps_s"]) == 1
    for r in summary(samples, events, 46.0).summary:  # MFU within the time the GPU was busy, as everywhere
        assert not finite(r.get("mfu_pct")) or r["mfu_pct"] <= r["gpu_util_mean_pct"]
