"""What the pytest plugin checks before a session runs and writes after it: the places a baseline, a rerun or
the verdicts go (each a usage error, exit 4, before anything runs, when no file can be written there), the
file pytest-benchmark writes a saved baseline to, the machine it names, and the records of --gpu-verdict-json."""

from __future__ import annotations

import argparse
import json
import os
import platform
import tempfile
from datetime import datetime, timezone
from pathlib import Path

import pytest

from gpubench.gate import compare as benchcompare
from gpubench.gate import floor as benchfloor


def count(text: str) -> int:
    """A whole number of one or more, for an option's parser."""
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"a whole number of one or more, not {text}")
    return value


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
    return {"node": platform.node(), "processor": platform.processor(), "machine": platform.machine(),
            "python_compiler": platform.python_compiler(), "python_implementation": platform.python_implementation(),
            "python_implementation_version": platform.python_version(), "python_version": platform.python_version(),
            "python_build": list(platform.python_build()), "release": platform.release(), "system": platform.system(),
            "cpu": {"brand_raw": brand or platform.processor(), "count": os.cpu_count(),
                    "arch_string_raw": platform.machine(), "source": "/proc/cpuinfo"}}


def verdict_records(gpu: dict | None, baseline_name: str | None, least_floor_pct: float, always: list[str],
                    compared: list, runs: dict) -> dict:
    """What --gpu-verdict-json holds: every verdict with its numbers, and each run's extra_info (its
    round-by-round clocks left out) with its round times in microseconds and the rounds the host was late for."""
    infos = {k: {"name": r["name"], "extra_info": {i: v for i, v in r["extra_info"].items()
                                                    if not i.startswith("rounds_")},
                 "rounds_us": [round(x * 1e6, 5) for x in r["rounds"]],
                 "rounds_host_late": r["extra_info"].get("rounds_host_late", [])}
             for k, r in runs.items()}
    return {"gpu": gpu, "baseline": baseline_name, "least_floor_pct": least_floor_pct, "always": always,
            "verdicts": [c.record(baseline_name) for c in compared], "runs": infos}


def rerun_added(path: Path, baseline: dict, compared: list, uuid: str | None) -> tuple[list[tuple[str, bool]], bool]:
    """--gpu-measure-floor: add this run's changes from the baseline's first process to the baseline file as one
    more unchanged rerun. The lines for the end of the report (line, red), and whether the file was written."""
    changes = {c.fullname: dict(c.verdict.raw) for c in compared if c.verdict}
    when = datetime.now(timezone.utc).isoformat(timespec="seconds")
    updated, moved = benchfloor.with_rerun(baseline, changes, when, uuid)
    try:
        benchfloor.write(path, updated)
    except OSError as err:
        return [(f"ERROR: the rerun could not be added to {path}: {err.strerror or err}", True)], False
    runs = len(benchfloor.reruns(updated))
    lines = [(f"gpu baseline floor: rerun {runs} added to {path} ({len(changes)} benchmarks; {runs + 1} processes "
              "now measure it)", False)]
    lines += [(f"measured as unchanged, though its median moved more than {benchfloor.MOVED_PCT:g}%: {name} (its "
               "floor widens by as much; if its code changed, save the baseline again)", True) for name in moved]
    return lines, True


def written(path: Path, data: dict) -> str | None:
    """Write the verdicts' JSON; the error line where it could not be written, else None."""
    try:
        path.write_text(json.dumps(data, indent=2, default=str))
    except OSError as err:
        return f"ERROR: the verdicts could not be written to {path}: {err.strerror or err}"
    return None


def fail_slower_ending(compared: list, ran: bool) -> str | None:
    """Why --gpu-fail-slower fails this run: a benchmark read slower, or none was compared (ran: whether any GPU
    benchmark ran); None where it passes."""
    slower = [c.name for c in compared if c.verdict and c.verdict.word == "slower"]
    if slower:
        return (f"FAILED: --gpu-fail-slower: {len(slower)} benchmark{'s' * (len(slower) != 1)} read slower "
                f"({', '.join(slower)})")
    if not any(c.verdict for c in compared):
        why = "none had a verdict (see above)" if ran else "no GPU benchmark ran"
        return f"FAILED: --gpu-fail-slower: nothing was compared with the baseline ({why}), and a gate that " \
               "compared nothing must not pass"
    return None
