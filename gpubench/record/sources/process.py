"""A source fed by a long-running command (dcgmi dmon, nvidia-smi -lms) that prints one line per GPU.

A reader thread parses the command's lines as they come and keeps the latest values of each GPU with
the time they arrived; the sampler reads them on its own schedule. A value older than two intervals is
reported missing, not current. If the command dies, the next read raises, so the sampler reports the
failure instead of recording stale numbers.
"""

from __future__ import annotations

import math
import os
import shutil
import signal
import subprocess
import threading
import time

from . import Source, SourceUnavailable


class SourceFailed(RuntimeError):
    """A source that had been running stopped giving values."""


class ProcessSource(Source):
    executable = ""
    missing_hint = ""
    startup_s = 1.0  # how long open() waits to see the first value or an early exit

    def __init__(self, interval_ms: int = 100, clock=time.monotonic):
        self.interval_ms = interval_ms
        self._clock = clock
        self._proc: subprocess.Popen | None = None
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self._latest: dict[int, tuple[float, dict[str, float]]] = {}
        self._other_lines: list[str] = []

    @property
    def stale_after_s(self) -> float:
        return 2 * self.interval_ms / 1000

    # subclasses: the command line, and a parser with feed(line) -> (gpu, values) | None and noise(line)
    def command(self, exe: str, gpus: list[int]) -> list[str]:
        raise NotImplementedError

    def make_parser(self):
        raise NotImplementedError

    def open(self, gpus):
        exe = shutil.which(self.executable)
        if exe is None:
            raise SourceUnavailable(f"`{self.executable}` is not on PATH: {self.missing_hint}")
        self._proc = subprocess.Popen(
            self.command(exe, gpus),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            bufsize=1,
            start_new_session=True,
        )  # its own group: close() ends it and its children
        self._thread = threading.Thread(
            target=self._pump, args=(self.make_parser(),), name=f"gpubench-{self.name}", daemon=True
        )
        self._thread.start()
        deadline = time.monotonic() + self.startup_s + 3 * self.interval_ms / 1000
        while time.monotonic() < deadline:
            with self._lock:
                if self._latest:
                    return
            if self._proc.poll() is not None:
                self._thread.join(timeout=1)
                why = " ".join(self._other_lines[-2:]).strip() or f"exit code {self._proc.returncode}"
                self.close()
                raise SourceUnavailable(f"`{self.executable}` stopped at once: {why}")
            time.sleep(0.02)
        self.close()
        raise SourceUnavailable(f"`{self.executable}` printed no values within {self.startup_s:.0f} s")

    def _pump(self, parser):
        assert self._proc is not None and self._proc.stdout is not None
        for line in self._proc.stdout:
            parsed = parser.feed(line)
            now = self._clock()
            with self._lock:
                if parsed is not None:
                    gpu, values = parsed
                    merged = dict(self._latest.get(gpu, (now, {}))[1], **values)
                    self._latest[gpu] = (now, merged)
                elif line.strip() and not parser.noise(line):
                    self._other_lines = (self._other_lines + [line.strip()])[-10:]

    def read(self):
        if self._proc is not None and self._proc.poll() is not None:
            raise SourceFailed(f"`{self.executable}` exited with code {self._proc.returncode}")
        now = self._clock()
        with self._lock:
            return {
                g: dict(v) if now - t <= self.stale_after_s else {c: math.nan for c in v}
                for g, (t, v) in self._latest.items()
            }

    def close(self):
        proc, self._proc = self._proc, None
        if proc is not None:
            for sig in (signal.SIGTERM, signal.SIGKILL):
                try:
                    os.killpg(proc.pid, sig)
                except ProcessLookupError:
                    break
                try:
                    proc.wait(timeout=2)
                    break
                except subprocess.TimeoutExpired:
                    continue
        if proc is not None and proc.stdout is not None:
            proc.stdout.close()
        if self._thread is not None:
            self._thread.join(timeout=2)
            self._thread = None


class LineParser:
    """What every parser of a process source's output provides."""

    def feed(self, line: str):
        """(gpu, {column: value}) for a line of values, else None."""
        return None

    def noise(self, line: str) -> bool:
        """A line the command prints routinely (a header) that says nothing about an error."""
        return False


def number(text: str) -> float:
    """Parse one printed value; N/A, [Not Supported] and the like are missing, never 0."""
    text = text.strip().strip("[]")
    try:
        return float(text)
    except ValueError:
        return math.nan
