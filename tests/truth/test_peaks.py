"""Datasheet peaks by exact NVML name: a GPU gets its own numbers or none, never a neighbour's."""

import pytest

from gpubench.truth.peaks import datasheet_for

T = 1e12


@pytest.mark.parametrize(
    "name,memory_mib,dram,bf16",
    [
        ("NVIDIA H100 80GB HBM3", 81559, 3.35e12, 989.4 * T),
        ("NVIDIA H100 PCIe", 81559, 2.0e12, 756.5 * T),
        ("NVIDIA H100 NVL", 95830, 3.9e12, 835.5 * T),
        ("NVIDIA H200", 143771, 4.8e12, 989.4 * T),
        ("NVIDIA H200 NVL", 143771, 4.8e12, 835.5 * T),
        ("NVIDIA GH200 480GB", 97871, 4.0e12, 989.4 * T),
        ("NVIDIA GH200 480GB", 146831, 4.9e12, 989.4 * T),
        ("NVIDIA A100-SXM4-80GB", 81920, 2.039e12, 312 * T),
        ("NVIDIA A100-SXM4-40GB", 40960, 1.555e12, 312 * T),
        ("NVIDIA L40S", 46068, 0.864e12, 362.05 * T),
        ("NVIDIA L40", 46068, 0.864e12, 181.05 * T),
        ("NVIDIA L4", 23034, 0.3e12, 121 * T),
    ],
)
def test_real_nvml_names_get_their_own_peaks(name, memory_mib, dram, bf16):
    peaks = datasheet_for(name, memory_mib)
    assert peaks["dram"] == dram and peaks["bf16_tensor"] == bf16


@pytest.mark.parametrize(
    "name",
    [
        "NVIDIA L4 Ada",
        "NVIDIA RTX 6000 Ada Generation",
        "Tesla T4",
        "NVIDIA GeForce RTX 4090",
        "NVIDIA H20",
        "NVIDIA B200",
        "",
        "H200",
    ],
)
def test_an_unknown_gpu_gets_no_peak(name):
    assert datasheet_for(name, 80000) is None


def test_a_name_with_variants_needs_its_memory_size():
    assert datasheet_for("NVIDIA GH200 480GB") is None
    assert datasheet_for("NVIDIA GH200 480GB", 120 * 1024) is None  # no such part


def test_every_precision_a_loop_runs_in_has_its_dense_peak():
    from gpubench.truth.peaks import UNITS

    h100, a100 = datasheet_for("NVIDIA H100 80GB HBM3"), datasheet_for("NVIDIA A100-SXM4-80GB")
    assert set(UNITS) == {"bf16", "fp16", "tf32", "fp8", "fp32"}
    assert h100["tf32_tensor"] == pytest.approx(h100["bf16_tensor"] / 2) and h100["fp8_tensor"] == pytest.approx(
        2 * h100["bf16_tensor"], rel=1e-3
    )
    assert a100["tf32_tensor"] == 156e12 and "fp8_tensor" not in a100  # Ampere has no FP8: no peak, not a guess
    # a TF32 loop at 150 TFLOP/s read MFU 224% against plain FP32: against TF32 it is 30%
    assert 100 * 150e12 / h100["tf32_tensor"] == pytest.approx(30.3, abs=0.1)


def test_no_number_grows_a_table():
    from gpubench.metrics import fmt_value, pct

    assert pct(1e300) == "1e+300%" and len(fmt_value("power_w", 1e300)) < 12 and fmt_value("power_w", 512.4) == "512 W"


def test_the_peaks_child_writes_what_it_measured_and_where_and_nothing_when_interrupted(tmp_path, monkeypatch):
    """`python -m gpubench.truth.peaks OUT`, the process a watch measures the peaks in."""
    import json

    from gpubench.truth import peaks

    def measure(on_window=None):
        on_window("dram", 1.0, 2.5)
        return {"dram": 3.0e12}

    monkeypatch.setattr(peaks, "measure", measure)
    assert peaks.main([str(tmp_path / "peaks.json")]) == 0
    assert json.loads((tmp_path / "peaks.json").read_text()) == {
        "measured": {"dram": 3.0e12},
        "windows": {"dram": [1.0, 2.5]},
    }

    def pressed(on_window=None):
        raise KeyboardInterrupt

    monkeypatch.setattr(peaks, "measure", pressed)
    assert peaks.main([str(tmp_path / "again.json")]) == 130 and not (tmp_path / "again.json").exists()
