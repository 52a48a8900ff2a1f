"""The sampler's schedule, phases and failure handling, with a fake clock and fake sources."""

import itertools
import math
import threading

import pytest
from fakes import FakeSource

from gpubench.record.sampler import DROP_AFTER, Sampler
from gpubench.record.sources import NullSource, SourceUnavailable
from gpubench.record.sources.policy import open_given


class FakeTime:
    """A clock that moves only when told: reads cost `read_cost` seconds, waits jump ahead."""

    def __init__(self, read_cost=0.0):
        self.now = 100.0
        self.read_cost = read_cost

    def clock(self):
        return self.now


def _drive(sampler, clock, ticks, read_cost=0.0, slow_tick=None):
    """Run the sampler's loop on the fake clock for `ticks` samples."""
    count = itertools.count(1)
    real_sample = sampler.sample_once

    def sample_once():
        rows = real_sample()
        n = next(count)
        clock.now += read_cost + (0.35 if n == slow_tick else 0.0)
        return rows

    def wait(timeout):
        assert timeout >= 0
        clock.now += timeout
        if len({r["t_end_s"] for r in sampler.rows}) >= ticks:
            sampler._stop.set()
        return sampler._stop.is_set()

    sampler.sample_once = sample_once
    sampler._wait = wait
    sampler._run()


def test_schedule_does_not_drift_with_slow_reads():
    clock = FakeTime()
    s = Sampler([FakeSource()], [0], interval_s=0.1, clock=clock.clock, wall_clock=lambda: 0.0)
    s.sources[0].open([0])
    _drive(s, clock, ticks=50, read_cost=0.03)
    times = [r["t_end_s"] for r in s.rows]
    # tick k is due at start + k * interval exactly, whatever each read cost; the first waits one interval
    assert times == pytest.approx([100.0 + 0.1 * k for k in range(1, 51)])
    # each row covers the interval since the previous one, with no gap and no overlap
    assert [r["t_start_s"] for r in s.rows] == pytest.approx([100.0] + times[:-1])


def test_missed_ticks_are_skipped_not_bunched():
    clock = FakeTime()
    s = Sampler([FakeSource()], [0], interval_s=0.1, clock=clock.clock, wall_clock=lambda: 0.0)
    s.sources[0].open([0])
    _drive(s, clock, ticks=10, slow_tick=3)
    gaps = [b - a for a, b in zip((r["t_end_s"] for r in s.rows), [r["t_end_s"] for r in s.rows][1:])]
    assert min(gaps) == pytest.approx(0.1)  # no burst of catch-up samples
    assert max(gaps) == pytest.approx(0.4)  # the slow read cost its ticks, on the grid


def test_rows_carry_phase_gpu_and_times_for_every_gpu():
    src = FakeSource()
    src.open([0, 1])
    s = Sampler([src], [0, 1], interval_s=0.1, clock=iter(itertools.count(5.0, 0.1)).__next__, wall_clock=lambda: 1.7e9)
    s.sample_once()
    s.set_phase("copy-triton")
    s.sample_once()  # half start, half copy-triton
    rows = s.sample_once()
    assert [r["gpu"] for r in rows] == [0, 1]
    assert all(r["phase"] == "copy-triton" and r["t_wall"] == 1.7e9 for r in rows)
    assert s.rows[0]["phase"] == "start"  # before anything runs: not "idle", a scenario's name
    assert rows[0]["gpu_util_pct"] == 100.0
    assert s.columns == ("gpu_util_pct", "power_w", "sm_active_pct")


def test_a_column_a_source_does_not_give_is_nan_not_zero():
    src = FakeSource(lambda n: {"gpu_util_pct": 50.0})
    src.open([0])
    row = Sampler([src], [0]).sample_once()[0]
    assert row["gpu_util_pct"] == 50.0 and math.isnan(row["sm_active_pct"])


def test_a_failing_source_is_reported_once_and_dropped_only_after_failing_again_and_again():
    bad, good = FakeSource(fail_after=1), FakeSource(lambda n: {"power_w": 99.0})
    bad.name = "bad"
    for src in (bad, good):
        src.open([0])
    seen = []
    s = Sampler([bad, good], [0], on_failure=lambda name, err: seen.append((name, err)))
    rows = [s.sample_once()[0] for _ in range(DROP_AFTER + 5)]
    assert rows[0]["gpu_util_pct"] == 100.0
    assert all(math.isnan(r["gpu_util_pct"]) for r in rows[1:])  # never zeros
    assert all(r["power_w"] == 99.0 for r in rows)  # the healthy source keeps going
    assert [name for name, _ in seen] == ["bad", "bad"] and "the source is kept" in seen[0][1]
    assert seen[1][1].startswith(f"dropped after {DROP_AFTER} failed reads in a row")
    assert [f["dropped"] for f in s.failures] == [False, True] and bad.reads == DROP_AFTER + 1


def test_one_failed_read_leaves_one_empty_row_and_the_source_goes_on():
    """GPM's NVML_ERROR_NO_DATA once in a while must not cost the rest of the run its profiling columns."""
    src = FakeSource(lambda n: {"sm_active_pct": 50.0})
    src.open([0])
    reads = iter([True, False, True, True])
    real = src.read

    def flaky():
        if not next(reads):
            raise RuntimeError("NVML_ERROR_NO_DATA")
        return real()

    src.read = flaky
    s = Sampler([src], [0])
    values = [s.sample_once()[0]["sm_active_pct"] for _ in range(4)]
    assert values[0] == 50.0 and math.isnan(values[1]) and values[2:] == [50.0, 50.0]
    assert len(s.failures) == 1 and not s.failures[0]["dropped"]


def test_sink_gets_each_row_as_it_is_made():
    got = []
    src = FakeSource()
    src.open([0])
    s = Sampler([src], [0], sink=got.append)
    s.sample_once()
    assert len(got) == 1 and got[0] is s.rows[0]


def test_real_thread_starts_and_stop_is_idempotent():
    src = FakeSource()
    src.open([0])
    s = Sampler([src], [0], interval_s=0.01)
    s.start()
    s.start()  # a second start does not make a second thread
    threading.Event().wait(0.1)
    s.stop()
    s.stop()
    n = len(s.rows)
    assert n >= 3
    threading.Event().wait(0.05)
    assert len(s.rows) == n
    assert not any(t.name == "gpubench-sampler" for t in threading.enumerate())


def test_open_sources_reports_why_each_is_missing():
    class Missing(NullSource):
        name = "missing"

        def open(self, gpus):
            raise SourceUnavailable("GPU 0 does not support NVML GPM")

    opened = open_given([NullSource(), Missing()], [0], 0.1)
    assert [s.name for s in opened.sources] == ["null"]
    assert opened.unavailable == {"missing": "GPU 0 does not support NVML GPM"}


def test_interval_must_be_positive():
    with pytest.raises(ValueError):
        Sampler([], [0], interval_s=0)


def test_rows_are_labelled_by_the_phase_that_covered_most_of_their_interval():
    clock = FakeTime()
    src = FakeSource()
    src.open([0])
    s = Sampler([src], [0], interval_s=0.1, clock=clock.clock, wall_clock=lambda: 0.0)
    clock.now += 0.1
    s.sample_once()  # [100.0, 100.1]: start
    clock.now += 0.07
    s.set_phase("copy")  # at 100.17: copy covers 0.03 of the next interval
    clock.now += 0.03
    s.sample_once()  # [100.1, 100.2]: mostly start
    clock.now += 0.02
    s.set_phase("gap")  # at 100.22: copy covers 0.02 + gap 0.08
    clock.now += 0.08
    s.sample_once()  # [100.2, 100.3]: mostly gap, though copy ran at its start
    clock.now += 0.1
    s.sample_once()
    assert [r["phase"] for r in s.rows] == ["start", "start", "gap", "gap"]
    s.set_phase("copy")
    clock.now += 0.1
    assert s.sample_once()[0]["phase"] == "copy"


def test_memory_stays_bounded_however_long_it_samples():
    src = FakeSource()
    src.open([0, 1])
    written = []
    s = Sampler(
        [src],
        [0, 1],
        interval_s=0.1,
        sink=written.append,
        keep_rows=50,
        clock=iter(itertools.count(0.0, 0.1)).__next__,
        wall_clock=lambda: 0.0,
    )
    for _ in range(5000):
        s.sample_once()
    assert len(written) == 10_000 and len(s.rows) == 50


def test_an_interval_shorter_than_a_source_refreshes_is_refused():
    slow = FakeSource()
    slow.min_interval_s = 0.1
    with pytest.raises(ValueError, match="shorter than source 'fake' refreshes"):
        Sampler([slow], [0], interval_s=0.05)
