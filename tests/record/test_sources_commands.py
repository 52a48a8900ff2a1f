"""The sources that read a command's output: dcgmi dmon and nvidia-smi as fake executables (their formats
parsed, their command lines, a command missing, failing or dying mid-run, a value gone stale), and the
replay of a recorded samples.csv."""

import math

import pytest

from gpubench.record.sources import SourceUnavailable
from gpubench.record.sources.dcgm import DcgmSource, DmonParser
from gpubench.record.sources.replay import ReplaySource
from gpubench.record.sources.smi import SmiParser, SmiSource

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
    path.write_text(
        "t_start_s,t_end_s,t_wall,gpu,uuid,phase,gpu_util_pct,sm_active_pct\n"
        "0.9,1.0,1.7e9,0,GPU-a,idle,0,0\n0.9,1.0,1.7e9,1,GPU-b,idle,5,\n1.0,1.1,1.7e9,0,GPU-a,copy,100,99\n"
    )
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
