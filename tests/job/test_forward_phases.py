"""Phases of what steps no optimizer, from synthetic samples and the forward hook's lines
(gpubench.inside.forwards): an inference job's rows are warm-up and `inference`, with rates, MFU, MBU and
tokens from its forwards; a job that trains and evaluates gets `train` and `eval`; a run of forwards beside
another process's training is training's time."""

import pytest
from jobs import PEAKS, every, gpus, rows, stamps
from test_activity import COLUMNS, EVAL, TRAIN  # the sampled columns and a training and an evaluation GPU state

from gpubench.job.markreader import Stream
from gpubench.job.phases import summarize_watch

R = Stream(None, 4242)
OTHER = Stream(None, 4343)
G = gpus(1)
FLOPS, BYTES, TOKENS = 2e12, 4e8, 32768.0


def summary(samples, events, t1):
    return summarize_watch(samples, events, G, 0.0, t1, PEAKS, "bf16", COLUMNS, {}, False)


def forwards(times, stream=R, flops=FLOPS, origin="forward"):
    return stamps(
        stream,
        G[0].uuid,
        times,
        flops=flops,
        nbytes=BYTES if flops else 0.0,
        tokens=TOKENS if flops else 0.0,
        origin=origin,
    )


def by_name(result):
    return {r["scenario"]: r for r in result.summary}


def test_an_inference_job_gets_warmup_and_inference_rows_with_rates_from_its_forwards():
    def state(t, g):
        return TRAIN if 5.0 <= t < 25.0 else {}

    # the first forward of its shape counted (K), the rest carry its count, 20 forwards a second
    events = forwards([5.1], origin="forward counted") + forwards(every(5.2, 24.95, 0.05))
    got = by_name(summary(rows(1, 0.0, 27.0, state), events, 27.0))
    assert list(got) == ["start-up", "warmup", "inference", "teardown"]
    row = got["inference"]
    assert row["steps_per_s"] == pytest.approx(20.0, rel=0.01)
    assert row["mfu_pct"] == pytest.approx(100 * 20 * FLOPS / 989.4e12, rel=0.01)
    assert row["tokens_per_s"] == pytest.approx(20 * TOKENS, rel=0.01)
    assert row["gbps"] == pytest.approx(20 * BYTES / 1e9, rel=0.01)
    assert row["steps_source"] == "forward" and row["flops_source"] == "forward counted"
    assert "outermost module" in row["provenance"] and "one forward of each input shape" in row["provenance"]


def test_a_job_that_trains_and_evaluates_gets_train_and_eval_rows():
    def state(t, g):
        return TRAIN if 2.0 <= t < 20.0 or 30.0 <= t < 40.0 else EVAL if 20.0 <= t < 30.0 else {}

    opt = stamps(R, G[0].uuid, every(2.1, 19.95, 0.1), flops=5e13, origin="optimizer")
    late = stamps(R, G[0].uuid, every(30.1, 39.95, 0.1), flops=5e13, origin="optimizer")
    events = opt + forwards([20.1], origin="forward counted") + forwards(every(20.2, 29.9, 0.05)) + late
    got = by_name(summary(rows(1, 0.0, 42.0, state), events, 42.0))
    assert {"train", "eval"} <= set(got) and "busy" not in got and "inference" not in got
    ev, train = got["eval"], got["train"]
    assert ev["steps_per_s"] == pytest.approx(20.0, rel=0.01) and ev["steps_source"] == "forward"
    assert ev["tensor_active_pct"] == 12.0 and ev["mfu_pct"] == pytest.approx(100 * 20 * FLOPS / 989.4e12, rel=0.01)
    assert train["steps_per_s"] == pytest.approx(10.0, rel=0.01) and train["steps_source"] == "optimizer"
    assert train["spans"] == 2 and ev["spans"] == 1


def test_forwards_beside_another_process_training_stay_training():
    def state(t, g):
        return TRAIN if 2.0 <= t < 20.0 else {}

    opt = stamps(R, G[0].uuid, every(2.1, 19.95, 0.1), flops=5e13, origin="optimizer")
    events = opt + forwards(every(5.0, 15.0, 0.5), stream=OTHER)
    got = by_name(summary(rows(1, 0.0, 22.0, state), events, 22.0))
    assert "eval" not in got and "inference" not in got and "train" in got


def test_inference_warms_up_until_its_rate_settles():
    """A decoder's first call of generate runs at half its later rate: its warm-up lasts until the rate settles
    (half the run at most), and the inference row reads the settled rate."""

    def state(t, g):
        return TRAIN if 2.0 <= t < 32.0 else {}

    slow, fast = every(2.1, 10.0, 1 / 14), every(10.0 + 1 / 36, 31.9, 1 / 36)
    got = by_name(summary(rows(1, 0.0, 34.0, state), forwards(slow + fast), 34.0))
    assert got["inference"]["steps_per_s"] == pytest.approx(36.0, rel=0.01)
    assert got["warmup"]["t_end"] == pytest.approx(10.0, abs=0.5)
    # a first call of 40% of the run (12 s of 30 at batch 1 on an H200): all of it is warm-up
    slow, fast = every(2.1, 14.0, 1 / 10), every(14.0 + 1 / 40, 31.9, 1 / 40)
    got = by_name(summary(rows(1, 0.0, 34.0, state), forwards(slow + fast), 34.0))
    assert got["warmup"]["t_end"] == pytest.approx(14.0, abs=0.5)
    assert got["inference"]["steps_per_s"] == pytest.approx(40.0, rel=0.01)
    # a rate that never settles: warm-up stops at half the run
    ramp = [2.1]
    while ramp[-1] < 31.0:
        ramp.append(ramp[-1] + 0.2 / (1 + (ramp[-1] - 2.0)))  # ever faster
    got = by_name(summary(rows(1, 0.0, 34.0, state), forwards(ramp), 34.0))
    assert got["warmup"]["t_end"] <= 2.1 + (ramp[-1] - 2.1) / 2 + 0.1
