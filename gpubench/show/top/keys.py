"""The terminal while the live view runs: keys one at a time, the frame redrawn in place, all put back after.

Only what every terminal since the VT100 knows: the alternate screen (the shell's lines come back as they
were on exit), cursor home, erase to the end of the line and below. So it works in tmux, screen and over
SSH with nothing beyond the standard library. Each frame is written whole from the top left, every line
erased to its end, so a shorter frame leaves nothing of the one before; no line is longer than the terminal
is wide, so none wraps and shifts the rest.
"""

from __future__ import annotations

import os
import select
import signal
import sys
import termios
import tty

ENTER = "\x1b[?1049h\x1b[?25l"  # the alternate screen; the cursor hidden
LEAVE = "\x1b[?25h\x1b[?1049l"
HOME, ERASE_LINE, ERASE_BELOW = "\x1b[H", "\x1b[K", "\x1b[J"
RESIZED = "resized"  # what key() returns when the terminal changed size: redraw


class Screen:
    """A context: cbreak input (keys without Enter, not echoed; Ctrl-C still interrupts) and the alternate
    screen while inside, the terminal's own settings back on leaving, however the block ends."""

    def __init__(self, stdin=None, stdout=None):
        self.fd = (stdin or sys.stdin).fileno()
        self.out = stdout or sys.stdout
        self._saved = None
        self._wake: tuple[int, int] | None = None
        self._winch = self._tstp = None

    def __enter__(self) -> Screen:
        self._saved = termios.tcgetattr(self.fd)
        # SIGWINCH writes to a pipe that key() waits on beside the keys: a resize redraws at once
        self._wake = os.pipe()
        os.set_blocking(self._wake[1], False)
        self._winch = signal.signal(signal.SIGWINCH, self._resized)
        self._tstp = signal.signal(signal.SIGTSTP, self._suspend)
        self._take()
        return self

    def _take(self) -> None:
        tty.setcbreak(self.fd)
        self.out.write(ENTER)
        self.out.flush()

    def _give_back(self) -> None:
        try:
            self.out.write(LEAVE)
            self.out.flush()
        finally:
            termios.tcsetattr(self.fd, termios.TCSADRAIN, self._saved)

    def _resized(self, signum=None, frame=None) -> None:
        try:
            os.write(self._wake[1], b"r")
        except OSError:  # the pipe is full: a redraw is already due
            pass

    def _suspend(self, signum, frame) -> None:
        """Ctrl-Z: the shell gets its screen and settings back while top is stopped; `fg` redraws the frame."""
        self._give_back()
        signal.signal(signal.SIGTSTP, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGTSTP)  # stops here until continued
        signal.signal(signal.SIGTSTP, self._suspend)
        self._take()
        self._resized()

    def __exit__(self, *exc) -> None:
        try:
            self._give_back()
        finally:
            signal.signal(signal.SIGWINCH, self._winch)
            signal.signal(signal.SIGTSTP, self._tstp)
            for end in self._wake:
                os.close(end)

    def size(self) -> tuple[int, int]:
        """(columns, rows) of the terminal now; 80 by 24 where it cannot say."""
        try:
            size = os.get_terminal_size(self.out.fileno())
            return size.columns, size.lines
        except (OSError, ValueError, AttributeError):
            return 80, 24

    def draw(self, lines: list[str]) -> None:
        self.out.write(HOME + f"{ERASE_LINE}\n".join(lines) + ERASE_LINE + ERASE_BELOW)
        self.out.flush()

    def key(self, timeout_s: float) -> str | None:
        """The next key pressed within timeout_s, RESIZED, "" for a key with no meaning here (an arrow), or
        None when the time passed with nothing. A terminal gone (end of input) reads as q."""
        ready = select.select([self.fd, self._wake[0]], [], [], max(0.0, timeout_s))[0]
        if self._wake[0] in ready:
            os.read(self._wake[0], 64)
            return RESIZED
        if self.fd not in ready:
            return None
        data = os.read(self.fd, 64)
        if not data:
            return "q"
        text = data.decode(errors="ignore")
        return "" if not text or text.startswith("\x1b") else text[0]
