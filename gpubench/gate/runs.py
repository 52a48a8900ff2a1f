"""A baseline measured in several processes from one command: `pytest ... --gpu-save-baseline=DIR` saves the
baseline in its own process, then runs the same command again, each time in a fresh process, with
--gpu-measure-floor=DIR in place of --gpu-save-baseline, until --gpu-baseline-runs processes have measured
it (gpubench.gate.floor says why a floor needs several: a process's own effect on a call's time shows only
between processes).

The runs replay the command line as pytest received it, in the folder it was started from, but for what
would make them write over the first run's files: a JUnit XML report, pytest-benchmark's saved runs and
JSON, and --gpu-verdict-json, which each run writes beside the first (name-run-2.json, ...).
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

RUNS = 8  # processes that measure a baseline by default: gpubench.gate.floor.multiplier(8) is 5.7
# The command's seconds by default: no process starts that would end past them (a process takes about as long as the
# longest so far), once FEW_RUNS have measured. On an H200 eight processes of nine benchmarks took 98-124 s, and
# each floor process spends 4-5 s starting (python, torch, the CUDA context) besides its rounds.
SECONDS = 110.0
FEW_RUNS = 4  # the least processes a floor comes from, whatever the time: fewer give floors too wide to judge by
# options whose value the runs drop (the first run's files), with flags dropped alone
DROPPED = (
    "--gpu-save-baseline",
    "--gpu-baseline-runs",
    "--junitxml",
    "--junit-xml",
    "--benchmark-save",
    "--benchmark-json",
)
DROPPED_FLAGS = ("--benchmark-autosave",)
MAYBE_VALUE = ("--benchmark-compare",)  # its value is optional: the next word is it unless it is an option
VERDICTS = "--gpu-verdict-json"


def numbered(path: str, run: int) -> str:
    p = Path(path)
    return str(p.with_name(f"{p.stem}-run-{run}{p.suffix}"))


def rerun_args(args: list[str], save_dir: str, run: int) -> list[str]:
    """The command line of run number `run` (2 and on): the first's, measuring the floor of save_dir's baseline."""
    out, i = [], 0
    while i < len(args):
        arg = args[i]
        i += 1
        name, eq, value = arg.partition("=")
        if name in DROPPED_FLAGS:
            continue
        if name in MAYBE_VALUE:
            if not eq and i < len(args) and not args[i].startswith("-"):
                i += 1
            continue
        if name in DROPPED or name == VERDICTS:
            if not eq:
                value = args[i] if i < len(args) else ""
                i += 1
            if name == VERDICTS:
                out.append(f"{VERDICTS}={numbered(value, run)}")
            continue
        out.append(arg)
    return [*out, f"--gpu-measure-floor={save_dir}"]


def run_pytest(args: list[str], cwd: str) -> int:
    """One pytest session in a process of its own, its output on this terminal; its exit status."""
    return subprocess.run([sys.executable, "-m", "pytest", *args], cwd=cwd).returncode


def free_gpu_memory() -> None:
    """Hand back what torch's allocator keeps, so the runs that follow find the GPU as a fresh process would."""
    torch = sys.modules.get("torch")
    try:
        if torch is not None and torch.cuda.is_initialized():
            torch.cuda.empty_cache()
    except Exception:  # noqa: BLE001 - freeing a cache is a courtesy, never a failure
        pass


def sayer(tr):
    """How the runs' lines are said: as a separator of pytest's terminal reporter where there is one, flushed
    before the next run's own output."""

    def say(line: str, red: bool) -> None:
        if tr is not None:
            tr.write_sep("=", line, red=red, bold=red)
        else:
            print(line)
        sys.stdout.flush()

    return say


def measure_floor(
    args: list[str],
    cwd: str,
    save_dir: str,
    runs: int,
    say,
    run=None,
    needed=None,
    seconds: float = 0.0,
    started: float | None = None,
    clock=time.monotonic,
) -> tuple[int, int]:
    """Runs 2..runs of a baseline's command, one after another, each in a fresh process (run: how a session is
    run, run_pytest unless given), while needed() (the benchmarks whose floors still need a process) names any;
    each run leaves out the others itself (gate.configure.deselect_settled). Stops at the first that fails. With
    seconds, from FEW_RUNS processes on no run starts that would end more than that many seconds after started
    (clock's time the command began), a run taking as long as the longest before it (the first process, which
    also saved the baseline, until another has run).
    (the exit status to end with, how many runs measured the baseline)."""
    run = run or run_pytest
    free_gpu_memory()
    began = clock()
    first, longest = (began - started if started is not None else 0.0), 0.0
    for n in range(2, runs + 1):
        left = needed() if needed is not None else None
        if left is not None and not left:
            say(f"gpu baseline: every benchmark's floor is settled after {n - 1} processes", False)
            return 0, n - 1
        spent = clock() - (started if started is not None else began)
        estimate = longest or first
        if seconds > 0 and n > FEW_RUNS and spent + estimate > seconds:
            say(
                f"gpu baseline: {n - 1} processes in {spent:.0f} s; another (about {estimate:.0f} s) would end past "
                f"--gpu-baseline-seconds {seconds:g}, so the floors still open come from these",
                False,
            )
            return 0, n - 1
        which = f" for {len(left)} benchmark{'s' * (len(left) != 1)} whose floors need it" if left else ""
        say(f"gpu baseline: run {n} of at most {runs}, a fresh process measuring its floor{which}", False)
        t0 = clock()
        try:
            rc = run(rerun_args(args, save_dir, n), cwd)
            longest = max(longest, clock() - t0)
        except KeyboardInterrupt:
            say(f"gpu baseline: interrupted in run {n} of {runs}; the baseline keeps the {n - 1} runs before it", True)
            return 2, n - 1
        if rc != 0:
            say(
                f"gpu baseline: run {n} of {runs} ended with exit status {rc}; the baseline keeps the {n - 1} runs "
                "before it, and its floor is wider for the runs it lacks",
                True,
            )
            return rc, n - 1
    return 0, runs
