"""gpubench's pytest plugin in real pytest sessions (pytester), on a CPU, what a run records: GPU time per call
behind an L2 flush or calls back to back, settled clocks, a call shorter than its launch timed in a CUDA graph
or behind a blocking kernel, and a run against a baseline timed as the baseline was, with a fake GPU and host
whose clocks the benchmarked calls advance (gatefakes)."""

import json

import pytest

from gatefakes import H100, PLUGINS, TEST_TINY, FakeDevice, fake_gpu, no_autoload, spawned, suite

FIXTURES = (fake_gpu, no_autoload, spawned, suite)  # pytest finds them by their names in this module
pytest_plugins = ["pytester"]


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
    assert info["round_start"] == (
        f"behind a blocking kernel of 200 µs, {info['calls_per_round']} calls launched by the host"
    )


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


def test_launched_one_by_one_a_call_shorter_than_its_launch_is_timed_behind_a_blocking_kernel(
    tiny, tmp_path, monkeypatch
):
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
    assert json.loads((tmp_path / "run.json").read_text())["benchmarks"][0]["stats"]["median"] == pytest.approx(
        7e-6, rel=0.01
    )
