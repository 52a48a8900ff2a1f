"""What moved with a verdict (gate.counters), from synthetic fingerprints: the clause a `slower` or `faster` gets,
the clocks said first, and nothing where the counters were not read; then through a session on the fake GPU:
the baseline keeps its fingerprint, a run reads one only where its verdict may not be `same`, the verdict's
line and --gpu-verdict-json carry both, and every round keeps its clock and clock-event reasons."""

import json
import re

import pytest

from gpubench.gate import counters
from gatefakes import fake_gpu, no_autoload, saved, spawned, suite, verdict_line

FIXTURES = (fake_gpu, no_autoload, saved, spawned, suite)  # pytest finds them by their names in this module
pytest_plugins = ["pytester"]


def fp(ms=1.0, **shares) -> dict:
    return {"call_ms": ms, **shares}


@pytest.mark.parametrize(
    "before, now, word, said",
    [
        (
            fp(0.636, dram_active_pct=92.0, fp32_active_pct=8.0),
            fp(0.668, dram_active_pct=92.0, fp32_active_pct=8.0),
            "slower",
            "DRAM active 92% → 92% (+5% a call): more bytes",
        ),
        (
            fp(1.0, dram_active_pct=61.0, sm_active_pct=90.0),
            fp(1.02, dram_active_pct=74.0, sm_active_pct=90.0),
            "slower",
            "DRAM active 61% → 74% (+24% a call): more bytes",
        ),
        (
            fp(0.03, tensor_active_pct=80.0, fp32_active_pct=1.0),
            fp(0.4, tensor_active_pct=0.5, fp32_active_pct=60.0),
            "slower",
            "tensor active 80% → 0.5%, FP32 active 1% → 60%: the call left the tensor cores for FP32",
        ),
        (
            fp(0.03, tensor_active_pct=80.0),
            fp(0.09, tensor_active_pct=3.0),
            "slower",
            "tensor active 80% → 3%: the call left the tensor cores",
        ),
        (
            fp(1.2, sm_active_pct=50.0, sm_occupancy_pct=6.0, fp32_active_pct=45.0),
            fp(2.4, sm_active_pct=25.0, sm_occupancy_pct=3.0, fp32_active_pct=22.0),
            "slower",
            "SM active 50% → 25%, occupancy halved: fewer SMs busy, a smaller grid",
        ),
        (
            fp(1.0, sm_active_pct=99.0, sm_occupancy_pct=40.0),
            fp(1.3, sm_active_pct=98.0, sm_occupancy_pct=20.0),
            "slower",
            "occupancy halved (40% → 20%): fewer warps resident",
        ),
        (
            fp(1.0, fp32_active_pct=70.0, dram_active_pct=2.0),
            fp(1.1, fp32_active_pct=70.0, dram_active_pct=2.0),
            "slower",
            "FP32 active 70% → 70% (+10% a call): more FP32 work",
        ),
        (
            fp(1.0, dram_active_pct=90.0),
            fp(0.8, dram_active_pct=90.0),
            "faster",
            "DRAM active 90% → 90% (-20% a call): fewer bytes",
        ),
        (
            fp(0.09, tensor_active_pct=3.0),
            fp(0.03, tensor_active_pct=80.0),
            "faster",
            "tensor active 3% → 80%: the call moved onto the tensor cores",
        ),
        (fp(1.0, dram_active_pct=90.0), fp(1.1, dram_active_pct=82.0), "slower", "no counter moved with it"),
    ],
)
def test_a_slower_or_faster_says_what_moved_with_it(before, now, word, said):
    assert counters.what_moved(before, now, word) == said


@pytest.mark.parametrize(
    "before, now, word",
    [
        (fp(1.0, dram_active_pct=90.0), fp(1.1, dram_active_pct=90.0), "same"),
        (fp(1.0, dram_active_pct=90.0), fp(1.1, dram_active_pct=90.0), "unsure"),
        (fp(1.0), fp(1.1), "slower"),  # no profiling source (NVML alone, a CPU fake): nothing read, nothing said
        (None, fp(1.1, dram_active_pct=90.0), "slower"),  # a baseline saved before fingerprints
        (fp(1.0, dram_active_pct=90.0), None, "slower"),  # a run that did not read them
    ],
)
def test_nothing_is_said_where_the_counters_were_not_read_or_the_verdict_moved_nothing(before, now, word):
    assert counters.what_moved(before, now, word) is None


@pytest.mark.parametrize(
    "before, now, word, said",
    [
        (
            {"sm_clock_mhz_rounds": 1980.0, "clock_events_rounds": {}},
            {"sm_clock_mhz_rounds": 1755.0, "clock_events_rounds": {"power cap": 0.9}},
            "slower",
            "SM clock 1980 → 1755 MHz, power at the limit: the GPU throttled",
        ),
        (
            {"sm_clock_mhz_rounds": 1755.0, "clock_events_rounds": {"power cap": 0.9}},
            {"sm_clock_mhz_rounds": 1980.0, "clock_events_rounds": {}},
            "faster",
            "SM clock 1755 → 1980 MHz, power cap in 90% → 0% of rounds: a higher clock",
        ),
        (
            {"sm_clock_mhz_rounds": 1980.0},
            {"sm_clock_mhz_rounds": 1830.0},
            "slower",
            "SM clock 1980 → 1830 MHz: a lower clock",
        ),
        ({"sm_clock_mhz_rounds": 1500.0}, {"sm_clock_mhz_rounds": 1545.0}, "same", "SM clock 1500 → 1545 MHz"),
        (
            {"sm_clock_mhz_rounds": 1980.0, "clock_events_rounds": {"thermal (software)": 0.0}},
            {"sm_clock_mhz_rounds": 1700.0, "clock_events_rounds": {"thermal (software)": 0.8}},
            "slower",
            "SM clock 1980 → 1700 MHz, thermal (software) held the clock: the GPU throttled",
        ),
    ],
)
def test_a_run_at_other_clocks_says_so(before, now, word, said):
    assert counters.clock_clause(before, now, word) == said


def test_clocks_within_two_percent_and_no_reason_that_moved_say_nothing():
    same = {"sm_clock_mhz_rounds": 1980.0, "clock_events_rounds": {"power cap": 0.1}}
    assert counters.clock_clause(same, {**same, "sm_clock_mhz_rounds": 1965.0}, "slower") is None


def test_a_fingerprint_keeps_what_was_read():
    got = counters.fingerprint(
        {
            "sm_active_pct": 50.0,
            "tensor_active_pct": float("nan"),
            "gpu_util_pct": 100.0,
            "power_w": None,
            "n_samples": 6,
        },
        0.5,
    )
    assert got == {"sm_active_pct": 50.0, "call_ms": 0.5, "samples": 6}
    info = {"counters": got, "sm_clock_mhz_rounds": 1980.0, "clock_events_rounds": {}, "power_limit_w": 700.0}
    assert counters.of(info) == {
        **got,
        "sm_clock_mhz_rounds": 1980.0,
        "clock_events_rounds": {},
        "power_limit_w": 700.0,
    }
    assert counters.of({}) is None


# --- in a session, on the fake GPU ---------------------------------------------------------------------------

LADDER = {
    "sm_active_pct": 90.0,
    "sm_occupancy_pct": 40.0,
    "dram_active_pct": 88.0,
    "fp32_active_pct": 6.0,
    "tensor_active_pct": 0.0,
}


def test_the_baseline_keeps_its_fingerprint_and_a_slower_run_names_what_moved(suite, fake_gpu, tmp_path):
    fake_gpu.ladder = dict(LADDER)
    suite(f"--gpu-save-baseline={tmp_path}", "--gpu-baseline-runs=1", kernel_ms=1.0).assert_outcomes(passed=1)
    kept = json.loads((tmp_path / "h100-80gb-hbm3.json").read_text())["benchmarks"][0]["extra_info"]["counters"]
    assert kept["dram_active_pct"] == 88.0 and kept["call_ms"] == pytest.approx(1.0, rel=0.01)
    out = tmp_path / "v.json"
    r = suite(f"--gpu-baseline={tmp_path}", f"--gpu-verdict-json={out}", kernel_ms=1.1)
    assert "  slower  " in verdict_line(r)
    assert verdict_line(r).split("; ")[-2] == "DRAM active 88% → 88% (+10% a call): more bytes"
    (v,) = json.loads(out.read_text())["verdicts"]
    assert v["moved"] == "DRAM active 88% → 88% (+10% a call): more bytes"
    assert v["counters"]["baseline"]["dram_active_pct"] == v["counters"]["now"]["dram_active_pct"] == 88.0
    assert v["counters"]["now"]["call_ms"] == pytest.approx(1.1, rel=0.01)


def test_a_run_whose_verdict_reads_same_reads_no_counters_and_a_floor_run_none_at_all(suite, saved, fake_gpu, tmp_path):
    fake_gpu.windows = 0
    out = tmp_path / "v.json"
    suite(f"--gpu-baseline={saved}", f"--gpu-verdict-json={out}", kernel_ms=1.0).assert_outcomes(passed=1)
    data = json.loads(out.read_text())
    assert data["verdicts"][0]["word"] == "same" and fake_gpu.windows == 0
    assert data["runs"]["test_k.py::test_kernel"]["extra_info"]["metrics_window"] == "not read: its verdict reads same"
    suite(f"--gpu-measure-floor={saved}", kernel_ms=1.0).assert_outcomes(passed=1)
    assert fake_gpu.windows == 0


def test_without_a_profiling_source_a_slower_run_says_nothing_of_counters(suite, saved, fake_gpu):
    r = suite(f"--gpu-baseline={saved}", kernel_ms=1.1)
    line = verdict_line(r)
    assert "  slower  " in line and "more bytes" not in line and "no counter moved" not in line


# --- clocks round by round, on the fake GPU -------------------------------------------------------------------


def test_each_round_records_the_sm_clock_and_clock_events_and_a_verdict_says_when_they_differ(
    suite, saved, fake_gpu, tmp_path
):
    fake_gpu.sm_clock_mhz, fake_gpu.clock_events = 1755.0, 4 | 1  # power cap (idle is the GPU after a round)
    out = tmp_path / "v.json"
    r = suite(f"--gpu-baseline={saved}", f"--gpu-verdict-json={out}", kernel_ms=1.0)
    info = json.loads(out.read_text())["runs"]["test_k.py::test_kernel"]["extra_info"]
    assert info["sm_clock_mhz_rounds"] == 1755.0 and info["clock_events_rounds"] == {"power cap": 1.0}
    assert re.search(r" ms  \w+ +SM clock 1980 → 1755 MHz, power at the limit; median ", verdict_line(r))
    assert (
        "the GPU ran otherwise than for the baseline (clocks, limits) in 1 of 1 benchmarks: test_kernel"
        in r.stdout.str()
    )
    saved_info = json.loads((saved / "h100-80gb-hbm3.json").read_text())["benchmarks"][0]["extra_info"]
    assert saved_info["rounds_sm_clock_mhz"] == [1980.0] * saved_info["rounds"]  # one per timed round
    assert saved_info["rounds_clock_events"] == [0] * saved_info["rounds"]


def test_a_gpu_held_by_its_power_limit_after_settling_gets_four_times_the_rounds(suite, fake_gpu, tmp_path):
    suite(f"--benchmark-json={tmp_path / 'free.json'}").assert_outcomes(passed=1)
    free = json.loads((tmp_path / "free.json").read_text())["benchmarks"][0]
    fake_gpu.clock_events = 4 | 1  # power cap; idle (after a round) keeps nothing swaying
    suite("--gpu-settle=0.3", f"--benchmark-json={tmp_path / 'capped.json'}").assert_outcomes(passed=1)
    capped = json.loads((tmp_path / "capped.json").read_text())["benchmarks"][0]
    assert "min_time_why" not in free["extra_info"] and free["extra_info"]["min_time_s"] == 0.05
    assert capped["extra_info"]["min_time_s"] == 0.2
    assert capped["extra_info"]["min_time_why"] == "power cap after settling: 4x --gpu-min-time and --gpu-max-time"
    # settled a tenth of a second, then on to --gpu-settle as the limit held; a free GPU only the tenth
    assert capped["extra_info"]["settle_why"] == "power cap after 0.1 s: settled for --gpu-settle"
    assert capped["extra_info"]["settle_s"] == 0.3 and free["extra_info"]["settle_s"] == 0.05
    assert capped["stats"]["rounds"] == pytest.approx(4 * free["stats"]["rounds"], rel=0.05)
    fake_gpu.clock_events = 1  # idle alone is no limit
    suite(f"--benchmark-json={tmp_path / 'idle.json'}").assert_outcomes(passed=1)
    assert json.loads((tmp_path / "idle.json").read_text())["benchmarks"][0]["extra_info"]["min_time_s"] == 0.05
