"""The sampler thread: on a fixed schedule, read every source and write one row per GPU.

Each row carries monotonic and wall time, the GPU index, the phase (the scenario running, or
"gap"/"idle"), and every metric column (NaN where a source has no value). Rows go to the sink as
they are made, so an interrupted run keeps what it recorded. A source that raises mid-run is
reported once and its columns stay NaN from then on: a failure is never recorded as zeros.
"""

from __future__ import annotations

import math
import threading
import time
from typing import Callable

from gpubench.metrics import COLUMNS
from gpubench.sources import Source, SourceUnavailable

DEFAULT_INTERVAL_S = 0.1  # GPM refreshes about every 100 ms: polling faster only repeats values


def open_sources(sources: list[Source], gpus: list[int]) -> tuple[list[Source], dict[str, str]]:
    """Open each source; return those that opened and, for the rest, why not (one sentence each)."""
    opened, unavailable = [], {}
    for source in sources:
        try:
            source.open(gpus)
        except SourceUnavailable as err:
            unavailable[source.name] = str(err)
        else:
            opened.append(source)
    return opened, unavailable


class Sampler:
    def __init__(self, sources: list[Source], gpus: list[int], interval_s: float = DEFAULT_INTERVAL_S,
                 sink: Callable[[dict], None] | None = None, clock=time.monotonic, wall_clock=time.time,
                 on_failure: Callable[[str, str], None] | None = None):
        if interval_s <= 0:
            raise ValueError("the sampling interval must be positive")
        self.sources = list(sources)
        self.gpus = list(gpus)
        self.interval_s = interval_s
        present = {c for s in self.sources for c in s.columns}
        self.columns = tuple(c for c in COLUMNS if c in present)
        self.failures: list[dict] = []
        self.rows: list[dict] = []
        self.sink = sink  # called with each row as it is made (the runner streams rows to disk)
        self._clock = clock
        self._wall_clock = wall_clock
        self._on_failure = on_failure
        self._failed: set[str] = set()
        self._phase = "idle"
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._wait = self._stop.wait  # tests swap in a fake that advances a fake clock

    @property
    def phase(self) -> str:
        with self._lock:
            return self._phase

    def set_phase(self, phase: str) -> None:
        with self._lock:
            self._phase = phase

    def sample_once(self) -> list[dict]:
        t_mono, t_wall = self._clock(), self._wall_clock()
        phase = self.phase
        merged: dict[int, dict[str, float]] = {g: {} for g in self.gpus}
        for source in self.sources:
            if source.name in self._failed:
                continue
            try:
                values = source.read()
            except Exception as err:  # any failure of a source is reported, never turned into zeros
                self._failed.add(source.name)
                failure = {"source": source.name, "t_mono_s": t_mono, "error": f"{type(err).__name__}: {err}"}
                self.failures.append(failure)
                if self._on_failure:
                    self._on_failure(source.name, failure["error"])
                continue
            for g in self.gpus:
                merged[g].update(values.get(g, {}))
        rows = []
        for g in self.gpus:
            row = {"t_mono_s": t_mono, "t_wall": t_wall, "gpu": g, "phase": phase}
            row.update({c: merged[g].get(c, math.nan) for c in self.columns})
            rows.append(row)
        with self._lock:
            self.rows.extend(rows)
        if self.sink:
            for row in rows:
                self.sink(row)
        return rows

    def _run(self) -> None:
        next_t = self._clock()
        while not self._stop.is_set():
            self.sample_once()
            # A fixed grid: the next tick is due one interval after the last one was due, not after
            # the read finished, so the schedule does not drift. Ticks missed while a read was slow
            # are skipped rather than made up in a burst.
            next_t += self.interval_s
            now = self._clock()
            if next_t < now:
                next_t += math.ceil((now - next_t) / self.interval_s) * self.interval_s
            self._wait(next_t - now)

    def start(self) -> "Sampler":
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="gpubench-sampler", daemon=True)
            self._thread.start()
        return self

    def stop(self) -> None:
        """Stop the thread; safe to call twice and from a signal handler's aftermath."""
        self._stop.set()
        thread, self._thread = self._thread, None
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout=5)

    def rows_snapshot(self) -> list[dict]:
        with self._lock:
            return list(self.rows)

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()
