"""`gpubench watch`: the metric ladder of the user's own job, one row per phase, with a verdict.

    gpubench watch -- python train.py --batch 16    # run the command as a child; stop when it exits
    gpubench watch --duration 60                    # attach: whatever runs on the GPUs for 60 s
    with gpubench.recording() as rec: ...           # the same around a block of Python (notebooks)

Which GPUs: --device N or --all-gpus as in `gpubench run`; else those the command sees under its
CUDA_VISIBLE_DEVICES, mapped to NVML by UUID; else every GPU. The command's output passes through
untouched (gpubench writes only to stderr) and gpubench ends with the command's exit code.
"""

from __future__ import annotations

import os
import shlex
import shutil
import sys
from pathlib import Path

from gpubench.inside import markwriter
from gpubench.job import child, hookenv, speak
from gpubench.job.watcher import Watch, Watcher, WatchOptions
from gpubench.job.watchshow import show  # the table at the end: watchcmd.show as before
from gpubench.record import nvml
from gpubench.record.config import RecordingConfig
from gpubench.record.recording import Reporter
from gpubench.usage import visible


class NoGpu(LookupError):
    """The command has no GPU here to record (no driver, or CUDA_VISIBLE_DEVICES hides them all)."""


class CannotStart(Exception):
    """The command cannot be started; the message is one sentence, `code` the shell's (126 or 127)."""

    def __init__(self, code: int, sentence: str):
        super().__init__(sentence)
        self.code = code


def run(
    opts: WatchOptions, argv: list[str], duration_s: float | None = None, reporter: Reporter | None = None, notes=()
) -> tuple[int, Watch]:
    """Watch `argv` as a child until it exits (or, with no argv, the GPUs for duration_s); return the
    exit code gpubench should end with, and the watch. CannotStart where argv cannot be started: then
    nothing is left on disk."""
    existed = opts.out_dir.exists()
    env = dict(os.environ)
    interrupted = False
    outcome = child.Outcome(None)
    try:
        with child.held_signals(), Watcher(opts, reporter) as watcher:
            watch = watcher.watch
            for note in notes:
                watch.rec.warn(note)
            outcome = _attend(watcher, argv, env, duration_s, opts.auto)
            if outcome.interrupted:
                raise KeyboardInterrupt  # the manifest says so; the summary is written all the same
    except KeyboardInterrupt:
        interrupted = True
    except CannotStart:
        _discard(opts.out_dir, existed)
        raise
    if argv and outcome.exit_code is not None:
        return outcome.exit_code, watch
    return (130 if interrupted else 0), watch


def _attend(watcher: Watcher, argv: list[str], env: dict, duration_s: float | None, auto: bool = True) -> child.Outcome:
    watch = watcher.watch
    if not argv:
        return child.Outcome(None, interrupted=True) if watch.interrupted else child.wait(None, duration_s)
    record = watch.manifest["child"] = {
        "argv": argv,
        "pid": None,
        "exit_code": None,
        "signal": None,
        "still_running": False,
    }
    if watch.interrupted:  # while the peaks were measured: the command is not started
        return child.Outcome(None, interrupted=True)
    env[markwriter.ENV] = str(watch.marks_path.resolve())
    watch.manifest["auto"] = hook = hookenv.prepare(env, auto)
    try:
        outcome, left = _spawn_and_wait(argv, env, lambda pid: (record.__setitem__("pid", pid), watcher.track(pid)))
    finally:
        hookenv.release(hook)
    record.update(exit_code=outcome.exit_code, signal=outcome.signal_name, still_running=outcome.exit_code is None)
    if left:
        record["left_running"] = left
        watch.rec.warn(child.left_running_line(left))
    return outcome


def _spawn_and_wait(argv: list[str], env: dict, started=lambda pid: None) -> tuple[child.Outcome, list[dict]]:
    """Start argv, wait for it (inside held_signals), and name what it left running when it exited."""
    ours = set(child.children())
    adopting = child.subreaper(True)
    try:
        try:
            pid = child.spawn(argv, env)
        except OSError as err:
            raise CannotStart(
                127 if isinstance(err, FileNotFoundError) else 126,
                f"{argv[0]} could not be started: {err.strerror or err}",
            ) from None
        started(pid)
        outcome = child.wait(pid)
        left = child.left_running(ours) if adopting and outcome.exit_code is not None else []
    finally:
        if adopting:
            child.subreaper(False)
    return outcome, left


def _discard(out_dir: Path, existed: bool) -> None:
    """Remove what a watch wrote into out_dir (new, or empty before it: check_writable saw to that)."""
    if not existed:
        shutil.rmtree(out_dir, ignore_errors=True)
        return
    for path in out_dir.iterdir():
        shutil.rmtree(path) if path.is_dir() else path.unlink()


def resolve_gpus(device: int | None, all_gpus: bool, env: dict) -> tuple[list, str | None]:
    """The GPUs to sample and, where the mapping was guessed, a note; LookupError (one sentence) where
    there is no GPU to watch (the caller has made sure NVML has a driver)."""
    from gpubench.record import gpus

    if device is not None or all_gpus:
        try:
            return gpus.resolve(device or 0, all_gpus)[1], None
        except (IndexError, gpus.CudaUnavailable) as err:
            raise LookupError(f"--device {device or 0}: {err}") from None
    found, note = gpus.visible_under(env)
    if not found:
        hidden = env.get("CUDA_VISIBLE_DEVICES")
        raise NoGpu(
            f"CUDA_VISIBLE_DEVICES={hidden!r} leaves the command no GPU to watch"
            if hidden is not None
            else "the driver lists no GPU"
        )
    return found, note


def cmd(
    config: RecordingConfig,
    cmd: list[str],
    duration_s: float | None = None,
    dtype: str = "bf16",
    metrics_port: int | None = None,
    auto: bool = True,
    every_s: float = 60.0,
    quiet: bool = False,
) -> int:
    """`gpubench watch`: the command after `--` (or none, with duration_s), recorded as `config` says; the live
    rows said as it runs (gpubench.job.speak) unless quiet."""
    from gpubench.read.summary import TRIM_S
    from gpubench.record.preflight import check_out
    from gpubench.usage import UsageError

    argv = list(cmd[1:] if cmd[:1] == ["--"] else cmd)
    if argv and duration_s is not None:
        raise UsageError("--duration is for watching without a command; a command is watched until it exits")
    if not argv and duration_s is None:
        raise UsageError(
            "give the command to watch after --, as in `gpubench watch -- python train.py`, "
            "or --duration S to record whatever runs on the GPUs for S seconds"
        )
    if duration_s is not None and duration_s <= TRIM_S:
        raise UsageError(f"--duration must be longer than the {TRIM_S:g} s that each phase's summary leaves out")
    env = dict(os.environ)
    if argv and (problem := child.cannot_start(argv, env)):
        print(f"gpubench watch: {visible(problem[1])}", file=sys.stderr)
        return problem[0]
    if (lost := lost_cwd(config.out if argv else None)) is not None:
        if not argv:  # nothing of the user's runs in attach mode: refusing loses nothing
            raise UsageError("the current directory no longer exists: cd into one that does, and watch from there")
        return run_unrecorded(argv, env, f"{lost}; an absolute --out records it")
    check_out(config.out)
    endpoint = serve_metrics(metrics_port, UsageError)  # a port in use is said before anything runs
    try:
        voice = dict(speak=speak.choose(quiet, env), every_s=every_s)
        return _prepare_and_run(config, argv, env, endpoint, duration_s, dtype, auto, voice)
    finally:
        if endpoint is not None:
            endpoint.close()


def lost_cwd(out: Path | None) -> str | None:
    """Why the run cannot be written where the current directory was deleted and the run directory would lie
    in it (a relative --out, or the default under results/): no entry can be made in a deleted directory.
    None where the directory exists or --out is absolute: the job itself runs in a deleted directory, as it
    would alone."""
    try:
        os.getcwd()
        return None
    except FileNotFoundError:
        if out is not None and out.is_absolute():
            return None
    return f"the current directory no longer exists, and the run directory {out or 'results/'} would lie in it"


def serve_metrics(port: int | None, error=ValueError):
    """The metrics endpoint bound to `port` (None: none); `error` with one sentence where it cannot be."""
    if port is None:
        return None
    from gpubench.job.exporter import CannotServe, Endpoint

    try:
        return Endpoint(port)
    except CannotServe as err:
        raise error(str(err)) from None


def _prepare_and_run(config: RecordingConfig, argv, env, endpoint, duration_s, dtype, auto, voice) -> int:
    from gpubench.record.preflight import check_out, require_gpu
    from gpubench.record.rundir import default_run_dir
    from gpubench.usage import UsageError

    if not argv:
        require_gpu("watch")  # attach mode has nothing to do without a GPU
    try:
        nvml.device_count()
        gpus, note = resolve_gpus(config.device, config.all_gpus, env)
    except nvml.GpuUnavailable as err:  # a CPU node: the job comes first
        return run_unrecorded(argv, env, str(err).split(";")[0])
    except NoGpu as err:
        return run_unrecorded(argv, env, str(err))
    except LookupError as err:
        raise UsageError(str(err)) from None
    info = nvml.device_info(gpus[0].nvml_index)
    out = config.out or default_run_dir(info["name"], kind="watch")
    if config.out is None:
        check_out(out)
    attach_marks = Path(env[markwriter.ENV]) if not argv and env.get(markwriter.ENV) else None
    opts = WatchOptions(
        out, gpus, info, config, dtype=dtype, marks_path=attach_marks, metrics=endpoint, auto=auto, **voice
    )
    return _run_and_show(opts, argv, duration_s, [note] if note else [])


def run_unrecorded(argv: list[str], env: dict, why: str) -> int:
    """The command alone, where there is no GPU to record (a CPU node, a job that hides every GPU): said once,
    then run as a watch runs it (output untouched, signals passed on) and its exit code returned. A user who
    puts `gpubench watch --` in front of a launcher never loses the job to it."""
    print(
        f"gpubench watch: nothing can be recorded here ({visible(why)}): the command runs unrecorded", file=sys.stderr
    )
    try:
        with child.held_signals():
            outcome, left = _spawn_and_wait(argv, env)
    except CannotStart as err:
        print(f"gpubench watch: {visible(err)}", file=sys.stderr)
        return err.code
    if left:
        print(f"gpubench watch: {visible(child.left_running_line(left))}", file=sys.stderr)
    return outcome.exit_code if outcome.exit_code is not None else 130


def _run_and_show(opts: WatchOptions, argv, duration_s, notes) -> int:
    from gpubench.show.console import ConsoleReporter, make_console, say

    reporter = ConsoleReporter(make_console(stderr=True))
    names = ", ".join(f"GPU {g.nvml_index} ({g.name})" for g in opts.gpus)
    what = shlex.join(argv) if argv else f"{names} for {duration_s:g} s"
    say(
        reporter.console,
        f"gpubench watch: recording {names} into {opts.out_dir} while {what} runs"
        if argv
        else f"gpubench watch: recording {what} into {opts.out_dir}",
    )
    if opts.metrics is not None:
        say(reporter.console, f"gpubench watch: serving the ladder and the job's MFU at {opts.metrics.url}")
    try:
        code, watch = run(opts, argv, duration_s, reporter, notes)
    except CannotStart as err:
        print(f"gpubench watch: {visible(err)}", file=sys.stderr)
        return err.code
    show(watch, reporter.console)
    return code
