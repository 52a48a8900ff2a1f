"""samples.arrows: sample rows in Arrow's IPC stream format, written a batch of rows at a time as they are
recorded, compressed with zstd, and read back a column at a time (gpubench.record.arrowread).

Why the stream format: each batch is whole on disk once written, and a reader reads batch after batch
without an index, so a recording killed outright (kill -9, the machine lost) keeps every batch but the
one it was writing, and a torn last batch is skipped as a torn CSV line was. Parquet writes its index
(the footer) at close: a killed Parquet file cannot be read at all.

A batch is written every BATCH_S seconds of samples (or BATCH_ROWS rows, whichever comes first): a
minute of one GPU at the default interval is 600 rows, enough for zstd (which works on each column of a
batch) to compress well, few enough batches to read a day quickly, and a killed run loses at most that.
Ctrl-C and SIGTERM close the file, losing nothing. Types: times as microseconds (duration since the
monotonic clock's origin, t_wall a UTC timestamp), NVML indices and ranks as int32 (null: no rank),
uuid and phase dictionary-coded, the profiling ratios (DCGM 1001-1008, continuous values whose digits
past the seventh are noise) as float32, every other metric as float64; a missing value is null.
"""

from __future__ import annotations

import threading
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.ipc as ipc

from gpubench.metrics import BY_COLUMN, RATIO_FIELDS
from gpubench.read.samples import Samples, column_from

BATCH_S = 60.0  # a minute: 600 rows of one GPU at the default 0.1 s, 4,800 of eight
BATCH_ROWS = 8192
MONOTONIC = frozenset({"t_start_s", "t_end_s"})
CODEC = "zstd"
FORMAT = {b"gpubench": b"samples 1"}
CONTINUATION = b"\xff\xff\xff\xff"  # every IPC stream message starts with it


def field_type(name: str) -> pa.DataType:
    if name in MONOTONIC:
        return pa.duration("us")
    if name == "t_wall":
        return pa.timestamp("us", tz="UTC")
    if name in ("gpu", "rank"):
        return pa.int32()
    if name in ("uuid", "phase"):
        return pa.dictionary(pa.int32(), pa.string())
    metric = BY_COLUMN.get(name)
    return pa.float32() if metric is not None and metric.dcgm_id in RATIO_FIELDS else pa.float64()


def schema(names) -> pa.Schema:
    return pa.schema([pa.field(n, field_type(n)) for n in names], metadata=FORMAT)


def _array(name: str, values: np.ndarray, kind: pa.DataType) -> pa.Array:
    if pa.types.is_duration(kind) or pa.types.is_timestamp(kind):
        return pa.array(np.round(np.asarray(values, dtype=np.float64) * 1e6).astype(np.int64)).view(kind)
    if pa.types.is_integer(kind):
        v = np.asarray(values, dtype=np.float64)
        missing = np.isnan(v)
        return pa.array(np.where(missing, 0, v).astype(np.int32), mask=missing if missing.any() else None)
    if pa.types.is_dictionary(kind):
        return pa.array(np.asarray(values, dtype=object).tolist(), pa.string()).dictionary_encode()
    return pa.array(np.asarray(values, dtype=kind.to_pandas_dtype()), from_pandas=True)  # NaN: null


def batch(columns: dict, names, sch: pa.Schema) -> pa.RecordBatch:
    return pa.record_batch([_array(n, columns[n], sch.field(n).type) for n in names], schema=sch)


class Writer:
    """Appends batches to a new samples stream; close() ends it (a reader does without the end)."""

    def __init__(self, path: Path, names):
        self.names = list(names)
        self.schema = schema(self.names)
        self._file = pa.OSFile(str(path), "wb")  # unbuffered: each batch is on disk when write_batch returns
        self._stream = ipc.new_stream(self._file, self.schema, options=ipc.IpcWriteOptions(compression=CODEC))

    def write(self, columns: dict) -> None:
        if len(columns[self.names[0]]):
            self._stream.write_batch(batch(columns, self.names, self.schema))

    def write_table(self, samples: Samples) -> None:
        """Rows held column-wise, cut into batches as Sink cuts them: the rows that end less than BATCH_S
        after the batch's first, at most BATCH_ROWS; a column the table lacks is written missing."""
        samples.load(*self.names)
        ends = samples.col("t_end_s")
        start = 0
        while start < len(samples):
            within = int(np.searchsorted(ends[start : start + BATCH_ROWS], ends[start] + BATCH_S, side="left"))
            stop = start + max(1, within)
            part = samples.slice(start, stop)
            self.write({n: part.col(n) if samples.has(n) else np.full(stop - start, np.nan) for n in self.names})
            start = stop

    def close(self) -> None:
        if not self._file.closed:
            self._stream.close()
            self._file.close()


class Sink:
    """Takes the sampler's rows one by one (in its thread) and writes them a batch at a time; close() (in
    the recording's) writes the rest."""

    def __init__(self, path: Path, names):
        self.path = path
        self.fields = list(names)
        self._writer: Writer | None = Writer(path, self.fields)
        self._rows: list[dict] = []
        self._lock = threading.Lock()

    def __call__(self, row: dict) -> None:
        with self._lock:
            if self._writer is None:
                return
            # the batch is written when the row that would take it past BATCH_S comes: a tick's rows (one
            # per GPU, one end time) stay in one batch
            if self._rows and (len(self._rows) >= BATCH_ROWS or row["t_end_s"] - self._rows[0]["t_end_s"] >= BATCH_S):
                self._flush()
            self._rows.append(row)

    def _flush(self) -> None:
        rows, self._rows = self._rows, []
        if rows and self._writer is not None:
            self._writer.write({n: column_from(n, [r.get(n) for r in rows]) for n in self.fields})

    def close(self) -> None:
        with self._lock:
            if self._writer is not None:
                try:
                    self._flush()
                finally:
                    self._writer.close()
                    self._writer = None


def write(path: Path, samples: Samples, names) -> None:
    """A whole table at once (merged ranks, a generated run), in batches as a recording writes them."""
    writer = Writer(path, names)
    try:
        writer.write_table(samples)
    finally:
        writer.close()
