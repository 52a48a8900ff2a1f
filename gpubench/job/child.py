"""The watched command as a child process: its output untouched, signals passed on, its exit code kept.

The child shares gpubench's process group and terminal, so it reads the terminal as it would alone,
and a Ctrl-C typed there reaches it straight from the terminal, which signals the whole foreground
group. A SIGINT sent to gpubench alone (`kill -INT`, a script, a scheduler) is passed on to the
child. Only the signal's origin tells the two apart (siginfo's si_code: the kernel for a terminal's
Ctrl-C, SI_USER for kill), and only a blocked signal taken with sigtimedwait shows it. So SIGINT is
held (blocked) from before the recording starts its threads, which inherit the mask, to after it has
finished, and the waiting main thread takes it. SIGTERM, which no terminal sends, is always passed on.

gpubench waits for the child to exit, however long its shutdown takes; a third Ctrl-C stops waiting
and leaves the child running. The exit code is the child's, or 128 + N where signal N ended it.

A job can fork a process and exit without waiting for it (a daemon, a server started in the background, a
worker a launcher forgot). While the child runs, gpubench is its subreaper (Linux's
PR_SET_CHILD_SUBREAPER): whatever the job leaves behind, however many forks deep, is handed to gpubench
instead of to init, so that when the child exits gpubench can name what is still running.
"""

from __future__ import annotations

import ctypes
import os
import shutil
import signal
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

SI_KERNEL = 0x80  # Linux's si_code for a signal the kernel raised, as a terminal's Ctrl-C is
HELD = frozenset({signal.SIGINT, signal.SIGCHLD})  # SIGCHLD too: the wait wakes as soon as the child exits
GIVE_UP_AFTER = 3  # Ctrl-Cs after which gpubench stops waiting for a child that ignores them
POLL_S = 0.25
PR_SET_CHILD_SUBREAPER = 36  # linux/prctl.h
SHOWN = 3  # processes left running named in the line gpubench prints (the manifest lists them all)
ARGV_MAX = 200  # characters of a left process's command line kept
GRACE_S = 1.0  # how long processes the job leaves behind may take to notice and exit before they are named


@dataclass
class Outcome:
    exit_code: int | None  # None: no child, or one still running
    interrupted: bool = False  # a SIGINT or SIGTERM arrived while waiting
    signal_name: str | None = None  # the signal that ended the child


def cannot_start(argv: list[str], env: dict) -> tuple[int, str] | None:
    """(exit code, one sentence) where `argv` cannot be run, as a shell answers: 127 not found, 126 not runnable."""
    name = argv[0]
    path = name if "/" in name else shutil.which(name, path=env.get("PATH", os.defpath))
    if path is None:
        return 127, f"{name}: command not found on PATH"
    if not os.path.exists(path):
        return 127, f"{name}: no such file"
    if os.path.isdir(path):
        return 126, f"{name} is a directory, not a command"
    if not os.access(path, os.X_OK):
        return 126, f"{name} is not executable (chmod +x it, or run it through its interpreter)"
    return None


@contextmanager
def held_signals():
    """Block SIGINT and SIGCHLD in this thread and in every thread started meanwhile; wait() takes them."""
    old = signal.pthread_sigmask(signal.SIG_BLOCK, HELD)
    try:
        yield
    finally:
        while signal.sigtimedwait(HELD, 0) is not None:
            pass  # a Ctrl-C while the recording finished is ignored, as Recording ignores it
        signal.pthread_sigmask(signal.SIG_SETMASK, old)


def spawn(argv: list[str], env: dict, stderr_path: str | None = None) -> int:
    """Start argv with this process's stdio (or stderr into a file), its signals unblocked and SIGPIPE
    back to default, as a shell would; OSError where it cannot be started."""
    into_file = os.O_WRONLY | os.O_CREAT | os.O_TRUNC
    actions = [(os.POSIX_SPAWN_OPEN, 2, stderr_path, into_file, 0o600)] if stderr_path else []
    return os.posix_spawnp(
        argv[0], argv, env, file_actions=actions, setsigmask=(), setsigdef=(signal.SIGPIPE, signal.SIGXFSZ)
    )


def exit_code(status: int) -> tuple[int, str | None]:
    code = os.waitstatus_to_exitcode(status)
    return (128 - code, signal.Signals(-code).name) if code < 0 else (code, None)


def wait(pid: int | None, duration_s: float | None = None) -> Outcome:
    """Wait for child `pid` to exit, passing SIGINT and SIGTERM on to it; without a child, for duration_s
    seconds (None: until a signal) or the first SIGINT or SIGTERM. Call inside held_signals()."""
    outcome = Outcome(None)
    interrupts = 0

    def on_term(signum, frame):
        outcome.interrupted = True
        if pid is not None:
            os.kill(pid, signal.SIGTERM)

    main = threading.current_thread() is threading.main_thread()  # only it may set a handler
    previous = signal.signal(signal.SIGTERM, on_term) if main else None
    deadline = time.monotonic() + duration_s if duration_s is not None else None
    try:
        while True:
            if pid is not None:
                done, status = os.waitpid(pid, os.WNOHANG)
                if done:
                    outcome.exit_code, outcome.signal_name = exit_code(status)
                    return outcome
            elif outcome.interrupted or (deadline is not None and time.monotonic() >= deadline):
                return outcome
            timeout = POLL_S if deadline is None else max(0.0, min(POLL_S, deadline - time.monotonic()))
            info = signal.sigtimedwait(HELD, timeout)
            if info is None or info.si_signo != signal.SIGINT:
                continue
            outcome.interrupted = True
            interrupts += 1
            if pid is not None and info.si_code != SI_KERNEL:  # the terminal already told the child
                os.kill(pid, signal.SIGINT)
            if pid is not None and interrupts >= GIVE_UP_AFTER:
                return outcome
    finally:
        if main:
            signal.signal(signal.SIGTERM, previous)


def subreaper(on: bool) -> bool:
    """Make this process the one that adopts the orphans of its descendants (on), or stop; False where the
    system cannot (not Linux)."""
    try:
        return ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, int(on), 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def children(proc: Path = Path("/proc")) -> dict[int, str]:
    """This process's children now: pid -> state (R, S, Z, ...), from /proc/<pid>/stat."""
    from gpubench.job.contexts import stats

    me = str(os.getpid())
    return {pid: f[0] for pid, f in stats(proc) if len(f) > 1 and f[1] == me}


def left_running(ours, proc: Path = Path("/proc"), grace_s: float = GRACE_S) -> list[dict]:
    """The processes the job left behind that still run grace_s after it exited (a worker that notices its
    parent is gone, and exits, is no process left running): children this process adopted as subreaper,
    other than ours (those it had before the job started: its own sampling processes). Those that exited
    are reaped here (nobody else waits for them)."""
    deadline = time.monotonic() + grace_s
    while True:
        running = []
        for pid, state in sorted(children(proc).items()):
            if pid in ours:
                continue
            if state == "Z":
                try:
                    os.waitpid(pid, os.WNOHANG)
                except ChildProcessError:
                    pass
                continue
            running.append(pid)
        if not running or time.monotonic() >= deadline:
            break
        time.sleep(0.05)
    out = []
    for pid in running:
        try:
            argv = (proc / str(pid) / "cmdline").read_bytes().rstrip(b"\0").split(b"\0")
        except OSError:
            continue  # gone meanwhile
        out.append({"pid": pid, "argv": [a.decode(errors="replace")[:ARGV_MAX] for a in argv if a][:20]})
    return out


def left_running_line(left: list[dict]) -> str:
    """One sentence on the processes the job left running."""
    import shlex

    named = "; ".join(
        f"pid {p.get('pid')}: {shlex.join(str(a) for a in p.get('argv') or [])[:ARGV_MAX]}" for p in left[:SHOWN]
    )
    more = f"; and {len(left) - SHOWN} more" if len(left) > SHOWN else ""
    return (
        f"the command left {len(left)} process{'es' if len(left) > 1 else ''} running when it exited ({named}"
        f"{more}); gpubench did not watch {'them' if len(left) > 1 else 'it'} after that"
    )
