"""gpubench's pytest plugin in real pytest sessions (pytester), on a CPU: baselines per GPU model, named for
the GPU and holding its fingerprint, and the refusal of the incomparable (another model, part, mode or speed
setting), with a fake GPU and host whose clocks the benchmarked calls advance (gatefakes)."""

import json
import re

import pytest

from gpubench.gate import configure
from gatefakes import H100, H200, FakeDevice, baseline, fake_gpu, no_autoload, spawned, suite, verdict_line

FIXTURES = (fake_gpu, no_autoload, spawned, suite)  # pytest finds them by their names in this module
pytest_plugins = ["pytester"]


# --- baselines per GPU model -----------------------------------------------------------------------


def test_a_saved_baseline_is_named_for_the_gpu_and_holds_its_fingerprint(suite, fake_gpu, tmp_path):
    r = suite(f"--gpu-save-baseline={tmp_path}")
    r.assert_outcomes(passed=1)
    assert [p.name for p in tmp_path.iterdir()] == ["h100-80gb-hbm3.json"]
    saved = json.loads((tmp_path / "h100-80gb-hbm3.json").read_text())
    assert saved["machine_info"]["gpu"] == H100
    assert f"gpu baseline saved: {tmp_path / 'h100-80gb-hbm3.json'}" in r.stdout.str()


@pytest.mark.filterwarnings("ignore:Not saving anything")  # the benchmark never ran: nothing to save
def test_benchmarks_on_another_gpu_than_the_baseline_was_chosen_for_fail(suite, fake_gpu, monkeypatch, tmp_path):
    """The baseline is chosen for CUDA device 0; a test that moved the current device elsewhere is refused."""
    monkeypatch.setattr(configure, "this_gpu", lambda: {**H100, "uuid": "GPU-another-h100"})
    r = suite(f"--gpu-save-baseline={tmp_path}")
    r.assert_outcomes(errors=1)
    assert "not on the GPU the baseline was chosen for (GPU-another-h100)" in r.stdout.str()
    assert "Traceback" not in r.stdout.str()


def test_the_baseline_of_another_model_is_not_picked(suite, fake_gpu, tmp_path):
    baseline(tmp_path / "h200.json", H200)
    r = suite(f"--gpu-baseline={tmp_path}")
    assert r.ret == pytest.ExitCode.USAGE_ERROR
    err = r.stderr.str()
    assert "no baseline for NVIDIA H100 80GB HBM3" in err and "it holds h200.json" in err
    assert "Traceback" not in err


@pytest.mark.parametrize("how", ["--gpu-baseline", "--benchmark-compare"])
def test_a_baseline_measured_on_another_model_is_refused(suite, fake_gpu, tmp_path, how):
    # a file named for this GPU that was measured on another (renamed, or given by path)
    path = baseline(tmp_path / "h100-80gb-hbm3.json", H200)
    r = suite(f"--gpu-baseline={tmp_path}" if how == "--gpu-baseline" else f"--benchmark-compare={path}")
    assert r.ret == pytest.ExitCode.USAGE_ERROR
    lines = [line for line in r.stderr.lines if line.strip()]
    assert lines == [
        "ERROR: the baseline h100-80gb-hbm3.json was measured on NVIDIA H200 but this GPU is "
        "NVIDIA H100 80GB HBM3: timings of different GPU models are not comparable, so compare "
        "against a baseline saved on NVIDIA H100 80GB HBM3 (--gpu-baseline=DIR picks "
        "DIR/h100-80gb-hbm3.json)"
    ]
    assert "passed" not in r.stdout.str()  # refused before anything ran


@pytest.mark.filterwarnings("ignore:Benchmark machine_info is different")
def test_a_baseline_without_a_gpu_is_compared_as_pytest_benchmark_does(suite, fake_gpu, tmp_path):
    path = baseline(tmp_path / "cpu.json", None)
    r = suite(f"--benchmark-compare={path}")
    r.assert_outcomes(passed=1)


@pytest.mark.filterwarnings("ignore:Benchmark machine_info is different")
def test_the_same_model_with_another_driver_is_compared_and_noted(suite, fake_gpu, tmp_path):
    baseline(tmp_path / "h100-80gb-hbm3.json", {**H100, "driver": "570.1"})
    r = suite(f"--gpu-baseline={tmp_path}")
    r.assert_outcomes(passed=1)
    assert "gpu baseline: same model, but driver 570.1 -> 580.65.06" in r.stdout.str()


# --- speed settings, memory size, MIG ---------------------------------------------------------------


@pytest.mark.parametrize(
    "other,said",
    [
        ({"memory_mib": 97871.0}, "with 97871 MiB of memory but this one has 81559 MiB"),
        ({"mig_mode": True}, "was measured with MIG on but MIG is off on this GPU"),
        ({"power_limit_w": 400.0}, "power limit (W) 400.0 -> 700.0"),
        ({"app_sm_clock_mhz": 1500}, "application SM clock (MHz) 1500 -> 1980"),
    ],
)
def test_a_baseline_of_another_part_mode_or_limit_is_refused(suite, fake_gpu, monkeypatch, tmp_path, other, said):
    monkeypatch.setattr(FakeDevice, "fingerprint", {**H100, "app_sm_clock_mhz": 1980, "ecc": True})
    monkeypatch.setattr(configure, "this_gpu", lambda: dict(FakeDevice.fingerprint))
    baseline(tmp_path / "h100-80gb-hbm3.json", {**H100, "app_sm_clock_mhz": 1980, "ecc": True, **other})
    r = suite(f"--gpu-baseline={tmp_path}")
    assert r.ret == pytest.ExitCode.USAGE_ERROR
    (line,) = [line for line in r.stderr.lines if line.strip()]
    assert line.startswith("ERROR: the baseline h100-80gb-hbm3.json was measured") and said in line


@pytest.mark.filterwarnings("ignore:Benchmark machine_info is different")
def test_other_limits_are_compared_when_allowed_and_said_in_every_verdict(suite, fake_gpu, tmp_path):
    path = baseline(tmp_path / "h100-80gb-hbm3.json", {**H100, "power_limit_w": 400.0})
    data = json.loads(path.read_text())
    data["benchmarks"][0]["stats"]["data"] = [1e-3] * 20
    path.write_text(json.dumps(data))
    r = suite(f"--gpu-baseline={tmp_path}", "--gpu-allow-different-limits")
    r.assert_outcomes(passed=1)
    assert "other speed settings, compared as allowed: power limit (W) 400.0 -> 700.0" in r.stdout.str()
    # said first, right after the verdict's word
    assert re.search(
        r" ms  \w+ +power limit \(W\) 400.0 -> 700.0 \(--gpu-allow-different-limits\); median ", verdict_line(r)
    )
