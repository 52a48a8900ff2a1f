"""NVML and GPM with pynvml patched where it is imported; dcgmi and nvidia-smi as fake executables."""

import math
from types import SimpleNamespace
from unittest import mock

import pynvml
import pytest

from gpubench.record import nvml
from gpubench.record.sources import SourceUnavailable
from gpubench.record.sources.dcgm import DcgmSource, DmonParser
from gpubench.record.sources.gpm import GpmSource
from gpubench.record.sources.nvml_source import NvmlSource
from gpubench.record.sources.replay import ReplaySource
from gpubench.record.sources.smi import SmiParser, SmiSource


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
    assert src.read() == {0: {"gpu_util_pct": 100.0, "mem_util_pct": 7.0, "power_w": 251.3,
                              "sm_clock_mhz": 1980.0, "mem_used_mib": 2048.0, "energy_j": 123.456}}
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


def _gpm_patches(values, supported=True):
    ticks = iter(range(10**6))
    return [
        mock.patch.object(nvml, "handle", lambda g: f"h{g}"),
        mock.patch.object(nvml, "gpm_supported", lambda h: supported),
        mock.patch.object(nvml, "gpm_sample_alloc", lambda: {"id": next(ticks)}),
        mock.patch.object(nvml, "gpm_sample_free", mock.Mock()),
        mock.patch.object(nvml, "gpm_sample_get", lambda h, s: s.update(t=next(ticks))),
        mock.patch.object(nvml, "gpm_metrics", mock.Mock(side_effect=values)),
    ]


def test_gpm_every_read_is_a_fresh_interval_chained_to_the_last():
    calls = []

    def metrics(s1, s2, ids):
        calls.append((s1["t"], s2["t"]))
        return [float(len(calls))] + [math.nan] * (len(ids) - 1)

    patches = _gpm_patches(metrics)
    for p in patches:
        p.start()
    try:
        src = GpmSource()
        src.open([0])
        reads = [src.read()[0] for _ in range(3)]
    finally:
        for p in patches:
            p.stop()
    # the sampler never reads faster than min_interval_s, so no read repeats the last interval
    assert [r["graphics_active_pct"] for r in reads] == [1.0, 2.0, 3.0]
    assert math.isnan(reads[0]["sm_active_pct"])
    # each interval starts where the previous one ended: no gap between them
    assert calls[1][0] == calls[0][1] and calls[2][0] == calls[1][1]
    assert GpmSource.min_interval_s == 0.1


def test_a_gpm_id_the_driver_refuses_is_named_once_and_the_other_columns_read_on():
    from gpubench.record.sources.gpm import METRIC_IDS, MetricsRefused

    refused = METRIC_IDS["fp16_active_pct"]

    def metrics(s1, s2, ids):  # a driver that does not know one id refuses every request that holds it
        if refused in ids:
            raise nvml_error(pynvml.NVML_ERROR_INVALID_ARGUMENT)
        return [float(i) for i in ids]

    patches = _gpm_patches(metrics)
    for p in patches:
        p.start()
    try:
        src = GpmSource()
        src.open([0])
        with pytest.raises(MetricsRefused, match=r"fp16_active_pct \(id 13\)"):
            src.read()  # the sampler leaves this row empty and keeps the source
        values = src.read()[0]
    finally:
        for p in patches:
            p.stop()
    assert math.isnan(values["fp16_active_pct"]) and set(values) == set(METRIC_IDS)
    assert values["tensor_active_pct"] == float(METRIC_IDS["tensor_active_pct"])


def test_gpm_refused_whole_by_every_id_alone_is_raised_as_it_came():
    def metrics(s1, s2, ids):
        raise nvml_error(pynvml.NVML_ERROR_INVALID_ARGUMENT)

    patches = _gpm_patches(metrics)
    for p in patches:
        p.start()
    try:
        src = GpmSource()
        src.open([0])
        with pytest.raises(pynvml.NVMLError):
            src.read()
    finally:
        for p in patches:
            p.stop()


def test_a_gpm_pair_with_no_refresh_between_is_no_reading_and_the_next_pairs_with_the_last_good_sample():
    """Two samples the driver had not refreshed between: every activity exactly 0, DRAM 0 or missing, in busy
    work as recorded on an H200. An idle GPU's row (DRAM still moving a little) stays a reading of 0."""
    calls = []
    busy = {"graphics_active_pct": 97.0, "sm_active_pct": 83.0, "sm_occupancy_pct": 40.0, "tensor_active_pct": 26.0,
            "dram_active_pct": 37.0}
    answers = [busy, dict.fromkeys(busy, 0.0), {**dict.fromkeys(busy, 0.0), "dram_active_pct": math.nan}, busy,
               {**dict.fromkeys(busy, 0.0), "dram_active_pct": 0.0004}]

    def metrics(s1, s2, ids):
        calls.append((s1["t"], s2["t"]))
        got = answers[len(calls) - 1]
        return [got.get(c, math.nan) for c in GpmSource.columns]

    patches = _gpm_patches(metrics)
    for p in patches:
        p.start()
    try:
        src = GpmSource()
        src.open([0])
        reads = [src.read()[0] for _ in answers]
    finally:
        for p in patches:
            p.stop()
    assert reads[0]["tensor_active_pct"] == 26.0 and reads[3]["sm_active_pct"] == 83.0
    assert all(math.isnan(v) for r in reads[1:3] for v in r.values())  # missing, never 0
    assert reads[4]["sm_active_pct"] == 0.0 and reads[4]["dram_active_pct"] == 0.0004  # idle is a reading
    assert calls[1][0] == calls[2][0] == calls[3][0] == calls[0][1]  # paired with the last good sample
    assert calls[4][0] == calls[3][1]


def test_gpm_unsupported_gpu_names_the_reason():
    patches = _gpm_patches(lambda *a: [], supported=False)
    for p in patches:
        p.start()
    try:
        with pytest.raises(SourceUnavailable, match="Hopper or newer"):
            GpmSource().open([0])
    finally:
        for p in patches:
            p.stop()


def test_an_nvml_error_while_opening_gpm_is_a_reason_not_a_traceback():
    patches = _gpm_patches(lambda *a: [])
    for p in patches:
        p.start()
    try:
        with mock.patch.object(nvml, "gpm_sample_alloc", side_effect=nvml_error(pynvml.NVML_ERROR_INSUFFICIENT_SIZE)):
            with pytest.raises(SourceUnavailable, match="NVML GPM could not start"):
                GpmSource().open([0])
    finally:
        for p in patches:
            p.stop()


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


# dcgmi dmon output in DCGM's format: two header lines, N/A on the first tick, a repeated header
DMON = """\
#Entity   GPUTL  GRACT        SMACT        SMOCC        TENSO        DRAMA        FP64A        FP32A        FP16A
ID
GPU 0     N/A    N/A          N/A          N/A          N/A          N/A          N/A          N/A          N/A
GPU 1     0      0.000        0.000        0.000        0.000        0.000        0.000        0.000        0.000
GPU 0     100    1.000        0.008        0.000        0.000        0.000        0.000        0.000        0.000
#Entity   GPUTL  GRACT        SMACT        SMOCC        TENSO        DRAMA        FP64A        FP32A        FP16A
ID
GPU 0     100    0.999        0.966        0.141        0.938        0.174        0.000        0.000        0.000
"""


def test_dmon_parser_reads_headers_na_and_ratios():
    p = DmonParser()
    parsed = [x for x in (p.feed(line) for line in DMON.splitlines()) if x]
    assert [g for g, _ in parsed] == [0, 1, 0, 0]
    assert math.isnan(parsed[0][1]["sm_active_pct"])
    assert parsed[2][1]["dcgm_gpu_util_pct"] == 100.0
    assert parsed[2][1]["sm_active_pct"] == pytest.approx(0.8)  # ratio 0.008 -> 0.8 %
    assert parsed[3][1]["tensor_active_pct"] == pytest.approx(93.8)


def test_dcgm_source_runs_dcgmi(fake_bin, tmp_path):
    (tmp_path / "dmon.txt").write_text(DMON)
    fake_bin("dcgmi", f'echo "$@" > {tmp_path}/args\ncat {tmp_path}/dmon.txt\nsleep 600\n')
    src = DcgmSource(interval_ms=100)
    src.open([0])
    try:
        import time

        deadline = time.time() + 600  # a hang guard: the loop ends when the value is read
        while src.read().get(0, {}).get("tensor_active_pct") != pytest.approx(93.8) and time.time() < deadline:
            time.sleep(0.02)
        assert src.read()[0]["sm_occupancy_pct"] == pytest.approx(14.1)
    finally:
        src.close()
        src.close()
    args = (tmp_path / "args").read_text().split()
    assert args[:2] == ["dmon", "-e"] and args[2] == "203,1001,1002,1003,1004,1005,1006,1007,1008"
    assert args[3:] == ["-d", "100", "-i", "0"]


def test_dcgm_missing_or_failing_is_one_sentence(fake_bin, monkeypatch):
    monkeypatch.setenv("PATH", str(fake_bin("true", "").parent))
    with pytest.raises(SourceUnavailable, match="`dcgmi` is not on PATH"):
        DcgmSource().open([0])
    fake_bin("dcgmi", 'echo "Error: unable to establish a connection to the specified host: localhost"\nexit 255\n')
    with pytest.raises(SourceUnavailable, match="unable to establish a connection"):
        DcgmSource().open([0])


SMI = """\
2026/11/21 12:00:00.100, 0, 100, 3, 251.30, 1980
2026/11/21 12:00:00.100, 1, 0, 0, [N/A], 345
2026/11/21 12:00:00.200, 0, 100, 4, 252.00, 1980
"""


def test_smi_parser():
    p = SmiParser()
    gpu, v = p.feed(SMI.splitlines()[1])
    assert gpu == 1 and v["smi_sm_clock_mhz"] == 345.0 and math.isnan(v["smi_power_w"])
    assert p.feed("Failed to initialize NVML: Driver/library version mismatch") is None


def test_smi_source_runs_the_real_command_line(fake_bin, tmp_path):
    (tmp_path / "smi.txt").write_text(SMI)
    fake_bin("nvidia-smi", f'echo "$@" > {tmp_path}/args\ncat {tmp_path}/smi.txt\nsleep 600\n')
    src = SmiSource(interval_ms=100)
    src.open([0, 1])
    try:
        import time

        deadline = time.time() + 600  # a hang guard: the loop ends when the value is read
        while src.read().get(0, {}).get("smi_mem_util_pct") != 4.0 and time.time() < deadline:
            time.sleep(0.02)
        values = src.read()
        assert values[0]["smi_gpu_util_pct"] == 100.0 and values[0]["smi_mem_util_pct"] == 4.0
        assert values[1]["smi_gpu_util_pct"] == 0.0
    finally:
        src.close()
    args = (tmp_path / "args").read_text().split()
    assert args[0] == "--query-gpu=timestamp,index,utilization.gpu,utilization.memory,power.draw,clocks.sm"
    assert "--format=csv,noheader,nounits" in args and "--loop-ms=100" in args and "--id=0,1" in args


def test_a_process_source_that_dies_mid_run_raises(fake_bin, tmp_path):
    fake_bin("nvidia-smi", 'echo "2026/11/21 12:00:00.100, 0, 100, 3, 251.30, 1980"\nsleep 0.3\nexit 3\n')
    src = SmiSource()
    src.open([0])
    import time

    deadline = time.monotonic() + 600  # a hang guard: the loop ends when the death is seen
    with pytest.raises(Exception, match="exited with code 3"):
        while time.monotonic() < deadline:
            src.read()
            time.sleep(0.02)
    src.close()


def test_replay_source_plays_back_a_samples_csv(tmp_path):
    path = tmp_path / "samples.csv"
    path.write_text("t_start_s,t_end_s,t_wall,gpu,uuid,phase,gpu_util_pct,sm_active_pct\n"
                    "0.9,1.0,1.7e9,0,GPU-a,idle,0,0\n0.9,1.0,1.7e9,1,GPU-b,idle,5,\n1.0,1.1,1.7e9,0,GPU-a,copy,100,99\n")
    src = ReplaySource(path)
    src.open([0, 1])
    first = src.read()
    assert first[0] == {"gpu_util_pct": 0.0, "sm_active_pct": 0.0}
    assert first[1]["gpu_util_pct"] == 5.0 and math.isnan(first[1]["sm_active_pct"])
    assert src.read() == {0: {"gpu_util_pct": 100.0, "sm_active_pct": 99.0}}
    assert src.read() == {}


def test_a_process_value_older_than_two_intervals_is_missing(fake_bin):
    fake_bin("nvidia-smi", 'echo "2026/11/21 12:00:00.100, 0, 100, 3, 251.30, 1980"\nsleep 30\n')
    now = [0.0]
    src = SmiSource(interval_ms=100, clock=lambda: now[0])
    src.open([0])
    try:
        assert src.read()[0]["smi_gpu_util_pct"] == 100.0
        now[0] = 0.19
        assert src.read()[0]["smi_gpu_util_pct"] == 100.0
        now[0] = 0.21  # no new line for more than two intervals: stale, not current
        assert math.isnan(src.read()[0]["smi_gpu_util_pct"])
    finally:
        src.close()


def test_dmon_headers_are_noise_for_the_parser_not_the_process_source():
    p = DmonParser()
    assert p.noise("#Entity   GPUTL") and p.noise("ID") and not p.noise("Error: connection refused")
