"""gpubench's pytest plugin: the `gpu_benchmark` fixture and baselines per GPU, on pytest-benchmark.

Registered through the `pytest11` entry point, so it loads in every pytest session where gpubench is
installed, GPU or not: importing it loads neither torch nor NVML (the fixtures and the baseline options do,
when used). Built on pytest-benchmark's public pieces only: the `benchmark` fixture (`pedantic`,
`extra_info`, `stats`), the `benchmark` mark, its options and its hooks. Disable it with
`-p no:gpubench.pytest_plugin`.

Only the hooks and fixtures are here; the gate behind them is gpubench.gate (what it decides before anything
runs: gate.configure; after: gate.finish; what it holds meanwhile: gate.decisions). A gate must never be
silently off: a baseline that cannot be read, a place a baseline cannot be saved, or --gpu-fail-slower where
there is no GPU to compare on ends the session before anything runs with one sentence and pytest's usage-error
exit status 4; --gpu-fail-slower in a session that compared nothing fails.
"""

from __future__ import annotations

import pytest

from gpubench.gate import configure, finish
from gpubench.gate.clock import CLOCK
from gpubench.gate.decisions import decisions
from gpubench.gate.fixture import GpuBenchmark
from gpubench.gate.options import add_options


def pytest_addoption(parser):
    add_options(parser)


def pytest_configure(config):
    # Runs before pytest-benchmark's own pytest_configure (trylast), which reads the options set here.
    configure.configure(config)


def pytest_report_header(config):
    return decisions(config).notes


def pytest_collection_modifyitems(config, items):
    """Every test that uses gpu_benchmark is timed by the CUDA-event clock, keeping its other benchmark options."""
    for item in items:
        if "gpu_benchmark" not in getattr(item, "fixturenames", ()):
            continue
        mark = item.get_closest_marker("benchmark")
        options = {**(mark.kwargs if mark else {}), "timer": CLOCK}
        item.add_marker(pytest.mark.benchmark(**options), append=False)
    configure.deselect_settled(config, items)


@pytest.fixture(scope="session")
def gpu_device(pytestconfig):
    """The CUDA device gpu_benchmark times on: the current one when the first benchmark starts (choose it
    with CUDA_VISIBLE_DEVICES), known to NVML by its UUID. Holds its fingerprint (name, UUID, memory,
    driver, power limit, application clocks, ECC, MIG mode), L2 size, datasheet peaks, and a sampler of
    its metrics for the session. Skips the test where there is no GPU."""
    device = configure.session_device(pytestconfig)
    yield device
    device.close()


@pytest.fixture
def gpu_benchmark(benchmark, gpu_device, pytestconfig):
    """gpu_benchmark(fn, *args, flops=None, bytes=None, unit=None, graph=None, **kwargs): time
    fn(*args, **kwargs) in GPU time per call (CUDA events, after a warm-up and settling the clocks) through
    pytest-benchmark, and return its result. Its rounds stop once the intervals of their median and quartiles
    are within a quarter of the floor they will be held against (--gpu-min-time to --gpu-max-time of them).

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
    and its counter fingerprint (counters), and the GPU's fingerprint. Once per test, like `benchmark`;
    skips without a GPU."""
    target, counters = configure.effort_for(pytestconfig, benchmark.name, benchmark.fullname)
    bench = GpuBenchmark(
        benchmark,
        gpu_device,
        min_time_s=pytestconfig.getoption("gpu_min_time"),
        max_time_s=pytestconfig.getoption("gpu_max_time"),
        flush_l2=not pytestconfig.getoption("gpu_no_flush_l2"),
        settle_s=pytestconfig.getoption("gpu_settle"),
        graph_before=configure.graph_in_baseline(pytestconfig, benchmark.fullname),
        target=target,
        counters=counters,
    )
    yield bench
    decisions(pytestconfig).keep_run(benchmark, bench.rounds_s)


# optionalhook: pytest-benchmark's hooks exist only while it is loaded (not under -p no:benchmark)
@pytest.hookimpl(optionalhook=True, tryfirst=True)
def pytest_benchmark_generate_machine_info(config):
    """In a session on a GPU (one that saves, measures or compares a GPU baseline, or where gpu_benchmark ran): the
    machine without py-cpuinfo's second (gate.configure.machine_info); elsewhere pytest-benchmark's own."""
    return configure.machine_info() if decisions(config).fingerprint is not None else None


@pytest.hookimpl(optionalhook=True)
def pytest_benchmark_update_machine_info(config, machine_info):
    if decisions(config).fingerprint is not None:
        machine_info["gpu"] = decisions(config).fingerprint


@pytest.hookimpl(optionalhook=True, tryfirst=True)  # before pytest-benchmark warns about every difference
def pytest_benchmark_compare_machine_info(config, benchmarksession, machine_info, compared_benchmark):
    """Keep the baseline for the verdicts; refuse one measured on another GPU model, memory size or MIG mode,
    or at other speed settings unless allowed (a usage error, exit 4, before anything runs)."""
    configure.check_baseline(config, compared_benchmark)


def pytest_sessionstart(session):
    decisions(session.config).session = session


def pytest_sessionfinish(session):
    finish.finish(session)


@pytest.hookimpl(wrapper=True)
def pytest_terminal_summary(terminalreporter, config):
    try:
        result = yield
    except Exception as err:
        if not finish.failed_check(terminalreporter, config, err):
            raise
        return None
    finish.write_report(terminalreporter, config)
    return result


def pytest_unconfigure(config):
    """--gpu-save-baseline's other runs, once this session has saved the baseline and printed its report."""
    finish.measure_floor(config)
