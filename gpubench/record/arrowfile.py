"""samples.arrows: sample rows in Arrow's IPC stream format, written a batch of rows at a time as they are
recorded, compressed with zstd, and read back a column at a time.

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
from gpubench.record.schema import LONGEST_TEXT
from gpubench.usage import visible

BATCH_S = 60.0  # a minute: 600 rows of one GPU at the default 0.1 s, 4,800 of eight
BATCH_ROWS = 8192
MONOTONIC = frozenset({"t_start_s", "t_end_s"})
CODEC = "zstd"
FORMAT = {b"gpubench": b"samples 1"}
CONTINUATION = b"\xff\xff\xff\xff"  # every IPC stream message starts with it


class DamagedSamples(ValueError):
    """The file is not a samples stream, or a batch inside it cannot be decoded; the text says which."""


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


# --- reading ---------------------------------------------------------------------------------------


def _torn(err: Exception) -> bool:
    """The stream ended inside a message: what a write cut off by a kill leaves."""
    text = str(err)
    # what Arrow says of a stream that ends inside a message's length, its metadata or its body, or between
    # the dictionaries of a batch (a reader meets these while the sampler writes, too)
    return any(
        words in text
        for words in (
            "Expected to read",
            "Expected to be able to read",
            "only 0 bytes",
            "only 1 bytes",
            "only 2 bytes",
            "only 3 bytes",
            "was null or length 0",
            "ended without reading the expected number",
        )
    )


# Arrow's words for damage, and ours: a reader is told what is wrong with the file, not how malloc failed.
DAMAGE = (
    ("malloc", "a length in it is larger than any batch gpubench writes"),
    ("ZSTD", "its compressed data is corrupt"),
    ("flatbuffer", "its header is corrupt"),
    ("offset", "the offsets of its text are corrupt"),
    ("UTF8", "its text is not UTF-8"),
    ("utf-8", "its text is not UTF-8"),
    ("out of bounds", "an index in it points outside its data"),
    ("too small", "a length in it does not fit its data"),
)
BROKEN = (pa.ArrowException, MemoryError, OSError, UnicodeDecodeError, SystemError, StopIteration, IndexError)


def damage(err: BaseException) -> str:
    """What is wrong with a batch, in words, from what Arrow raised while decoding it."""
    text = str(err)
    return next((said for words, said in DAMAGE if words in text), "it cannot be decoded")


def _checked(batch: pa.RecordBatch) -> pa.RecordBatch:
    """The batch, validated in full before a value of it is read: a damaged offset or dictionary index would
    otherwise read outside its buffers (a crash, not an error)."""
    batch.validate(full=True)
    return batch


def scan(path: Path, float_times: bool = False) -> tuple[list[str], list[int], bool]:
    """(column names, rows of each whole batch, whether a torn last batch follows them). float_times: a file
    gpubench converted from samples.csv, whose times are float64 seconds as the CSV wrote them."""
    size = path.stat().st_size
    with open(path, "rb") as f:
        head = f.read(4)
    if head != CONTINUATION:
        if size < len(CONTINUATION) and CONTINUATION.startswith(head):
            return [], [], size > 0  # killed before its header was written
        raise DamagedSamples("it is not a samples file gpubench wrote")
    try:
        with pa.OSFile(str(path), "rb") as src:
            sch = ipc.open_stream(src).schema
        fields = [(field.name, field.type) for field in sch]  # a name that is not UTF-8 raises here
    except BROKEN as err:
        if _torn(err):
            return [], [], True
        raise DamagedSamples("its header cannot be read") from None
    names = [name for name, _ in fields]
    for name, kind in fields:
        if not _readable(name, kind, float_times):
            raise DamagedSamples(f"its column {visible(name)} holds {kind}, not what gpubench writes there")
    if len(set(names)) != len(names):
        raise DamagedSamples("it names a column twice")
    if not names:
        raise DamagedSamples("it holds no column")
    with pa.OSFile(str(path), "rb") as src:
        sizes = []
        reader = None
        while True:
            try:
                reader = reader or ipc.open_stream(src, options=ipc.IpcReadOptions(included_fields=[0]))
                sizes.append(_checked(reader.read_next_batch()).num_rows)
            except StopIteration:
                return names, sizes, src.tell() < size
            except BROKEN as err:
                if _torn(err) and src.tell() >= size:
                    return names, sizes, True
                raise DamagedSamples(f"batch {len(sizes) + 1} of its rows is damaged ({damage(err)})") from None


def _readable(name: str, kind: pa.DataType, float_times: bool = False) -> bool:
    """Whether a column of this name and type reads as gpubench holds it; a column gpubench does not write
    is never read, whatever it holds."""
    if name in MONOTONIC or name == "t_wall":
        return kind == field_type(name) or (float_times and pa.types.is_float64(kind))
    if name in ("gpu", "rank"):
        return pa.types.is_integer(kind)
    if name in ("uuid", "phase"):
        return pa.types.is_string(kind) or (pa.types.is_dictionary(kind) and pa.types.is_string(kind.value_type))
    if name in BY_COLUMN:
        return pa.types.is_floating(kind) or pa.types.is_integer(kind)
    return True


def _names(words: list) -> list:
    """The words of a text column (a phase, a UUID), each no longer than a name gpubench writes."""
    if any(len(w) > LONGEST_TEXT for w in words if w is not None):
        raise DamagedSamples(f"it holds a name longer than {LONGEST_TEXT} characters")
    return words


def _numpy(arr: pa.Array, pick: np.ndarray | None = None) -> np.ndarray:
    """An Arrow column as gpubench holds it: float64 seconds, float64 numbers (NaN for null), object text."""
    kind = arr.type
    if pa.types.is_duration(kind) or pa.types.is_timestamp(kind):
        out = arr.view(pa.int64()).to_numpy(zero_copy_only=False)
        return (out if pick is None else out[pick]) / 1e6
    if pa.types.is_dictionary(kind):
        words = np.array(_names(arr.dictionary.to_pylist()) + [""], dtype=object)
        codes = arr.indices.fill_null(len(words) - 1).to_numpy()
        return words[codes if pick is None else codes[pick]]
    if pa.types.is_string(kind):
        out = np.array(_names(arr.fill_null("").to_pylist()), dtype=object)
    else:
        out = arr.to_numpy(zero_copy_only=False)  # null: NaN
    with np.errstate(invalid="ignore", over="ignore"):  # a damaged batch's garbage becomes NaN or inf, unsaid
        return (out if pick is None else out[pick]).astype(np.float64 if out.dtype != object else object, copy=False)


def batches(path: Path, names: list[str], sizes: list[int], wanted: list[str]):
    """Each whole batch's columns of wanted, as numpy arrays, one batch at a time (memory stays a batch's)."""
    fields = sorted(names.index(n) for n in wanted)
    try:
        with pa.OSFile(str(path), "rb") as src:
            reader = ipc.open_stream(src, options=ipc.IpcReadOptions(included_fields=fields))
            for k in range(len(sizes)):
                got = _checked(reader.read_next_batch())
                yield {names[i]: _numpy(got.column(j)) for j, i in enumerate(fields)}
    except BROKEN as err:
        raise DamagedSamples(f"a batch of its {', '.join(wanted)} is damaged ({damage(err)})") from None


def fetcher(path: Path, names: list[str], sizes: list[int]):
    """fetch(names, rows) for Samples: one pass over the whole batches, decoding only the columns asked for
    and only the rows asked for."""
    bounds = np.concatenate([[0], np.cumsum(sizes, dtype=np.int64)])

    def fetch(wanted: list[str], rows: np.ndarray | None) -> dict:
        try:
            return _fetch(wanted, rows)
        except BROKEN as err:  # scan decoded the first column only
            raise DamagedSamples(f"a batch of its {', '.join(wanted)} is damaged ({damage(err)})") from None

    def _fetch(wanted: list[str], rows: np.ndarray | None) -> dict:
        fields = sorted(names.index(n) for n in wanted)
        parts: dict = {names[i]: [] for i in fields}
        with pa.OSFile(str(path), "rb") as src:
            reader = ipc.open_stream(src, options=ipc.IpcReadOptions(included_fields=fields))
            for k in range(len(sizes)):
                lo, hi = bounds[k], bounds[k + 1]
                pick = None
                if rows is not None:
                    a, b = np.searchsorted(rows, [lo, hi])
                    if a == b:
                        reader.read_next_batch()
                        continue
                    pick = rows[a:b] - lo
                got = _checked(reader.read_next_batch())
                for j, i in enumerate(fields):
                    parts[names[i]].append(_numpy(got.column(j), pick))
        return {n: np.concatenate(p) if p else np.array([], dtype=np.float64) for n, p in parts.items()}

    return fetch


def valued(path: Path, names: list[str], sizes: list[int]):
    """valued(wanted) for Samples: the columns that hold a value in some whole batch, from the batches' null
    counts alone (a recording writes a missing value as null; the sources never give an infinity)."""

    def any_value(wanted: list[str]) -> set:
        fields = sorted(names.index(n) for n in wanted)
        found: set = set()
        try:
            with pa.OSFile(str(path), "rb") as src:
                reader = ipc.open_stream(src, options=ipc.IpcReadOptions(included_fields=fields))
                for _ in sizes:
                    got = reader.read_next_batch()
                    found |= {names[i] for j, i in enumerate(fields) if got.column(j).null_count < got.num_rows}
        except BROKEN as err:
            raise DamagedSamples(f"a batch of its {', '.join(wanted)} is damaged ({damage(err)})") from None
        return found

    return any_value


def read(path: Path, notes: list[str] | None = None, guard=None, float_times: bool = False, shown_as=None) -> Samples:
    """The file as Samples, its columns read as asked for; guard(fetch) -> fetch, where given, wraps every
    read of columns (rundir checks them there). float_times and shown_as (the name notes give the file): a
    file converted from samples.csv."""
    names, sizes, torn = scan(path, float_times)
    if torn and notes is not None:
        notes.append(
            f"{shown_as or path.name}: its last batch of rows was cut off mid-write (the run was killed) and is skipped"
        )
    fetch = fetcher(path, names, sizes)
    return Samples(
        names=names,
        length=int(sum(sizes)),
        fetch=guard(fetch) if guard else fetch,
        valued=valued(path, names, sizes),
        stream=lambda wanted: batches(path, names, sizes, wanted),
    )
