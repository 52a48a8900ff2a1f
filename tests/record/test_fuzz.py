"""Damaged run directories, generated: every file of a run and every column, missing, empty, of the wrong
type, not finite, out of range, huge (past csv's field limit, a line of megabytes), in another encoding or
with a byte-order mark, nested deep, cut short, from another tool, a folder or a device in its place; and
an output that fails (standard output closed or full, an encoding that lacks the characters of --out).
plot, report and list on each must end in exit 0 or 2 with no traceback, write nothing where they refuse
(but where only standard output failed, after the files), and leave the run as it was. Marks files,
generated too: lines with times that are not times (negative, NaN, infinite, reversed), garbage, control
characters and byte-order marks are left out and counted, never raised, and never shape a phase.

CI tries EXAMPLES examples, the same ones on every run (derandomized), in about a minute on two cores;
GPUBENCH_FUZZ_EXAMPLES=N tries N, and GPUBENCH_FUZZ_SEED=S another N than the fixed ones.
"""

from __future__ import annotations

import contextlib
import csv
import io
import json
import os
import shutil
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, seed, settings
from hypothesis import strategies as st
from synthetic import SCENARIOS, make_run

from gpubench.cli import main

EXAMPLES = int(os.environ.get("GPUBENCH_FUZZ_EXAMPLES", "32"))
SEED = os.environ.get("GPUBENCH_FUZZ_SEED")
FILES = ("manifest.json", "samples", "summary.csv")
# Small runs, so that a run the commands accept is drawn in a second or two: a watched job's (three figures),
# and a suite's with a kernel of each ground truth and a decode point (every figure of one GPU).
BASES = {"watch-csv": ("watch", "csv", ("idle", "copy-triton", "gemm-torch")),
         "watch-arrows": ("watch", "arrows", ("idle", "copy-triton", "gemm-torch")),
         "suite-arrows": ("run", "arrows", ("copy-triton", "h2d-copy", "gemm-torch", "decode-b16"))}


@pytest.fixture(scope="module")
def bases(tmp_path_factory) -> dict:
    root = tmp_path_factory.mktemp("bases")
    return {name: make_run(root / name, fmt=fmt, kind=kind, scenarios=[s for s in SCENARIOS if s[0] in names])
            for name, (kind, fmt, names) in BASES.items()}


def snapshot(root: Path) -> dict:
    return {str(p.relative_to(root)): (p.read_bytes() if p.is_file() else None) for p in sorted(root.rglob("*"))}


# --- what goes where a value belongs ---------------------------------------------------------------

HOSTILE_TEXT = ["", "x" * 300_000, "\ud800", "<script>alert(1)</script>", "{", "{0}", "{said:99999999f}",
                "é", "a|b", "**x**", "`x`", "\n", "NaN"]
leaf = st.one_of(st.none(), st.booleans(), st.integers(-2**70, 2**70), st.just(10**400),
                 st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=12), st.sampled_from(HOSTILE_TEXT))
json_value = st.recursive(leaf, lambda inner: st.lists(inner, max_size=3) |
                          st.dictionaries(st.text(max_size=8), inner, max_size=3), max_leaves=8)
cell = st.one_of(st.sampled_from(["", "nan", "inf", "-inf", "-1000", "-1", "0", "1e308", "1e400", "101", "abc",
                                  "True", "\x00", "x" * 100_000, "x" * 200_000, "é", "<script>", "1,2", '"',
                                  "9" * 400, "9" * 5001, "\ufeff0", "a\x1b]0;x\x07b"]),
                 st.floats().map(repr), st.integers(-10**20, 10**20).map(str), st.text(max_size=10))


def paths(value, prefix=()):
    """Every path to a value inside nested JSON objects and arrays."""
    yield prefix
    if isinstance(value, dict):
        for k, v in value.items():
            yield from paths(v, prefix + (k,))
    elif isinstance(value, list):
        for i, v in enumerate(value[:3]):
            yield from paths(v, prefix + (i,))


# --- damage ----------------------------------------------------------------------------------------

def samples_file(run: Path) -> Path:
    return next(run / n for n in ("samples.arrows", "samples.csv") if (run / n).exists())


def target(run: Path, name: str) -> Path:
    return samples_file(run) if name == "samples" else run / name


def whole_file(data, run: Path) -> None:
    """The file gone, empty, cut short, bytes changed, in another encoding, or something else altogether."""
    path = target(run, data.draw(st.sampled_from(FILES)))
    raw = path.read_bytes()
    how = data.draw(st.sampled_from(["delete", "empty", "cut", "flip", "utf-16", "latin-1", "random", "deep",
                                     "foreign", "folder", "device", "bom", "long line"]))
    if how == "delete":
        path.unlink()
    elif how == "folder":
        path.unlink()
        path.mkdir()
    elif how == "device":
        path.unlink()
        path.symlink_to("/dev/zero")
    elif how == "bom":  # as a spreadsheet or an editor saves it
        path.write_bytes(b"\xef\xbb\xbf" + raw)
    elif how == "long line":  # megabytes without a newline: past csv's field limit and any header
        path.write_bytes(raw[:data.draw(st.integers(0, 200))] + b"x," * 600_000)
    elif how == "empty":
        path.write_bytes(b"")
    elif how == "cut":
        path.write_bytes(raw[:data.draw(st.integers(0, max(0, len(raw) - 1)))])
    elif how == "flip":
        at = data.draw(st.lists(st.integers(0, len(raw) - 1), min_size=1, max_size=8))
        out = bytearray(raw)
        for i in at:
            out[i] ^= data.draw(st.integers(1, 255))
        path.write_bytes(bytes(out))
    elif how in ("utf-16", "latin-1"):
        text = raw.decode("utf-8", "replace").replace("GPU", "GPU é")
        path.write_bytes(text.encode(how, "replace"))
    elif how == "random":
        path.write_bytes(data.draw(st.binary(max_size=300)))
    elif how == "deep":
        depth = data.draw(st.sampled_from([50, 100_000]))
        path.write_text("[" * depth + "]" * depth if path.suffix == ".json" else "t_start_s\n" + "[" * depth)
    elif path.suffix == ".arrows":  # another tool's file of the same name
        _foreign_arrows(path, data)
    else:
        path.write_text('{"time": [1, 2], "value": [3, 4]}' if path.suffix == ".json" else "time,value\n1,2\n3,4\n")


def _foreign_arrows(path: Path, data) -> None:
    """An Arrow stream another tool could write: gpubench's column names with other types, or none of them."""
    import pyarrow as pa
    import pyarrow.ipc as ipc

    kind = data.draw(st.sampled_from(["other names", "times as floats", "metric as text", "phase as number"]))
    n = data.draw(st.integers(0, 5))
    cols = {"t_start_s": pa.array([float(i) for i in range(n)]), "t_end_s": pa.array([i + 0.1 for i in range(n)]),
            "gpu": pa.array([0] * n), "phase": pa.array(["a"] * n), "gpu_util_pct": pa.array([50.0] * n)}
    if kind == "other names":
        cols = {"time": cols["t_start_s"], "value": cols["gpu_util_pct"]}
    elif kind == "metric as text":
        cols["gpu_util_pct"] = pa.array(["high"] * n)
    elif kind == "phase as number":
        cols["phase"] = pa.array([1.5] * n)
    table = pa.table(cols)
    with pa.OSFile(str(path), "wb") as f, ipc.new_stream(f, table.schema) as w:
        w.write_table(table)


def manifest_field(data, run: Path) -> None:
    """One field of the manifest set to any JSON value, or dropped."""
    path = run / "manifest.json"
    manifest = json.loads(path.read_text())
    where = data.draw(st.sampled_from([p for p in paths(manifest) if p]))
    parent = manifest
    for key in where[:-1]:
        parent = parent[key]
    if data.draw(st.booleans()) and isinstance(parent, dict):
        del parent[where[-1]]
    else:
        parent[where[-1]] = data.draw(json_value)
    path.write_text(json.dumps(manifest))


def csv_cells(data, run: Path) -> None:
    """Cells, a column, a header or rows of samples.csv or summary.csv changed."""
    names = ["summary.csv"] + (["samples.csv"] if (run / "samples.csv").exists() else [])
    path = run / data.draw(st.sampled_from(names))
    with open(path, newline="") as f:
        rows = list(csv.reader(f))
    head, body = rows[0], rows[1:]
    column = data.draw(st.integers(0, len(head) - 1))
    how = data.draw(st.sampled_from(["cell", "column", "drop column", "rename", "duplicate", "short row",
                                     "shuffle", "header only", "repeat rows", "reverse"]))
    if how == "cell" and body:
        body[data.draw(st.integers(0, len(body) - 1))][column] = data.draw(cell)
    elif how == "column":
        value = data.draw(cell)
        for row in body:
            row[column] = value
    elif how == "drop column":
        head.pop(column)
        for row in body:
            row.pop(column)
    elif how == "rename":
        head[column] = data.draw(st.text(max_size=12))
    elif how == "duplicate":
        head[column] = head[(column + 1) % len(head)]
    elif how == "short row" and body:
        body[data.draw(st.integers(0, len(body) - 1))].pop()
    elif how == "shuffle":
        body = data.draw(st.permutations(body))
    elif how == "header only":
        body = []
    elif how == "repeat rows" and body:
        at = data.draw(st.integers(0, len(body) - 1))
        body = body[:at + 1] + body[at:]
    elif how == "reverse":
        body = body[::-1]
    with open(path, "w", newline="") as f:
        csv.writer(f).writerows([head] + body)


def arrows_values(data, run: Path) -> None:
    """Values of samples.arrows rewritten through its own writer: times, GPUs and metrics out of range."""
    import numpy as np

    from gpubench.record.arrowfile import write
    from gpubench.record.rundir import read_samples

    path = run / "samples.arrows"
    if not path.exists():
        return
    samples = read_samples(path)
    columns = {k: np.array(v, copy=True) for k, v in samples.columns().items()}
    name = data.draw(st.sampled_from([n for n in columns if columns[n].dtype.kind == "f"]))
    value = data.draw(st.sampled_from([np.nan, np.inf, -np.inf, -1000.0, -1.0, 1e300, 1e15, 101.0, 3.5]))
    rows = data.draw(st.sampled_from(["one", "all"]))
    if rows == "one":
        columns[name][data.draw(st.integers(0, len(columns[name]) - 1))] = value
    else:
        columns[name][:] = value
    from gpubench.read.samples import Samples

    with np.errstate(invalid="ignore", over="ignore"):  # a time of NaN or 1e300 as microseconds: garbage, as wanted
        write(path, Samples(columns), list(columns))


def output_in_the_way(data, run: Path) -> None:
    """Where the commands would write, something that is not theirs to replace."""
    how = data.draw(st.sampled_from(["figures file", "figure folder", "report folder"]))
    if how == "figures file":
        (run / "figures").write_text("mine")
    elif how == "figure folder":
        (run / "figures" / "headline.png").mkdir(parents=True)
    else:
        (run / "report.md").mkdir()


DAMAGE = [whole_file, manifest_field, manifest_field, csv_cells, csv_cells, arrows_values, output_in_the_way]


# --- the test --------------------------------------------------------------------------------------

class Full(io.TextIOBase):
    """Standard output on a full disk (`> /dev/full`)."""

    def writable(self) -> bool:
        return True

    def write(self, text):
        raise OSError(28, "No space left on device")


OUTPUTS = ("terminal", "closed", "full", "ascii")  # where standard output goes


def run_command(args, output: str = "terminal") -> tuple[int, str]:
    err = io.StringIO()
    stdout = {"terminal": io.StringIO(), "closed": None, "full": Full(),
              "ascii": io.TextIOWrapper(io.BytesIO(), encoding="ascii")}[output]
    with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(err):
        code = main(args)
    return code, err.getvalue()


def held(code: int, err: str, command: str) -> None:
    assert code in (0, 2), (code, err)
    assert "Traceback" not in err, err
    if code == 2:
        assert err.startswith(f"gpubench {command}: error: ") and err.count("\n") == 1, err


def output_failed(err: str) -> bool:
    """Only standard output failed: the files were written first."""
    return "error: cannot write to standard output" in err


def fuzzed(test):
    test = settings(max_examples=EXAMPLES, deadline=None, database=None, derandomize=SEED is None,
                    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow,
                                           HealthCheck.data_too_large])(test)
    return seed(int(SEED))(test) if SEED is not None else test


@fuzzed
@given(data=st.data())
def test_a_damaged_run_is_one_sentence_or_a_report_and_never_harmed(bases, data):
    base = bases[data.draw(st.sampled_from(sorted(bases)))]
    output = data.draw(st.sampled_from(OUTPUTS))
    with tempfile.TemporaryDirectory() as tmp:
        run = Path(tmp) / "run"
        shutil.copytree(base, run)
        for damage in data.draw(st.lists(st.sampled_from(DAMAGE), min_size=1, max_size=3)):
            # a file no more, or a device in its place (reading /dev/zero has no end): no damage after it
            if run.joinpath("manifest.json").is_file() and any(run.glob("samples.*")) and not any(
                    p.is_symlink() or p.is_dir() for p in run.iterdir() if p.name != "figures"):
                try:
                    damage(data, run)
                except (OSError, ValueError, json.JSONDecodeError, UnicodeDecodeError, IndexError, KeyError,
                        TypeError, csv.Error):
                    pass  # a file already too damaged for this kind of damage
        before = snapshot(run)

        out = Path(tmp) / ("out-ü" if output == "ascii" else "out")
        code, err = run_command(["report", str(run), "--out", str(out)], output)
        held(code, err, "report")
        assert snapshot(run) == before  # --out: the run is only read
        if code == 2 and not output_failed(err):
            assert not out.exists()
        elif code == 0 or output in ("closed", "full"):
            assert code == 0 or output_failed(err)
            assert {"report.md", "report.html"} <= {p.name for p in out.iterdir()}
            assert not list(out.rglob(".gpubench-*"))
            for name in ("report.md", "report.html"):  # no control character of the run's reaches the report
                text = (out / name).read_text()
                assert not {c for c in text if ord(c) < 32 and c not in "\n\t"}, name

        code, err = run_command(["plot", str(run)], output)
        held(code, err, "plot")
        after = snapshot(run)
        drawn = {k: v for k, v in after.items() if k not in before}
        assert {k: v for k, v in after.items() if k in before} == before  # nothing of the run replaced
        if code == 2 and not output_failed(err):
            assert not drawn
        assert all(k.startswith("figures") and ".gpubench-" not in k for k in drawn)

    code, err = run_command(["list"], output)
    assert code == 0 if output in ("terminal", "ascii") else (code == 2 and output_failed(err)), (code, err)


# --- marks files -----------------------------------------------------------------------------------

TIMES = ["10.5", "-5", "nan", "inf", "-inf", "1e13", "1e400", "", "abc", "12.25", "0", "11"]
NAMES = ["train", "", "a\x00b", "x\x1b]0;t\x07y", "é", "n" * 300, "[/b]", "\ufeffeval"]


@st.composite
def marks_line(draw) -> str:
    """A line of a marks file, well formed or not: a mark, a group of steps, the old format, or garbage."""
    t = draw(st.sampled_from(TIMES))
    who = f"{draw(st.sampled_from(['', '0', '3', 'x']))}\t{draw(st.sampled_from(['7', '8', '-1', '']))}\t\thost"
    kind = draw(st.sampled_from(["M", "S", "old", "garbage"]))
    if kind == "M":
        return f"M\t{t}\t{who}\t{draw(st.sampled_from(NAMES))}"
    if kind == "S":
        n = draw(st.sampled_from(["1", "3", "0", "-2", "x"]))
        sums = "\t".join(draw(st.sampled_from(["0", "1e12", "nan", "-1", "inf"])) for _ in range(4))
        return f"S\t{t}\t{who}\t{draw(st.sampled_from(TIMES))}\t{n}\t{n}\t{sums}\t0\t{draw(st.sampled_from(TIMES))}"
    if kind == "old":
        return f"{t}\t0\t7\t{draw(st.sampled_from(['mark', 'step']))}\t{draw(st.sampled_from(NAMES + TIMES))}"
    return draw(st.text(max_size=30).filter(lambda x: "\n" not in x and "\r" not in x))


@fuzzed
@given(lines=st.lists(marks_line(), max_size=40), bom=st.booleans(), torn=st.booleans())
def test_damaged_marks_are_left_out_and_said_never_raised(lines, bom, torn):
    """Whatever a marks file holds, the reader returns only events whose times are times on the monotonic
    clock and whose names are printable, counts every other line in its note, and the watch's summary of
    those events raises nothing."""
    import math

    from jobs import COLUMNS, PEAKS, gpus, rows

    from gpubench.job.markreader import Mark, Reader
    from gpubench.inside.markwriter import NAME_MAX
    from gpubench.job.phases import summarize_watch

    text = "\n".join(lines) + ("" if torn else "\n")
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "marks.tsv"
        path.write_bytes((b"\xef\xbb\xbf" if bom else b"") + text.encode("utf-8", "surrogatepass"))
        reader = Reader(path)
        events = reader.poll()
    whole = [line for line in text.split("\n")[:-1] if line.strip()]  # a torn last line waits for its end
    skipped = sum(n for n, _ in reader.skipped.values())
    assert len(events) + skipped == len(whole)
    assert (reader.note() is None) == (skipped == 0)
    for e in events:
        for t in (e.t,) + ((e.t_last,) if not isinstance(e, Mark) else ()):
            assert math.isfinite(t) and 0 <= t <= 1e12
        if isinstance(e, Mark):
            assert e.name.isprintable() and 0 < len(e.name) <= NAME_MAX
    samples = rows(1, 0.0, 20.0, lambda t, g: {"gpu_util_pct": 90.0, "sm_active_pct": 50.0})
    summarize_watch(samples, events, gpus(1), 0.0, 20.0, PEAKS, "bf16", COLUMNS, {}, False)
