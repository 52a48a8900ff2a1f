"""summary.csv read and checked: one row per scenario (a suite run) or per phase and GPU (a watch), text
columns kept as text, numbers as numbers (gpubench.record.columns says which is which), every number held
to its column's range.

A job that marks every epoch has ten thousand phases, and a summary of eight GPUs a million cells: the
file is parsed column-wise by pyarrow where it is well formed, its numbers checked a column at a time, and
only then turned into rows. Anything that path does not take as it is (a cell that is not a number where
one belongs, a field past csv's limit, a repeated row) is read again row by row with Python's csv module,
which names the line and decides as it always did: the two give the same rows, to the last bit.
"""

from __future__ import annotations

import csv
import functools
import math
import re
from pathlib import Path

from gpubench.metrics import valid_range
from gpubench.record import columns, schema
from gpubench.record.columns import numeric

SUMMARY_KEY = ("scenario", "gpu", "rank", "uuid")  # a summary holds one row for each: a phase or scenario, a GPU
INTEGER = r"^[+-]?[0-9]+$"


class BadSummary(ValueError):
    """summary.csv cannot be read; the text is one sentence, naming the file."""


@functools.lru_cache(maxsize=4096)
def _range(key: str) -> tuple[float, float]:
    return valid_range(re.sub(r"_p(10|90)$", "", key))


def value(text: str):
    """A cell as written: nothing is NaN, a whole number an int, a number a float, True or False a bool,
    anything else text."""
    if text == "":
        return math.nan
    for cast in (int, float):
        try:
            return cast(text)
        except ValueError:
            pass
    if text in ("True", "False"):
        return text == "True"
    return text


def read_summary(path: Path, notes: list[str] | None = None) -> list[dict]:
    """summary.csv as dicts; a row with the wrong number of fields, or text where a number belongs, is an
    error naming the file and line (BadSummary). Text columns stay text (a scenario named 42 is named "42");
    a number out of its column's range is flagged (schema.summary_value), said in notes. A row repeated
    whole is left out, said in notes; a second row for the same phase or scenario and GPU with other numbers
    is an error (which of the two is the run's cannot be told). A byte-order mark is no part of the header."""
    said: list[str] = []
    text = columns.text_columns()
    rows = _columnwise(path, said, text)
    if rows is None:
        said.clear()
        rows = _by_row(path, said, text)
    if notes is not None:
        notes += [f"{path.name}: {n}" for n in said]
    return rows


def _flagged(rows: list[dict], cells, said: list[str]) -> list[dict]:
    """rows with the cells out of their column's range (row index, key) flagged, in row and column order."""
    for i, key in sorted(cells):
        rows[i][key] = schema.summary_value(key, rows[i][key], rows[i]["scenario"], said)
    return rows


def _columnwise(path: Path, said: list[str], text: frozenset) -> list[dict] | None:
    """The rows, parsed by pyarrow a column at a time; None where the file asks for the row reader (which
    then says what is wrong with it, or reads what pyarrow would not)."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.csv as pacsv

    with open(path, "rb") as f:
        head = f.readline(1 << 16)
    try:
        names = next(csv.reader([head.decode("utf-8-sig").rstrip("\r\n")]), [])
    except (UnicodeDecodeError, csv.Error):
        return None
    if not names or len(set(names)) != len(names) or "scenario" not in names:
        return None
    try:
        table = pacsv.read_csv(
            path,
            read_options=pacsv.ReadOptions(column_names=names, skip_rows=1),
            convert_options=pacsv.ConvertOptions(
                column_types={n: pa.string() for n in names}, strings_can_be_null=False
            ),
        )
    except (pa.ArrowInvalid, OSError):
        return None
    n = table.num_rows
    if n == 0:
        return []
    limit = csv.field_size_limit()
    if any(pc.max(pc.utf8_length(table.column(k))).as_py() > limit for k in names):
        return None  # a field past csv's limit: the row reader refuses it, as it always did
    cols, out_of_range = {}, []
    for name in names:
        col = table.column(name)
        texts = col.to_pylist()
        if name in text:
            cols[name] = [v or math.nan for v in texts]
            continue
        try:
            floats = pc.cast(pc.if_else(pc.equal(col, ""), pa.scalar(None, pa.string()), col), pa.float64())
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            if numeric(name):
                return None  # a cell that is not a number, or one pyarrow reads otherwise: the row reader decides
            cols[name] = listed = [value(v) for v in texts]
            out_of_range += [(i, name) for i, v in enumerate(listed) if not _plain(name, v)]
            continue
        v = floats.to_numpy(zero_copy_only=False)
        held = v.astype(object)
        held[np.isnan(v)] = math.nan  # one NaN for every missing cell: a summary of 80,000 rows has millions
        listed = held.tolist()
        for i in np.flatnonzero(pc.match_substring_regex(col, INTEGER).to_numpy(zero_copy_only=False)).tolist():
            listed[i] = value(texts[i])  # a whole number is an int, as the row reader reads it
        cols[name] = listed
        lo, hi = _range(name)
        with np.errstate(invalid="ignore"):
            wrong = ~np.isnan(v) & ~((v >= lo) & (v <= hi))
        out_of_range += [(i, name) for i in np.flatnonzero(wrong).tolist()]
    scenario = cols["scenario"]
    if any(not isinstance(s, str) or len(s) > schema.LONGEST_TEXT for s in scenario):
        return None
    keys = list(zip(*(cols.get(k, [None] * n) for k in SUMMARY_KEY)))
    if len(set(map(repr, keys))) != n:
        return None  # a repeated row: the row reader says which
    rows = [dict(zip(names, values)) for values in zip(*(cols[k] for k in names))]
    return _flagged(rows, out_of_range, said)


def _by_row(path: Path, said: list[str], text: frozenset) -> list[dict]:
    """The rows, read one by one with Python's csv module: each cell as `value` reads it; the first line
    that is not a summary row is a BadSummary naming it."""
    seen: dict = {}
    rows: list[dict] = []
    repeats: list[tuple[int, int]] = []  # (line, the line it repeats): said once, however many
    cells: list = []
    numbers: list[str] = []  # the header's columns of numbers, found on the first row
    try:
        with open(path, newline="", encoding="utf-8-sig") as f:
            reader = csv.DictReader(f)
            for raw in reader:
                line = reader.line_num
                if None in raw or None in raw.values():
                    raise BadSummary(f"{path} line {line} does not have the header's fields")
                key = tuple(raw.get(k) for k in SUMMARY_KEY)
                if key in seen:
                    first, values = seen[key]
                    if values != list(raw.values()):
                        raise BadSummary(
                            f"{path} line {line} is a second row for {raw.get('scenario')!r} on GPU "
                            f"{raw.get('gpu')} (line {first} is the first) with other numbers: a "
                            "summary holds one row for each, so which is the run's cannot be told"
                        )
                    repeats.append((line, first))
                    continue
                row = {k: (v or math.nan) if k in text else value(v) for k, v in raw.items()}
                numbers = numbers or [k for k in row if numeric(k)]
                bad = [k for k in numbers if not isinstance(row[k], (int, float))]
                if bad or not row.get("scenario") or not isinstance(row["scenario"], str):
                    raise BadSummary(
                        f"{path} line {line} is not a summary row "
                        f"({bad[0] + ' is not a number' if bad else 'it names no scenario'})"
                    )
                if len(row["scenario"]) > schema.LONGEST_TEXT:
                    raise BadSummary(
                        f"{path} line {line} is not a summary row (its scenario is longer "
                        f"than {schema.LONGEST_TEXT} characters)"
                    )
                seen[key] = (line, list(raw.values()))
                cells += [(len(rows), k) for k, v in row.items() if not _plain(k, v)]
                rows.append(row)
    except UnicodeDecodeError:
        raise BadSummary(f"{path} is not text: it is not a summary gpubench wrote") from None
    except csv.Error as err:  # a field past csv's limit
        why = (
            f"a field longer than {csv.field_size_limit():,} characters, which no summary holds"
            if "field larger" in str(err)
            else str(err)
        )
        # line_num + 1: the line it stopped in
        raise BadSummary(f"{path} line {reader.line_num + 1} is not a summary row ({why})") from None
    if repeats:
        said.append(_repeated(repeats))
    return _flagged(rows, cells, said)


def _repeated(repeats: list[tuple[int, int]]) -> str:
    """One note for every row repeated whole: a file of 140,000 copies would otherwise get as many notes."""
    (line, first), n = repeats[0], len(repeats)
    if n == 1:
        return f"line {line} repeats line {first} and is left out"
    return f"{n:,} lines repeat earlier rows whole and are left out; the first is line {line}, a repeat of line {first}"


def _plain(key: str, v) -> bool:
    """A cell that needs no check: text, a bool, NaN, or a number inside its column's range."""
    if type(v) not in (int, float):
        return True
    lo, hi = _range(key)
    return v != v or lo <= v <= hi
