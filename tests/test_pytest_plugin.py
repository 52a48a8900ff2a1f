"""gpubench's pytest plugin in real pytest sessions (pytester), on a CPU: its registration, options, the skip
without a GPU, baselines per GPU model, and the noise-aware comparison, with a fake GPU whose clock the
benchmarked call advances."""

import itertools
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from gpubench import pytest_plugin
from gpubench.gate.device import NoGpu

pytest_plugins = ["pytester"]
ROOT = Path(__file__).resolve().parents[1]
PLUGIN = "gpubench.pytest_plugin"
# The sessions under test load pytest-benchmark and this plugin only, whatever else is installed here.
PLUGINS = ("-p", "pytest_benchmark.plugin", "-p", PLUGIN)
H100 = {"name": "NVIDIA H100 80GB HBM3", "uuid": "GPU-0a1b", "memory_mib": 81559.0, "driver": "580.65.06",
        "cuda_driver": "13.0", "power_limit_w": 700.0, "mig_mode": False}
H200 = {**H100, "name": "NVIDIA H200", "uuid": "GPU-9f8e", "memory_mib": 143771.0}

# A test as a user writes it: the fake device's kernel takes KERNEL_MS of GPU time per call.
TEST_KERNEL = """
import os

def test_kernel(gpu_benchmark, gpu_device):
    gpu_benchmark(gpu_device.kernel, float(os.environ["KERNEL_MS"]), flops=2e9, bytes=1e6, unit="fp32")
"""


class GpuClock:
    """The fake GPU's time in ms: only the benchmarked kernel advances it, by its time times a jitter of +-2%."""

    def __init__(self):
        self.ms = 0.0
        self.jitter = itertools.cycle([1.0, 0.98, 1.02, 0.99, 1.01])

    def run(self, ms):
        self.ms += ms * next(self.jitter)


class FakeDevice:
    """What gpu_benchmark needs of a device, with an H100's fingerprint and L2."""

    fingerprint = H100
    l2_bytes = 50 * 2**20
    peaks = {"datasheet": {"fp32": 66.9e12, "dram": 3.35e12}, "measured": None}
    versions = {"gpubench": "test"}

    def __init__(self, clock):
        self.clock = clock
        self.flushes = 0
        self.closed = False

    def kernel(self, ms):
        self.clock.run(ms)

    def warm_up(self, run):
        t = self.clock.ms
        run()
        return self.clock.ms - t

    def flush_l2(self):
        self.flushes += 1

    def flush_ms(self):
        return 0.1

    def back_to_back(self, run, call_ms, duration_s):
        return 10.0, 20.0

    def metrics(self, t_start, t_end):
        return {"gpu_util_pct": 100.0, "sm_active_pct": 0.8, "tensor_active_pct": float("nan"), "n_samples": 7}

    def close(self):
        self.closed = True


@pytest.fixture
def fake_gpu(monkeypatch):
    """A fake GPU behind the plugin: its device, its identity, and CUDA events that read its clock."""
    torch = pytest.importorskip("torch")
    clock = GpuClock()

    class Event:
        def __init__(self, enable_timing=True):
            self.ms = None

        def record(self):
            self.ms = clock.ms

        def synchronize(self):
            pass

        def elapsed_time(self, end):
            return end.ms - self.ms

    device = FakeDevice(clock)
    monkeypatch.setattr(torch.cuda, "Event", Event)
    monkeypatch.setattr(pytest_plugin, "open_device", lambda: device)
    monkeypatch.setattr(pytest_plugin, "this_gpu", lambda: dict(device.fingerprint))
    return device


@pytest.fixture(autouse=True)
def no_autoload(monkeypatch):
    monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")


@pytest.fixture
def suite(pytester, monkeypatch):
    """A user's test suite with one GPU benchmark; run(*args, kernel_ms=...) runs it in this process."""
    pytester.makepyfile(test_k=TEST_KERNEL)
    # pytest-benchmark's own machine_info asks py-cpuinfo, a second per session; the GPU's is added to this
    pytester.makeconftest("def pytest_benchmark_generate_machine_info(config):\n    return {'node': 'test'}\n")

    def run(*args, kernel_ms=1.0):
        monkeypatch.setenv("KERNEL_MS", str(kernel_ms))
        return pytester.runpytest(*PLUGINS, "--gpu-min-time=0.05", *args)

    return run


def baseline(path: Path, gpu: dict | None, median_s=1e-3) -> Path:
    """A saved pytest-benchmark file, as --gpu-save-baseline writes it, with the GPU it claims."""
    stats = {"min": median_s, "max": median_s, "mean": median_s, "stddev": 0.0, "rounds": 10, "median": median_s,
             "iqr": 0.0, "q1": median_s, "q3": median_s, "iqr_outliers": 0, "stddev_outliers": 0, "outliers": "0;0",
             "ld15iqr": median_s, "hd15iqr": median_s, "ops": 1 / median_s, "total": 10 * median_s, "iterations": 1}
    machine = {"node": "x"} | ({"gpu": gpu} if gpu else {})
    bench = {"group": None, "name": "test_kernel", "fullname": "test_k.py::test_kernel", "params": None,
             "param": None, "extra_info": {}, "options": {}, "stats": stats}
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"machine_info": machine, "commit_info": {}, "benchmarks": [bench],
                                "datetime": "2026-01-01T00:00:00", "version": "5.2.3"}))
    return path


# --- registration and options ----------------------------------------------------------------------

def test_the_entry_point_names_the_plugin_module():
    tomllib = pytest.importorskip("tomllib")  # Python 3.11+
    eps = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["entry-points"]["pytest11"]
    assert eps == {PLUGIN: PLUGIN}  # the same name as pytest_plugins = [PLUGIN], so it registers once


def test_pytest_loads_the_plugin_through_its_entry_point(tmp_path):
    """An installed distribution's pytest11 entry point is all pytest needs: no -p, no conftest."""
    dist = tmp_path / "gpubench_ladder-0.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: gpubench-ladder\nVersion: 0.0\n")
    (dist / "entry_points.txt").write_text(f"[pytest11]\n{PLUGIN} = {PLUGIN}\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), str(ROOT)])}
    env.pop("PYTEST_DISABLE_PLUGIN_AUTOLOAD")
    fixtures = [sys.executable, "-m", "pytest", "--fixtures", "-p", "no:cacheprovider"]
    out = subprocess.run(fixtures, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert "gpu_benchmark -- " in out.stdout and "GPU time per call" in out.stdout
    assert "gpu_device [session scope]" in out.stdout
    # a conftest that also asks for it (as this repository's does) gets the same registration, not a second
    (tmp_path / "conftest.py").write_text(f"pytest_plugins = [{PLUGIN!r}]\n")
    again = subprocess.run(fixtures, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert again.returncode == 0, again.stderr
    assert again.stdout.count("gpu_benchmark -- ") == 1


def test_importing_the_plugin_loads_no_gpu_library():
    code = (f"import sys, {PLUGIN}; heavy = [m for m in ('torch', 'pynvml', 'triton', 'cupy', 'numpy') "
            "if m in sys.modules]; print(heavy)")
    out = subprocess.run([sys.executable, "-c", code], env={**os.environ, "PYTHONPATH": str(ROOT)},
                         capture_output=True, text=True, timeout=60)
    assert out.stdout.strip() == "[]", out.stderr


def test_options_are_one_group_in_help(pytester):
    out = pytester.runpytest(*PLUGINS, "--help").stdout.str()
    assert "gpu_benchmark (GPU time per call" in out
    for option in ("--gpu-min-time", "--gpu-no-flush-l2", "--gpu-baseline", "--gpu-save-baseline",
                   "--gpu-noise-floor"):
        assert option in out


@pytest.mark.parametrize("args", [["--gpu-min-time=0"], ["--gpu-noise-floor=-1"]])
def test_bad_option_values_are_usage_errors(pytester, args):
    r = pytester.runpytest(*PLUGINS, *args)
    assert r.ret == pytest.ExitCode.USAGE_ERROR


def test_gpu_baseline_and_benchmark_compare_exclude_each_other(pytester, fake_gpu, tmp_path):
    r = pytester.runpytest(*PLUGINS, f"--gpu-baseline={tmp_path}", "--benchmark-compare=0001")
    assert r.ret == pytest.ExitCode.USAGE_ERROR
    assert "give --gpu-baseline or --benchmark-compare, not both" in r.stderr.str()


# --- without a GPU ---------------------------------------------------------------------------------

def test_without_a_gpu_the_benchmark_skips_with_the_reason(suite, monkeypatch):
    torch = pytest.importorskip("torch")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    r = suite("-rs")
    r.assert_outcomes(skipped=1)
    assert "gpu_benchmark needs an NVIDIA GPU: torch.cuda.is_available() is False" in r.stdout.str()


def test_without_a_gpu_the_baseline_options_say_they_do_nothing(suite, monkeypatch, tmp_path):
    torch = pytest.importorskip("torch")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)

    def no_gpu():
        raise NoGpu("CUDA sees no GPU in this process")

    monkeypatch.setattr(pytest_plugin, "this_gpu", no_gpu)
    r = suite(f"--gpu-baseline={tmp_path}", f"--gpu-save-baseline={tmp_path}")
    r.assert_outcomes(skipped=1)
    assert "no GPU here (CUDA sees no GPU in this process)" in r.stdout.str()
    assert list(tmp_path.iterdir()) == []  # nothing half-written


# --- what a run records ----------------------------------------------------------------------------

def test_a_small_working_set_is_timed_one_call_per_round_after_a_flush(suite, fake_gpu, tmp_path):
    r = suite(f"--benchmark-json={tmp_path / 'run.json'}")
    r.assert_outcomes(passed=1)
    bench = json.loads((tmp_path / "run.json").read_text())["benchmarks"][0]
    info, stats = bench["extra_info"], bench["stats"]
    assert stats["median"] == pytest.approx(1e-3)  # GPU time per call from the events, not host time
    assert info["l2_flush"] is True and info["calls_per_round"] == 1 and info["working_set_bytes"] == 1_000_000
    assert fake_gpu.flushes == stats["rounds"] + 1  # before every round and the warm-up round
    assert info["metrics_window"].startswith("calls back to back")
    assert info["gbps"] == pytest.approx(1.0) and info["tflops"] == pytest.approx(2.0)
    assert info["mfu_pct"] == pytest.approx(100 * 2e12 / 66.9e12)
    assert info["gpu_util_pct"] == 100.0 and info["tensor_active_pct"] is None and info["n_samples"] == 7
    assert (info["gpu"], info["gpu_uuid"], info["power_limit_w"]) == (H100["name"], H100["uuid"], 700.0)


def test_without_the_flush_rounds_are_calls_back_to_back(suite, fake_gpu, tmp_path):
    r = suite("--gpu-no-flush-l2", f"--benchmark-json={tmp_path / 'run.json'}")
    r.assert_outcomes(passed=1)
    info = json.loads((tmp_path / "run.json").read_text())["benchmarks"][0]["extra_info"]
    assert info["l2_flush"] is False and info["calls_per_round"] > 1 and fake_gpu.flushes == 0
    assert info["metrics_window"] == "the timed rounds"


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
    monkeypatch.setattr(pytest_plugin, "this_gpu", lambda: {**H100, "uuid": "GPU-another-h100"})
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
    assert lines == ["ERROR: the baseline h100-80gb-hbm3.json was measured on NVIDIA H200 but this GPU is "
                     "NVIDIA H100 80GB HBM3: timings of different GPU models are not comparable, so compare "
                     "against a baseline saved on NVIDIA H100 80GB HBM3 (--gpu-baseline=DIR picks "
                     "DIR/h100-80gb-hbm3.json)"]
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


# --- the noise-aware comparison --------------------------------------------------------------------

@pytest.fixture
def saved(suite, fake_gpu, tmp_path):
    """A baseline of the fake kernel at 1 ms per call (its rounds spread +-2%)."""
    suite(f"--gpu-save-baseline={tmp_path}", kernel_ms=1.0).assert_outcomes(passed=1)
    return tmp_path


def verdict_line(result) -> str:
    return next(line for line in result.stdout.lines if line.startswith("test_kernel ") and " ms -> " in line)


def test_an_unchanged_kernel_reads_same(suite, saved):
    r = suite(f"--gpu-baseline={saved}", "--benchmark-compare-fail=median:10%", kernel_ms=1.01)
    assert r.ret == pytest.ExitCode.OK
    line = verdict_line(r)
    assert line.endswith("vs h100-80gb-hbm3.json)") and " same " in line and "+1.0%" in line


def test_a_change_beyond_the_iqr_reads_slower_when_the_floor_is_off(suite, saved):
    assert " same " in verdict_line(suite(f"--gpu-baseline={saved}", "--gpu-noise-floor=0", kernel_ms=1.01))
    r = suite(f"--gpu-baseline={saved}", "--gpu-noise-floor=0", kernel_ms=1.03)
    assert " slower " in verdict_line(r) and r.ret == pytest.ExitCode.OK  # a verdict, not a failure


def test_a_real_slowdown_reads_slower_and_fails_the_check_without_a_traceback(suite, saved):
    r = suite(f"--gpu-baseline={saved}", "--benchmark-compare-fail=median:10%", kernel_ms=1.5)
    assert r.ret == pytest.ExitCode.TESTS_FAILED
    assert " slower " in verdict_line(r) and "+50.0%" in verdict_line(r)
    out = r.stdout.str() + r.stderr.str()
    assert "Performance has regressed" in out and "Traceback" not in out
    assert r.stdout.lines[-2].startswith("FAILED: --benchmark-compare-fail found a slowdown")


def test_a_faster_kernel_reads_faster(suite, saved):
    assert " faster " in verdict_line(suite(f"--gpu-baseline={saved}", kernel_ms=0.5))
