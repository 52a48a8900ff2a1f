"""What a run directory's files must hold for plot and report to read them: the manifest's fields and their
types, the samples' columns and times, and the range of every number. rundir's readers run these checks
as each file is read, so that nothing past them meets a value of the wrong kind.

A field of the wrong type, a time that is not one, a missing column: the file is refused, in a sentence
naming the field (Bad, which the reader turns into RunDirError). A number out of its range (GPU-Util
-1000%, a negative kernel time, an infinity) is flagged instead of refused: a sample's becomes NaN with a
note that says it is not drawn, a summary's becomes metrics.OutOfRange, written "out of range".
JSON null is a missing value: None, but an empty object or array in the manifest's own fields (so that
`manifest.get("gpu", {})` holds); nulls in an array are dropped.
"""

from __future__ import annotations

import math
import re
import string

from gpubench.metrics import BY_COLUMN, HUGE, OutOfRange, beyond, in_range, valid_range


class Bad(ValueError):
    """A file's content that cannot be read: the text completes "<file> is damaged: ..."."""


# --- the manifest ----------------------------------------------------------------------------------


class Text:
    def __init__(self, longest: int):
        self.longest = longest

    def check(self, value, where):
        if not isinstance(value, str):
            raise Bad(f"its {where!r} is not text")
        if len(value) > self.longest:
            raise Bad(f"its {where!r} is longer than {self.longest} characters")
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:  # a lone surrogate: JSON's \ud800 escapes decode to one
            raise Bad(f"its {where!r} is not text (it holds a lone surrogate)") from None
        return value


class Number:
    def __init__(self, lo: float, hi: float, integer: bool = False, above: bool = False):
        self.lo, self.hi, self.integer, self.above = lo, hi, integer, above

    def check(self, value, where):
        kind = "a whole number" if self.integer else "a number"
        if isinstance(value, bool) or not isinstance(value, int if self.integer else (int, float)):
            raise Bad(f"its {where!r} is not {kind}")
        if not (self.lo < value if self.above else self.lo <= value) or not value <= self.hi:
            low = f"above {self.lo:g}" if self.above else f"at least {self.lo:g}"
            raise Bad(f"its {where!r} is not {kind} {low} and at most {self.hi:g}")
        return value


class Flag:
    def check(self, value, where):
        if not isinstance(value, bool):
            raise Bad(f"its {where!r} is not true or false")
        return value


class Choice:
    def __init__(self, *words):
        self.words = words

    def check(self, value, where):
        if value not in self.words:
            raise Bad(f"its {where!r} is not one of {', '.join(self.words)}")
        return value


class Each:
    """A JSON array, every item to spec."""

    def __init__(self, spec):
        self.spec = spec

    def check(self, value, where):
        if not isinstance(value, list):
            raise Bad(f"its {where!r} is not a JSON array")
        return [check(v, self.spec, f"{where}[{i}]") for i, v in enumerate(value) if v is not None]


class Map:
    """A JSON object with any names, every value to spec."""

    def __init__(self, spec):
        self.spec = spec

    def check(self, value, where):
        if not isinstance(value, dict):
            raise Bad(f"its {where!r} is not a JSON object")
        out = {}
        for k, v in value.items():
            KEY.check(k, f"{where}.<name>")
            out[k] = None if v is None else check(v, self.spec, f"{where}.{k}")
        return out


class Needed:
    """A field the object must have."""

    def __init__(self, spec):
        self.spec = spec


class Sentence:
    """A story sentence: text with {fields} the report fills from a summary row, each a plain name with at
    most a short format spec."""

    SPEC = re.compile(r"[<>^=]?[+\- ]?#?0?\d{0,2}[,_]?(\.\d{1,2})?[bcdeEfFgGnosxX%]?")

    def check(self, value, where):
        TEXT.check(value, where)
        try:
            parts = list(string.Formatter().parse(value))
        except ValueError:
            raise Bad(f"its {where!r} is not a sentence to fill (its braces do not pair)") from None
        for _, field, spec, conversion in parts:
            if field is None:
                continue
            if not field.isidentifier() or conversion or not self.SPEC.fullmatch(spec or ""):
                raise Bad(f"its {where!r} is not a sentence to fill ({{{field}}} is not a plain field)")
        return value


def check(value, spec, where: str):
    """value, checked against spec (nulls as the module's docstring says); Bad where it does not hold."""
    if isinstance(spec, dict):
        if not isinstance(value, dict):
            raise Bad(f"its {where!r} is not a JSON object")
        out = dict(value)
        for key, field in spec.items():
            need = isinstance(field, Needed)
            field = field.spec if need else field
            if out.get(key) is None:
                if need:
                    raise Bad(
                        f"it has no {where + '.' + key if where else key!r}, which every manifest gpubench writes has"
                    )
                if key in out and not where:  # the manifest's own fields, read as manifest.get("gpu", {})
                    out[key] = {} if isinstance(field, (dict, Map)) else [] if isinstance(field, Each) else None
                continue
            out[key] = check(out[key], field, f"{where}.{key}" if where else key)
        return out
    return spec.check(value, where)


KEY, NAME, TEXT = Text(200), Text(200), Text(100_000)
INDEX, COUNT = Number(0, 1e6, integer=True), Number(1, 1e6, integer=True)
AMOUNT = Number(0, HUGE)
GPU = {
    "name": NAME,
    "uuid": NAME,
    "driver": NAME,
    "cuda_driver": NAME,
    "sm_count": COUNT,
    "nvml_index": INDEX,
    "memory_mib": AMOUNT,
}
# The fields plot and report read, each where present; others pass unread.
MANIFEST = {
    "kind": Needed(Choice("run", "watch")),
    "status": NAME,
    "completed": Flag(),
    "start_wall": NAME,
    "command": Each(TEXT),
    "gpu": GPU,
    "dtype": NAME,
    "peaks": {
        "datasheet": Map(Number(0, HUGE, above=True)),
        "measured": Map(Number(0, HUGE, above=True)),
        "conditions": Map(Map(AMOUNT)),
    },
    "families": Map({"story": Each(Sentence())}),
    "sources": {"used": Each(NAME), "unavailable": Map(TEXT)},
    "options": {"trim_s": Number(0, 1e6)},
    "versions": Map(NAME),
    "warnings": Each(TEXT),
    "errors": Each(TEXT),
    "distributed": {
        "world_size": COUNT,
        "clock": TEXT,
        "ranks": Each(
            {
                "rank": Needed(INDEX),
                "node": Needed(NAME),
                "gpu": Needed({"nvml_index": Needed(INDEX), "uuid": Needed(NAME)}),
            }
        ),
    },
    "child": {"argv": Each(TEXT), "exit_code": Number(-1e6, 1e6, integer=True), "signal": NAME},
    # a watch's receipt (gpubench.read.receipt): the report gives it anew from the summary, at this price
    "receipt": {"price_per_gpu_hour": AMOUNT},
}


def manifest(data) -> dict:
    """The manifest's JSON, checked where plot and report read it."""
    if not isinstance(data, dict):
        raise Bad("it does not hold a gpubench manifest (a JSON object)")
    return check(data, MANIFEST, "")


# --- samples ---------------------------------------------------------------------------------------

SAMPLE_COLUMNS = ("t_start_s", "t_end_s", "gpu", "phase")  # what every recording writes from its first row
TIMES = ("t_start_s", "t_end_s")
LONGEST_TIME_S = 1e12  # the monotonic clock counts from boot: thirty thousand years is not a time
LONGEST_TEXT = 1000  # a phase is at most marks.NAME_MAX characters, a UUID 40


def sample_names(names) -> None:
    """Bad where the file lacks a column every recording writes."""
    missing = [n for n in SAMPLE_COLUMNS if n not in names]
    if missing:
        raise Bad(
            f"it lacks the column{'s' if len(missing) > 1 else ''} {', '.join(missing)}, so it is not a "
            "samples file gpubench wrote"
        )


def sample_columns(columns: dict, line, notes: list | None, flagged: set, texts: bool = True) -> dict:
    """Columns of sample rows (numpy arrays), checked: times and GPUs that are not, text too long for a name
    (texts False: checked already, as samples.arrows checks each word of its dictionaries once), are Bad,
    naming the row (line(i): where row i of these columns stands in the file); metrics out of range become
    NaN, said once per column in notes (flagged: the columns said so already)."""
    import numpy as np

    for name in TIMES:
        if name in columns:
            t = columns[name]
            bad = np.flatnonzero(~((t >= 0) & (t <= LONGEST_TIME_S)))
            if len(bad):
                raise Bad(f"{line(bad[0])}: its {name} is {t[bad[0]]:g}, not a time on the monotonic clock")
    if all(n in columns for n in TIMES):
        bad = np.flatnonzero(columns["t_end_s"] < columns["t_start_s"])
        if len(bad):
            raise Bad(f"{line(bad[0])}: its interval ends before it starts")
    for name in ("gpu", "rank"):
        if name in columns and columns[name].dtype.kind == "f":
            v = columns[name]
            ok = (v >= 0) & (v <= 1e6) & (v == np.floor(v)) if name == "gpu" else np.isnan(v) | ((v >= 0) & (v <= 1e6))
            bad = np.flatnonzero(~ok)
            if len(bad):
                raise Bad(f"{line(bad[0])}: its {name} is {v[bad[0]]:g}, not a GPU's or a rank's number")
    for name in ("phase", "uuid") if texts else ():
        if name in columns and columns[name].dtype == object and len(columns[name]):
            lengths = np.fromiter(
                (len(x) if isinstance(x, str) else -1 for x in columns[name]), np.int64, len(columns[name])
            )
            bad = np.flatnonzero((lengths < 0) | (lengths > LONGEST_TEXT))
            if len(bad):
                raise Bad(f"{line(bad[0])}: its {name} is not a name of up to {LONGEST_TEXT} characters")
    out = dict(columns)
    for name, v in columns.items():
        if name not in BY_COLUMN or v.dtype.kind != "f":
            continue
        lo, hi = valid_range(name)
        wrong = ~np.isnan(v) & ~((v >= lo) & (v <= hi))
        if wrong.any():
            if notes is not None and name not in flagged:
                flagged.add(name)
                first = v[wrong][0]
                notes.append(
                    f"values of {name} {beyond(name, first)} (such as {first:g}) are left out of the "
                    "figures: no GPU reads so"
                )
            out[name] = np.where(wrong, np.nan, v)
    return out


# --- the summary -----------------------------------------------------------------------------------


def summary_value(key: str, value, scenario, notes: list | None):
    """A summary cell already parsed (numbers as numbers): a number out of its range becomes OutOfRange,
    said in notes."""
    if (
        not isinstance(value, (int, float))
        or isinstance(value, bool)
        or (isinstance(value, float) and math.isnan(value))
    ):
        return value
    column = re.sub(r"_p(10|90)$", "", key)
    if in_range(column, value):
        return value
    if notes is not None:
        notes.append(f"its {key} of {scenario} is {value:g}, {beyond(column, value)}: shown as out of range")
    return OutOfRange(value)
