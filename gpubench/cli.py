"""The gpubench command line: the dispatch to each command of run, watch, top, list, doctor, plot, report and
compare
(their parser: gpubench.options), which lives with its part. Imports are deferred to the command that needs them:
`gpubench list` and `--help` load no GPU library."""

from __future__ import annotations

import argparse
import os
import signal
import sys

from gpubench.options import parser
from gpubench.usage import (
    UsageError,
    interrupted_code,
    interruption,
    say_error,
    sigterm_interrupts,
)


def recording_config(args: argparse.Namespace):
    """The one RecordingConfig of a recording verb, from its options (gpubench.options.add_recording_options
    stores each under its field's name): everything below the command line takes this, never the parsed
    arguments."""
    from dataclasses import fields

    from gpubench.record.config import RecordingConfig

    return RecordingConfig(
        **{
            f.name: getattr(args, f.name)
            for f in fields(RecordingConfig)
            if any(args.command in flag.verbs for flag in f.metadata.get("flags", ()))
        }
    )


def dispatch(args: argparse.Namespace) -> int:
    """The command's function, called with plain values; each lives with its part, imported on use so that
    `gpubench list` and --help load no GPU library. `run` goes to the distributed run where torchrun started
    this process."""
    if args.command == "run":
        from gpubench.ranks.launch import from_env

        suite = dict(names=args.names, duration_s=args.duration, gap_s=args.gap, slow_rank=args.slow_rank)
        launch = from_env()
        if launch is not None:
            from gpubench.ranks.torchrun import run

            return run(recording_config(args), launch, **suite)
        from gpubench.suite.runcmd import run

        return run(recording_config(args), **suite)
    if args.command == "watch":
        from gpubench.job.watchcmd import cmd

        return cmd(
            recording_config(args),
            args.cmd,
            duration_s=args.duration,
            dtype=args.dtype,
            metrics_port=args.metrics_port,
            auto=not args.no_auto,
            every_s=args.every,
            quiet=args.quiet,
        )
    if args.command == "top":
        from gpubench.show.top.cmd import cmd as top

        return top(interval_s=args.interval, once=args.once, as_json=args.json, sort=args.sort, loop=args.loop)
    if args.command == "list":
        from gpubench.suite.runcmd import list_scenarios

        return list_scenarios()
    if args.command == "doctor":
        from gpubench.record.doctor import cmd

        return cmd()
    if args.command == "compare":
        from gpubench.show.comparecmd import cmd

        return cmd(args.run_dirs, args.out)
    from gpubench.job.running import so_far  # a watch still running: its phases so far
    from gpubench.show import render

    return getattr(render, args.command)(args.run_dir, args.out, summarize=so_far)  # plot, report


def main(argv: list[str] | None = None) -> int:
    p = parser()
    args = _parsed(p, argv)
    if args.command is None:
        p.print_help()
        return 2
    stdout = sys.stdout
    sys.stdout = Stdout(stdout)
    try:
        with sigterm_interrupts():
            if args.command in NEED_CWD:
                _check_cwd()
            code = dispatch(args)
            sys.stdout.flush()  # a reader gone away (`gpubench list | head -1`) is found here, not at exit
        return code
    except UsageError as err:
        from gpubench.ranks.launch import is_quiet_rank

        if not is_quiet_rank(os.environ):  # under torchrun rank 0 speaks for every rank
            say_error(args.command, err)
        return 2
    except KeyboardInterrupt as err:  # what a command does not catch itself: each writes whole files or none
        say_error(args.command, f"interrupted by {interruption(err)}; no file was left half-written")
        return interrupted_code(err)
    except BrokenPipeError:
        _quiet_stdout(stdout)
        return 128 + signal.SIGPIPE  # as a command that SIGPIPE ended: `head` has what it asked for
    except OutputFailed as err:
        _quiet_stdout(stdout)
        say_error(args.command, f"cannot write to standard output: {err}")
        return 2
    finally:
        sys.stdout = stdout


NEED_CWD = ("run", "plot", "report", "compare")  # relative paths, and the default run directory, start from it


def _check_cwd() -> None:
    try:
        os.getcwd()
    except FileNotFoundError:
        raise UsageError(
            "the current directory no longer exists (it was deleted or moved away): cd into one "
            "that does, and run gpubench again"
        ) from None


class OutputFailed(Exception):
    """Standard output cannot take what a command prints: closed (`>&-`), a full disk (`> /dev/full`)."""


class Stdout:
    """sys.stdout while a command runs: a write that cannot be made ends the command in one sentence instead
    of a traceback, and a character the output's encoding lacks (PYTHONIOENCODING=ascii and a path with ü)
    is written as an escape. A broken pipe passes as it is: `gpubench list | head -1` is no error."""

    def __init__(self, stream):
        self.stream = stream

    def _do(self, what, *args):
        if self.stream is None:
            raise OutputFailed("it is closed")
        try:
            return getattr(self.stream, what)(*args)
        except BrokenPipeError:
            raise
        except UnicodeEncodeError:
            encoding = getattr(self.stream, "encoding", None) or "ascii"
            return self.stream.write(args[0].encode(encoding, "backslashreplace").decode(encoding))
        except (OSError, ValueError) as err:  # ValueError: a file closed under it
            raise OutputFailed(getattr(err, "strerror", None) or str(err)) from None

    def write(self, text: str):
        return self._do("write", text)

    def flush(self) -> None:
        if self.stream is not None:
            self._do("flush")

    def __getattr__(self, name):  # fileno, isatty, encoding: as the stream has them
        return getattr(self.stream, name)


def _quiet_stdout(stdout) -> None:
    """Point stdout at /dev/null, so that the flush at exit finds no closed pipe or full disk to complain of."""
    try:
        fd = stdout.fileno()
    except (AttributeError, OSError, ValueError):  # closed, or replaced by something without a file (a test's capture)
        return
    null = os.open(os.devnull, os.O_WRONLY)
    os.dup2(null, fd)
    os.close(null)


def _parsed(p: argparse.ArgumentParser, argv: list[str] | None) -> argparse.Namespace:
    """p.parse_args, with --help and --version printed through Stdout: argparse drops a write that fails, so
    `gpubench --help > /dev/full` would print nothing and exit 0, where a command exits 2 in one sentence."""
    stdout = sys.stdout
    sys.stdout = Stdout(stdout)
    try:
        try:
            return p.parse_args(argv)
        except SystemExit as done:
            if not done.code:  # help or version printed: it is written only once it is flushed
                sys.stdout.flush()
            raise
    except OutputFailed as err:
        _quiet_stdout(stdout)
        print(f"gpubench: error: cannot write to standard output: {err}", file=sys.stderr)  # no command yet
        raise SystemExit(2) from None
    except BrokenPipeError:  # `gpubench --help | head -1`, as main() ends `list | head -1`
        _quiet_stdout(stdout)
        raise SystemExit(128 + signal.SIGPIPE) from None
    finally:
        sys.stdout = stdout
