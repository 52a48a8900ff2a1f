"""gpubench's pytest plugin: the `gpu_benchmark` fixture and baselines per GPU, on pytest-benchmark.

Registered through the `pytest11` entry point, so it loads in every pytest session where gpubench is
installed, GPU or not: importing it loads neither torch nor NVML (the fixtures and the baseline options do,
when used). Built on pytest-benchmark's public pieces only: the `benchmark` fixture (`pedantic`,
`extra_info`, `stats`), the `benchmark` mark, its options and its hooks. Disable it with
`-p no:gpubench.pytest_plugin`.

A gate must never be silently off: a baseline that cannot be read, or a place a baseline cannot be saved,
ends the session before anything runs with one sentence and pytest's usage-error exit status 4.
"""

from __future__ import annotations

import argparse
import json
import tempfile
from datetime import datetime, timezone
from pathlib import Path

import pytest

from gpubench.gate import compare as benchcompare
from gpubench.gate import floor as benchfloor
from gpubench.gate import report as benchreport
from gpubench.gate.clock import CLOCK
from gpubench.gate.fixture import MIN_TIME_S, SETTLE_S, GpuBenchmark
from gpubench.gate.verdict import LEAST_FLOOR_PCT
from gpubench.usage import non_negative, positive

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


def pytest_addoption(parser):
    group = parser.getgroup("gpu-benchmark", "gpu_benchmark (GPU time per call with CUDA events; gpubench)")
    group.addoption("--gpu-min-time", metavar="S", type=positive, default=MIN_TIME_S,
                    help=f"GPU time each gpu_benchmark runs for, in seconds (default {MIN_TIME_S:g})")
    group.addoption("--gpu-settle", metavar="S", type=non_negative, default=SETTLE_S,
                    help="run each benchmark back to back for S seconds before its timed rounds, so they start at "
                         f"the clock the GPU sustains (default {SETTLE_S:g})")
    group.addoption("--gpu-no-flush-l2", action="store_true",
                    help="never flush L2 between rounds: time back-to-back calls even when the working set fits "
                         "in L2 (by default such calls are timed one per round after an L2 flush)")
    group.addoption("--gpu-baseline", metavar="DIR",
                    help="compare with the baseline of this GPU model in DIR (DIR/<gpu>.json, e.g. "
                         "DIR/h100-80gb-hbm3.json): sets --benchmark-compare to that file and refuses a file "
                         "measured on another GPU model, memory size or MIG mode")
    group.addoption("--gpu-save-baseline", metavar="DIR",
                    help="save this run as the baseline of this GPU model, DIR/<gpu>.json (replaced only "
                         "when the run has written it in full)")
    group.addoption("--gpu-measure-floor", metavar="DIR",
                    help="rerun the benchmarks unchanged against DIR/<gpu>.json and add the rerun to that file's "
                         "between-run floor (run it two or more times after --gpu-save-baseline)")
    group.addoption("--gpu-noise-floor", metavar="PCT", type=non_negative, default=LEAST_FLOOR_PCT,
                    help="the least floor: a change within PCT%% of the baseline is never read as slower or faster, "
                         "whatever the reruns measured; the floor of a baseline without reruns (default "
                         f"{LEAST_FLOOR_PCT:g})")
    group.addoption("--gpu-allow-different-limits", action="store_true",
                    help="compare with a baseline measured at another power limit, application clock or ECC mode "
                         "(refused otherwise), and say so with every verdict")
    group.addoption("--gpu-fail-slower", action="store_true",
                    help="fail the session (exit 1) when any benchmark reads slower against the baseline")
    group.addoption("--gpu-verdict-json", metavar="PATH",
                    help="write every verdict against the baseline, with its numbers, to PATH as JSON")


def this_gpu() -> dict:
    """The fingerprint of the GPU this process's benchmarks run on, before any runs (raises NoGpu)."""
    from gpubench.gate.device import identify

    return identify()


def _exclusive(config, *names) -> None:
    given = [n for n in names if config.getoption(n.lstrip("-").replace("-", "_"), None)]
    if len(given) > 1:
        raise pytest.UsageError(f"give {given[0]} or {given[1]}, not both")


def check_compare_file(value) -> None:
    """--benchmark-compare naming a file: it must be a whole baseline, or the comparison would quietly not happen."""
    if not isinstance(value, str):
        return  # --benchmark-compare alone: pytest-benchmark's latest saved run
    path = Path(value)
    if path.is_file():
        try:
            benchcompare.load_baseline(path)
        except benchcompare.BaselineError as err:
            raise pytest.UsageError(str(err)) from None
    elif path.suffix == ".json" and not any(ch in value for ch in "*?["):
        raise pytest.UsageError(f"--benchmark-compare={value}: no such file, so nothing would be compared")


def check_writable(path: Path, what: str) -> None:
    """One sentence when `path` could not be written: it is a folder, or its nearest existing folder is not a
    directory or takes no file (a temporary one, removed at once: a session without a GPU saves nothing)."""
    folder = path.parent
    while not folder.exists() and folder != folder.parent:
        folder = folder.parent
    if path.is_dir():
        raise pytest.UsageError(f"{what} {path}: it is a directory")
    if not folder.is_dir():
        raise pytest.UsageError(f"{what} {path}: {folder} is not a directory")
    try:
        tempfile.TemporaryFile(dir=folder).close()
    except OSError as err:
        raise pytest.UsageError(f"{what} {path}: {folder} takes no file ({err.strerror or err})") from None


def prepare_save(save_dir: str, gpu: dict) -> tuple[Path, Path]:
    """Create the baseline folder and its partial file now, so that a folder that cannot take it is a usage
    error before anything runs, not an INTERNALERROR after everything did."""
    final = benchcompare.baseline_path(save_dir, gpu["name"])
    partial = final.with_name(f".{final.name}.partial")
    try:
        if final.is_dir():
            raise IsADirectoryError(21, "it is a directory")
        final.parent.mkdir(parents=True, exist_ok=True)
        partial.touch()
    except OSError as err:
        raise pytest.UsageError(f"cannot save the baseline as {final}: {err.strerror or err}") from None
    return partial, final


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
    if not (base_dir or save_dir or floor_dir):
        return
    from gpubench.gate.device import NoGpu

    try:
        gpu = this_gpu()
    except NoGpu as err:
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
    benchmarks = (saved[1] or {}).get("benchmarks") if saved and isinstance(saved[1], dict) else None
    for bench in benchmarks if isinstance(benchmarks, list) else []:
        if isinstance(bench, dict) and bench.get("fullname") == fullname:
            info = bench.get("extra_info")
            return bool(info.get("cuda_graph_calls")) if isinstance(info, dict) else False
    return None


# optionalhook: pytest-benchmark's hooks exist only while it is loaded (not under -p no:benchmark)
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
    refusal = benchcompare.model_mismatch(saved, current, where) or benchcompare.part_mismatch(saved, current, where)
    if refusal:
        raise pytest.UsageError(refusal)
    limits = benchcompare.limits_changed(saved, current)
    if limits and not config.getoption("gpu_allow_different_limits"):
        raise pytest.UsageError(benchcompare.limits_refusal(limits, where))
    if limits:
        config.stash[ALWAYS] = [f"{'; '.join(limits)} (--gpu-allow-different-limits)"]
        config.stash[NOTES].append(f"gpu baseline: other speed settings, compared as allowed: {'; '.join(limits)}")
    changed = benchcompare.differences(saved, current)
    if changed:
        config.stash[NOTES].append(f"gpu baseline: same model, but {'; '.join(changed)}")


def pytest_sessionstart(session):
    session.config.stash[SESSION] = session


def pytest_sessionfinish(session):
    # pytest-benchmark wrote its JSON in its own (wrapping) pytest_sessionfinish, before this one runs
    config = session.config
    if SAVE in config.stash:
        partial, final = config.stash[SAVE]
        written = config.option.benchmark_json
        if hasattr(written, "close"):
            written.close()
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
    slower = [c.name for c in config.stash.get(COMPARED, []) if c.verdict and c.verdict.word == "slower"]
    if slower and config.getoption("gpu_fail_slower") and session.exitstatus == pytest.ExitCode.OK:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
        config.stash[ENDING].append((f"FAILED: --gpu-fail-slower: {len(slower)} benchmark"
                                     f"{'s' * (len(slower) != 1)} read slower ({', '.join(slower)})", True))


def add_rerun(session, baseline: dict) -> None:
    """--gpu-measure-floor: this run, unchanged, becomes one more rerun of the baseline's floor."""
    config = session.config
    path = Path(config.option.benchmark_compare)
    changes = {c.fullname: {ch.stat: ch for ch in c.verdict.changes}
               for c in config.stash[COMPARED] if c.verdict}
    when = datetime.now(timezone.utc).isoformat(timespec="seconds")
    updated, left = benchfloor.with_rerun(baseline, changes, when, config.stash[FINGERPRINT].get("uuid"))
    ending = config.stash[ENDING]
    try:
        benchfloor.write(path, updated)
    except OSError as err:
        session.exitstatus = pytest.ExitCode.USAGE_ERROR
        ending.append((f"ERROR: the rerun could not be added to {path}: {err.strerror or err}", True))
        return
    runs = len(benchfloor.reruns(updated))
    ending.append((f"gpu baseline floor: rerun {runs} added to {path} ({len(changes) - len(left)} benchmarks)", False))
    for name in left:
        ending.append((f"left out of the floor: {name} moved more than {benchfloor.MAX_RERUN_CHANGE_PCT:g}%, "
                       "not what an unchanged rerun does", True))


def write_verdicts(session) -> None:
    config = session.config
    path = Path(config.getoption("gpu_verdict_json"))
    name = config.stash[BASELINE][0] if BASELINE in config.stash else None
    runs = {k: {"name": r["name"], "extra_info": {i: v for i, v in r["extra_info"].items()
                                                   if not i.startswith("rounds_")}}
            for k, r in config.stash.get(RUNS, {}).items()}
    data = {"gpu": config.stash.get(FINGERPRINT, None), "baseline": name,
            "least_floor_pct": config.getoption("gpu_noise_floor"), "always": config.stash.get(ALWAYS, []),
            "verdicts": [c.record(name) for c in config.stash.get(COMPARED, [])], "runs": runs}
    try:
        path.write_text(json.dumps(data, indent=2, default=str))
    except OSError as err:
        session.exitstatus = pytest.ExitCode.USAGE_ERROR
        config.stash[ENDING].append((f"ERROR: the verdicts could not be written to {path}: {err.strerror or err}",
                                     True))


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
