"""The NVML source and gpubench's NVML door with pynvml patched where it is imported: what nvidia-smi shows,
not supported read as missing and never 0, other errors never hidden, no driver in one sentence, and the GPM
request NVML is given. GPM: test_sources_gpm.py; dcgmi and nvidia-smi: test_sources_commands.py."""

import math
from types import SimpleNamespace
from unittest import mock

import pynvml
import pytest

from gpubench.record import nvml
from gpubench.record.sources import SourceUnavailable
from gpubench.record.sources.nvml_source import NvmlSource


def nvml_error(code):
    return pynvml.NVMLError(code)


@pytest.fixture
def fake_nvml():
    nvml.reset_for_tests()  # a real NVML may already be initialised (GPU machines): start from scratch
    with mock.patch("gpubench.record.nvml.pynvml", autospec=True) as m:
        m.NVML_CLOCK_SM = pynvml.NVML_CLOCK_SM
        m.NVML_SUCCESS = pynvml.NVML_SUCCESS
        m.nvmlDeviceGetCount.return_value = 1
        m.nvmlDeviceGetHandleByIndex.side_effect = lambda i: f"h{i}"
        m.nvmlDeviceGetUtilizationRates.return_value = SimpleNamespace(gpu=100, memory=7)
        m.nvmlDeviceGetPowerUsage.return_value = 251_300
        m.nvmlDeviceGetClockInfo.return_value = 1980
        m.nvmlDeviceGetMemoryInfo.return_value = SimpleNamespace(used=2 * 2**30, total=80 * 2**30)
        m.nvmlDeviceGetTotalEnergyConsumption.return_value = 123_456
        yield m
    nvml.reset_for_tests()


def test_nvml_source_reads_what_nvidia_smi_shows(fake_nvml):
    src = NvmlSource()
    src.open([0])
    assert src.read() == {
        0: {
            "gpu_util_pct": 100.0,
            "mem_util_pct": 7.0,
            "power_w": 251.3,
            "sm_clock_mhz": 1980.0,
            "mem_used_mib": 2048.0,
            "energy_j": 123.456,
        }
    }
    fake_nvml.nvmlInit.assert_called_once()


def test_not_supported_is_nan_never_zero(fake_nvml):
    fake_nvml.nvmlDeviceGetPowerUsage.side_effect = nvml_error(pynvml.NVML_ERROR_NOT_SUPPORTED)
    src = NvmlSource()
    src.open([0])
    values = src.read()[0]
    assert math.isnan(values["power_w"]) and values["gpu_util_pct"] == 100.0


def test_other_nvml_errors_are_not_hidden(fake_nvml):
    fake_nvml.nvmlDeviceGetUtilizationRates.side_effect = nvml_error(pynvml.NVML_ERROR_GPU_IS_LOST)
    src = NvmlSource()
    src.open([0])
    with pytest.raises(pynvml.NVMLError):
        src.read()


def test_missing_library_is_one_clear_sentence(fake_nvml):
    fake_nvml.nvmlInit.side_effect = nvml_error(pynvml.NVML_ERROR_LIBRARY_NOT_FOUND)
    with pytest.raises(SourceUnavailable, match="no NVIDIA driver found"):
        NvmlSource().open([0])
    with pytest.raises(nvml.GpuUnavailable, match="no NVIDIA driver found"):
        nvml.device_count()


def test_real_pynvml_without_a_driver_says_so():
    # on this CI machine there is no libnvidia-ml.so at all
    try:
        nvml.device_count()
    except nvml.GpuUnavailable as err:
        assert "no NVIDIA driver" in str(err)
    else:
        pytest.skip("an NVIDIA driver is present")


def test_no_data_is_an_empty_cell_and_in_use_is_an_error(fake_nvml):
    # NVML_ERROR_NO_DATA is 21 and NVML_ERROR_IN_USE is 19: codes come from pynvml, never literals
    assert pynvml.NVML_ERROR_NO_DATA == 21 and pynvml.NVML_ERROR_IN_USE == 19
    fake_nvml.nvmlDeviceGetUtilizationRates.side_effect = nvml_error(pynvml.NVML_ERROR_NO_DATA)
    src = NvmlSource()
    src.open([0])
    values = src.read()[0]
    assert math.isnan(values["gpu_util_pct"]) and values["power_w"] == 251.3
    fake_nvml.nvmlDeviceGetUtilizationRates.side_effect = nvml_error(pynvml.NVML_ERROR_IN_USE)
    with pytest.raises(pynvml.NVMLError):
        src.read()


def test_gpm_metrics_builds_the_nvml_request(fake_nvml):
    def answer(req):
        for i in range(req.numMetrics):
            req.metrics[i].value = 10.0 * (i + 1)
            req.metrics[i].nvmlReturn = 0 if i != 1 else pynvml.NVML_ERROR_NOT_SUPPORTED
        return req

    fake_nvml.c_nvmlGpmMetricsGet_t = pynvml.c_nvmlGpmMetricsGet_t
    fake_nvml.NVML_GPM_METRICS_GET_VERSION = pynvml.NVML_GPM_METRICS_GET_VERSION
    fake_nvml.nvmlGpmMetricsGet.side_effect = answer
    out = nvml.gpm_metrics(pynvml.c_nvmlGpmSample_t(), pynvml.c_nvmlGpmSample_t(), [2, 3, 5])
    assert out[0] == 10.0 and math.isnan(out[1]) and out[2] == 30.0
    req = fake_nvml.nvmlGpmMetricsGet.call_args[0][0]
    assert [req.metrics[i].metricId for i in range(3)] == [2, 3, 5]
