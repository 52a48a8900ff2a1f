"""gpubench's pytest plugin: the `gpu_benchmark` fixture and baselines per GPU model, on pytest-benchmark.

Registered through the `pytest11` entry point, so it loads in every pytest session where gpubench is
installed, GPU or not: importing it loads neither torch nor NVML (the fixtures and the baseline options do,
when used). Built on pytest-benchmark's public pieces only: the `benchmark` fixture (`pedantic`,
`extra_info`, `stats`), the `benchmark` mark, its options and its hooks. Disable it with
`-p no:gpubench.pytest_plugin`.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from gpubench.gate import compare as benchcompare
from gpubench.gate.clock import CLOCK
from gpubench.gate.fixture import MIN_TIME_S, GpuBenchmark
from gpubench.usage import non_negative, positive

FINGERPRINT = pytest.StashKey[dict]()  # the GPU this session benchmarks on
NOTES = pytest.StashKey[list]()  # lines for the report header
SAVE = pytest.StashKey[tuple]()  # (file being written, the baseline it becomes)
SAVED = pytest.StashKey[str]()
GROUPED = pytest.StashKey[list]()  # the rows pytest-benchmark grouped for its table
SESSION = pytest.StashKey[pytest.Session]()


def pytest_addoption(parser):
    group = parser.getgroup("gpu-benchmark", "gpu_benchmark (GPU time per call with CUDA events; gpubench)")
    group.addoption("--gpu-min-time", metavar="S", type=positive, default=MIN_TIME_S,
                    help=f"GPU time each gpu_benchmark runs for, in seconds (default {MIN_TIME_S:g})")
    group.addoption("--gpu-no-flush-l2", action="store_true",
                    help="never flush L2 between rounds: time back-to-back calls even when the working set fits "
                         "in L2 (by default such calls are timed one per round after an L2 flush)")
    group.addoption("--gpu-baseline", metavar="DIR",
                    help="compare with the baseline of this GPU model in DIR (DIR/<gpu>.json, e.g. "
                         "DIR/h100-80gb-hbm3.json): sets --benchmark-compare to that file and refuses a file "
                         "measured on another GPU model; add --benchmark-compare-fail=median:10%% to fail on "
                         "a slowdown")
    group.addoption("--gpu-save-baseline", metavar="DIR",
                    help="save this run as the baseline of this GPU model, DIR/<gpu>.json (replaced only "
                         "when the run has written it in full)")
    group.addoption("--gpu-noise-floor", metavar="PCT", type=non_negative, default=benchcompare.NOISE_FLOOR_PCT,
                    help="against a baseline, a change of a median within the wider IQR of the two runs, or "
                         "within PCT%% of the baseline median (drift between runs that one run's IQR cannot "
                         f"show), reads 'same' (default {benchcompare.NOISE_FLOOR_PCT:g})")


def this_gpu() -> dict:
    """The fingerprint of the GPU this process's benchmarks run on, before any runs (raises NoGpu)."""
    from gpubench.gate.device import identify

    return identify()


def pytest_configure(config):
    # Runs before pytest-benchmark's own pytest_configure (trylast), which reads the options set here.
    config.stash[NOTES] = []
    base_dir, save_dir = config.getoption("gpu_baseline"), config.getoption("gpu_save_baseline")
    if not (base_dir or save_dir):
        return
    if base_dir and config.getoption("benchmark_compare", None):
        raise pytest.UsageError("give --gpu-baseline or --benchmark-compare, not both")
    if save_dir and config.getoption("benchmark_json", None):
        raise pytest.UsageError("give --gpu-save-baseline or --benchmark-json, not both")
    from gpubench.gate.device import NoGpu

    try:
        gpu = this_gpu()
    except NoGpu as err:
        config.stash[NOTES].append(f"gpu baselines: no GPU here ({err}), so --gpu-baseline and "
                                   "--gpu-save-baseline do nothing and the GPU benchmarks skip")
        return
    config.stash[FINGERPRINT] = gpu
    if base_dir:
        path = benchcompare.baseline_path(base_dir, gpu["name"])
        if not path.is_file():
            raise pytest.UsageError(benchcompare.missing_baseline(base_dir, gpu["name"]))
        config.option.benchmark_compare = str(path.resolve())
        config.stash[NOTES].append(f"gpu baseline: {path} ({gpu['name']})")
    if save_dir:
        final = benchcompare.baseline_path(save_dir, gpu["name"])
        final.parent.mkdir(parents=True, exist_ok=True)
        partial = final.with_name(f".{final.name}.partial")
        # what --benchmark-json=PATH would have set; written in full, it replaces the baseline at the end
        config.option.benchmark_json = benchmark_json_option(partial)
        config.stash[SAVE] = (partial, final)


def benchmark_json_option(path: Path):
    """The value pytest-benchmark's --benchmark-json=PATH parses to: a path from 5.3 on, a file opened for
    writing before."""
    from importlib.metadata import version

    major, minor = (int(x) for x in version("pytest-benchmark").split(".")[:2])
    return path if (major, minor) >= (5, 3) else argparse.FileType("wb")(str(path))


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
    with CUDA_VISIBLE_DEVICES), known to NVML by its UUID. Holds its fingerprint (name, UUID, driver,
    power limit, MIG mode), L2 size, datasheet peaks, and a sampler of its metrics for the session.
    Skips the test where there is no GPU."""
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
    """gpu_benchmark(fn, *args, flops=None, bytes=None, unit=None, **kwargs): time fn(*args, **kwargs) in
    GPU time per call (CUDA events, after a warm-up) through pytest-benchmark, and return its result.

    flops, bytes: the work of one call (bytes: each input read once, each output written once); they add
    TFLOP/s, GB/s, and MFU (unit: the peak it runs on, bf16_tensor, fp16_tensor or fp32) and MBU against
    the GPU's datasheet. When the working set (array arguments, or bytes) fits in L2, each round is one
    call after an L2 flush outside the timed events (flush_l2=False or --gpu-no-flush-l2 to turn it off;
    working_set_bytes=N to say what the call touches). extra_info gets the timing plan, the metrics
    sampled meanwhile (median gpu_util_pct, sm_active_pct, tensor_active_pct, dram_active_pct,
    sm_clock_mhz, power_w ...) and the GPU's fingerprint. Once per test, like `benchmark`; skips without
    a GPU."""
    return GpuBenchmark(benchmark, gpu_device, min_time_s=pytestconfig.getoption("gpu_min_time"),
                        flush_l2=not pytestconfig.getoption("gpu_no_flush_l2"))


# optionalhook: pytest-benchmark's hooks exist only while it is loaded (not under -p no:benchmark)
@pytest.hookimpl(optionalhook=True)
def pytest_benchmark_update_machine_info(config, machine_info):
    if FINGERPRINT in config.stash:
        machine_info["gpu"] = config.stash[FINGERPRINT]


@pytest.hookimpl(optionalhook=True, tryfirst=True)  # before pytest-benchmark warns about every difference
def pytest_benchmark_compare_machine_info(config, benchmarksession, machine_info, compared_benchmark):
    """Refuse a baseline measured on another GPU model (a usage error, exit 4, before anything runs)."""
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
    compare = config.getoption("benchmark_compare", None)
    where = f"the baseline {Path(compare).name}" if isinstance(compare, str) and Path(compare).is_file() else \
        "the baseline"
    refusal = benchcompare.model_mismatch(saved, current, where)
    if refusal:
        raise pytest.UsageError(refusal)
    changed = benchcompare.differences(saved, current)
    if changed:
        config.stash[NOTES].append(f"gpu baseline: same model, but {'; '.join(changed)}")


@pytest.hookimpl(wrapper=True, optionalhook=True)
def pytest_benchmark_group_stats(config, benchmarks, group_by):
    config.stash[GROUPED] = [dict(b) for b in benchmarks]  # copies: the table renames its rows
    return (yield)


def pytest_sessionstart(session):
    session.config.stash[SESSION] = session


def pytest_sessionfinish(session):
    # pytest-benchmark wrote its JSON in its own (wrapping) pytest_sessionfinish, before this one runs
    if SAVE not in session.config.stash:
        return
    partial, final = session.config.stash[SAVE]
    written = session.config.option.benchmark_json
    if hasattr(written, "close"):
        written.close()
    if partial.is_file() and partial.stat().st_size:
        partial.replace(final)
        session.config.stash[SAVED] = str(final)
    else:
        partial.unlink(missing_ok=True)  # no benchmark ran: nothing to save


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
    floor = config.getoption("gpu_noise_floor")
    lines = benchcompare.report_lines(
        benchcompare.pairs(config.stash.get(GROUPED, []), keep=lambda b: "gpu_uuid" in (b.get("extra_info") or {})),
        floor)
    if lines:
        tr.write_sep("-", "gpu benchmarks against the baseline")
        for line in lines:
            tr.write_line(line)
    if SAVED in config.stash:
        tr.write_line(f"gpu baseline saved: {config.stash[SAVED]}")
