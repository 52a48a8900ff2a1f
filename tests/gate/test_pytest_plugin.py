"""gpubench's pytest plugin in real pytest sessions (pytester), on a CPU: its registration, options, the skip
without a GPU, and a gate that never quietly passes (a damaged baseline or compare file, a baseline or verdict
that cannot be written, --gpu-fail-slower without a baseline), with a fake GPU and host whose clocks the
benchmarked calls advance (gatefakes). What a run records: test_plugin_records.py; baselines per GPU and the
refusal of the incomparable: test_plugin_baselines.py; the verdict in a session, the floor and the baseline's
runs: test_gate_session.py."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from gpubench.gate import configure
from gpubench.gate.device import NoGpu
from gatefakes import (  # noqa: F401 - fixtures
    PLUGIN,
    PLUGINS,
    ROOT,
    fake_gpu,
    no_autoload,
    spawned,
    suite,
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

    keys = {
        id(v)
        for m in (pytest_plugin, configure, finish, decisions)
        for v in vars(m).values()
        if isinstance(v, pytest.StashKey)
    }
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
    code = (
        f"import sys, {PLUGIN}; heavy = [m for m in ('torch', 'pynvml', 'triton', 'cupy', 'numpy') "
        "if m in sys.modules]; print(heavy)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert out.stdout.strip() == "[]", out.stderr


def test_options_are_one_group_in_help(pytester):
    out = pytester.runpytest(*PLUGINS, "--help").stdout.str()
    assert "gpu_benchmark (GPU time per call" in out
    for option in (
        "--gpu-min-time",
        "--gpu-settle",
        "--gpu-no-flush-l2",
        "--gpu-baseline",
        "--gpu-save-baseline",
        "--gpu-baseline-runs",
        "--gpu-measure-floor",
        "--gpu-noise-floor",
        "--gpu-allow-different-limits",
        "--gpu-fail-slower",
        "--gpu-verdict-json",
    ):
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


# --- a gate never silently off (issue 27) ----------------------------------------------------------

DAMAGED = {
    "empty": "",
    "truncated": '{"machine_info": {}, "benchmarks": [',
    "not an object": "[]",
    "no benchmarks": '{"machine_info": {}, "benchmarks": []}',
    "no median": '{"machine_info": {}, "benchmarks": [{"fullname": "t", "stats": {"median": "x"}}]}',
    "bad rounds": '{"machine_info": {}, "benchmarks": [{"fullname": "t", "stats": {"median": 1, "data": [-1]}}]}',
}


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
