"""The gate in real pytest sessions (pytester) on a fake GPU (gatefakes): the verdict line and its record, the
baseline measured in several processes from one command and the floor they give, the rounds the host was
late for, and --gpu-fail-slower never passing what it could not compare."""

import json

import pytest

from gatefakes import (  # noqa: F401 - fixtures
    PLUGINS,
    TEST_KERNEL,
    baseline,
    fake_gpu,
    no_autoload,
    saved,
    spawned,
    suite,
    verdict_line,
)
from gpubench.gate import configure
from gpubench.gate import runs as benchruns
from gpubench.gate.device import NoGpu

pytest_plugins = ["pytester"]


# --- the verdict against a baseline ---------------------------------------------------------------


def test_an_unchanged_kernel_reads_same(suite, saved):
    r = suite(f"--gpu-baseline={saved}", "--benchmark-compare-fail=median:10%", "--gpu-fail-slower", kernel_ms=1.0)
    assert r.ret == pytest.ExitCode.OK
    line = verdict_line(r)
    assert line.endswith("(vs h100-80gb-hbm3.json)") and "  same  " in line
    assert "every interval within its floor" in line and "one process: no reruns measured its floor" in line


def test_a_real_slowdown_reads_slower_and_fails_the_check_without_a_traceback(suite, saved):
    r = suite(f"--gpu-baseline={saved}", "--benchmark-compare-fail=median:10%", kernel_ms=1.5)
    assert r.ret == pytest.ExitCode.TESTS_FAILED
    assert "  slower  median +50.0% [+" in verdict_line(r)
    out = r.stdout.str() + r.stderr.str()
    assert "Performance has regressed" in out and "Traceback" not in out
    assert r.stdout.lines[-2].startswith("FAILED: --benchmark-compare-fail found a slowdown")


def test_a_faster_kernel_reads_faster(suite, saved):
    assert "  faster  median -50.0%" in verdict_line(suite(f"--gpu-baseline={saved}", kernel_ms=0.5))


def test_a_change_below_the_least_floor_is_never_slower(suite, saved):
    """+0.5% with a tight interval: within the default least floor of 1%, so not slower; with no floor, slower."""
    assert "  same  " in verdict_line(suite(f"--gpu-baseline={saved}", kernel_ms=1.005))
    assert "  slower  " in verdict_line(suite(f"--gpu-baseline={saved}", "--gpu-noise-floor=0", kernel_ms=1.005))


def test_gpu_fail_slower_fails_a_slowdown_that_pytest_benchmarks_check_lets_through(suite, saved):
    r = suite(f"--gpu-baseline={saved}", "--benchmark-compare-fail=median:10%", "--gpu-fail-slower", kernel_ms=1.05)
    assert r.ret == pytest.ExitCode.TESTS_FAILED
    assert "Performance has regressed" not in r.stdout.str()  # +5% passes median:10%
    assert "FAILED: --gpu-fail-slower: 1 benchmark read slower (test_kernel)" in r.stdout.str()


def test_the_verdicts_go_to_a_json_file_with_their_numbers(suite, saved, tmp_path):
    out = tmp_path / "verdicts.json"
    suite(f"--gpu-baseline={saved}", f"--gpu-verdict-json={out}", kernel_ms=1.5).assert_outcomes(passed=1)
    data = json.loads(out.read_text())
    (v,) = data["verdicts"]
    assert (v["name"], v["word"], v["baseline"]) == ("test_kernel", "slower", "h100-80gb-hbm3.json")
    assert set(v["changes"]) == {"median", "q1", "q3", "tmean"}
    median = v["changes"]["median"]
    assert median["pct"] == median["raw_pct"] == pytest.approx(50.0) and median["floor"] == 1.0
    assert median["center"] == 0.0 and v["floor_processes"] == 1
    # the fake's rounds come in steps of 0.1% (its jitter): each interval is widened by a step of either run
    assert median["resolution"] == pytest.approx(0.2, rel=0.01)
    run = data["runs"]["test_k.py::test_kernel"]
    assert len(run["rounds_us"]) == run["extra_info"]["rounds"] and run["rounds_host_late"] == []
    assert data["runs"]["test_k.py::test_kernel"]["extra_info"]["round_start"].startswith("behind the L2 flush")


def test_a_verdict_line_names_the_median_once():
    """Where another statistic decided, the median follows in brackets as its own text, not "median median"."""
    from gpubench.gate.against_baseline import Compared, lines
    from gpubench.gate.judgement import judge

    before = [1e-3 * (1 + 0.001 * (i % 5)) for i in range(100)]
    now = [x * (1.3 if i % 5 == 4 else 1.0) for i, x in enumerate(before)]
    c = Compared(
        "test_x", "t::test_x", 1e-3, 1e-3, judge(before, now, {s: 1.0 for s in ("median", "q1", "q3", "tmean")})
    )
    line = lines([c], "h100.json", 1.0)[1]
    assert " (median +" in line and "median median" not in line and line.count("median ") == 1


# --- a baseline measured in several processes, from one command ---------------------------------------

PROCESS_MS = (1.0, 1.006, 0.994, 1.004, 0.996, 1.0, 1.008, 0.992)  # what each process does to the call


@pytest.fixture
def processes(suite, fake_gpu, spawned, pytester, monkeypatch, tmp_path):
    """--gpu-save-baseline with its other runs made in this process, each with its own process effect."""
    effects = iter(PROCESS_MS[1:])

    def run(args, cwd):
        monkeypatch.setenv("KERNEL_MS", str(next(effects)))
        return pytester.runpytest(*args).ret

    spawned.run = run
    return suite


def test_one_command_saves_a_baseline_and_measures_its_floor_in_fresh_processes(processes, spawned, tmp_path):
    out = tmp_path / "out"
    r = processes(
        f"--gpu-save-baseline={out}",
        f"--gpu-verdict-json={tmp_path / 'v.json'}",
        "--junitxml=j.xml",
        kernel_ms=PROCESS_MS[0],
    )
    assert r.ret == pytest.ExitCode.OK
    assert len(spawned) == 7  # runs 2..8
    for n, args in enumerate(spawned, start=2):
        assert args[-1] == f"--gpu-measure-floor={out}" and "--junitxml=j.xml" not in args
        assert not any(a.startswith("--gpu-save-baseline") for a in args)
        assert f"--gpu-verdict-json={tmp_path / f'v-run-{n}.json'}" in args
    assert (
        "gpu baseline: run 8 of at most 8, a fresh process measuring its floor for 1 benchmark whose floors "
        "need it" in r.stdout.str()
    )
    assert f"gpu baseline: 8 processes measured {out / 'h100-80gb-hbm3.json'}" in r.stdout.str()
    stored = json.loads((out / "h100-80gb-hbm3.json").read_text())
    assert len(stored["gpubench"]["reruns"]) == 7 and stored["gpubench"]["processes"] == 8
    assert stored["benchmarks"][0]["stats"]["median"] == pytest.approx(1e-3)  # the first process's rounds


def test_the_floor_of_eight_processes_holds_what_they_moved_and_catches_more(processes, tmp_path):
    out = tmp_path / "out"
    processes(f"--gpu-save-baseline={out}", kernel_ms=PROCESS_MS[0]).assert_outcomes(passed=1)
    floor = json.loads((out / "h100-80gb-hbm3.json").read_text())["gpubench"]["floor_pct"]["test_k.py::test_kernel"]
    # the processes' medians spread 0.55%: t(7) x 0.55% x sqrt(1 + 1/8) = 3.2%, wider than any of them moved
    assert 3.0 < floor["median"] < 4.0
    # wider than the 3% a call of 1 ms needs (5% more work must read slower): what stays within it is `unsure`,
    # never `same`; what leaves it is caught
    for ms, word in ((1.0, "unsure"), (0.992, "unsure"), (1.02, "unsure"), (1.07, "slower"), (0.93, "faster")):
        line = verdict_line(processes(f"--gpu-baseline={out}", kernel_ms=ms))
        assert f"  {word}  " in line and "floors from 8 processes" in line, (ms, line)
        assert (word == "unsure") == ("could hide 5% more work" in line), line


def test_a_run_that_fails_ends_the_baseline_with_the_runs_before_it(suite, fake_gpu, spawned, tmp_path):
    spawned.run = lambda args, cwd: 1 if len(spawned) == 2 else 0
    r = suite(f"--gpu-save-baseline={tmp_path}", "--gpu-baseline-runs=5", kernel_ms=1.0)
    assert r.ret == 1 and len(spawned) == 2  # runs 2 and 3; run 3 failed
    assert (
        "gpu baseline: run 3 of 5 ended with exit status 1; the baseline keeps the 2 runs before it" in r.stdout.str()
    )


def test_one_run_saves_the_baseline_alone(suite, fake_gpu, spawned, tmp_path):
    r = suite(f"--gpu-save-baseline={tmp_path}", "--gpu-baseline-runs=1", kernel_ms=1.0)
    r.assert_outcomes(passed=1)
    assert spawned == [] and "measured in 1 process, this one first" in r.stdout.str()


@pytest.mark.parametrize("value", ["0", "-2", "x"])
def test_baseline_runs_are_a_whole_number_of_one_or_more(pytester, value):
    assert pytester.runpytest(*PLUGINS, f"--gpu-baseline-runs={value}").ret == pytest.ExitCode.USAGE_ERROR


def test_the_runs_replay_the_command_but_for_the_first_runs_own_files():
    args = [
        "tests/b",
        "--gpu-save-baseline",
        "out",
        "--gpu-baseline-runs=3",
        "--junit-xml",
        "j.xml",
        "--gpu-verdict-json",
        "v/x.json",
        "-k",
        "small",
        "--benchmark-autosave",
        "--benchmark-compare",
        "-q",
    ]
    assert benchruns.rerun_args(args, "out", 2) == [
        "tests/b",
        "--gpu-verdict-json=v/x-run-2.json",
        "-k",
        "small",
        "-q",
        "--gpu-measure-floor=out",
    ]
    assert benchruns.rerun_args(["--benchmark-compare", "tests", "x"], "o", 3) == ["x", "--gpu-measure-floor=o"]


def test_a_rerun_that_moved_far_is_kept_in_the_floor_and_said(suite, saved):
    r = suite(f"--gpu-measure-floor={saved}", kernel_ms=1.5)
    assert "measured as unchanged, though its median moved more than 10%: test_k.py::test_kernel" in r.stdout.str()
    reruns = json.loads((saved / "h100-80gb-hbm3.json").read_text())["gpubench"]["reruns"]
    assert reruns[0]["benchmarks"]["test_k.py::test_kernel"]["median"][0] == pytest.approx(50.0)


def test_saving_a_baseline_anew_starts_without_reruns(suite, saved):
    suite(f"--gpu-measure-floor={saved}", kernel_ms=1.0).assert_outcomes(passed=1)
    suite(f"--gpu-save-baseline={saved}", "--gpu-baseline-runs=1", kernel_ms=1.0).assert_outcomes(passed=1)
    assert json.loads((saved / "h100-80gb-hbm3.json").read_text())["gpubench"] == {"processes_max": 1, "reruns": []}


@pytest.mark.parametrize(
    "args", [["--gpu-save-baseline=a", "--gpu-measure-floor=b"], ["--gpu-baseline=a", "--gpu-measure-floor=b"]]
)
def test_the_floor_is_measured_apart_from_saving_or_comparing(pytester, fake_gpu, args):
    r = pytester.runpytest(*PLUGINS, *args)
    assert r.ret == pytest.ExitCode.USAGE_ERROR and "not both" in r.stderr.str()


# --- rounds the host was late for --------------------------------------------------------------------


def test_rounds_the_host_was_late_for_are_marked_and_decide_nothing(suite, saved, fake_gpu, tmp_path):
    """Every 17th call the fake host is held up 0.5 ms before launching, longer than the 200 us lead: the GPU
    waits inside the timed events and the round reads 1.25 ms. Those rounds are marked and left out."""
    fake_gpu.stall_every, fake_gpu.stall_ms = 17, 0.5
    out = tmp_path / "v.json"
    r = suite(f"--gpu-baseline={saved}", f"--gpu-verdict-json={out}", "--gpu-fail-slower", kernel_ms=1.0)
    assert r.ret == pytest.ExitCode.OK and "  same  " in verdict_line(r)
    run = json.loads(out.read_text())["runs"]["test_k.py::test_kernel"]
    late, rounds = run["rounds_host_late"], run["rounds_us"]
    assert late and all(rounds[i] > 1200 for i in late)
    assert all(x < 1010 for i, x in enumerate(rounds) if i not in late)
    (v,) = json.loads(out.read_text())["verdicts"]
    assert v["rounds_used"][1] == len(rounds) - len(late)


# --- --gpu-fail-slower never passes what it could not compare ---------------------------------------


def test_gpu_fail_slower_without_a_gpu_is_a_usage_error(suite, monkeypatch, tmp_path):
    torch = pytest.importorskip("torch")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)

    def no_gpu():
        raise NoGpu("CUDA sees no GPU in this process")

    monkeypatch.setattr(configure, "this_gpu", no_gpu)
    baseline(tmp_path / "h100-80gb-hbm3.json", None)
    for how in (f"--gpu-baseline={tmp_path}", f"--benchmark-compare={tmp_path / 'h100-80gb-hbm3.json'}"):
        r = suite(how, "--gpu-fail-slower")
        assert r.ret == pytest.ExitCode.USAGE_ERROR
        (line,) = [line for line in r.stderr.lines if line.strip()]
        assert line.startswith("ERROR: --gpu-fail-slower, but there is no GPU here (CUDA sees no GPU in this process)")
        assert "passed" not in r.stdout.str() and "skipped" not in r.stdout.str()


@pytest.mark.filterwarnings("ignore:Benchmark machine_info is different")
def test_gpu_fail_slower_fails_a_session_that_compared_nothing(suite, fake_gpu, tmp_path):
    path = baseline(tmp_path / "h100-80gb-hbm3.json", fake_gpu.fingerprint)
    data = json.loads(path.read_text())
    data["benchmarks"][0]["fullname"] = "test_k.py::test_another"
    path.write_text(json.dumps(data))
    r = suite(f"--gpu-baseline={tmp_path}", "--gpu-fail-slower")
    assert r.ret == pytest.ExitCode.TESTS_FAILED
    assert "FAILED: --gpu-fail-slower: nothing was compared with the baseline (none had a verdict" in r.stdout.str()


# --- the machine a baseline names ---------------------------------------------------------------------------


def test_a_gpu_session_names_its_machine_without_py_cpuinfos_second(pytester, fake_gpu, monkeypatch, tmp_path):
    """pytest-benchmark's own machine_info asks py-cpuinfo, which times the CPU's clock for a second in a process
    of its own: in every session of a gate. A GPU session names the CPU from /proc/cpuinfo instead."""
    import os

    import cpuinfo

    asked = []
    monkeypatch.setattr(cpuinfo, "get_cpu_info", lambda: asked.append(1) or {})
    pytester.makepyfile(test_k=TEST_KERNEL)
    monkeypatch.setenv("KERNEL_MS", "1.0")
    pytester.runpytest(
        *PLUGINS, "--gpu-min-time=0.05", "--gpu-settle=0.05", f"--gpu-save-baseline={tmp_path}"
    ).assert_outcomes(passed=1)
    machine = json.loads((tmp_path / "h100-80gb-hbm3.json").read_text())["machine_info"]
    assert asked == [] and machine["cpu"]["count"] == os.cpu_count() and machine["cpu"]["source"] == "/proc/cpuinfo"
    assert machine["gpu"]["name"] == "NVIDIA H100 80GB HBM3" and machine["python_version"]
