"""gpubench's pytest plugin in real pytest sessions (pytester), on a CPU: its registration, options, the skip
without a GPU, what a run records (settled clocks, calls shorter than their launch, clocks per round),
baselines per GPU and the refusal of the incomparable, and a gate that never quietly passes, with a fake
GPU and host whose clocks the benchmarked calls advance (gatefakes). The verdict in a session, the floor
and the baseline's runs are in test_gate_session.py."""

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from gpubench.gate import configure
from gpubench.gate.device import NoGpu
from gatefakes import (  # noqa: F401 - fixtures
    H100,
    H200,
    PLUGIN,
    PLUGINS,
    TEST_TINY,
    ROOT,
    FakeDevice,
    baseline,
    fake_gpu,
    no_autoload,
    saved,
    spawned,
    suite,
    verdict_line,
)

pytest_plugins = ["pytester"]

# --- registration and options ----------------------------------------------------------------------

def test_the_entry_point_names_the_plugin_module():
    tomllib = pytest.importorskip("tomllib")  # Python 3.11+
    eps = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["entry-points"]["pytest11"]
    assert eps == {PLUGIN: PLUGIN}  # the same name as pytest_plugins = [PLUGIN], so it registers once


def test_the_plugin_holds_hooks_and_the_gate_keeps_one_object_in_the_stash():
    """The gate's logic lives in gpubench.gate; what a session decided is one Decisions under one stash key."""
    import inspect

    from gpubench import pytest_plugin
    from gpubench.gate import decisions, finish

    keys = {id(v) for m in (pytest_plugin, configure, finish, decisions) for v in vars(m).values()
            if isinstance(v, pytest.StashKey)}
    assert keys == {id(decisions.KEY)}
    own = [n for n, v in vars(pytest_plugin).items() if inspect.isfunction(v) and v.__module__ == PLUGIN]
    assert own and all(n.startswith("pytest_") for n in own), own


def test_pytest_loads_the_plugin_through_its_entry_point(tmp_path):
    """An installed distribution's pytest11 entry point is all pytest needs: no -p, no conftest."""
    dist = tmp_path / "gpubench_ladder-0.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: gpubench-ladder\nVersion: 0.0\n")
    (dist / "entry_points.txt").write_text(f"[pytest11]\n{PLUGIN} = {PLUGIN}\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), str(ROOT)])}
    env.pop("PYTEST_DISABLE_PLUGIN_AUTOLOAD")
    fixtures = [sys.executable, "-m", "pytest", "--fixtures", "-p", "no:cacheprovider"]
    out = subprocess.run(fixtures, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert "gpu_benchmark -- " in out.stdout and "GPU time per call" in out.stdout
    assert "gpu_device [session scope]" in out.stdout
    # a conftest that also asks for it (as this repository's does) gets the same registration, not a second
    (tmp_path / "conftest.py").write_text(f"pytest_plugins = [{PLUGIN!r}]\n")
    again = subprocess.run(fixtures, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert again.returncode == 0, again.stderr
    assert again.stdout.count("gpu_benchmark -- ") == 1


def test_importing_the_plugin_loads_no_gpu_library():
    code = (f"import sys, {PLUGIN}; heavy = [m for m in ('torch', 'pynvml', 'triton', 'cupy', 'numpy') "
            "if m in sys.modules]; print(heavy)")
    out = subprocess.run([sys.executable, "-c", code], env={**os.environ, "PYTHONPATH": str(ROOT)},
                         capture_output=True, text=True, timeout=600)
    assert out.stdout.strip() == "[]", out.stderr


def test_options_are_one_group_in_help(pytester):
    out = pytester.runpytest(*PLUGINS, "--help").stdout.str()
    assert "gpu_benchmark (GPU time per call" in out
    for option in ("--gpu-min-time", "--gpu-settle", "--gpu-no-flush-l2", "--gpu-baseline", "--gpu-save-baseline",
                   "--gpu-baseline-runs", "--gpu-measure-floor", "--gpu-noise-floor", "--gpu-allow-different-limits",
                   "--gpu-fail-slower", "--gpu-verdict-json"):
        assert option in out
    # the recipe, said where a user looks for it: how many processes a baseline takes, and why
    flat = " ".join(out.split())
    assert "default 8" in flat and "t(N-1) x their spread x sqrt(1 + 1/N)" in flat


@pytest.mark.parametrize("args", [["--gpu-min-time=0"], ["--gpu-noise-floor=-1"], ["--gpu-settle=-1"]])
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

    monkeypatch.setattr(configure, "this_gpu", no_gpu)
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
    assert info["round_start"] == "behind the L2 flush and a blocking kernel of 200 µs"
    assert fake_gpu.flushes == stats["rounds"] + 1  # before every round and the warm-up round
    assert info["metrics_window"].startswith("calls back to back")
    assert info["gbps"] == pytest.approx(1.0) and info["tflops"] == pytest.approx(2.0)
    assert info["mfu_pct"] == pytest.approx(100 * 2e12 / 66.9e12)
    assert info["gpu_util_pct"] == 100.0 and info["tensor_active_pct"] is None and info["n_samples"] == 7
    assert (info["gpu"], info["gpu_uuid"], info["power_limit_w"]) == (H100["name"], H100["uuid"], 700.0)


def test_without_the_flush_rounds_are_calls_back_to_back_behind_a_blocking_kernel(suite, fake_gpu, tmp_path):
    r = suite("--gpu-no-flush-l2", f"--benchmark-json={tmp_path / 'run.json'}")
    r.assert_outcomes(passed=1)
    info = json.loads((tmp_path / "run.json").read_text())["benchmarks"][0]["extra_info"]
    assert info["l2_flush"] is False and info["calls_per_round"] > 1 and fake_gpu.flushes == 0
    assert info["metrics_window"].startswith("calls back to back")  # rounds of 0.05 s: too short for the sampler
    # the fake host launches in no time
    assert info["round_start"] == (f"behind a blocking kernel of 200 µs, {info['calls_per_round']} calls launched "
                                   "by the host")


def test_the_clocks_settle_before_the_rounds(suite, fake_gpu, tmp_path):
    """The fake GPU runs 10% fast for its first 30 ms of work, as a GPU does before it reaches its power limit:
    rounds timed from then on catch both clocks, rounds after settling only the one it sustains."""
    fake_gpu.clock.boost, fake_gpu.clock.boost_ms = 0.9, 30.0
    suite("--gpu-settle=0", f"--benchmark-json={tmp_path / 'cold.json'}").assert_outcomes(passed=1)
    cold = json.loads((tmp_path / "cold.json").read_text())["benchmarks"][0]["stats"]["data"]
    assert min(cold) == pytest.approx(0.9e-3, rel=0.01) and max(cold) == pytest.approx(1e-3, rel=0.01)
    fake_gpu.clock.busy = 0.0
    suite("--gpu-settle=0.1", f"--benchmark-json={tmp_path / 'settled.json'}").assert_outcomes(passed=1)
    bench = json.loads((tmp_path / "settled.json").read_text())["benchmarks"][0]
    assert min(bench["stats"]["data"]) == pytest.approx(1e-3, rel=0.01)
    assert bench["extra_info"]["settle_s"] == 0.1 and fake_gpu.settled_ms >= 100.0


@pytest.fixture
def tiny(pytester, fake_gpu, monkeypatch):
    """A kernel of 2.6 us of GPU time that the host needs 7 us to launch (the suite's launch-bound kernel)."""
    pytester.makepyfile(test_t=TEST_TINY)
    pytester.makeconftest("def pytest_benchmark_generate_machine_info(config):\n    return {'node': 'test'}\n")
    monkeypatch.setenv("TINY_MS", "0.0026")
    fake_gpu.clock.launch_ms = 0.007
    return lambda *args: pytester.runpytest(*PLUGINS, "--gpu-min-time=0.02", "--gpu-settle=0.001", *args)


def test_a_call_shorter_than_its_launch_is_timed_in_a_cuda_graph_at_its_gpu_time(tiny, tmp_path):
    tiny(f"--benchmark-json={tmp_path / 'run.json'}").assert_outcomes(passed=1)
    bench = json.loads((tmp_path / "run.json").read_text())["benchmarks"][0]
    assert bench["stats"]["median"] == pytest.approx(2.6e-6, rel=0.01)  # not the 7 us launch rate
    info = bench["extra_info"]
    assert info["launch_us"] == pytest.approx(7.0) and info["calls_per_round"] == info["cuda_graph_calls"] == 1000
    assert info["round_start"] == "one replay of a CUDA graph of 1000 calls, behind a blocking kernel of 214 µs"
    assert "cuda_graph_refused" not in info


def test_launched_one_by_one_a_call_shorter_than_its_launch_is_timed_behind_a_blocking_kernel(tiny, tmp_path,
                                                                                              monkeypatch):
    monkeypatch.setenv("TINY_GRAPH", "no")
    tiny(f"--benchmark-json={tmp_path / 'run.json'}").assert_outcomes(passed=1)
    bench = json.loads((tmp_path / "run.json").read_text())["benchmarks"][0]
    assert bench["stats"]["median"] == pytest.approx(2.6e-6, rel=0.01)  # not the 7 us launch rate
    info = bench["extra_info"]
    assert info["calls_per_round"] == 256 and info["cuda_graph_calls"] == 0
    # 2 x 256 launches of 7 us, + 200 us
    assert info["round_start"] == "behind a blocking kernel of 3784 µs, 256 calls launched by the host"


def test_a_call_that_cannot_be_captured_is_launched_one_by_one_and_says_why(tiny, fake_gpu, tmp_path, monkeypatch):
    fake_gpu.refuse_graph = "the call could not be captured in a CUDA graph (operation not permitted)"
    tiny(f"--benchmark-json={tmp_path / 'run.json'}").assert_outcomes(passed=1)
    bench = json.loads((tmp_path / "run.json").read_text())["benchmarks"][0]
    assert bench["stats"]["median"] == pytest.approx(2.6e-6, rel=0.01)
    info = bench["extra_info"]
    assert info["cuda_graph_calls"] == 0 and "operation not permitted" in info["cuda_graph_refused"]
    monkeypatch.setenv("TINY_GRAPH", "yes")  # insisted on: the test fails and says why
    r = tiny()
    r.assert_outcomes(failed=1)
    assert "graph=True, but the call could not be captured" in r.stdout.str()


def test_a_run_against_a_baseline_times_each_benchmark_as_the_baseline_did(tiny, tmp_path, monkeypatch):
    """Decided afresh, a call that grew past 50 us would leave its graph and go uncompared: it follows."""
    monkeypatch.setenv("TINY_GRAPH", "no")
    tiny(f"--gpu-save-baseline={tmp_path}").assert_outcomes(passed=1)
    monkeypatch.delenv("TINY_GRAPH")
    out = tmp_path / "v.json"
    tiny(f"--gpu-baseline={tmp_path}", f"--gpu-verdict-json={out}").assert_outcomes(passed=1)
    data = json.loads(out.read_text())
    info = data["runs"]["test_t.py::test_tiny"]["extra_info"]
    assert info["cuda_graph_calls"] == 0 and info["cuda_graph_as_baseline"] is False
    (v,) = data["verdicts"]
    assert v["word"] is not None and v["not_compared"] is None
    tiny(f"--benchmark-json={tmp_path / 'fresh.json'}").assert_outcomes(passed=1)  # no baseline: a graph
    fresh = json.loads((tmp_path / "fresh.json").read_text())["benchmarks"][0]["extra_info"]
    assert fresh["cuda_graph_calls"] == 1000 and "cuda_graph_as_baseline" not in fresh


def test_without_the_blocking_kernel_the_fake_gpu_times_the_launch_rate(tiny, fake_gpu, tmp_path, monkeypatch):
    """What the tests above guard against: a start event on an idle GPU times the host's launches."""
    monkeypatch.setattr(FakeDevice, "hold", lambda self, us: None)
    monkeypatch.setenv("TINY_GRAPH", "no")
    tiny(f"--benchmark-json={tmp_path / 'run.json'}").assert_outcomes(passed=1)
    assert json.loads((tmp_path / "run.json").read_text())["benchmarks"][0]["stats"]["median"] == \
        pytest.approx(7e-6, rel=0.01)


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


# --- speed settings, memory size, MIG ---------------------------------------------------------------

@pytest.mark.parametrize("other,said", [
    ({"memory_mib": 97871.0}, "with 97871 MiB of memory but this one has 81559 MiB"),
    ({"mig_mode": True}, "was measured with MIG on but MIG is off on this GPU"),
    ({"power_limit_w": 400.0}, "power limit (W) 400.0 -> 700.0"),
    ({"app_sm_clock_mhz": 1500}, "application SM clock (MHz) 1500 -> 1980"),
])
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
    assert re.search(r" ms  \w+ +power limit \(W\) 400.0 -> 700.0 \(--gpu-allow-different-limits\); median ",
                     verdict_line(r))


# --- a gate never silently off (issue 27) ----------------------------------------------------------

DAMAGED = {"empty": "", "truncated": '{"machine_info": {}, "benchmarks": [', "not an object": "[]",
           "no benchmarks": '{"machine_info": {}, "benchmarks": []}',
           "no median": '{"machine_info": {}, "benchmarks": [{"fullname": "t", "stats": {"median": "x"}}]}',
           "bad rounds": '{"machine_info": {}, "benchmarks": [{"fullname": "t", '
                         '"stats": {"median": 1, "data": [-1]}}]}'}


@pytest.mark.parametrize("damage", DAMAGED)
@pytest.mark.parametrize("how", ["--gpu-baseline", "--benchmark-compare"])
def test_a_damaged_baseline_stops_the_gate_in_one_sentence(suite, fake_gpu, tmp_path, damage, how):
    path = tmp_path / "h100-80gb-hbm3.json"
    path.write_text(DAMAGED[damage])
    r = suite(f"--gpu-baseline={tmp_path}" if how == "--gpu-baseline" else f"--benchmark-compare={path}")
    assert r.ret == pytest.ExitCode.USAGE_ERROR
    (line,) = [line for line in r.stderr.lines if line.strip()]
    assert line.startswith(f"ERROR: the baseline {path} ") and line.endswith("save it again with --gpu-save-baseline")
    assert "passed" not in r.stdout.str() and "Traceback" not in r.stdout.str() + r.stderr.str()


def test_a_damaged_compare_file_stops_the_session_without_a_gpu_too(suite, tmp_path):
    path = tmp_path / "run.json"
    path.write_text("{")
    r = suite(f"--benchmark-compare={path}")
    assert r.ret == pytest.ExitCode.USAGE_ERROR and "is not valid JSON" in r.stderr.str()
    r = suite(f"--benchmark-compare={tmp_path / 'missing.json'}")
    assert r.ret == pytest.ExitCode.USAGE_ERROR and "missing.json: no such file" in r.stderr.str()


def unwritable_dirs(tmp_path):
    (tmp_path / "file").write_text("")
    dirs = {"under a file": tmp_path / "file" / "baselines", "a system folder": Path("/sys/gpubench-baselines")}
    if os.geteuid() != 0:  # root writes into a read-only folder all the same
        (tmp_path / "ro").mkdir(mode=0o555)
        dirs["read-only"] = tmp_path / "ro" / "baselines"
    return dirs


@pytest.mark.parametrize("gpu", [True, False])
def test_saving_where_a_baseline_cannot_go_is_a_usage_error(suite, tmp_path, request, gpu):
    if gpu:
        request.getfixturevalue("fake_gpu")
    for what, folder in unwritable_dirs(tmp_path).items():
        r = suite(f"--gpu-save-baseline={folder}")
        assert r.ret == pytest.ExitCode.USAGE_ERROR, what
        (line,) = [line for line in r.stderr.lines if line.strip()]
        assert line.startswith("ERROR: cannot ") and "INTERNALERROR" not in r.stdout.str() + r.stderr.str(), what
        assert "passed" not in r.stdout.str()


def test_failing_on_a_slowdown_without_a_baseline_is_a_usage_error(suite):
    r = suite("--gpu-fail-slower")
    assert r.ret == pytest.ExitCode.USAGE_ERROR and "--gpu-fail-slower needs a baseline" in r.stderr.str()


def test_a_verdict_file_that_cannot_be_written_is_a_usage_error(suite, tmp_path):
    (tmp_path / "file").write_text("")
    r = suite(f"--gpu-verdict-json={tmp_path / 'file' / 'v.json'}")
    assert r.ret == pytest.ExitCode.USAGE_ERROR and "is not a directory" in r.stderr.str()
