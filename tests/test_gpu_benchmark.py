"""What gpu_benchmark decides without a GPU: the L2 flush, the rounds, the work it reports, and how a run
reads against a baseline (the file for this GPU model, the refusal across models, same/slower/faster)."""

import math
from types import SimpleNamespace

import pytest

from gpubench.gate import compare as bc
from gpubench.gate import device as benchdevice
from gpubench.gate.fixture import (
    FLUSH_MIN_BYTES,
    MAX_FLUSHED_ROUNDS,
    MIN_ROUNDS,
    UNITS,
    GpuBenchmark,
    estimate_working_set,
    flush_bytes,
    needs_flush,
    plan,
    work_facts,
)
from gpubench.record import gpus
from gpubench.record.rundir import json_safe
from gpubench.truth.peaks import datasheet_for

L2 = 50 * 2**20  # an H100's
H100 = {"name": "NVIDIA H100 80GB HBM3", "uuid": "GPU-1", "memory_mib": 81559, "driver": "580.65",
        "cuda_driver": "13.0", "power_limit_w": 700.0, "mig_mode": False}
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


def test_with_flush_each_round_is_one_call_and_the_flush_counts_toward_the_time():
    p = plan(call_ms=0.9, min_time_s=1.0, flush=True, flush_ms=0.1)
    assert (p.iterations, p.rounds, p.flush) == (1, 1000, True)


def test_rounds_stay_between_the_floor_and_the_ceiling():
    assert plan(call_ms=500.0, min_time_s=1.0, flush=False).rounds == MIN_ROUNDS
    assert plan(call_ms=500.0, min_time_s=1.0, flush=True).rounds == MIN_ROUNDS
    assert plan(call_ms=0.001, min_time_s=1.0, flush=True).rounds == MAX_FLUSHED_ROUNDS


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
    with pytest.raises(ValueError, match="unit must be one of bf16_tensor, fp16_tensor, tf32_tensor, fp8_tensor, "
                                         "fp32, got .bf16."):
        bench(calls.append, 1, flops=1.0, unit="bf16")
    assert calls == []


def test_json_has_no_nan():
    assert json_safe({"a": math.nan, "b": 1.0, "c": None}) == {"a": None, "b": 1.0, "c": None}


# --- baselines per GPU model -----------------------------------------------------------------------

def test_a_baseline_file_is_named_for_the_gpu_model(tmp_path):
    assert bc.baseline_path(tmp_path, H100["name"]) == tmp_path / "h100-80gb-hbm3.json"


def test_a_missing_baseline_says_what_is_there_and_how_to_save_one(tmp_path):
    (tmp_path / "h200.json").write_text("{}")
    msg = bc.missing_baseline(tmp_path, H100["name"])
    assert "h100-80gb-hbm3.json is missing" in msg and "h200.json" in msg and "--gpu-save-baseline" in msg
    assert msg.count(". ") == 0  # one sentence


def test_another_gpu_model_is_refused_in_one_sentence():
    assert bc.model_mismatch(H100, {**H100, "uuid": "GPU-other", "driver": "590.1"}) is None
    msg = bc.model_mismatch(H200, H100, "the baseline h200.json")
    assert msg.startswith("the baseline h200.json was measured on NVIDIA H200 but this GPU is NVIDIA H100 80GB HBM3")
    assert "h100-80gb-hbm3.json" in msg and msg.count(". ") == 0


def test_the_same_model_with_another_driver_or_power_limit_is_noted():
    changed = bc.differences(H100, {**H100, "driver": "590.1", "power_limit_w": 650.0})
    assert changed == ["driver 580.65 -> 590.1", "power limit (W) 700.0 -> 650.0"]


# --- noise -----------------------------------------------------------------------------------------

def test_a_change_within_the_wider_iqr_reads_same():
    v = bc.verdict(now_median=1.04, now_iqr=0.01, base_median=1.0, base_iqr=0.05, floor_pct=0.0)
    assert v.word == "same" and v.change_pct == pytest.approx(4.0) and v.noise_pct == pytest.approx(5.0)


def test_a_change_beyond_the_noise_reads_slower_or_faster():
    assert bc.verdict(1.06, 0.01, 1.0, 0.05, floor_pct=0.0).word == "slower"
    assert bc.verdict(0.94, 0.01, 1.0, 0.05, floor_pct=0.0).word == "faster"


def test_the_floor_covers_drift_that_a_tight_iqr_cannot_show():
    assert bc.verdict(1.015, 0.001, 1.0, 0.001, floor_pct=2.0).word == "same"
    assert bc.verdict(1.015, 0.001, 1.0, 0.001, floor_pct=0.0).word == "slower"


def test_a_verdict_needs_a_baseline_median():
    with pytest.raises(ValueError):
        bc.verdict(1.0, 0.0, 0.0, 0.0)


def test_pairs_match_each_saved_row_with_this_runs_row():
    now = {"fullname": "t.py::a", "name": "a", "path": None, "median": 1.0, "iqr": 0.0}
    rows = [now, {**now, "path": "b.json", "source": "b"}, {"fullname": "t.py::c", "path": "b.json"}]
    assert bc.pairs(rows) == [(rows[1], now)]
    assert bc.pairs(rows, keep=lambda b: False) == []


# --- the device's own pieces that need no GPU -------------------------------------------------------

def test_no_cuda_driver_is_one_sentence_not_a_traceback(monkeypatch):
    def no_driver(index):
        raise gpus.CudaUnavailable("the CUDA driver library libcuda.so.1 could not be loaded")

    monkeypatch.setattr(benchdevice.gpus, "by_cuda_index", no_driver)
    with pytest.raises(benchdevice.NoGpu, match="libcuda.so.1 could not be loaded"):
        benchdevice.identify()


def test_a_window_gets_the_medians_of_its_steady_rows_of_its_gpu():
    device = object.__new__(benchdevice.CudaDevice)  # no GPU: only the sampler's rows matter here
    rows = [{"gpu": g, "t_start_s": t, "t_end_s": t + 0.1, "gpu_util_pct": 100.0 if g == 3 else 0.0,
             "sm_active_pct": float(t), "energy_j": 1000.0 + t} for g in (3, 4) for t in range(10)]
    device.gpu = gpus.Gpu(nvml_index=3, uuid="GPU-3", name="NVIDIA H100 80GB HBM3", cuda_index=0)
    device.sampler = SimpleNamespace(columns=("gpu_util_pct", "sm_active_pct", "energy_j"),
                                     rows_snapshot=lambda: rows)
    # rows starting in the first half second are NVML's trailing average of what ran before
    assert device.metrics(2.0, 6.5) == {"gpu_util_pct": 100.0, "sm_active_pct": 4.5, "n_samples": 4}
