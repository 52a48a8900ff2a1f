"""Datasheet peaks by exact NVML name: a GPU gets its own numbers or none, never a neighbour's."""

import pytest

from gpubench.truth.peaks import datasheet_for

T = 1e12


@pytest.mark.parametrize("name,memory_mib,dram,bf16", [
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
])
def test_real_nvml_names_get_their_own_peaks(name, memory_mib, dram, bf16):
    peaks = datasheet_for(name, memory_mib)
    assert peaks["dram"] == dram and peaks["bf16_tensor"] == bf16


@pytest.mark.parametrize("name", ["NVIDIA L4 Ada", "NVIDIA RTX 6000 Ada Generation", "Tesla T4",
                                  "NVIDIA GeForce RTX 4090", "NVIDIA H20", "NVIDIA B200", "", "H200"])
def test_an_unknown_gpu_gets_no_peak(name):
    assert datasheet_for(name, 80000) is None


def test_a_name_with_variants_needs_its_memory_size():
    assert datasheet_for("NVIDIA GH200 480GB") is None
    assert datasheet_for("NVIDIA GH200 480GB", 120 * 1024) is None  # no such part
