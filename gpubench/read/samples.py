"""Sample rows held column-wise: one numpy array per column, the rows in the order they were written (each
GPU's in time order), the rows of one GPU and the rows of a window cut from them by binary search.

A run's file is read a column at a time, as the code asks for them: `Samples` loads the columns it is
asked for (fetch), for the rows it holds, and keeps them. A day on eight GPUs is about seven million rows;
the timeline of one GPU reads its own rows of a few columns, never the whole table. Lists of row dicts
(the sampler's, the tests') become Samples through as_samples, so every summary reads both.
"""

from __future__ import annotations

import math
from typing import Callable

import numpy as np

from gpubench.read.samplekeys import INT_KEYS, TEXT_KEYS  # ints held as float64 (NaN: none), given back as int

# fetch(names, rows) -> {name: array of those rows}; rows is an ascending int64 index, or None for all rows
Fetch = Callable[[list, "np.ndarray | None"], dict]


class Samples:
    """Rows held column-wise; a view of some rows of a larger table shares its fetch."""

    def __init__(
        self,
        columns: dict | None = None,
        *,
        names=None,
        length: int | None = None,
        fetch: Fetch | None = None,
        rows: np.ndarray | None = None,
        valued=None,
        stream=None,
    ):
        self._cols = dict(columns or {})
        self.names = list(names if names is not None else self._cols)
        self._fetch = fetch
        self._valued = valued  # names -> those with a value somewhere, without loading them (the whole file)
        self._stream = stream  # names -> each batch's columns in turn, without keeping them (the whole file)
        self._rows = rows  # which rows of the fetched table this holds (None: all)
        self._length = (
            length
            if length is not None
            else (len(rows) if rows is not None else len(next(iter(self._cols.values()))) if self._cols else 0)
        )
        self._views: dict = {}

    def __len__(self) -> int:
        return self._length

    def has(self, name: str) -> bool:
        return name in self.names

    def load(self, *names) -> "Samples":
        """Read the columns not yet held, all in one pass over the file."""
        wanted = [n for n in names if n in self.names and n not in self._cols]
        if wanted and self._fetch is not None:
            self._cols.update(self._fetch(wanted, self._rows))
        return self

    def col(self, name: str) -> np.ndarray:
        """One column (float64 for numbers, NaN where missing; object for text); all NaN where this table
        has no such column."""
        if name not in self.names:
            return np.full(len(self), np.nan)
        self.load(name)
        return self._cols[name]

    def chunks(self, *names):
        """These rows' columns of names, a part at a time in row order: the file's batches one by one, held only
        while the caller looks at them (a check over a day of rows), or all at once where they are held."""
        names = [n for n in names if n in self.names]
        if self._stream is not None and self._rows is None and any(n not in self._cols for n in names):
            yield from self._stream(names)
        elif len(self):
            yield {n: self.col(n) for n in names}

    def valued(self, names) -> set:
        """The columns among names that hold a number somewhere in these rows."""
        names = [n for n in names if n in self.names]
        if self._valued is not None and self._rows is None:
            return set(self._valued(names))
        return {n for n in names if np.isfinite(self.col(n)).any()}

    def take(self, which) -> "Samples":
        """The rows a boolean mask or an index array (into these rows) picks, as a table of their own."""
        index = np.flatnonzero(which) if np.asarray(which).dtype == bool else np.asarray(which, dtype=np.int64)
        rows = index if self._rows is None else self._rows[index]
        return Samples(
            {k: v[index] for k, v in self._cols.items()},
            names=self.names,
            length=len(index),
            fetch=self._fetch,
            rows=rows,
        )

    def slice(self, i: int, j: int) -> "Samples":
        return self.take(np.arange(i, max(i, j), dtype=np.int64))

    # --- rows of one GPU, rows of a window ----------------------------------------------------------

    def of(self, key: str, value, keep: bool = True) -> "Samples":
        """The rows whose `key` (gpu, uuid, rank) is value; kept for the next call unless keep is False
        (a caller that reads each GPU once lets each go)."""
        view = self._views.get((key, value))
        if view is None:
            column = self.col(key)
            match = column == value if value is not None else np.isnan(column)
            view = self.take(np.asarray(match, dtype=bool))
            if keep:
                self._views[(key, value)] = view
        return view

    def inside(self, t_start: float, t_end: float, tol: float = 0.0) -> tuple[int, int]:
        """(i, j): rows[i:j] are the rows whose whole interval lies inside [t_start - tol, t_end + tol], by
        binary search over the rows of one GPU (in time order; ValueError where they are not)."""
        starts, ends = self.col("t_start_s"), self.col("t_end_s")
        if not _ascending(starts) or not _ascending(ends):
            raise ValueError("rows out of time order: take one GPU's rows first")
        i = int(np.searchsorted(starts, t_start - tol, side="left"))
        j = int(np.searchsorted(ends, t_end + tol, side="right"))
        return i, max(i, j)

    def window(self, t_start: float, t_end: float, tol: float = 0.0) -> "Samples":
        """The rows whose whole interval lies inside [t_start, t_end] (see inside)."""
        starts, ends = self.col("t_start_s"), self.col("t_end_s")
        if _ascending(starts) and _ascending(ends):
            return self.slice(*self.inside(t_start, t_end, tol))
        return self.take((starts >= t_start - tol) & (ends <= t_end + tol))

    # --- as rows, for a few ---------------------------------------------------------------------------

    def __iter__(self):
        """Each row as a dict, as the CSV reader gave them: for small tables (tests, a replay)."""
        self.load(*self.names)
        lists = [_values(name, self._cols[name]) for name in self.names]
        for values in zip(*lists):
            yield dict(zip(self.names, values))

    def __getitem__(self, i):
        """Row i as a dict, or the rows of a slice as Samples; col(name) is a column."""
        if isinstance(i, slice):
            return self.take(np.arange(len(self))[i])
        if not isinstance(i, (int, np.integer)):
            raise TypeError("Samples[i] is row i; col(name) is a column")
        i = range(len(self))[i]
        return next(iter(self.slice(i, i + 1)))

    def columns(self) -> dict:
        """Every column, loaded: to send to another process (torchrun's gather) or write elsewhere."""
        self.load(*self.names)
        return {n: self._cols[n] for n in self.names}


def load_together(views, *names) -> None:
    """Read names for several views of one table (each GPU's rows) in one pass over the file, not a pass a
    view: every batch of a file holds every GPU's rows, so each pass decodes the whole of those columns."""
    groups: dict = {}
    for view in views:
        if view._fetch is not None and view._rows is not None:
            groups.setdefault(id(view._fetch), []).append(view)
        else:
            view.load(*names)
    for group in groups.values():
        wanted = [n for n in dict.fromkeys(names) if any(n in v.names and n not in v._cols for v in group)]
        if not wanted:
            continue
        picked = np.zeros(1 + max(int(v._rows.max(initial=-1)) for v in group), dtype=bool)
        for view in group:  # the rows any view holds, in order (np.unique's hashing took seconds for a day)
            picked[view._rows] = True
        rows = np.flatnonzero(picked)
        fetched = group[0]._fetch(wanted, rows)
        where = [np.searchsorted(rows, v._rows) for v in group]
        for name in wanted:  # a column at a time, each let go once shared out: memory stays near one copy
            column = fetched.pop(name)
            for view, at in zip(group, where):
                if name in view.names and name not in view._cols:
                    view._cols[name] = column[at]


def _ascending(a: np.ndarray) -> bool:
    return len(a) < 2 or bool(np.all(a[1:] >= a[:-1]))


def _values(name: str, column: np.ndarray) -> list:
    if name in INT_KEYS and column.dtype.kind == "f":
        return [int(v) if math.isfinite(v) else None for v in column.tolist()]
    return column.tolist()


def column_from(name: str, values: list) -> np.ndarray:
    """A column from Python values: text as object, numbers as float64 (None and missing: NaN)."""
    if name in TEXT_KEYS or any(isinstance(v, str) for v in values):
        return np.array(["" if v is None else v for v in values], dtype=object)
    return np.array([math.nan if v is None or isinstance(v, bool) else v for v in values], dtype=np.float64)


def as_samples(rows) -> Samples:
    """rows as Samples: a Samples as it is; a dict of columns (Samples.columns(), sent by another process);
    a list of row dicts (a key missing from a row: NaN there)."""
    if isinstance(rows, Samples):
        return rows
    if isinstance(rows, dict):
        return Samples({n: np.asarray(c) for n, c in rows.items()})
    rows = list(rows)
    names: dict = {}
    for r in rows:
        names.update(dict.fromkeys(r))
    return Samples({n: column_from(n, [r.get(n) for r in rows]) for n in names}, length=len(rows))


def finite_values(samples: Samples, name: str) -> np.ndarray:
    column = samples.col(name)
    return column[np.isfinite(column)] if column.dtype.kind == "f" else np.array([], dtype=np.float64)


def quantiles(values: np.ndarray, qs) -> list[float]:
    """Linear-interpolated quantiles of a non-empty array, by gpubench.stats.quantile's rule and arithmetic
    (the same numbers to the last bit), sorting once."""
    data = np.sort(values)
    out = []
    for q in qs:
        pos = q * (len(data) - 1)
        lo = int(pos)
        hi = min(lo + 1, len(data) - 1)
        out.append(float(data[lo]) + (float(data[hi]) - float(data[lo])) * (pos - lo))
    return out


def fmean(values: np.ndarray) -> float:
    """statistics.fmean's number (an exactly rounded sum over the count); NaN for none."""
    return math.fsum(values.tolist()) / len(values) if len(values) else math.nan
