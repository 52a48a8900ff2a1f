"""gpubench's pytest plugin: the `gpu_benchmark` fixture and baselines per GPU, on pytest-benchmark.

Registered through the `pytest11` entry point, so it loads in every pytest session where gpubench is
installed, GPU or not: importing it loads neither torch nor NVML (the fixtures and the baseline options do,
when used). Built on pytest-benchmark's public pieces only: the `benchmark` fixture (`pedantic`,
`extra_info`, `stats`), the `benchmark` mark, its options and its hooks. Disable it with
`-p no:gpubench.pytest_plugin`.

A gate must never be silently off: a baseline that cannot be read, a place a baseline cannot be saved, or
--gpu-fail-slower where there is no GPU to compare on ends the session before anything runs with one
sentence and pytest's usage-error exit status 4; --gpu-fail-slower in a session that compared nothing fails.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from gpubench.gate import compare as benchcompare
from gpubench.gate import report as benchreport
from gpubench.gate import runs as benchruns
from gpubench.gate.clock import CLOCK
from gpubench.gate.fixture import GpuBenchmark
from gpubench.gate.options import add_options
from gpubench.gate.session import (
    benchmark_json_option,
    check_compare_file,
    check_writable,
    fail_slower_ending,
    prepare_save,
    rerun_added,
    verdict_records,
    written,
)
from gpubench.gate.session import machine_info as gate_machine_info

FINGERPRINT = pytest.StashKey[dict]()  # the GPU this session benchmarks on
NOTES = pytest.StashKey[list]()  # lines for the report header
SAVE = pytest.StashKey[tuple]()  # (file being written, the baseline it becomes)
SAVED = pytest.StashKey[str]()
SESSION = pytest.StashKey[pytest.Session]()
BASELINE = pytest.StashKey[tuple]()  # (file name, its content) of the baseline compared with
RUNS = pytest.StashKey[dict]()  # fullname -> this run's rounds and extra_info of each gpu_benchmark
ALWAYS = pytest.StashKey[list]()  # said with every verdict: speed settings allowed to differ
COMPARED = pytest.StashKey[list]()  # report.Compared per benchmark
ENDING = pytest.StashKey[list]()  # (line, red) for the end of the report
FLOOR_RUNS = pytest.StashKey[int]()  # runs still to measure the saved baseline's floor, in fresh processes


def pytest_addoption(parser):
    add_options(parser)


def this_gpu() -> dict:
    """The fingerprint of the GPU this process's benchmarks run on, before any runs (raises NoGpu)."""
    from gpubench.gate.device import identify

    return identify()


def _exclusive(config, *names) -> None:
    given = [n for n in names if config.getoption(n.lstrip("-").replace("-", "_"), None)]
    if len(given) > 1:
        raise pytest.UsageError(f"give {given[0]} or {given[1]}, not both")


def pytest_configure(config):
    # Runs before pytest-benchmark's own pytest_configure (trylast), which reads the options set here.
    config.stash[NOTES], config.stash[RUNS], config.stash[ENDING] = [], {}, []
    base_dir, save_dir = config.getoption("gpu_baseline"), config.getoption("gpu_save_baseline")
    floor_dir = config.getoption("gpu_measure_floor")
    _exclusive(config, "--gpu-baseline", "--gpu-measure-floor", "--benchmark-compare")
    _exclusive(config, "--gpu-save-baseline", "--gpu-measure-floor")
    _exclusive(config, "--gpu-save-baseline", "--benchmark-json")
    check_compare_file(config.getoption("benchmark_compare", None))
    compared = base_dir or floor_dir or config.getoption("benchmark_compare", None)
    if config.getoption("gpu_fail_slower") and not compared:
        raise pytest.UsageError("--gpu-fail-slower needs a baseline to compare with: give --gpu-baseline=DIR (or "
                                "--benchmark-compare=FILE)")
    if config.getoption("gpu_verdict_json"):
        check_writable(Path(config.getoption("gpu_verdict_json")), "cannot write the verdicts to")
    if save_dir:
        check_writable(benchcompare.baseline_path(save_dir, "x"), "cannot save the baseline in")
    fail_slower = config.getoption("gpu_fail_slower")
    if not (base_dir or save_dir or floor_dir or fail_slower):
        return
    from gpubench.gate.device import NoGpu

    try:
        gpu = this_gpu()
    except NoGpu as err:
        if fail_slower:
            raise pytest.UsageError(f"--gpu-fail-slower, but there is no GPU here ({err}): the GPU benchmarks would "
                                    "skip and nothing would be compared, so the gate refuses to pass; run it where "
                                    "the baseline's GPU is") from None
        config.stash[NOTES].append(f"gpu baselines: no GPU here ({err}), so --gpu-baseline, --gpu-save-baseline "
                                   "and --gpu-measure-floor do nothing and the GPU benchmarks skip")
        return
    config.stash[FINGERPRINT] = gpu
    if base_dir or floor_dir:
        path = benchcompare.baseline_path(base_dir or floor_dir, gpu["name"])
        if not path.is_file():
            raise pytest.UsageError(benchcompare.missing_baseline(base_dir or floor_dir, gpu["name"]))
        try:
            benchcompare.load_baseline(path)
        except benchcompare.BaselineError as err:
            raise pytest.UsageError(str(err)) from None
        if floor_dir:
            check_writable(path, "cannot add a rerun to")
        config.option.benchmark_compare = str(path.resolve())
        config.stash[NOTES].append(f"gpu baseline: {path} ({gpu['name']})")
    if save_dir:
        partial, final = prepare_save(save_dir, gpu)
        # what --benchmark-json=PATH would have set; written in full, it replaces the baseline at the end
        config.option.benchmark_json = benchmark_json_option(partial)
        config.stash[SAVE] = (partial, final)
        config.stash[FLOOR_RUNS] = config.getoption("gpu_baseline_runs")
        runs = config.stash[FLOOR_RUNS]
        config.stash[NOTES].append(f"gpu baseline: measured in {runs} process{'es' * (runs != 1)}, this one first"
                                   + (" (the others when it ends)" if runs > 1 else ""))


def pytest_report_header(config):
    return config.stash.get(NOTES, [])


def pytest_collection_modifyitems(config, items):
    """Every test that uses gpu_benchmark is timed by the CUDA-event clock, keeping its other benchmark options."""
    for item in items:
        if "gpu_benchmark" not in getattr(item, "fixturenames", ()):
            continue
        mark = item.get_closest_marker("benchmark")
        options = {**(mark.kwargs if mark else {}), "timer": CLOCK}
        item.add_marker(pytest.mark.benchmark(**options), append=False)


@pytest.fixture(scope="session")
def gpu_device(pytestconfig):
    """The CUDA device gpu_benchmark times on: the current one when the first benchmark starts (choose it
    with CUDA_VISIBLE_DEVICES), known to NVML by its UUID. Holds its fingerprint (name, UUID, memory,
    driver, power limit, application clocks, ECC, MIG mode), L2 size, datasheet peaks, and a sampler of
    its metrics for the session. Skips the test where there is no GPU."""
    device = open_device()
    chosen = pytestconfig.stash.get(FINGERPRINT, None)  # the GPU a baseline was picked or saved for
    if chosen is not None and chosen.get("uuid") != device.fingerprint.get("uuid"):
        device.close()
        pytest.fail(f"the benchmarks run on {device.fingerprint['name']} ({device.fingerprint['uuid']}), not on "
                    f"the GPU the baseline was chosen for ({chosen['uuid']}): leave CUDA's current device at 0, or "
                    "choose the GPU with CUDA_VISIBLE_DEVICES", pytrace=False)
    pytestconfig.stash[FINGERPRINT] = device.fingerprint
    yield device
    device.close()


def open_device():
    """The current CUDA device, or a skip with the reason there is none."""
    try:
        import torch
    except ImportError:
        pytest.skip("gpu_benchmark needs PyTorch and an NVIDIA GPU: torch is not installed")
    if not torch.cuda.is_available():
        pytest.skip("gpu_benchmark needs an NVIDIA GPU: torch.cuda.is_available() is False")
    from gpubench.gate.device import CudaDevice

    return CudaDevice(torch.cuda.current_device())


@pytest.fixture
def gpu_benchmark(benchmark, gpu_device, pytestconfig):
    """gpu_benchmark(fn, *args, flops=None, bytes=None, unit=None, graph=None, **kwargs): time
    fn(*args, **kwargs) in GPU time per call (CUDA events, after a warm-up and settling the clocks) through pytest-benchmark, and
    return its result.

    flops, bytes: the work of one call (bytes: each input read once, each output written once); they add
    TFLOP/s, GB/s, and MFU (unit: the peak it runs on, bf16_tensor, fp16_tensor or fp32) and MBU against
    the GPU's datasheet. When the working set (array arguments, or bytes) fits in L2, each round is one
    call after an L2 flush outside the timed events (flush_l2=False or --gpu-no-flush-l2 to turn it off;
    working_set_bytes=N to say what the call touches); otherwise calls run back to back behind a blocking
    kernel. A call shorter than 50 us of GPU time is captured in a CUDA graph of up to 1000 calls and each
    round is a replay, so it is timed at its GPU time, not the host's launch rate; against a baseline, a
    benchmark is timed as the baseline timed it (graph=False: never; graph=True: insist; extra_info's
    cuda_graph_calls says which, cuda_graph_refused why a call could not be captured). extra_info gets the
    timing plan, the SM clock and clock-event reasons of every round, the metrics sampled meanwhile
    (median gpu_util_pct, sm_active_pct, tensor_active_pct, dram_active_pct, sm_clock_mhz, power_w ...)
    and the GPU's fingerprint. Once per test, like `benchmark`; skips without a GPU."""
    bench = GpuBenchmark(benchmark, gpu_device, min_time_s=pytestconfig.getoption("gpu_min_time"),
                         flush_l2=not pytestconfig.getoption("gpu_no_flush_l2"),
                         settle_s=pytestconfig.getoption("gpu_settle"),
                         graph_before=graph_in_baseline(pytestconfig, benchmark.fullname))
    yield bench
    if bench.rounds_s:
        pytestconfig.stash[RUNS][benchmark.fullname] = {"name": benchmark.name, "rounds": bench.rounds_s,
                                                       "extra_info": dict(benchmark.extra_info)}


def graph_in_baseline(config, fullname: str) -> bool | None:
    """Whether the baseline (loaded when pytest-benchmark configured itself) timed this benchmark from a CUDA
    graph; None without a baseline or without the benchmark in it."""
    saved = config.stash.get(BASELINE, None)
    return benchcompare.graph_in(saved[1] if saved else None, fullname)


# optionalhook: pytest-benchmark's hooks exist only while it is loaded (not under -p no:benchmark)
@pytest.hookimpl(optionalhook=True, tryfirst=True)
def pytest_benchmark_generate_machine_info(config):
    """In a session on a GPU (one that saves, measures or compares a GPU baseline, or where gpu_benchmark ran): the
    machine without py-cpuinfo's second (gate.session.machine_info); elsewhere pytest-benchmark's own."""
    return gate_machine_info() if FINGERPRINT in config.stash else None


@pytest.hookimpl(optionalhook=True)
def pytest_benchmark_update_machine_info(config, machine_info):
    if FINGERPRINT in config.stash:
        machine_info["gpu"] = config.stash[FINGERPRINT]


@pytest.hookimpl(optionalhook=True, tryfirst=True)  # before pytest-benchmark warns about every difference
def pytest_benchmark_compare_machine_info(config, benchmarksession, machine_info, compared_benchmark):
    """Keep the baseline for the verdicts; refuse one measured on another GPU model, memory size or MIG mode,
    or at other speed settings unless allowed (a usage error, exit 4, before anything runs)."""
    compare = config.getoption("benchmark_compare", None)
    name = Path(compare).name if isinstance(compare, str) and Path(compare).is_file() else "the saved run"
    config.stash[BASELINE] = (name, compared_benchmark)
    saved = (compared_benchmark.get("machine_info") or {}).get("gpu")
    if not saved:
        return  # not a GPU baseline
    current = config.stash.get(FINGERPRINT, None)
    if current is None:
        from gpubench.gate.device import NoGpu

        try:
            current = config.stash[FINGERPRINT] = this_gpu()
        except NoGpu:
            return  # no GPU here: the GPU benchmarks skip, nothing is compared
    where = f"the baseline {name}" if name != "the saved run" else "the baseline"
    try:
        always, notes = benchcompare.comparable(saved, current, where, config.getoption("gpu_allow_different_limits"))
    except benchcompare.BaselineError as err:
        raise pytest.UsageError(str(err)) from None
    config.stash[ALWAYS] = always
    config.stash[NOTES].extend(notes)


def pytest_sessionstart(session):
    session.config.stash[SESSION] = session


def pytest_sessionfinish(session):
    # pytest-benchmark wrote its JSON in its own (wrapping) pytest_sessionfinish, before this one runs
    config = session.config
    if SAVE in config.stash:
        partial, final = config.stash[SAVE]
        opened = config.option.benchmark_json
        if hasattr(opened, "close"):
            opened.close()
        if partial.is_file() and partial.stat().st_size:
            partial.replace(final)
            config.stash[SAVED] = str(final)
        else:
            partial.unlink(missing_ok=True)  # no benchmark ran: nothing to save
    if BASELINE in config.stash and config.stash.get(RUNS, None):
        name, baseline = config.stash[BASELINE]
        config.stash[COMPARED] = benchreport.compare_run(baseline, config.stash[RUNS],
                                                         config.getoption("gpu_noise_floor"),
                                                         config.stash.get(ALWAYS, []))
        if config.getoption("gpu_measure_floor"):
            add_rerun(session, baseline)
    if config.getoption("gpu_verdict_json", None):
        write_verdicts(session)
    if config.getoption("gpu_fail_slower") and session.exitstatus == pytest.ExitCode.OK:
        failed = fail_slower_ending(config.stash.get(COMPARED, []), bool(config.stash.get(RUNS, None)))
        if failed:
            session.exitstatus = pytest.ExitCode.TESTS_FAILED
            config.stash[ENDING].append((failed, True))


def add_rerun(session, baseline: dict) -> None:
    """--gpu-measure-floor: this run, unchanged, becomes one more rerun of the baseline's floor."""
    config = session.config
    lines, ok = rerun_added(Path(config.option.benchmark_compare), baseline, config.stash[COMPARED],
                            config.stash[FINGERPRINT].get("uuid"))
    config.stash[ENDING].extend(lines)
    if not ok:
        session.exitstatus = pytest.ExitCode.USAGE_ERROR


def write_verdicts(session) -> None:
    config = session.config
    name = config.stash[BASELINE][0] if BASELINE in config.stash else None
    data = verdict_records(config.stash.get(FINGERPRINT, None), name, config.getoption("gpu_noise_floor"),
                           config.stash.get(ALWAYS, []), config.stash.get(COMPARED, []), config.stash.get(RUNS, {}))
    error = written(Path(config.getoption("gpu_verdict_json")), data)
    if error:
        session.exitstatus = pytest.ExitCode.USAGE_ERROR
        config.stash[ENDING].append((error, True))


@pytest.hookimpl(wrapper=True)
def pytest_terminal_summary(terminalreporter, config):
    try:
        result = yield
    except Exception as err:
        # pytest-benchmark raises PerformanceRegression after printing which check failed: end the session
        # as failed instead of with a traceback
        if type(err).__name__ != "PerformanceRegression" or SESSION not in config.stash:
            raise
        config.stash[SESSION].exitstatus = pytest.ExitCode.TESTS_FAILED
        write_report(terminalreporter, config)
        terminalreporter.write_line("FAILED: --benchmark-compare-fail found a slowdown (Performance has regressed, "
                                    "above)", red=True, bold=True)
        return None
    write_report(terminalreporter, config)
    return result


def write_report(tr, config) -> None:
    compared = config.stash.get(COMPARED, [])
    if compared:
        tr.write_sep("-", "gpu benchmarks against the baseline")
        for line in benchreport.lines(compared, config.stash[BASELINE][0], config.getoption("gpu_noise_floor")):
            tr.write_line(line)
    if SAVED in config.stash:
        tr.write_line(f"gpu baseline saved: {config.stash[SAVED]}")
    for line, red in config.stash.get(ENDING, []):
        tr.write_line(line, red=red, bold=red)


def pytest_unconfigure(config):
    """--gpu-save-baseline's other runs, once this session has saved the baseline and printed its report: each
    a fresh process, so that the floor holds what processes do (gpubench.gate.runs)."""
    runs = config.stash.get(FLOOR_RUNS, 1)
    session = config.stash.get(SESSION, None)
    if runs < 2 or SAVED not in config.stash or session is None or session.exitstatus != pytest.ExitCode.OK:
        return
    say = benchruns.sayer(config.pluginmanager.get_plugin("terminalreporter"))
    params = config.invocation_params
    rc, done = benchruns.measure_floor(list(params.args), str(params.dir), config.getoption("gpu_save_baseline"),
                                       runs, say)
    if rc == 0:
        say(f"gpu baseline: {done} processes measured {config.stash[SAVED]}", False)
    session.exitstatus = rc
