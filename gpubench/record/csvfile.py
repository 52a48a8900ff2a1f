"""samples.csv, the samples of runs recorded before samples.arrows (and of runs converted by other tools):
written a row at a time (CsvSink, which tests still use), and read by converting it, a block at a time,
into a temporary samples.arrows that the Arrow reader then reads a column at a time.

Why convert: a day of eight GPUs is 1.6 GB of CSV. Held whole, with its parse and its columns, it needed
5.8 GB to plot; converted in blocks of BLOCK_BYTES it plots within the memory the Arrow file does, from a
file of a sixth of its size. The times keep the float64 seconds the CSV wrote (never rounded to
microseconds), so a run reads to the same numbers, bit for bit, as it always did.

A file spreadsheets saved (a byte-order mark before the header) reads as any other. A last line cut off
mid-write (the run was killed) is skipped with a note. Damage is one sentence naming the line: pyarrow's
parser reads a well-formed file; where it stops, the file is read again row by row with Python's csv
module to find the first line that is not a sample row (a field past csv's limit of 131,072 characters
included: no column holds one).
"""

from __future__ import annotations

import csv
import io
import math
from pathlib import Path

from gpubench.metrics import COLUMNS
from gpubench.read.samplekeys import INT_KEYS, SAMPLE_KEYS, TEXT_KEYS, TIME_KEYS

FLOAT_KEYS = frozenset(COLUMNS) | TIME_KEYS
WORD_KEYS = TEXT_KEYS  # dictionary-coded in the Arrow file, as a recording writes them
BOM = b"\xef\xbb\xbf"
HEADER_MAX = 1 << 20  # a header of every column gpubench has is under 1 kB
BLOCK_BYTES = 512 << 10  # about 2,500 rows a batch: memory stays flat (8 MB blocks took 200 MB more)
PY_ROWS = 50_000  # rows a batch where Python's csv reads the file


class BadCsv(ValueError):
    """samples.csv cannot be read; the text completes "<file> ..." in one sentence."""


class CsvSink:
    """Appends sample rows to samples.csv as they come, flushing each, so a crash keeps what was recorded
    (the format of runs recorded before samples.arrows; tests write it to check both are read alike)."""

    def __init__(self, path: Path, columns, keys=SAMPLE_KEYS):
        self.path = path
        self.fields = list(keys) + list(columns)
        self._f = open(path, "w", newline="")
        self._w = csv.DictWriter(self._f, fieldnames=self.fields, extrasaction="ignore")
        self._w.writeheader()
        self._f.flush()

    def __call__(self, row: dict) -> None:
        if self._f.closed:
            return
        self._w.writerow({k: cell(v, k) for k, v in row.items()})
        self._f.flush()

    def close(self) -> None:
        if not self._f.closed:
            self._f.close()


def cell(value, key: str = ""):
    if isinstance(value, float):
        if math.isnan(value):
            return ""
        return f"{value:.4f}" if key in TIME_KEYS else f"{value:.10g}"
    return value


# --- reading ---------------------------------------------------------------------------------------


class _Part(io.RawIOBase):
    """The bytes of a file from `start` to `stop`, as a stream: the rows after the header and before a torn
    last line, read in blocks without holding the file."""

    def __init__(self, path: Path, start: int, stop: int):
        self._f = open(path, "rb")
        self._f.seek(start)
        self._left = stop - start

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        n = self._f.readinto(memoryview(buffer)[: max(0, min(len(buffer), self._left))])
        self._left -= n
        return n

    def close(self) -> None:
        self._f.close()
        super().close()


def _layout(path: Path, notes: list | None) -> tuple[list[str], int, int]:
    """(the header's column names, where the rows start, where they stop): a byte-order mark is skipped, a
    torn last line is left out with a note."""
    size = path.stat().st_size
    with open(path, "rb") as f:
        head = f.read(HEADER_MAX + len(BOM) + 1)
        start = len(BOM) if head.startswith(BOM) else 0
        end = head.find(b"\n", start)
        if end < 0 and size > len(head):
            raise BadCsv(f"line 1 is not a header of sample columns (it runs past {HEADER_MAX >> 20} MiB)")
        stop = size
        if size and end >= 0:
            f.seek(max(0, size - 1))
            if f.read(1) != b"\n":  # the last line was cut off mid-write: read up to the line before it
                stop = _last_newline(f, size) + 1
                if notes is not None:
                    notes.append(
                        f"{path.name}: its last line was cut off mid-write (the run was killed) and is skipped"
                    )
    line = head[start : end if end >= 0 else len(head)]
    try:
        text = line.decode("utf-8")
        names = next(csv.reader([text.rstrip("\r")]), [])
    except UnicodeDecodeError:
        raise BadCsv("is not text: it is not a samples file gpubench wrote") from None
    except csv.Error as err:
        raise BadCsv(f"line 1 is not a header of sample columns ({err})") from None
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise BadCsv(f"line 1 names the column {twice[0]} twice, so it is not a samples file gpubench wrote")
    return names, (end + 1 if end >= 0 else size), stop


def _last_newline(f, size: int) -> int:
    pos = size
    while pos > 0:
        step = min(pos, 1 << 16)
        pos -= step
        f.seek(pos)
        found = f.read(step).rfind(b"\n")
        if found >= 0:
            return pos + found
    return -1


def convert(path: Path, out: Path, notes: list | None = None) -> list[str]:
    """samples.csv into a samples stream at out (float64 times), a block at a time; its column names. BadCsv
    (one sentence) where a line is not a sample row."""
    names, start, stop = _layout(path, notes)
    if not names:
        return []
    try:
        _with_arrow(path, out, names, start, stop)
    except _Stopped:  # pyarrow found something it does not read: Python's csv names the line, or reads it
        _with_python(path, out, names, start, stop)
    return names


class _Stopped(Exception):
    pass


def _schema(names: list[str]):
    import pyarrow as pa

    def kind(n):
        if n in FLOAT_KEYS:
            return pa.float64()
        if n in INT_KEYS:
            return pa.int64()
        return pa.dictionary(pa.int32(), pa.string()) if n in WORD_KEYS else pa.string()

    return pa.schema([pa.field(n, kind(n)) for n in names])


def _writer(out: Path, sch):
    import pyarrow as pa
    import pyarrow.ipc as ipc

    from gpubench.record.arrowfile import CODEC

    sink = pa.OSFile(str(out), "wb")
    return sink, ipc.new_stream(sink, sch, options=ipc.IpcWriteOptions(compression=CODEC))


def _batch(columns: dict, sch):
    """A batch in the schema: NaN as null (a missing value, as a recording writes it), words dictionary-coded."""
    import pyarrow as pa
    import pyarrow.compute as pc

    arrays = []
    for field in sch:
        arr = columns[field.name]
        if pa.types.is_floating(field.type):
            arr = pc.if_else(pc.is_nan(arr), pa.scalar(None, pa.float64()), arr)
        elif pa.types.is_dictionary(field.type):
            arr = arr.dictionary_encode()
        arrays.append(arr)
    return pa.record_batch(arrays, schema=sch)


def _with_arrow(path: Path, out: Path, names: list[str], start: int, stop: int) -> None:
    import pyarrow as pa
    import pyarrow.csv as pacsv

    sch = _schema(names)
    types = {f.name: (f.type.value_type if pa.types.is_dictionary(f.type) else f.type) for f in sch}
    sink, stream = _writer(out, sch)
    try:
        with _Part(path, start, stop) as part:
            reader = pacsv.open_csv(
                part,
                read_options=pacsv.ReadOptions(column_names=names, block_size=BLOCK_BYTES),
                convert_options=pacsv.ConvertOptions(
                    column_types=types, null_values=[""], strings_can_be_null=False, quoted_strings_can_be_null=False
                ),
            )
            for got in reader:
                if "gpu" in names and got.column("gpu").null_count:
                    raise _Stopped
                stream.write_batch(_batch({n: got.column(n) for n in names}, sch))
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        raise _Stopped from None
    finally:
        stream.close()
        sink.close()


def _with_python(path: Path, out: Path, names: list[str], start: int, stop: int) -> None:
    from gpubench.read.samples import column_from

    sch = _schema(names)
    sink, stream = _writer(out, sch)
    rows: list[dict] = []

    def flush():
        if rows:
            cols = {n: column_from(n, [r[n] for r in rows]) for n in names}
            stream.write_batch(_batch({n: _arrow(n, cols[n], sch.field(n).type) for n in names}, sch))
            rows.clear()

    try:
        with io.TextIOWrapper(io.BufferedReader(_Part(path, start, stop)), encoding="utf-8", newline="") as text:
            reader = csv.reader(text)
            line = 1
            try:
                for raw in reader:
                    line = reader.line_num + 1  # the header is line 1
                    if len(raw) != len(names):
                        raise BadCsv(
                            f"line {line} is not a sample row (it has {len(raw)} fields, the header {len(names)})"
                        )
                    try:
                        rows.append(_sample(dict(zip(names, raw))))
                    except (ValueError, OverflowError):
                        raise BadCsv(f"line {line} is not a sample row") from None
                    if len(rows) >= PY_ROWS:
                        flush()
            except csv.Error as err:
                limit = csv.field_size_limit()
                why = (
                    f"a field longer than {limit:,} characters, which no column holds"
                    if "field larger" in str(err)
                    else str(err)
                )
                raise BadCsv(f"line {reader.line_num + 1} is not a sample row ({why})") from None
            except UnicodeDecodeError:
                raise BadCsv("is not text: it is not a samples file gpubench wrote") from None
        flush()
    finally:
        stream.close()
        sink.close()


def _arrow(name: str, values, kind):
    import numpy as np
    import pyarrow as pa

    if pa.types.is_dictionary(kind):
        return pa.array(values.tolist(), pa.string())
    if pa.types.is_string(kind):
        return pa.array(["" if v is None else str(v) for v in values.tolist()], pa.string())
    if pa.types.is_integer(kind):
        v = np.asarray(values, dtype=np.float64)
        return pa.array(np.where(np.isnan(v), 0, v).astype(np.int64), mask=np.isnan(v))
    return pa.array(np.asarray(values, dtype=np.float64))


def _sample(raw: dict) -> dict:
    row = {}
    for key, text in raw.items():
        if key in FLOAT_KEYS:
            row[key] = float(text) if text != "" else math.nan
        elif key == "rank" and text == "":
            row[key] = None  # a GPU that --all-gpus sampled and no rank used
        elif key in INT_KEYS:
            row[key] = int(text)
        else:
            row[key] = text
    return row
