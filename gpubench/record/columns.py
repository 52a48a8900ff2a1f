"""The columns of summary.csv and their kinds, as the writer writes them and the reader reads them back.

A summary's columns are made by many rooms: the suite's scenario loop, the kernel families, the watch's phases,
the merge of ranks, the tensor-pipe ceiling. Each module that makes columns this room cannot tell by their
name declares them where it makes them, in a literal at its top:

    SUMMARY_COLUMNS = {"msg_text": "text", "regime_text": "text"}  # gpubench.record.columns reads it

and this module collects those literals from the package's source, once, without importing the modules
(a kernel family loads torch; plotting a run must not). The metrics of gpubench.metrics are floats
without a declaration. Kinds:

    text   words, kept as written (a scenario named 42 is named "42"); an empty cell is NaN
    int    a whole number or nothing
    float  a number or nothing, written to ten digits
    time   seconds on the monotonic clock, written to a tenth of a millisecond

A column nobody declares is read cell by cell as it looks (a number where it reads as one, else text):
declare a column of words, or "0" in it reads as the number 0.
"""

from __future__ import annotations

import ast
import functools
import importlib.util
import math
import re
from pathlib import Path

from gpubench.metrics import BY_COLUMN

TEXT, INT, FLOAT, TIME = "text", "int", "float", "time"
KINDS = (TEXT, INT, FLOAT, TIME)
NAME = "SUMMARY_COLUMNS"
# this room's own: a summary row's scenario (or phase) and GPU, as the samples name them
OWN = {"scenario": TEXT, "phase": TEXT, "uuid": TEXT, "gpu": INT}
SPREAD = re.compile(r"_p(10|90)$")  # a column's 10th and 90th percentiles beside it
NUMERIC_SUFFIXES = ("_per_call", "_measured_pct")  # work per call; a fraction of a measured peak


class Conflict(ValueError):
    """Two modules declare one column with two kinds."""


def declarations(path: Path) -> dict[str, str]:
    """The SUMMARY_COLUMNS literal at the top of one module's source ({} where it has none)."""
    text = path.read_text(encoding="utf-8")
    if NAME not in text:
        return {}
    for node in ast.parse(text, str(path)).body:
        if isinstance(node, ast.Assign) and [getattr(t, "id", None) for t in node.targets] == [NAME]:
            found = ast.literal_eval(node.value)
            wrong = {k: v for k, v in found.items() if not isinstance(k, str) or v not in KINDS}
            if wrong:
                raise ValueError(f"{path}: {NAME} gives {wrong}, not names and kinds of {KINDS}")
            return dict(found)
    return {}


def roots() -> list[Path]:
    """The folders of the package's source: gpubench/ and kernels/ (installed as gpubench.kernels)."""
    kernels = importlib.util.find_spec("gpubench.kernels")
    found = list(kernels.submodule_search_locations or []) if kernels else []
    return [Path(__file__).resolve().parents[1]] + [Path(p) for p in found]


def collect(folders) -> dict[str, str]:
    """Every column declared under folders, with OWN: {name: kind}. Conflict where two say two kinds."""
    found, where = dict(OWN), {k: "gpubench.record.columns" for k in OWN}
    for folder in folders:
        for path in sorted(Path(folder).rglob("*.py")):
            for name, kind in declarations(path).items():
                if found.setdefault(name, kind) != kind:
                    raise Conflict(f"summary column {name!r} is {found[name]} in {where[name]} and {kind} in {path}")
                where.setdefault(name, str(path))
    return found


@functools.lru_cache(maxsize=1)
def declared() -> dict[str, str]:
    """The package's summary columns and their kinds, collected once."""
    return collect(roots())


def kind(key: str) -> str | None:
    """A column's kind: declared, or float for a metric and for a metric's spread; None for undeclared."""
    got = declared().get(key)
    return FLOAT if got is None and SPREAD.sub("", key) in BY_COLUMN else got


def text_columns() -> frozenset:
    return frozenset(k for k, v in declared().items() if v == TEXT)


@functools.lru_cache(maxsize=4096)
def numeric(key: str) -> bool:
    """Columns that hold numbers (or nothing): metrics, their spread, times, work, counts."""
    base = SPREAD.sub("", key)
    return (base in BY_COLUMN or declared().get(base) in (INT, FLOAT, TIME)
            or base.endswith(NUMERIC_SUFFIXES))


def cell(value, key: str):
    """A summary cell as written: NaN as nothing, a time to 0.1 ms, another float to ten digits, else as is."""
    if isinstance(value, float):
        if math.isnan(value):
            return ""
        return f"{value:.4f}" if declared().get(key) == TIME else f"{value:.10g}"
    return value
