"""The sampler thread: on a fixed schedule, read every source and write one row per GPU.

Each row covers the interval since the previous one (`t_start_s` to `t_end_s`, monotonic clock), the
interval that GPM's and DCGM's values average over, and is labelled with the phase that ran for most
of it, so a row that straddles the start of a scenario is not counted as the scenario. Before anything
runs the phase is "start". Rows go to the sink as they are made, so an interrupted run keeps what it
recorded; only the last `keep_rows` stay in memory. A read that raises leaves that row's values of the
source empty (never zeros) and is reported once; a source that fails DROP_AFTER reads in a row is dropped
for the rest of the recording, and the failures (first, each drop) go to the manifest with their times.
"""

from __future__ import annotations

import math
import threading
import time
from collections import deque
from typing import Callable

from gpubench.metrics import COLUMNS
from gpubench.record.sources import Source
from gpubench.record.sources.policy import DEFAULT_INTERVAL_S

FIRST_PHASE = "start"
DROP_AFTER = 10  # consecutive failed reads of a source (a second at the default interval) before it is dropped


class PhaseLog:
    """When each phase began; which phase covered most of an interval."""

    def __init__(self, t0: float, first: str = FIRST_PHASE):
        self._log: list[tuple[float, str]] = [(t0, first)]

    @property
    def current(self) -> str:
        return self._log[-1][1]

    def set(self, t: float, name: str) -> None:
        self._log.append((t, name))

    def label(self, a: float, b: float) -> str:
        """The phase that covered most of [a, b]; entries wholly before a are dropped as they are passed."""
        while len(self._log) > 1 and self._log[1][0] <= a:
            self._log.pop(0)
        if b <= a:
            return self.current if self._log[-1][0] <= b else self._log[0][1]
        cover: dict[str, float] = {}
        for i, (t, name) in enumerate(self._log):
            end = self._log[i + 1][0] if i + 1 < len(self._log) else b
            lo, hi = max(a, t), min(b, end)
            if hi > lo:
                cover[name] = cover.get(name, 0.0) + hi - lo
        return max(cover, key=cover.get) if cover else self._log[0][1]


class Sampler:
    def __init__(
        self,
        sources: list[Source],
        gpus: list[int],
        interval_s: float = DEFAULT_INTERVAL_S,
        sink: Callable[[dict], None] | None = None,
        clock=time.monotonic,
        wall_clock=time.time,
        on_failure: Callable[[str, str], None] | None = None,
        keep_rows: int | None = None,
        uuids: dict[int, str] | None = None,
    ):
        if not interval_s > 0:
            raise ValueError("the sampling interval must be positive")
        slow = max(sources, key=lambda s: s.min_interval_s, default=None)
        if slow is not None and interval_s < slow.min_interval_s:
            raise ValueError(
                f"the sampling interval {interval_s:g} s is shorter than source {slow.name!r} "
                f"refreshes ({slow.min_interval_s:g} s): rows would repeat its values"
            )
        self.sources = list(sources)
        self.gpus = list(gpus)
        self.uuids = uuids or {}
        self.interval_s = interval_s
        present = {c for s in self.sources for c in s.columns}
        self.columns = tuple(c for c in COLUMNS if c in present)
        self.failures: list[dict] = []
        self.rows: deque = deque(maxlen=keep_rows)
        self.sink = sink  # called with each row as it is made (the recording streams rows to disk)
        self._clock = clock
        self._wall_clock = wall_clock
        self._on_failure = on_failure
        self._failed: set[str] = set()  # dropped
        self._failing: dict[str, int] = {}  # source -> consecutive failed reads
        self._lock = threading.Lock()
        t0 = clock()  # the sources were opened just before: the first row's interval starts here
        self._phases = PhaseLog(t0)
        self._last_t = t0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._wait = self._stop.wait  # tests swap in a fake that advances a fake clock

    @property
    def phase(self) -> str:
        with self._lock:
            return self._phases.current

    def set_phase(self, phase: str) -> None:
        with self._lock:
            self._phases.set(self._clock(), phase)

    def _read_all(self, t_end: float) -> dict[int, dict[str, float]]:
        merged: dict[int, dict[str, float]] = {g: {} for g in self.gpus}
        for source in self.sources:
            if source.name in self._failed:
                continue
            try:
                values = source.read()
            except Exception as err:  # any failure of a source is reported, never turned into zeros
                self._failure(source.name, t_end, f"{type(err).__name__}: {err}")
                continue
            self._failing[source.name] = 0
            for g in self.gpus:
                merged[g].update(values.get(g, {}))
        return merged

    def _failure(self, name: str, t_end: float, error: str) -> None:
        """One failed read: an empty row for that source; said the first time, dropped after DROP_AFTER in a row."""
        count = self._failing[name] = self._failing.get(name, 0) + 1
        first = not any(f["source"] == name for f in self.failures)
        dropped = count >= DROP_AFTER
        if dropped:
            self._failed.add(name)
        if first or dropped:
            self.failures.append(
                {"source": name, "t_end_s": t_end, "error": error, "dropped": dropped, "failed_reads": count}
            )
            if self._on_failure:
                self._on_failure(
                    name,
                    (
                        f"dropped after {count} failed reads in a row: {error}"
                        if dropped
                        else f"{error} (the row is left empty; the source is kept)"
                    ),
                )

    def sample_once(self) -> list[dict]:
        t_end, t_wall = self._clock(), self._wall_clock()
        merged = self._read_all(t_end)
        with self._lock:
            t_start, self._last_t = self._last_t, t_end
            phase = self._phases.label(t_start, t_end)
        rows = []
        for g in self.gpus:
            row = {
                "t_start_s": t_start,
                "t_end_s": t_end,
                "t_wall": t_wall,
                "gpu": g,
                "uuid": self.uuids.get(g, ""),
                "phase": phase,
            }
            row.update({c: merged[g].get(c, math.nan) for c in self.columns})
            rows.append(row)
        with self._lock:
            self.rows.extend(rows)
        if self.sink:
            for row in rows:
                self.sink(row)
        return rows

    def _run(self) -> None:
        # The first row waits one interval, so it covers the time since the sources were opened.
        next_t = self._clock()
        while True:
            # A fixed grid: the next tick is due one interval after the last one was due, not after
            # the read finished, so the schedule does not drift. Ticks missed while a read was slow
            # are skipped rather than made up in a burst.
            next_t += self.interval_s
            now = self._clock()
            if next_t < now:
                next_t += math.ceil((now - next_t) / self.interval_s) * self.interval_s
            if self._wait(next_t - now):
                break
            self.sample_once()

    def start(self) -> "Sampler":
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="gpubench-sampler", daemon=True)
            self._thread.start()
        return self

    def stop(self) -> None:
        """Stop the thread; safe to call twice."""
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
