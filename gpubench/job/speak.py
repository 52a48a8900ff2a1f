"""A watch speaks as it goes: while the job runs, the current phase's live rows (gpubench.job.live: the
summary's own code over the last window), in a status area at the bottom of the terminal, or as lines in a log
(gpubench.job.liveline says what they hold).

Which: none with --quiet; lines, one each --every seconds over a window as long (WINDOW_S at least,
LONGEST_WINDOW_S at most), where gpubench's stderr is no terminal (a scheduler's job log, a pipe), where CI is
set, or where TERM is unset or dumb; else the status area, drawn every REFRESH_S over the endpoint's window.

How the status area keeps off the job's output. The job writes straight to the terminal gpubench runs in (its
stdout and stderr are gpubench's own, untouched: gpubench.job.child), so gpubench can know neither where the
job's lines are nor when the next one comes. Two things make drawing beside them safe:

- a draw never lands inside a write of the job's: each draw is one write() of its whole sequence, and the
  terminal driver holds a terminal's write lock for a whole write() call, so each write of the job's comes
  wholly before or wholly after it; inside it the job's cursor (position, colours) is saved first and
  restored last (DECSC, DECRC), so the job goes on where it was;
- the job's lines never land in the area: the terminal's scroll region (DECSTBM) ends above it, so the job's
  lines scroll inside the region, and those that leave its top go to the scrollback as a full screen's do (the
  region starts at the first line: tmux, xterm and VTE keep them). apt draws its progress bar below dpkg's
  output this way.

Each draw sets the whole arrangement again from nothing: the full screen's margins, then as many line feeds
from the job's cursor as the area has lines (IND, which keeps the column: a cursor at the bottom scrolls the
screen up by as much as the area needs, a cursor higher up only moves) and as many lines back up, then the
region, then the area's lines. So the job's cursor is above the area after every draw, and a terminal resized,
or a job that reset the margins (a full-screen program run from it, `reset`), is set right at the next draw
without a line of the job's covered. Rejected: printing status lines among the job's, which can cut one of its
lines in two (a progress bar writes a carriage return and no newline) and cannot tell a quiet moment from
outside; a pseudo-terminal between the job and the terminal, which would see every byte but changes what the
job runs under (its terminal, its process group, what Ctrl-C and Ctrl-Z reach), which a watch must not.

A job that draws the whole screen itself (curses, a scroll region of its own) shares the bottom lines with the
area: --quiet. Nothing is drawn while gpubench is not in the terminal's foreground process group (started in
the background with &, or a job that took the terminal for a shell of its own), nor on a terminal with fewer
than MIN_JOB_ROWS rows left for the job.

The terminal is given back on every way out: the watch's end, whatever ended it (the job's exit or its
killing, Ctrl-C, a signal to gpubench, an error of gpubench's: Watcher.finish silences the voice first, and
an exit that skips it runs atexit's), and Ctrl-Z (the margins given back before gpubench stops; the next
draw after `fg` sets them again). Only a kill -9 of gpubench leaves the margins set: `reset` gives them back.
"""

from __future__ import annotations

import atexit
import os
import signal
import stat
import threading
import time

from gpubench.job import liveline
from gpubench.job.live import WINDOW_S

REFRESH_S = 1.0  # the status area's refresh
LONGEST_WINDOW_S = 300.0  # a log line's window at most: the rows kept for it stay few
MIN_JOB_ROWS = 5  # rows the job keeps at least: a smaller terminal gets a one-line area, or none
SAVE, RESTORE, FULL, PLAIN = "\x1b7", "\x1b8", "\x1b[r", "\x1b[0m"


def add_options(parser) -> None:
    """`gpubench watch`'s options of the live rows."""
    from gpubench.usage import positive

    parser.add_argument(
        "--every",
        type=positive,
        default=60.0,
        metavar="S",
        help="where stderr is no terminal (a log file, CI): a live line per GPU (one for all above "
        f"{liveline.COMPACT_OVER}) every S seconds (default 60), over the last S seconds of the "
        f"current phase ({WINDOW_S:g} at least, {LONGEST_WINDOW_S:g} at most); on a terminal the "
        f"live rows stay in a status area at the bottom, refreshed every {REFRESH_S:g} s",
    )
    parser.add_argument("--quiet", action="store_true", help="no live rows while the command runs")


def window_for(every_s: float) -> float:
    """A log line's window: its interval, so that the lines tile the phase, within the endpoint's and 5 min."""
    return min(LONGEST_WINDOW_S, max(WINDOW_S, every_s))


def choose(quiet: bool, env: dict, fd: int = 2) -> str | None:
    """ "area", "lines" or None (see the module's docstring)."""
    if quiet:
        return None
    try:
        tty = os.isatty(fd)
    except OSError:
        return None
    ci = env.get("CI", "").strip().lower() not in ("", "0", "false", "no")
    return "lines" if not tty or ci or env.get("TERM", "") in ("", "dumb") else "area"


def write_all(fd: int, data: bytes) -> None:
    while data:
        data = data[os.write(fd, data) :]


def foreground(fd: int) -> bool:
    """Whether gpubench's process group holds the terminal: drawing is then gpubench's to do."""
    try:
        return os.tcgetpgrp(fd) == os.getpgrp()
    except OSError:
        return False


def ends_a_line(fd: int) -> bool:
    """Whether a file on fd ends with a newline (or is empty); True where that cannot be told (a pipe)."""
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or info.st_size == 0:
            return True
        reader = os.open(f"/proc/self/fd/{fd}", os.O_RDONLY)
        try:
            return os.pread(reader, 1, info.st_size - 1) in (b"\n", b"")
        finally:
            os.close(reader)
    except OSError:
        return True


class Area:
    """The status area at the bottom of the terminal on fd (see the module's docstring)."""

    def __init__(self, fd: int):
        self.fd = fd
        self.rows = 0  # the area's height at the last draw; 0: none drawn
        self.size: tuple[int, int] | None = None

    def draw(self, lines: list[str]) -> None:
        if not foreground(self.fd):
            return
        columns, height = os.get_terminal_size(self.fd)
        k = len(lines) if height - len(lines) >= MIN_JOB_ROWS else 1 if height - 1 >= MIN_JOB_ROWS else 0
        out = [SAVE, FULL, RESTORE]
        if self.rows and ((columns, height) != self.size or k < self.rows):
            out.append("\x1b[J")  # below the job's cursor: where an area of another size or place was
        if k:
            out += ["\x1bD" * k, f"\x1b[{k}A", SAVE, f"\x1b[1;{height - k}r", RESTORE, SAVE, PLAIN]
            out += [
                f"\x1b[{height - k + 1 + i};1H\x1b[2K{liveline.cut(line, columns - 1)}"
                for i, line in enumerate(lines[:k])
            ]
            out.append(RESTORE)
        write_all(self.fd, "".join(out).encode("utf-8", "replace"))
        self.rows, self.size = k, (columns, height)

    def clear(self) -> None:
        """The terminal's own margins back, and the area's lines blank."""
        if not self.rows or not foreground(self.fd):
            return
        _, height = os.get_terminal_size(self.fd)
        lines = "".join(f"\x1b[{height - i};1H\x1b[2K" for i in range(min(self.rows, height)))
        write_all(self.fd, f"{SAVE}{FULL}{RESTORE}{SAVE}{PLAIN}{lines}{RESTORE}".encode())
        self.rows = 0


class Voice(threading.Thread):
    """Says the live rows of `live` in `mode` ("area" or "lines") on fd until stop(); t0 is the watch's start
    on `clock` (the live rows' clock). Nothing it meets reaches the job or the recording: an error ends the
    speaking and is kept in `errors`."""

    def __init__(self, live, gpus: int, every_s: float, mode: str, t0: float, clock=time.monotonic, fd: int = 2):
        super().__init__(name="gpubench-live", daemon=True)
        self.live, self.gpus, self.every_s, self.mode, self.t0, self.clock, self.fd = (
            live,
            gpus,
            every_s,
            mode,
            t0,
            clock,
            fd,
        )
        self.window_s = WINDOW_S if mode == "area" else window_for(every_s)
        self.area = Area(fd) if mode == "area" else None
        self.said = 0  # updates written
        self.errors: list[str] = []
        self._lock = threading.RLock()  # one writer at a time: this thread, Ctrl-Z's handler, stop()
        self._wake = threading.Event()
        self._stopping = False
        self._handlers: dict = {}

    def start(self) -> None:
        if self.area is not None and threading.current_thread() is threading.main_thread():
            for signum, handler in ((signal.SIGTSTP, self._suspend), (signal.SIGWINCH, self._resized)):
                self._handlers[signum] = signal.signal(signum, handler)
        atexit.register(self._give_back)
        super().start()

    def run(self) -> None:
        step = REFRESH_S if self.area is not None else self.every_s
        due = self.clock() if self.area is not None else self.t0 + step  # the area at once: before the job's output
        while True:
            woken = self._wake.wait(max(0.0, due - self.clock()))
            self._wake.clear()
            if self._stopping:
                return
            now = self.clock()
            if now >= due:
                due += step * (int((now - due) // step) + 1)  # an update that came late is not made twice
            elif not (woken and self.area is not None):  # a resized terminal is drawn again at once
                continue
            try:
                self.say()
            except Exception as err:  # noqa: BLE001 -- the job and the recording go on without a voice
                self.errors.append(f"{type(err).__name__}: {err}")
                self._give_back()
                return

    def say(self) -> None:
        snap = self.live.snapshot(self.window_s)
        elapsed = self.clock() - self.t0
        with self._lock:
            if self._stopping:
                return
            if self.area is not None:
                self.area.draw(liveline.area_lines(snap, elapsed, self.window_s, self.gpus))
            else:
                text = "\n".join(liveline.log_lines(snap, elapsed, self.window_s)) + "\n"
                write_all(self.fd, (("" if ends_a_line(self.fd) else "\n") + text).encode("utf-8", "replace"))
            self.said += 1

    def stop(self) -> None:
        """Stop speaking and give the terminal back; safe to call twice."""
        with self._lock:
            self._stopping = True
        self._wake.set()
        if self.is_alive() and threading.current_thread() is not self:
            self.join(10.0)  # a snapshot under way; the terminal is given back whatever it does
        self._give_back()
        if threading.current_thread() is threading.main_thread():  # only the main thread sets handlers
            for signum, previous in self._handlers.items():
                signal.signal(signum, previous)
            self._handlers.clear()
        atexit.unregister(self._give_back)

    def facts(self) -> dict:
        """For the manifest."""
        return {
            "mode": self.mode,
            "every_s": self.every_s if self.area is None else REFRESH_S,
            "window_s": self.window_s,
            "updates": self.said,
            "errors": list(self.errors),
        }

    def _give_back(self) -> None:
        with self._lock:
            self._stopping = True
            if self.area is not None:
                try:
                    self.area.clear()
                except OSError:
                    pass  # the terminal is gone: nothing to give back

    def _suspend(self, signum, frame) -> None:
        """Ctrl-Z: the terminal's margins back before gpubench stops with the job; drawing resumes after fg."""
        with self._lock:
            if self.area is not None:
                try:
                    self.area.clear()
                except OSError:
                    pass
            signal.signal(signal.SIGTSTP, signal.SIG_DFL)
            os.kill(os.getpid(), signal.SIGTSTP)  # stops here until SIGCONT
            signal.signal(signal.SIGTSTP, self._suspend)
        self._wake.set()

    def _resized(self, signum, frame) -> None:
        self._wake.set()  # drawn again at once for the new size
