"""The columns of summary.csv and their kinds, as the writer writes them and the reader reads them back.

A summary's columns are made by many rooms: the suite's scenario loop, the kernel families, the watch's phases,
the merge of ranks, the tensor-pipe ceiling. Each module that makes columns this room cannot tell by their
name declares them where it makes them, in a literal at its top:

    SUMMARY_COLUMNS = {"straggler_text": "text", "node": "text"}  # gpubench.record.columns.DECLARERS names it

and registers by a line in DECLARERS below, the one list of the modules that declare columns. This module
imports them by name from that list the first time a column's kind is asked for and reads their
SUMMARY_COLUMNS: the one place record/ reaches into rooms above it, deferred, so importing this module loads
none of them and no import cycle forms while the package loads. Collecting must not load torch: a kernel
family does, and plotting a run must not, so the families' columns stand in kernels/columns.py, which imports
nothing, and kernels/common.py and kernels/allreduce.py take their SUMMARY_COLUMNS from it. A declaring module
that imports something heavy at its top does the same: its literal goes into a light module beside it, and
that module is the one DECLARERS names. The metrics of gpubench.metrics are floats without a declaration. Kinds:

    text   words, kept as written (a scenario named 42 is named "42"); an empty cell is NaN
    int    a whole number or nothing
    float  a number or nothing, written to ten digits
    time   seconds on the monotonic clock, written to a tenth of a millisecond

A column nobody declares is read cell by cell as it looks (a number where it reads as one, else text):
declare a column of words, or "0" in it reads as the number 0.
"""

from __future__ import annotations

import functools
import importlib
import math
import re

from gpubench.metrics import BY_COLUMN

TEXT, INT, FLOAT, TIME = "text", "int", "float", "time"
KINDS = (TEXT, INT, FLOAT, TIME)
NAME = "SUMMARY_COLUMNS"
# this room's own: a summary row's scenario (or phase) and GPU, as the samples name them
OWN = {"scenario": TEXT, "phase": TEXT, "uuid": TEXT, "gpu": INT}
SPREAD = re.compile(r"_p(10|90)$")  # a column's 10th and 90th percentiles beside it
NUMERIC_SUFFIXES = ("_per_call", "_measured_pct")  # work per call; a fraction of a measured peak
# the modules that declare summary columns, by import name: each holds a SUMMARY_COLUMNS at its top and none
# loads torch, triton or cupy (a kernel family's columns stand in gpubench.kernels.columns, beside them)
DECLARERS = (
    "gpubench.read.summary",  # a window's times, samples and rates
    "gpubench.truth.timing",  # the suite's timed calls
    "gpubench.truth.ceiling",  # the tensor-pipe ceiling
    "gpubench.kernels.columns",  # every kernel family's, and the all-reduce's
    "gpubench.suite.scenarios",  # a scenario's family, implementation and baseline
    "gpubench.job.phases",  # a watched job's phases and verdicts
    "gpubench.job.provenance",  # where a phase's steps and FLOPs come from
    "gpubench.job.tally",  # a phase's work streams and clock
    "gpubench.ranks.merge",  # the merge of ranks: nodes and stragglers
)


class Conflict(ValueError):
    """Two modules declare one column with two kinds."""


def declarations(module: str) -> dict[str, str]:
    """One declaring module's SUMMARY_COLUMNS, imported by its name and checked: {name: kind}."""
    found = getattr(importlib.import_module(module), NAME, None)
    if not isinstance(found, dict):
        raise ValueError(f"{module} is in {__name__}.DECLARERS but has no {NAME} dict (it has {found!r})")
    wrong = {k: v for k, v in found.items() if not isinstance(k, str) or v not in KINDS}
    if wrong:
        raise ValueError(f"{module}: {NAME} gives {wrong}, not names and kinds of {KINDS}")
    return dict(found)


def collect(modules) -> dict[str, str]:
    """Every column the modules (by import name) declare, with OWN: {name: kind}. Conflict where two say two
    kinds."""
    found, where = dict(OWN), {k: __name__ for k in OWN}
    for module in modules:
        for name, kind in declarations(module).items():
            if found.setdefault(name, kind) != kind:
                raise Conflict(f"summary column {name!r} is {found[name]} in {where[name]} and {kind} in {module}")
            where.setdefault(name, module)
    return found


@functools.lru_cache(maxsize=1)
def declared() -> dict[str, str]:
    """The package's summary columns and their kinds, collected once, from the modules DECLARERS names."""
    return collect(DECLARERS)


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
    return base in BY_COLUMN or declared().get(base) in (INT, FLOAT, TIME) or base.endswith(NUMERIC_SUFFIXES)


def cell(value, key: str):
    """A summary cell as written: NaN as nothing, a time to 0.1 ms, another float to ten digits, else as is."""
    if isinstance(value, float):
        if math.isnan(value):
            return ""
        return f"{value:.4f}" if declared().get(key) == TIME else f"{value:.10g}"
    return value
