"""Rows from a recorded samples.csv, played back tick by tick: sampler tests and re-plots need no GPU."""

from __future__ import annotations

import csv
import math
from pathlib import Path

from gpubench.metrics import COLUMNS

from . import Source


def read_samples(path: str | Path) -> list[dict]:
    """samples.csv as dicts: metric columns as floats (empty cells are NaN), the rest as written."""
    rows = []
    with open(path, newline="") as f:
        for raw in csv.DictReader(f):
            row = {}
            for key, text in raw.items():
                if key in COLUMNS or key in ("t_mono_s", "t_wall"):
                    row[key] = float(text) if text not in ("", None) else math.nan
                elif key == "gpu":
                    row[key] = int(text)
                else:
                    row[key] = text
            rows.append(row)
    return rows


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
            if row["t_mono_s"] != last_t:
                ticks.append({})
                last_t = row["t_mono_s"]
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
