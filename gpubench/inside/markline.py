"""One line of marks.tsv, as both ends know it: its fields in order, what each holds and how it is written.
gpubench.inside.markwriter writes lines only through `Line.write`, gpubench.job.markreader finds each field at
the place this spec gives it; neither counts tabs of its own.

Three kinds of line, tab-separated, each written whole by one process:

    M  t        rank pid uuid clock  name
    S  t_first  rank pid uuid clock  t_last n counted flops hw_flops bytes tokens bad lead_s
    P  t        rank pid uuid clock  written back pattern

The first field is the line's letter: M starts a phase; S, A, C, F, K and J gather steps (ORIGINS says whose).
P says that the optimizer hook's steps of this process (its A and C steps) are patterns of several optimizers'
steps from here on (gpubench.inside.steprule): the steps after its `written` first ones are each one
`pattern` ("5 × Adam #1, 1 × Adam #2": each optimizer's steps in one pattern, by class name), and the last
`back` of those `written` are taken back (they were parts of the pattern's first step, written before the
second optimizer stepped). It counts steps, not time: a step stamped on the GPU may be stamped after it.
`uuid` is SAME where it is the one of that process's previous line (a 40-character UUID on every line
would be a third of a day's marks). Times are written to the microsecond, sums to six digits.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import NamedTuple

SEP = "\t"
SAME = "="  # in the uuid field: the uuid of this process's previous line
MARK = "M"
# the job's step(); its optimizer's; the optimizer step whose FLOPs were counted; its outermost module's forward
# calls (a job that steps no optimizer); a forward whose FLOPs were counted (the first of its input shape); a
# JAX job's jitted step function
ORIGINS = {"S": "step", "A": "optimizer", "C": "counted", "F": "forward", "K": "forward counted", "J": "jit"}
PATTERN = "P"  # the optimizers' pattern from a given step of the hook's on
BOM = b"\xef\xbb\xbf"  # an editor's byte-order mark before the first line: no part of it


def _time(x) -> str:
    return f"{x:.6f}"


def _sum(x) -> str:
    return f"{x:.6g}"


# each kind: how a value is written, and how its text is read back (the reader checks ranges of its own)
KINDS = {
    "letter": (str, str),
    "time": (_time, float),  # time.monotonic() seconds
    "seconds": (_time, float),  # a duration
    "rank": (str, str),  # "" where the process has none
    "count": (str, int),
    "sum": (_sum, float),
    "text": (str, str),
}


class Field(NamedTuple):
    name: str
    kind: str


class Line:
    """The fields of one kind of line, in order; `at` gives each field's place by name (at.t_last)."""

    def __init__(self, *fields: Field):
        self.fields = fields
        self.names = tuple(f.name for f in fields)
        self.width = len(fields)
        self.at = SimpleNamespace(**{f.name: i for i, f in enumerate(fields)})
        self._show = tuple(KINDS[f.kind][0] for f in fields)

    def write(self, **values) -> str:
        """The line, newline included, from a value for every field (a missing or unknown one is a KeyError)."""
        if len(values) != self.width:
            raise KeyError(f"a marks line takes {', '.join(self.names)}; given {', '.join(values)}")
        return SEP.join(show(values[name]) for show, name in zip(self._show, self.names)) + "\n"

    def read(self, line: str) -> dict | None:
        """The fields of a line of this kind by name, each read back as its kind says; None where the line has
        another number of fields. A field that does not read as its kind raises ValueError."""
        p = line.rstrip("\n").split(SEP)
        if len(p) != self.width:
            return None
        return {f.name: KINDS[f.kind][1](text) for f, text in zip(self.fields, p)}


WHO = (Field("rank", "rank"), Field("pid", "count"), Field("uuid", "text"), Field("clock", "text"))
MARK_LINE = Line(Field("letter", "letter"), Field("t", "time"), *WHO, Field("name", "text"))
STEPS_LINE = Line(
    Field("letter", "letter"),
    Field("t_first", "time"),
    *WHO,
    Field("t_last", "time"),
    Field("n", "count"),
    Field("counted", "count"),
    Field("flops", "sum"),
    Field("hw_flops", "sum"),
    Field("bytes", "sum"),
    Field("tokens", "sum"),
    Field("bad", "count"),
    Field("lead_s", "seconds"),
)
PATTERN_LINE = Line(
    Field("letter", "letter"),
    Field("t", "time"),
    *WHO,
    Field("written", "count"),
    Field("back", "count"),
    Field("pattern", "text"),
)


def line_of(letter: str) -> Line | None:
    """The spec of a line that starts with letter; None for none."""
    if letter == PATTERN:
        return PATTERN_LINE
    return MARK_LINE if letter == MARK else STEPS_LINE if letter in ORIGINS else None
