"""What gpu_benchmark decides without a GPU: the L2 flush, the rounds and the blocking kernel ahead of them,
the clocks of the rounds, the work it reports, and that a baseline file is checked whole (the rest of the
baselines per GPU model: test_gate_device.py; which calls are timed from a CUDA graph:
test_gpu_benchmark_graph.py). The verdict itself is in test_gate_verdict.py."""

import json
import math
from types import SimpleNamespace

import pytest

from gpubench.gate import compare as bc
from gpubench.gate.clock import CudaEventClock
from gpubench.gate.facts import round_facts, work_facts
from gpubench.gate.fixture import (
    FLUSH_MIN_BYTES,
    LEAD_MARGIN_US,
    MAX_FLUSHED_ROUNDS,
    MAX_LEAD_US,
    MIN_ROUNDS,
    QUEUE_CALLS,
    UNITS,
    GpuBenchmark,
    estimate_working_set,
    flush_bytes,
    needs_flush,
    plan,
    round_start,
)
from gpubench.gate.against_baseline import compare_run
from gpubench.record.rundir import json_safe
from gpubench.truth.peaks import datasheet_for

L2 = 50 * 2**20  # an H100's
H100 = {
    "name": "NVIDIA H100 80GB HBM3",
    "uuid": "GPU-1",
    "memory_mib": 81559,
    "driver": "580.65",
    "cuda_driver": "13.0",
    "power_limit_w": 700.0,
    "mig_mode": False,
}
H200 = {**H100, "name": "NVIDIA H200", "uuid": "GPU-2", "memory_mib": 143771}


def array(nbytes):
    return SimpleNamespace(nbytes=nbytes)


# --- the L2 flush ----------------------------------------------------------------------------------


def test_the_working_set_is_the_array_arguments_or_the_useful_bytes_whichever_is_larger():
    assert estimate_working_set((array(10), 3.0), {"out": array(5)}) == 15
    assert estimate_working_set((array(10),), {}, work_bytes=100.0) == 100
    assert estimate_working_set((), {}, work_bytes=2e9) == 2_000_000_000
    assert estimate_working_set((1, "x"), {}) is None


def test_flush_when_the_working_set_may_fit_in_l2():
    assert needs_flush(L2 - 1, L2)
    assert needs_flush(None, L2)  # unknown: it may fit
    assert not needs_flush(L2, L2)
    assert not needs_flush(2**30, L2)


def test_no_flush_when_turned_off_or_l2_unknown():
    assert not needs_flush(1024, L2, enabled=False)
    assert not needs_flush(1024, 0)


def test_the_flush_writes_twice_l2_and_never_less_than_the_minimum():
    assert flush_bytes(L2) == FLUSH_MIN_BYTES  # 100 MiB is below the floor
    assert flush_bytes(256 * 2**20) == 512 * 2**20


# --- rounds ----------------------------------------------------------------------------------------


def test_without_flush_rounds_are_20ms_of_calls_back_to_back():
    p = plan(call_ms=0.5, min_time_s=1.0, flush=False)
    assert (p.iterations, p.rounds, p.flush) == (40, 50, False)


def test_with_flush_each_round_is_one_call_and_the_flush_and_lead_count_toward_the_time():
    p = plan(call_ms=0.9, min_time_s=1.0, flush=True, flush_ms=0.1)
    assert (p.iterations, p.flush, p.lead_us) == (1, True, LEAD_MARGIN_US)
    assert p.rounds == math.ceil(1e3 / (0.9 + 0.1 + LEAD_MARGIN_US / 1e3))


def test_rounds_stay_between_the_floor_and_the_ceiling():
    assert plan(call_ms=500.0, min_time_s=1.0, flush=False).rounds == MIN_ROUNDS
    assert plan(call_ms=500.0, min_time_s=1.0, flush=True).rounds == MIN_ROUNDS
    assert plan(call_ms=0.001, min_time_s=5.0, flush=True).rounds == MAX_FLUSHED_ROUNDS
    assert plan(call_ms=500.0, min_time_s=1.0, flush=False, graph_calls=1000).rounds == MIN_ROUNDS


def test_a_round_of_tiny_calls_fits_in_the_launch_queue_behind_a_kernel_that_covers_its_launches():
    p = plan(call_ms=0.0026, min_time_s=1.0, flush=False, launch_us=7.0)
    assert p.iterations == QUEUE_CALLS  # not the 7692 calls of 20 ms: the host would wait for a queue slot
    assert p.lead_us == pytest.approx(2 * QUEUE_CALLS * 7.0 + LEAD_MARGIN_US)
    assert p.rounds == pytest.approx(1e3 / (QUEUE_CALLS * 0.0026), abs=1)


def test_the_blocking_kernel_is_bounded_and_a_flushed_round_waits_behind_one_that_covers_its_launch():
    assert plan(call_ms=1.0, min_time_s=1.0, flush=False, launch_us=1e6).lead_us == MAX_LEAD_US
    # the flushed 1 ms spin read up to 64 us long in rounds where the host launched it after the flush ended
    assert plan(call_ms=1.0, min_time_s=1.0, flush=True, launch_us=7.0).lead_us == 2 * 7.0 + LEAD_MARGIN_US
    assert LEAD_MARGIN_US >= 64


def test_a_graph_round_is_one_replay_of_its_calls_behind_a_kernel_that_covers_one_launch():
    p = plan(call_ms=0.0028, min_time_s=1.0, flush=False, launch_us=12.0, graph_calls=1000)
    assert (p.iterations, p.graph_calls, p.flush) == (1, 1000, False)
    assert p.lead_us == 2 * 12.0 + LEAD_MARGIN_US
    assert p.rounds == math.ceil(1e3 / (1000 * 0.0028))
    assert "CUDA graph of 1000 calls" in round_start(p)
    assert "launched by the host" in round_start(plan(call_ms=1.0, min_time_s=1.0, flush=False, launch_us=7.0))
    assert "L2 flush" in round_start(plan(call_ms=1.0, min_time_s=1.0, flush=True, launch_us=7.0))


def test_graph_true_with_the_flush_or_a_graph_of_another_type_is_refused_before_any_timing():
    device = SimpleNamespace(warm_up=lambda run: 0.001, l2_bytes=L2, launch_us=lambda run, call_ms: 10.0)
    bench = GpuBenchmark(benchmark=SimpleNamespace(enabled=True), device=device)
    with pytest.raises(ValueError, match="flush_l2=False"):
        bench(lambda: None, graph=True)
    with pytest.raises(ValueError, match="graph must be"):
        bench(lambda: None, graph="yes")


# --- the clock -------------------------------------------------------------------------------------


class FakeEvent:
    """A CUDA event on a GPU whose clock the test sets: record() reads it."""

    now_ms = 0.0

    def record(self):
        self.at = FakeEvent.now_ms

    def synchronize(self):
        pass

    def elapsed_time(self, end):
        return end.at - self.at


def test_the_clock_counts_gpu_time_per_call_of_a_graph_replay_and_runs_the_lead_before_each_start():
    clock, leads = CudaEventClock(), []
    clock.event = FakeEvent
    clock.attach(lead=lambda: leads.append(FakeEvent.now_ms), on_round=lambda: "state", calls=1000)
    for _ in range(3):
        start = clock()
        FakeEvent.now_ms += 2.8  # one replay of 1000 calls of 2.8 us
        assert clock() - start == pytest.approx(2.8e-6)
    assert len(leads) == 3 and clock.detach() == ["state"] * 3
    assert clock.calls == 1 and clock.lead is None
    with pytest.raises(ValueError):
        clock.attach(calls=0)


def test_the_clock_marks_a_round_whose_launches_ended_after_its_lead_could_have():
    """The host's clock is read before the lead and after the end event: more than the lead's length between
    them, and the GPU may have waited for the host inside the timed events."""
    clock, host = CudaEventClock(), [0.0]
    clock.event, clock.host_time = FakeEvent, lambda: host[0]
    clock.attach(lead=lambda: None, calls=1, lead_us=200.0)
    for held_us in (50.0, 199.0, 650.0, 20.0):
        clock()
        host[0] += held_us / 1e6  # the host queues the round's calls (and is held up in the third)
        FakeEvent.now_ms += 0.014
        clock()
    assert clock.late == [False, False, True, False]
    clock.attach(lead=None, calls=1, lead_us=200.0)  # no lead: nothing covered the host, nothing is late
    clock()
    host[0] += 1.0
    FakeEvent.now_ms += 0.014
    clock()
    assert clock.late == [False]


def test_rounds_timed_from_a_graph_are_never_compared_with_rounds_the_host_launched():
    rounds = [1e-3 * (1 + 0.001 * i) for i in range(20)]
    baseline = {
        "benchmarks": [
            {"fullname": "t", "stats": {"median": 1e-3, "data": rounds}, "extra_info": {"cuda_graph_calls": 0}}
        ]
    }
    for now_calls, compared in ((1000, False), (0, True)):
        run = {"t": {"name": "t", "rounds": rounds, "extra_info": {"cuda_graph_calls": now_calls}}}
        (c,) = compare_run(baseline, run, 1.0)
        assert (c.verdict is not None) is compared
        if not compared:
            assert "CUDA graph" in c.not_compared and "--gpu-save-baseline" in c.not_compared
    # a baseline saved before graphs existed says nothing of them: its rounds were launched by the host
    del baseline["benchmarks"][0]["extra_info"]["cuda_graph_calls"]
    run = {"t": {"name": "t", "rounds": rounds, "extra_info": {"cuda_graph_calls": 1000}}}
    assert compare_run(baseline, run, 1.0)[0].not_compared


# --- clocks round by round -------------------------------------------------------------------------


def test_each_rounds_clock_and_reasons_are_kept_with_their_median_and_shares():
    names = {1: ["idle"], 4: ["power cap"], 5: ["idle", "power cap"], 64: ["thermal (hardware)"]}
    states = [(1980.0, 1), (1755.0, 5), (1740.0, 4), (math.nan, 64), (1800.0, None)]
    facts = round_facts(states, lambda m: names.get(m, []))
    assert facts["rounds_sm_clock_mhz"][:3] == [1980.0, 1755.0, 1740.0] and facts["rounds_clock_events"][4] is None
    assert facts["sm_clock_mhz_rounds"] == pytest.approx(1777.5)  # the median of the clocks NVML gave
    # shares of the rounds whose reasons NVML gave; idle is the GPU right after a round, not a reason of it
    assert facts["clock_events_rounds"] == {"power cap": 0.5, "thermal (hardware)": 0.25}
    assert round_facts([(math.nan, None)], lambda m: []) == {
        "rounds_sm_clock_mhz": [math.nan],
        "rounds_clock_events": [None],
    }


# --- work ------------------------------------------------------------------------------------------

PEAKS = {"datasheet": datasheet_for(H100["name"]), "measured": None}


def test_work_gives_rates_and_fractions_of_the_datasheet():
    f = work_facts(median_ms=1.0, flops=2e12, nbytes=3e9, unit="bf16_tensor", bound=None, peaks=PEAKS)
    assert f["tflops"] == pytest.approx(2000.0) and f["gbps"] == pytest.approx(3000.0)
    assert f["mfu_pct"] == pytest.approx(100 * 2e15 / PEAKS["datasheet"]["bf16_tensor"])
    assert f["mbu_pct"] == pytest.approx(100 * 3e12 / PEAKS["datasheet"]["dram"])


def test_no_work_given_no_rates_and_an_unknown_peak_no_fraction():
    assert work_facts(1.0, None, None, None, None, PEAKS) == {}
    f = work_facts(1.0, 1e9, None, None, None, {"datasheet": None, "measured": None})
    assert f == {"flops_per_call": 1e9, "tflops": pytest.approx(1.0)}  # no unit, no peak: no MFU


def test_a_work_bound_by_nothing_has_no_mbu():
    f = work_facts(1.0, 0.0, 0.0, "fp32", "none", PEAKS)
    assert "mbu_pct" not in f and f["tflops"] == 0.0


def test_every_unit_is_a_datasheet_peak_and_another_is_refused_before_anything_runs():
    assert all(unit in PEAKS["datasheet"] for unit in UNITS)
    calls = []
    bench = GpuBenchmark(benchmark=SimpleNamespace(enabled=True), device=None)
    with pytest.raises(
        ValueError, match="unit must be one of bf16_tensor, fp16_tensor, tf32_tensor, fp8_tensor, fp32, got .bf16."
    ):
        bench(calls.append, 1, flops=1.0, unit="bf16")
    assert calls == []


def test_json_has_no_nan():
    assert json_safe({"a": math.nan, "b": 1.0, "c": None}) == {"a": None, "b": 1.0, "c": None}


# --- baselines per GPU model -----------------------------------------------------------------------


def test_a_baseline_file_is_checked_whole_before_use(tmp_path):
    path = tmp_path / "b.json"
    good = {
        "machine_info": {},
        "benchmarks": [{"fullname": "t", "stats": {"median": 1e-3, "mean": 1e-3, "data": [1e-3]}}],
    }
    path.write_text(json.dumps(good))
    assert bc.load_baseline(path) == good
    for text, said in [
        ("", "is empty"),
        ("{", "is not valid JSON"),
        ("[" * 100_000, "is not valid JSON"),
        ('{"benchmarks": []}', "has no machine_info"),
        ('{"machine_info": {}, "benchmarks": {}}', "holds no benchmarks"),
        ('{"machine_info": {}, "benchmarks": [1]}', "without a name or statistics"),
        (
            '{"machine_info": {}, "benchmarks": [{"fullname": "t", "stats": {"median": 0}}]}',
            "has no positive median for t",
        ),
        (
            '{"machine_info": {}, "benchmarks": [{"fullname": "t", "stats": {"median": 1}}]}',
            "has no positive mean for t",
        ),  # pytest-benchmark would skip the file, comparing nothing
        (json.dumps({**good, "gpubench": []}), "damaged gpubench section"),
    ]:
        path.write_text(text)
        with pytest.raises(bc.BaselineError, match=said):
            bc.load_baseline(path)
    path.write_bytes(b"\xff\xfe")
    with pytest.raises(bc.BaselineError, match="cannot be read"):
        bc.load_baseline(path)
