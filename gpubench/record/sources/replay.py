"""Rows from a recorded samples.csv, played back tick by tick: sampler tests and re-plots need no GPU."""

from __future__ import annotations

from pathlib import Path

from gpubench.metrics import COLUMNS
from gpubench.record.samplesfile import read_samples

from . import Source


class ReplaySource(Source):
    name = "replay"

    def __init__(self, path: str | Path):
        self._rows = read_samples(path)
        header = self._rows[0].keys() if self._rows else ()
        self.columns = tuple(c for c in COLUMNS if c in header)
        self._ticks = self._group()
        self._next = 0

    def _group(self) -> list[dict[int, dict[str, float]]]:
        ticks, last_t = [], None
        for row in self._rows:
            if row["t_end_s"] != last_t:
                ticks.append({})
                last_t = row["t_end_s"]
            ticks[-1][row["gpu"]] = {c: row[c] for c in self.columns}
        return ticks

    def open(self, gpus):
        self._gpus = set(gpus)

    def read(self):
        if self._next >= len(self._ticks):
            return {}
        tick = self._ticks[self._next]
        self._next += 1
        return {g: v for g, v in tick.items() if g in self._gpus}
