"""The live window of a running watch (gpubench.job.live), fed synthetic rows and steps on a fake clock: the
summary's own rows over the window, the window's bounds, start-up, the ranks of each GPU, bounded memory,
and feeds that never raise."""

import pytest
from jobs import COLUMNS, PEAKS, every, gpus, mark, rows, stamps

from gpubench.job.live import KEEP_S, Live
from gpubench.job.markreader import Stream
from gpubench.job.phases import summarize_watch


class Clock:
    def __init__(self, t: float = 0.0):
        self.t = t

    def __call__(self) -> float:
        return self.t


def fed(n_gpus: int, samples, events, now: float, window_s: float = 15.0) -> Live:
    clock = Clock(0.0)
    live = Live(gpus(n_gpus), COLUMNS, PEAKS, "bf16", clock, window_s=window_s)
    for row in samples:
        live.take_row(row)
    clock.t = now
    live.take_events(events)
    return live


def lockstep(n: int, slow: int, t1: float = 10.6):
    """n ranks stepping together at 10/s from 0.6 s to t1; the slow rank's GPU idles 40% of the time."""
    events = []
    for r in range(n):
        s = Stream(r, 1000 + r)
        events += [
            mark(0.0, s, "train"),
            *stamps(s, gpus(n)[r].uuid, every(0.6, t1, 0.1), flops=1e13, nbytes=2e9, tokens=4096.0),
        ]
    samples = rows(
        n,
        0.0,
        11.0,
        lambda t, g: {
            "gpu_util_pct": 56.0 if g == slow else 97.0,
            "sm_active_pct": 50.0 if g == slow else 45.0,
            "tensor_active_pct": 25.0,
        },
    )
    return samples, events


def test_a_window_as_long_as_the_phase_gives_the_summarys_rows_straggler_included():
    samples, events = lockstep(2, slow=1)
    snap = fed(2, samples, events, now=10.6, window_s=60.0).snapshot()
    summary = summarize_watch(samples, events, gpus(2), 0.0, 10.6, PEAKS, "bf16", COLUMNS, {}).summary
    assert snap.phase == "train" and snap.window == (0.5, 10.6) and [r["gpu"] for r in snap.rows] == [0, 1]
    for live, done in zip(snap.rows, summary):
        for key in (
            "steps",
            "steps_per_s",
            "tflops",
            "mfu_pct",
            "hfu_pct",
            "mbu_pct",
            "tokens_per_s",
            "gpu_util_mean_pct",
            "sm_active_pct",
            "verdict_rules",
            "verdict",
            "straggler_rank",
        ):
            assert live[key] == done[key], key
    assert snap.rows[1]["verdict_rules"].startswith("straggler") and snap.ranks == {0: "0", 1: "1"}
    assert snap.rows[0]["mfu_pct"] == pytest.approx(100 * 10 * 1e13 / 989.4e12)


def test_the_window_is_the_last_window_s_of_the_phase_after_its_first_half_second():
    samples, events = lockstep(1, slow=-1, t1=30.0)
    samples = rows(1, 0.0, 30.0, lambda t, g: {"gpu_util_pct": 90.0})
    early = fed(1, samples, events, now=1.2).snapshot()
    assert early.window == (0.5, 1.2) and early.rows[0]["steps"] == 6  # stamps at 0.6 ... 1.1
    late = fed(1, samples, events, now=30.0, window_s=3.0).snapshot()
    assert late.window == (27.0, 30.0)
    assert late.rows[0]["steps"] == sum(27.0 <= t <= 30.0 for t in every(0.6, 30.0, 0.1))
    assert late.rows[0]["steps_per_s"] == pytest.approx(10.0)
    assert fed(1, samples, events, now=0.4).snapshot().rows == []  # inside the phase's first half second


def test_before_the_job_marks_or_steps_it_is_start_up():
    snap = fed(1, rows(1, 0.0, 3.0, lambda t, g: {"gpu_util_pct": 5.0}), [], now=3.0).snapshot()
    assert snap.phase == "start-up" and snap.rows[0]["verdict_rules"] == "start-up"
    assert snap.latest[0]["t_end_s"] == pytest.approx(3.0) and snap.ranks == {0: ""}


def test_a_gpu_keeps_its_rank_after_its_steps_leave_the_window():
    s = Stream(5, 42)
    events = [mark(0.0, s, "train"), *stamps(s, gpus(1)[0].uuid, every(0.6, 5.0, 0.1)), mark(5.0, s, "eval")]
    snap = fed(1, rows(1, 0.0, 40.0, lambda t, g: {}), events, now=40.0).snapshot()
    assert snap.phase == "eval" and snap.ranks == {0: "5"} and snap.rows[0]["steps"] == 0


def test_memory_stays_bounded_however_long_the_job():
    clock = Clock()
    live = Live(gpus(1), COLUMNS, PEAKS, "bf16", clock)
    s = Stream(0, 1)
    for i, row in enumerate(rows(1, 0.0, 600.0, lambda t, g: {"gpu_util_pct": 50.0})):
        clock.t = row["t_end_s"]
        live.take_row(row)
        live.take_events(stamps(s, gpus(1)[0].uuid, [clock.t]) + [mark(clock.t, s, f"phase {i % 3}")])
    assert len(live._rows[0]) <= KEEP_S / 0.1 + 2 and len(live._steps) <= KEEP_S / 0.1 + 2
    assert sum(len(m) for m in live._marks.values()) <= 64
    clock.t += 0.05
    snap = live.snapshot()
    assert snap.phase == "phase 2" and snap.rows == []  # each phase lasts 0.1 s: shorter than its trim


def test_what_it_is_fed_never_raises():
    live = Live(gpus(1), COLUMNS, PEAKS, "bf16", Clock())
    live.take_row({"t_end_s": 1.0})  # no gpu
    live.take_events(None)
    live.take_events([object(), "M\t1.0"])  # not events: passed by
    assert [e.split(":")[0] for e in live.errors] == ["KeyError", "TypeError"]
    sink = []
    live.after(sink.append)({"no": "gpu"})
    assert sink == [{"no": "gpu"}] and len(live.errors) == 3  # the row reached the sink all the same


def test_the_phases_rate_so_far_is_its_final_rows_where_the_windows_move():
    """10 steps/s for 20 s, then 5/s to 60 s: the last window reads 5, the phase so far its final row's."""
    s = Stream(0, 1000)
    times = every(0.6, 20.0, 0.1) + every(20.2, 60.0, 0.2)
    events = [mark(0.0, s, "train"), *stamps(s, gpus(1)[0].uuid, times, flops=1e13)]
    samples = rows(1, 0.0, 60.0, lambda t, g: {"gpu_util_pct": 95.0})
    row = fed(1, samples, events, now=60.0).snapshot().rows[0]
    final = summarize_watch(samples, events, gpus(1), 0.0, 60.0, PEAKS, "bf16", COLUMNS, {}).summary[0]
    assert row["steps_per_s"] == pytest.approx(5.0) and final["steps_per_s"] == pytest.approx(394 / 59.4)
    assert row["phase_steps_per_s"] == pytest.approx(final["steps_per_s"])
    assert row["phase_mfu_pct"] == pytest.approx(final["mfu_pct"])
    assert "phase_steps_per_s" not in fed(1, samples, [], now=60.0).snapshot().rows[0]  # no steps: none said
