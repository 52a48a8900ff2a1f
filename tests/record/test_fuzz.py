"""Damaged run directories, generated: every file of a run and every column, missing, empty, of the wrong
type, not finite, out of range, huge (past csv's field limit, a line of megabytes), in another encoding or
with a byte-order mark, nested deep, cut short, from another tool, a folder or a device in its place; and
an output that fails (standard output closed or full, an encoding that lacks the characters of --out).
plot, report and list on each must end in exit 0 or 2 with no traceback, write nothing where they refuse
(but where only standard output failed, after the files), and leave the run as it was. Marks files,
generated too: lines with times that are not times (negative, NaN, infinite, reversed), garbage, control
characters and byte-order marks are left out and counted, never raised, and never shape a phase. The damage
done to a run is drawn in fuzzdamage.py.

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
from fuzzdamage import DAMAGE
from hypothesis import HealthCheck, given, seed, settings
from hypothesis import strategies as st
from synthetic import SCENARIOS, make_run

from gpubench.cli import main

EXAMPLES = int(os.environ.get("GPUBENCH_FUZZ_EXAMPLES", "32"))
SEED = os.environ.get("GPUBENCH_FUZZ_SEED")

# Small runs, so that a run the commands accept is drawn in a second or two: a watched job's (three figures),
# and a suite's with a kernel of each ground truth and a decode point (every figure of one GPU).
BASES = {
    "watch-csv": ("watch", "csv", ("idle", "copy-triton", "gemm-torch")),
    "watch-arrows": ("watch", "arrows", ("idle", "copy-triton", "gemm-torch")),
    "suite-arrows": ("run", "arrows", ("copy-triton", "h2d-copy", "gemm-torch", "decode-b16")),
}


@pytest.fixture(scope="module")
def bases(tmp_path_factory) -> dict:
    root = tmp_path_factory.mktemp("bases")
    return {
        name: make_run(root / name, fmt=fmt, kind=kind, scenarios=[s for s in SCENARIOS if s[0] in names])
        for name, (kind, fmt, names) in BASES.items()
    }


def snapshot(root: Path) -> dict:
    return {str(p.relative_to(root)): (p.read_bytes() if p.is_file() else None) for p in sorted(root.rglob("*"))}


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
    stdout = {
        "terminal": io.StringIO(),
        "closed": None,
        "full": Full(),
        "ascii": io.TextIOWrapper(io.BytesIO(), encoding="ascii"),
    }[output]
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
    test = settings(
        max_examples=EXAMPLES,
        deadline=None,
        database=None,
        derandomize=SEED is None,
        suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow, HealthCheck.data_too_large],
    )(test)
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
            if (
                run.joinpath("manifest.json").is_file()
                and any(run.glob("samples.*"))
                and not any(p.is_symlink() or p.is_dir() for p in run.iterdir() if p.name != "figures")
            ):
                try:
                    damage(data, run)
                except (
                    OSError,
                    ValueError,
                    json.JSONDecodeError,
                    UnicodeDecodeError,
                    IndexError,
                    KeyError,
                    TypeError,
                    csv.Error,
                ):
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

    from gpubench.job.markfile import Reader
    from gpubench.job.markreader import Mark
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
