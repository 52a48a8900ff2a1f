"""The activity cut ends on every window: a span that starts where a second ends, at a time whose float
subtraction puts it back inside that second, once looped forever and held a finished watch open (the run
kept in results/logs/watch-auto-llama-unfinished-h200.tar.gz, summarized here from its own files)."""

import json
import random
import signal
import tarfile
from contextlib import contextmanager
from pathlib import Path

import pytest

from gpubench.job import markfile
from gpubench.job.activity import BIN_S, _between
from gpubench.job.phases import summarize_watch
from gpubench.record.gpus import Gpu
from gpubench.record.rundir import load_run
from gpubench.truth.peaks import sheet_for

ROOT = Path(__file__).resolve().parents[2]
UNFINISHED = ROOT / "results" / "logs" / "watch-auto-llama-unfinished-h200.tar.gz"


@contextmanager
def within(seconds: int):
    """Fail, rather than hang the test run, where the block has not ended in time."""

    def late(signum, frame):
        raise TimeoutError(f"still running after {seconds} s")

    previous = signal.signal(signal.SIGALRM, late)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def test_a_span_from_a_seconds_end_is_cut_into_whole_seconds_for_any_start_of_the_window():
    rng = random.Random(0)
    stuck = (75.92746147589646, 69)  # t0 + 69 - t0 // 1 == 68: the float that looped
    cases = [stuck] + [(rng.uniform(0, 1e4), rng.randint(1, 3000)) for _ in range(20000)]
    with within(20):
        for t0, k in cases:
            a = t0 + k * BIN_S
            busy = [k % 2 == 0] * (k + 5)
            out = _between(busy, t0, a, a + 2.5)
            assert out[0][1] == a and out[-1][2] == a + 2.5
            assert all(s[2] > s[1] for s in out) and all(x[2] == y[1] for x, y in zip(out, out[1:]))
            assert len(out) <= 1 or out[0][0] != out[1][0]


@pytest.mark.skipif(not UNFINISHED.is_file(), reason="the unfinished run is not in this checkout")
def test_the_watch_that_did_not_end_is_summarized_from_its_own_files(tmp_path):
    with tarfile.open(UNFINISHED) as tar:
        tar.extractall(tmp_path, filter="data")
    run = next(tmp_path.iterdir())
    manifest, samples, _ = load_run(run)
    gpus = [Gpu(**g) for g in manifest["gpus_sampled"]]
    events = markfile.read_all(run / "marks.tsv")
    peaks = {"datasheet": sheet_for({"name": gpus[0].name}), "measured": None, "conditions": {}}
    t0 = float(samples.col("t_start_s").min())
    t1 = float(samples.col("t_end_s").max())
    with within(60):
        for shift in (0.0, 0.05, 0.1, 0.35, 0.6):  # the window's ends as the watch's clock might have read them
            result = summarize_watch(
                samples,
                events,
                gpus,
                t0 + shift,
                t1 + shift,
                peaks,
                "bf16",
                manifest["columns"],
                {gpus[0].nvml_index: {849}},
                False,
            )
            rows = {r["scenario"]: r for r in result.summary}
            assert 24.0 < rows["train"]["steps_per_s"] < 26.5  # the job printed 24.4 by its host clock
    assert json.loads((run / "manifest.json").read_text())["status"] == "running"  # as it was left
