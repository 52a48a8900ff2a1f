"""What the tests of damaged and partial run directories share (test_rundirs*.py, test_damaged_*.py): a snapshot
of every file, a command refused in one sentence, a report written and read back, a small run directory to
damage, and edits of its CSV and JSON files line by line, row by row, cell by cell and field by field."""

import csv
import json
from pathlib import Path

import pytest
from synthetic import SCENARIOS, make_run

from gpubench.cli import main

WATCHED = [s for s in SCENARIOS if s[0] in ("idle", "copy-triton", "gemm-torch")]


def snapshot(root: Path) -> dict:
    """Every file and folder under root, with the bytes of each file."""
    return {str(p.relative_to(root)): (p.read_bytes() if p.is_file() else None) for p in sorted(root.rglob("*"))}


def refused(capsys, args, *message):
    """main(args) exits 2 with one sentence on stderr that holds every part of message."""
    assert main(args) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err, err
    for part in message:
        assert part in err, err
    return err


@pytest.fixture
def run_dir(tmp_path):
    return make_run(tmp_path / "run", fmt="csv")  # damaged line by line below (samples.arrows: test_samples_file.py)


def set_line(path: Path, number: int, text: str | None):
    """Replace line `number` (1 = the header) of a CSV, or drop it where text is None."""
    lines = path.read_text().splitlines(keepends=True)
    lines[number - 1 : number] = [] if text is None else [text + "\n"]
    path.write_text("".join(lines))


def set_field(path: Path, **fields):
    """Replace fields of a JSON object's file."""
    path.write_text(json.dumps({**json.loads(path.read_text()), **fields}))


def lines(path: Path) -> int:
    return len(path.read_text().splitlines())


def drop_column(path: Path, column: str):
    with open(path, newline="") as f:
        rows = list(csv.reader(f))
    at = rows[0].index(column)
    with open(path, "w", newline="") as f:
        csv.writer(f).writerows(row[:at] + row[at + 1 :] for row in rows)


def set_cell(path: Path, number: int, column: str, text: str):
    """Replace one cell of line `number` of a CSV."""
    with open(path, newline="") as f:
        rows = list(csv.reader(f))
    rows[number - 1][rows[0].index(column)] = text
    with open(path, "w", newline="") as f:
        csv.writer(f).writerows(rows)


def rewrite(path: Path, change) -> None:
    """A CSV's rows (header first) through change(rows) -> rows."""
    with open(path, newline="") as f:
        rows = list(csv.reader(f))
    with open(path, "w", newline="") as f:
        csv.writer(f).writerows(change(rows))


def report(run: Path, out: Path) -> str:
    assert main(["report", str(run), "--out", str(out)]) == 0
    return (out / "report.md").read_text()
