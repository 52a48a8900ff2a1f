"""The damage test_fuzz.py does to a run directory, drawn by hypothesis: what goes where a value belongs
(hostile text, JSON of any shape, CSV cells that are not numbers), and each kind of damage, given the draw and
the run: a whole file gone, cut or replaced, a manifest field, CSV cells, values of samples.arrows, and output
in the commands' way."""

from __future__ import annotations

import csv
import json
from pathlib import Path

from hypothesis import strategies as st

FILES = ("manifest.json", "samples", "summary.csv")


# --- what goes where a value belongs ---------------------------------------------------------------

HOSTILE_TEXT = [
    "",
    "x" * 300_000,
    "\ud800",
    "<script>alert(1)</script>",
    "{",
    "{0}",
    "{said:99999999f}",
    "é",
    "a|b",
    "**x**",
    "`x`",
    "\n",
    "NaN",
]
leaf = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**70), 2**70),
    st.just(10**400),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=12),
    st.sampled_from(HOSTILE_TEXT),
)
json_value = st.recursive(
    leaf,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
    max_leaves=8,
)
cell = st.one_of(
    st.sampled_from(
        [
            "",
            "nan",
            "inf",
            "-inf",
            "-1000",
            "-1",
            "0",
            "1e308",
            "1e400",
            "101",
            "abc",
            "True",
            "\x00",
            "x" * 100_000,
            "x" * 200_000,
            "é",
            "<script>",
            "1,2",
            '"',
            "9" * 400,
            "9" * 5001,
            "\ufeff0",
            "a\x1b]0;x\x07b",
        ]
    ),
    st.floats().map(repr),
    st.integers(-(10**20), 10**20).map(str),
    st.text(max_size=10),
)


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
    how = data.draw(
        st.sampled_from(
            [
                "delete",
                "empty",
                "cut",
                "flip",
                "utf-16",
                "latin-1",
                "random",
                "deep",
                "foreign",
                "folder",
                "device",
                "bom",
                "long line",
            ]
        )
    )
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
        path.write_bytes(raw[: data.draw(st.integers(0, 200))] + b"x," * 600_000)
    elif how == "empty":
        path.write_bytes(b"")
    elif how == "cut":
        path.write_bytes(raw[: data.draw(st.integers(0, max(0, len(raw) - 1)))])
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
    cols = {
        "t_start_s": pa.array([float(i) for i in range(n)]),
        "t_end_s": pa.array([i + 0.1 for i in range(n)]),
        "gpu": pa.array([0] * n),
        "phase": pa.array(["a"] * n),
        "gpu_util_pct": pa.array([50.0] * n),
    }
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
    how = data.draw(
        st.sampled_from(
            [
                "cell",
                "column",
                "drop column",
                "rename",
                "duplicate",
                "short row",
                "shuffle",
                "header only",
                "repeat rows",
                "reverse",
            ]
        )
    )
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
        body = body[: at + 1] + body[at:]
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
