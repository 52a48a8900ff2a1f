"""What the gate asks of the device and of NVML without a GPU (the CUDA driver missing, the sampler's rows of a
window, a round's clock and reasons, the speed settings), and which baseline a run may be compared with: the
file for this GPU model and the refusal across models, parts, MIG modes and speed settings."""

import math
from types import SimpleNamespace
from unittest import mock

import pynvml
import pytest

from gpubench.gate import compare as bc
from gpubench.gate import device as benchdevice
from gpubench.record import gpus, nvml

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


def test_the_same_model_with_another_driver_is_noted_and_other_speed_settings_are_named():
    other = {**H100, "driver": "590.1", "power_limit_w": 650.0, "app_sm_clock_mhz": 1500, "ecc": False}
    assert bc.differences(H100, other) == ["driver 580.65 -> 590.1"]
    assert bc.limits_changed({**H100, "app_sm_clock_mhz": 1980, "ecc": True}, other) == [
        "power limit (W) 700.0 -> 650.0",
        "application SM clock (MHz) 1980 -> 1500",
        "ECC True -> False",
    ]
    # a baseline saved before the settings were fingerprinted is compared on what it has
    assert bc.limits_changed(H100, {**H100, "app_sm_clock_mhz": 1980, "ecc": True}) == []
    msg = bc.limits_refusal(["power limit (W) 700.0 -> 650.0"], "the baseline h100-80gb-hbm3.json")
    assert "--gpu-allow-different-limits" in msg and msg.count(". ") == 0


def test_another_memory_size_or_mig_mode_is_refused_in_one_sentence():
    gh200 = {**H100, "name": "NVIDIA GH200 480GB", "memory_mib": 97871.0}
    msg = bc.part_mismatch(gh200, {**gh200, "memory_mib": 146944.0})
    assert "with 97871 MiB of memory but this one has 146944 MiB" in msg and msg.count(". ") == 0
    assert bc.part_mismatch(H100, {**H100, "memory_mib": 81559.0 + 300}) is None  # a driver's reserve
    assert "MIG on but MIG is off" in bc.part_mismatch({**H100, "mig_mode": True}, H100)
    assert bc.part_mismatch({**H100, "mig_mode": None}, H100) is None


# --- the device's own pieces that need no GPU -------------------------------------------------------


def test_no_cuda_driver_is_one_sentence_not_a_traceback(monkeypatch):
    def no_driver(index):
        raise gpus.CudaUnavailable("the CUDA driver library libcuda.so.1 could not be loaded")

    monkeypatch.setattr(benchdevice.gpus, "by_cuda_index", no_driver)
    with pytest.raises(benchdevice.NoGpu, match="libcuda.so.1 could not be loaded"):
        benchdevice.identify()


def test_a_window_gets_the_medians_of_the_rows_of_its_gpu_whose_values_cover_only_it():
    """A window of 0.6 s of calls, sampled every 0.1 s: a GPM value reaches 0.2 s back before its row, NVML's
    utilization 0.4 s and its power a second, so each counts from that far into the window, and power not at
    all (the counter window says nothing of it rather than the second before)."""
    device = object.__new__(benchdevice.CudaDevice)  # no GPU: only the sampler's rows matter here
    rows = [
        {
            "gpu": g,
            "t_start_s": t / 10,
            "t_end_s": (t + 1) / 10,
            "gpu_util_pct": float(t),
            "sm_active_pct": float(t) if g == 3 else -1.0,
            "power_w": 500.0,
            "energy_j": 1000.0 + t,
        }
        for g in (3, 4)
        for t in range(20)
    ]
    device.gpu = gpus.Gpu(nvml_index=3, uuid="GPU-3", name="NVIDIA H100 80GB HBM3", cuda_index=0)
    device.sampler = SimpleNamespace(
        columns=("gpu_util_pct", "sm_active_pct", "power_w", "energy_j"), rows_snapshot=lambda: rows
    )
    got = device.metrics(0.5, 1.1)  # rows 5..10 lie inside it
    assert got["sm_active_pct"] == 8.5  # rows 7..10: from 0.2 s in
    assert got["gpu_util_pct"] == 9.5  # rows 9..10: from 0.4 s in
    assert math.isnan(got["power_w"]) and got["n_samples"] == 6 and "energy_j" not in got


# --- what the gate asks of NVML ---------------------------------------------------------------------


@pytest.fixture
def fake_nvml():
    nvml.reset_for_tests()  # a real NVML may already be initialised (GPU machines): start from scratch
    with mock.patch("gpubench.record.nvml.pynvml", autospec=True) as m:
        m.NVML_CLOCK_SM, m.NVML_CLOCK_MEM = pynvml.NVML_CLOCK_SM, pynvml.NVML_CLOCK_MEM
        m.nvmlDeviceGetHandleByIndex.side_effect = lambda i: f"h{i}"
        yield m
    nvml.reset_for_tests()


def test_a_rounds_clock_and_reasons_come_from_nvml_and_what_it_cannot_give_stays_missing(fake_nvml):
    fake_nvml.nvmlDeviceGetClockInfo.return_value = 1755
    fake_nvml.nvmlDeviceGetCurrentClocksEventReasons.return_value = 4 | 1
    assert nvml.clock_now("h0") == (1755.0, 5)
    assert nvml.clock_event_names(5) == ["idle", "power cap"] and nvml.clock_event_names(None) == []
    del fake_nvml.nvmlDeviceGetCurrentClocksEventReasons  # an nvidia-ml-py from before the rename
    fake_nvml.nvmlDeviceGetCurrentClocksThrottleReasons.return_value = 64
    assert nvml.clock_now("h0") == (1755.0, 64)
    fake_nvml.nvmlDeviceGetClockInfo.side_effect = pynvml.NVMLError(pynvml.NVML_ERROR_NOT_SUPPORTED)
    fake_nvml.nvmlDeviceGetCurrentClocksThrottleReasons.side_effect = pynvml.NVMLError(pynvml.NVML_ERROR_NOT_SUPPORTED)
    clock, mask = nvml.clock_now("h0")
    assert math.isnan(clock) and mask is None


def test_the_speed_settings_are_the_application_clocks_and_ecc(fake_nvml):
    sm, mem = pynvml.NVML_CLOCK_SM, pynvml.NVML_CLOCK_MEM
    fake_nvml.nvmlDeviceGetApplicationsClock.side_effect = lambda h, clock: {sm: 1980, mem: 2619}[clock]
    fake_nvml.nvmlDeviceGetEccMode.return_value = [1, 1]
    assert nvml.speed_settings(0) == {"app_sm_clock_mhz": 1980, "app_mem_clock_mhz": 2619, "ecc": True}
    fake_nvml.nvmlDeviceGetApplicationsClock.side_effect = pynvml.NVMLError(pynvml.NVML_ERROR_NOT_SUPPORTED)
    fake_nvml.nvmlDeviceGetEccMode.side_effect = pynvml.NVMLError(pynvml.NVML_ERROR_NOT_SUPPORTED)
    assert nvml.speed_settings(0) == {"app_sm_clock_mhz": None, "app_mem_clock_mhz": None, "ecc": None}
