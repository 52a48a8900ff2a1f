"""What the gate decides before a benchmark runs: which options go together, the GPU the session benchmarks on,
the baseline it compares with (refused when measured on another GPU model, memory size or MIG mode, or at other
speed settings unless allowed), and where a saved baseline and the verdicts go. A gate must never be silently
off: each refusal is one sentence and pytest's usage-error exit status 4, before anything runs."""

from __future__ import annotations

import argparse
import os
import platform
import tempfile
from pathlib import Path

import pytest

from gpubench.gate import against_baseline, effort, processes
from gpubench.gate import compare as benchcompare
from gpubench.gate import floor as benchfloor
from gpubench.gate.decisions import KEY, Decisions, decisions


def this_gpu() -> dict:
    """The fingerprint of the GPU this process's benchmarks run on, before any runs (raises NoGpu)."""
    from gpubench.gate.device import identify

    return identify()


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


def session_device(config):
    """The device of the gpu_device fixture: the current CUDA device, which must be the GPU a baseline was picked
    or saved for (a failure, not a silent comparison with another GPU)."""
    device = open_device()
    known = decisions(config)
    chosen = known.fingerprint
    if chosen is not None and chosen.get("uuid") != device.fingerprint.get("uuid"):
        device.close()
        pytest.fail(
            f"the benchmarks run on {device.fingerprint['name']} ({device.fingerprint['uuid']}), not on "
            f"the GPU the baseline was chosen for ({chosen['uuid']}): leave CUDA's current device at 0, or "
            "choose the GPU with CUDA_VISIBLE_DEVICES",
            pytrace=False,
        )
    known.fingerprint = device.fingerprint
    return device


def _exclusive(config, *names) -> None:
    given = [n for n in names if config.getoption(n.lstrip("-").replace("-", "_"), None)]
    if len(given) > 1:
        raise pytest.UsageError(f"give {given[0]} or {given[1]}, not both")


def configure(config) -> None:
    """Check the options and the places files go; pick the GPU, the baseline (set as --benchmark-compare) and the
    file a saved baseline is written to (set as --benchmark-json). Runs before pytest-benchmark configures itself,
    which reads the options set here."""
    known = config.stash[KEY] = Decisions()
    base_dir, save_dir = config.getoption("gpu_baseline"), config.getoption("gpu_save_baseline")
    floor_dir = config.getoption("gpu_measure_floor")
    _exclusive(config, "--gpu-baseline", "--gpu-measure-floor", "--benchmark-compare")
    _exclusive(config, "--gpu-save-baseline", "--gpu-measure-floor")
    _exclusive(config, "--gpu-save-baseline", "--benchmark-json")
    check_compare_file(config.getoption("benchmark_compare", None))
    compared = base_dir or floor_dir or config.getoption("benchmark_compare", None)
    if config.getoption("gpu_fail_slower") and not compared:
        raise pytest.UsageError(
            "--gpu-fail-slower needs a baseline to compare with: give --gpu-baseline=DIR (or --benchmark-compare=FILE)"
        )
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
            raise pytest.UsageError(
                f"--gpu-fail-slower, but there is no GPU here ({err}): the GPU benchmarks would "
                "skip and nothing would be compared, so the gate refuses to pass; run it where "
                "the baseline's GPU is"
            ) from None
        known.notes.append(
            f"gpu baselines: no GPU here ({err}), so --gpu-baseline, --gpu-save-baseline "
            "and --gpu-measure-floor do nothing and the GPU benchmarks skip"
        )
        return
    known.fingerprint = gpu
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
        known.notes.append(f"gpu baseline: {path} ({gpu['name']})")
    if save_dir:
        partial, final = prepare_save(save_dir, gpu)
        # what --benchmark-json=PATH would have set; written in full, it replaces the baseline at the end
        config.option.benchmark_json = benchmark_json_option(partial)
        known.save = (partial, final)
        known.floor_runs = runs = config.getoption("gpu_baseline_runs")
        known.notes.append(
            f"gpu baseline: measured in {'up to ' * (runs > 1)}{runs} process{'es' * (runs != 1)}, "
            "this one first"
            + (
                f" (the others when it ends, each benchmark in as few as its floor "
                f"needs, at least {min(runs, processes.MIN_PROCESSES)})"
                if runs > 1
                else ""
            )
        )


def check_baseline(config, compared_benchmark: dict) -> None:
    """Keep the baseline pytest-benchmark loaded for the verdicts; refuse one measured on another GPU model, memory
    size or MIG mode, or at other speed settings unless allowed."""
    known = decisions(config)
    compare = config.getoption("benchmark_compare", None)
    name = Path(compare).name if isinstance(compare, str) and Path(compare).is_file() else "the saved run"
    known.baseline = (name, compared_benchmark)
    saved = (compared_benchmark.get("machine_info") or {}).get("gpu")
    if not saved:
        return  # not a GPU baseline
    if known.fingerprint is None:
        from gpubench.gate.device import NoGpu

        try:
            known.fingerprint = this_gpu()
        except NoGpu:
            return  # no GPU here: the GPU benchmarks skip, nothing is compared
    where = f"the baseline {name}" if name != "the saved run" else "the baseline"
    try:
        always, notes = benchcompare.comparable(
            saved, known.fingerprint, where, config.getoption("gpu_allow_different_limits")
        )
    except benchcompare.BaselineError as err:
        raise pytest.UsageError(str(err)) from None
    known.always = always
    known.notes.extend(notes)


def graph_in_baseline(config, fullname: str) -> bool | None:
    """Whether the baseline (loaded when pytest-benchmark configured itself) timed this benchmark from a CUDA
    graph; None without a baseline or without the benchmark in it."""
    saved = decisions(config).baseline
    return benchcompare.graph_in(saved[1] if saved else None, fullname)


def _saved(config, fullname: str) -> dict | None:
    """The GPU baseline this session compares with, where it holds this benchmark."""
    known = decisions(config)
    data = known.baseline[1] if known.baseline else None
    if not (isinstance(data, dict) and (data.get("machine_info") or {}).get("gpu")):
        return None
    return data if any(b.get("fullname") == fullname for b in data.get("benchmarks") or []) else None


def effort_for(config, name: str, fullname: str):
    """What one benchmark's rounds are held to (gate.effort.Target), and whether it reads its counters after them:
    yes, no (a run that measures a floor), or, against a baseline, where its verdict may not be `same`."""
    least = config.getoption("gpu_noise_floor")
    saved = _saved(config, fullname)
    if config.getoption("gpu_measure_floor"):
        fs = benchfloor.floors(saved, fullname, least) if saved else None
        median = benchfloor.call_s(saved, fullname) if fs else None
        if median is None:
            return effort.least_target(least), False
        if fs["median"].processes < 3:  # no spread of processes yet
            return effort.duty_target(least, median), False
        return effort.spread_target(fs, least, effort.FLOOR_SHARE * processes.duty(median)[0]), False
    if saved is None:
        first = config.getoption("gpu_save_baseline")  # the baseline's first process: its rounds are the reference
        return (effort.duty_target(least) if first else effort.least_target(least)), True

    def open_verdict(rounds: list[float], info: dict) -> bool:
        c = against_baseline.compare_one(saved, fullname, {"name": name, "rounds": rounds, "extra_info": info}, least)
        decisions(config).early[fullname] = c  # the session's verdict, reached while its tensors live
        return c.verdict is None or c.verdict.word != "same"

    return effort.floor_target(benchfloor.floors(saved, fullname, least), least), open_verdict


def deselect_settled(config, items) -> None:
    """A run that measures a floor leaves out the GPU benchmarks whose floors are settled (gate.processes), so that
    each process is spent on the benchmarks whose floors still need one."""
    known = decisions(config)
    if not config.getoption("gpu_measure_floor") or not known.baseline:
        return
    data, least = known.baseline[1], config.getoption("gpu_noise_floor")
    settled = {n for n in processes.names(data) if processes.status(data, n, least)[0]}
    drop = [i for i in items if i.nodeid in settled and "gpu_benchmark" in getattr(i, "fixturenames", ())]
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = [i for i in items if i not in drop]
        known.ending.append(
            (f"gpu baseline floor: {len(drop)} benchmark{'s' * (len(drop) != 1)} left out, their floors settled", False)
        )


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


def benchmark_json_option(path: Path):
    """The value pytest-benchmark's --benchmark-json=PATH parses to: a path from 5.3 on, a file opened for
    writing before."""
    from importlib.metadata import version

    major, minor = (int(x) for x in version("pytest-benchmark").split(".")[:2])
    return path if (major, minor) >= (5, 3) else argparse.FileType("wb")(str(path))


def machine_info() -> dict:
    """pytest-benchmark's machine_info, with the CPU as /proc/cpuinfo names it. pytest-benchmark asks py-cpuinfo,
    which starts a Python process that times the CPU's clock for a second, in every session that saves or
    compares: a second of each gate session, where a gate set of nine calls is timed in ten."""
    brand = None
    try:
        with open("/proc/cpuinfo", encoding="utf8") as f:
            brand = next((line.split(":", 1)[1].strip() for line in f if line.startswith("model name")), None)
    except OSError:
        pass
    return {
        "node": platform.node(),
        "processor": platform.processor(),
        "machine": platform.machine(),
        "python_compiler": platform.python_compiler(),
        "python_implementation": platform.python_implementation(),
        "python_implementation_version": platform.python_version(),
        "python_version": platform.python_version(),
        "python_build": list(platform.python_build()),
        "release": platform.release(),
        "system": platform.system(),
        "cpu": {
            "brand_raw": brand or platform.processor(),
            "count": os.cpu_count(),
            "arch_string_raw": platform.machine(),
            "source": "/proc/cpuinfo",
        },
    }
