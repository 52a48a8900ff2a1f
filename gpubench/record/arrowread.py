"""samples.arrows read back: its batches scanned once for their lengths and a torn last one, then the columns
asked for decoded batch by batch, each batch validated before a value of it is read; damage is one sentence
(DamagedSamples), never a crash. The format is gpubench.record.arrowfile's."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.ipc as ipc

from gpubench.metrics import BY_COLUMN
from gpubench.read.samples import Samples
from gpubench.record.arrowfile import CONTINUATION, MONOTONIC, field_type
from gpubench.record.schema import LONGEST_TEXT
from gpubench.usage import visible


class DamagedSamples(ValueError):
    """The file is not a samples stream, or a batch inside it cannot be decoded; the text says which."""


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
