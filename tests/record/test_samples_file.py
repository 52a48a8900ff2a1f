"""samples.arrows and samples.csv: written as recorded, read alike by one function, a killed run's torn tail
skipped, damage refused in one sentence; every committed run summarized again gives its committed summary."""

import json
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from synthetic import make_run

from gpubench.cli import main
from gpubench.metrics import COLUMNS
from gpubench.read.samples import Samples, as_samples
from gpubench.read.summary import derive, summarize
from gpubench.record import arrowfile, arrowread, rundir
from gpubench.record.csvfile import CsvSink
from gpubench.record.rundir import load_run, open_sink, read_samples

ROOT = Path(__file__).resolve().parents[2]
RUNS = sorted(p.parent for p in (ROOT / "results").glob("*/manifest.json"))


def rows(n: int, gpus: int = 2) -> list[dict]:
    rng = np.random.default_rng(1)
    out = []
    for k in range(n):
        for g in range(gpus):
            out.append(
                {
                    "t_start_s": 100 + 0.1 * k,
                    "t_end_s": 100.1 + 0.1 * k,
                    "t_wall": 1.7e9 + 0.1 * k,
                    "gpu": g,
                    "uuid": f"GPU-{g}",
                    "phase": "train" if k % 50 < 40 else "eval, with a comma",
                    "gpu_util_pct": float(rng.integers(0, 101)),
                    "power_w": round(rng.uniform(80, 700), 3),
                    "energy_j": 5e6 + 61.123 * k,
                    "sm_active_pct": rng.uniform(0, 100) if k % 7 else math.nan,
                }
            )
    return out


def write(path: Path, data: list[dict], close: bool = True):
    sink = (open_sink if path.suffix == ".arrows" else CsvSink)(
        path, ["gpu_util_pct", "power_w", "energy_j", "sm_active_pct"]
    )
    for r in data:
        sink(r)
    if close:
        sink.close()
    return sink


def test_both_formats_read_back_the_rows_written(tmp_path):
    data = rows(1500)
    back = {}
    for name in ("samples.arrows", "samples.csv"):
        write(tmp_path / name, data)
        back[name] = read_samples(tmp_path / name)
        assert len(back[name]) == len(data)
    a, c = back["samples.arrows"], back["samples.csv"]
    for key in ("gpu", "uuid", "phase", "gpu_util_pct"):
        assert list(a.col(key)) == list(c.col(key)) == [r[key] for r in data]
    for key, rel in (
        ("t_end_s", 1e-12),
        ("t_wall", 1e-12),
        ("power_w", 1e-12),
        ("energy_j", 1e-12),
        ("sm_active_pct", 1e-7),
    ):  # profiling ratios are kept to float32's seven digits
        want = np.array([r[key] for r in data])
        assert np.allclose(a.col(key), want, rtol=rel, atol=0, equal_nan=True), key
        assert np.array_equal(np.isnan(a.col(key)), np.isnan(want))
    assert next(iter(a))["gpu"] == 0 and isinstance(next(iter(a))["gpu"], int)


def test_a_killed_recording_keeps_every_whole_batch_and_notes_a_torn_one(tmp_path, monkeypatch):
    monkeypatch.setattr(arrowfile, "BATCH_S", 10.0)  # 100 ticks of two GPUs: 200 rows a batch
    path = tmp_path / "samples.arrows"
    write(path, rows(550), close=False)  # kill -9: never closed, the last 100 rows never written
    notes: list[str] = []
    assert len(read_samples(path, notes)) == 1000 and notes == []
    whole = path.read_bytes()
    for cut in (len(whole) - 1, len(whole) - 300):
        path.write_bytes(whole[:cut])
        notes = []
        assert len(read_samples(path, notes)) == 800
        assert notes == [
            "samples.arrows: its last batch of rows was cut off mid-write (the run was killed) and is skipped"
        ]
    path.write_bytes(whole[:20])  # killed while writing the header: no rows, not an error
    assert len(read_samples(path, [])) == 0


def test_a_file_cut_anywhere_reads_as_its_whole_batches(tmp_path, monkeypatch):
    """Read while the sampler writes (a live reader, a plot of a running watch), the file may end at any byte,
    between a batch's dictionaries too: never damage, always the batches written whole."""
    monkeypatch.setattr(arrowfile, "BATCH_S", 1.0)  # 10 ticks of two GPUs: 20 rows a batch
    path = tmp_path / "samples.arrows"
    write(path, rows(30), close=False)
    whole = path.read_bytes()
    seen = set()
    for cut in range(0, len(whole) + 1):
        path.write_bytes(whole[:cut])
        got = len(read_samples(path, []))
        assert got % 20 == 0, cut
        seen.add(got)
    assert seen == {0, 20, 40}


def test_a_killed_run_directory_is_plotted_as_partial(tmp_path, monkeypatch):
    monkeypatch.setattr(arrowfile, "BATCH_S", 10.0)  # several batches: the torn one is not the only one
    run = make_run(tmp_path / "run")
    samples = run / "samples.arrows"
    samples.write_bytes(samples.read_bytes()[:-50])
    manifest = json.loads((run / "manifest.json").read_text())
    (run / "manifest.json").write_text(json.dumps(dict(manifest, completed=False, status="running")))
    assert main(["report", str(run), "--out", str(tmp_path / "out")]) == 0
    md = (tmp_path / "out" / "report.md").read_text()
    assert "**a partial run**" in md and "its last batch of rows was cut off mid-write" in md


@pytest.mark.parametrize(
    "damage,message",
    [
        (lambda b: b"t_start_s,t_end_s\n" + b, "samples.arrows is damaged: it is not a samples file gpubench wrote"),
        (lambda b: b[:2000] + bytes(x ^ 0x5A for x in b[2000:2400]) + b[2400:], "samples.arrows is damaged: batch"),
    ],
)
def test_a_damaged_samples_file_is_one_sentence(tmp_path, capsys, damage, message):
    run = make_run(tmp_path / "run")
    path = run / "samples.arrows"
    path.write_bytes(damage(path.read_bytes()))
    assert main(["plot", str(run)]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1 and "Traceback" not in err
    assert not (run / "figures").exists()


def test_a_run_directory_without_samples_says_which_files_it_lacks(tmp_path, capsys):
    run = make_run(tmp_path / "run")
    (run / "samples.arrows").unlink()
    assert main(["plot", str(run)]) == 2
    assert "samples.arrows (or samples.csv) missing" in capsys.readouterr().err


@pytest.mark.parametrize(
    "run", [p / "samples.csv" for p in RUNS if (p / "samples.csv").is_file()], ids=lambda p: p.parent.name
)
def test_the_csv_reader_gives_pythons_numbers_to_the_last_bit(run):
    """samples.csv read through its Arrow copy holds the numbers Python's float() reads from each line."""
    import csv

    from gpubench.record.csvfile import _sample

    with open(run, newline="") as f:
        slow = as_samples([_sample(raw) for raw in csv.DictReader(f)])
    fast = rundir.read_samples(run)
    assert fast.names == slow.names and len(fast) == len(slow)
    for name in slow.names:
        a, b = fast.col(name), slow.col(name)
        assert a.dtype == b.dtype and (
            np.array_equal(a, b, equal_nan=True) if a.dtype.kind == "f" else list(a) == list(b)
        ), name


# --- every committed run, summarized again -----------------------------------------------------------

COMPUTED = (
    {"n_samples", "power_w_energy", "speedup_vs_baseline"}
    | set(derive({}, {}))
    | {f"{c}{s}" for c in COLUMNS for s in ("", "_p10", "_p90")}
)


def same(a, b) -> bool:
    nan = lambda v: v is None or (isinstance(v, float) and math.isnan(v))  # noqa: E731 -- JSON writes NaN as null
    return (nan(a) and nan(b)) or a == b


@pytest.mark.parametrize("run", [p for p in RUNS if not (p / "marks.tsv").is_file()], ids=lambda p: p.name)
def test_every_committed_suite_run_summarizes_again_to_its_committed_summary(run):
    manifest, samples, _ = load_run(run)
    committed = json.loads((run / "summary.json").read_text())
    facts = [{k: (math.nan if v is None else v) for k, v in r.items() if k not in COMPUTED} for r in committed]
    again = []
    if manifest.get("distributed"):
        peaks = {r["rank"]: r["peaks"] for r in manifest["distributed"]["ranks"]}
        for rank in sorted({r["rank"] for r in facts}):
            mine = [r for r in facts if r["rank"] == rank]
            again += summarize(samples.of("uuid", mine[0]["uuid"]), mine, peaks[rank], manifest["columns"])
        key = {(r["scenario"], r["rank"]): r for r in again}
        again = [key[(r["scenario"], r["rank"])] for r in committed]
    else:
        again = summarize(samples, facts, manifest["peaks"], manifest["columns"])
    assert len(again) == len(committed)
    for mine, theirs in zip(again, committed):
        differ = {k: (mine.get(k), v) for k, v in theirs.items() if k in COMPUTED and not same(mine.get(k), v)}
        assert not differ, f"{theirs['scenario']}: {differ}"


@pytest.mark.parametrize("run", [p for p in RUNS if (p / "marks.tsv").is_file()], ids=lambda p: p.name)
def test_a_committed_watch_run_summarizes_alike_from_samples_csv_and_samples_arrows(run, tmp_path):
    """The watch's summary of its files, from the committed samples.csv and from the same rows written as a
    recording writes samples.arrows today: the same rows, the same numbers (the profiling ratios to float32's
    seven digits). Its committed summary.json was made by an earlier phase logic (no start-up and teardown
    rows), so this compares the two formats, not the committed file."""
    import shutil

    from gpubench.job.watcher import resummarize

    copy = tmp_path / run.name
    shutil.copytree(run, copy, ignore=shutil.ignore_patterns("samples.csv", "figures", "report.*"))
    manifest, samples, _ = load_run(run)
    keys = rundir.keys_of(samples)
    rundir.write_samples(copy / "samples.arrows", samples, manifest["columns"], keys)
    from_csv, from_arrows = resummarize(run).summary, resummarize(copy).summary
    assert [r["scenario"] for r in from_csv] == [r["scenario"] for r in from_arrows]
    for a, b in zip(from_arrows, from_csv):
        for k, v in b.items():
            if isinstance(v, float) and not math.isnan(v):
                assert a[k] == pytest.approx(v, rel=1e-6, abs=1e-9), (b["scenario"], k)
            else:
                assert same(a[k], v), (b["scenario"], k)


def test_gpubench_list_loads_neither_numpy_nor_pyarrow():
    code = (
        "import sys, contextlib, io\nfrom gpubench.cli import main\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        "    main(['list'])\nprint(sorted(m for m in ('numpy', 'pyarrow') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_a_table_written_whole_is_cut_into_the_batches_a_recording_writes(tmp_path):
    data = rows(1500, gpus=8)  # 150 s of eight GPUs: batches of a minute
    rundir.write_samples(tmp_path / "samples.arrows", data, ["gpu_util_pct", "power_w", "energy_j", "sm_active_pct"])
    names, sizes, torn = arrowread.scan(tmp_path / "samples.arrows")
    assert sum(sizes) == len(data) and not torn and max(sizes) <= 8 * 601 and len(sizes) == 3
    assert isinstance(read_samples(tmp_path / "samples.arrows"), Samples)


COPIED = sorted(
    p.parent
    for p in (Path(__file__).resolve().parents[2] / "results").glob("*/samples.arrows")
    if (p.parent / "samples.csv").is_file()
)


@pytest.mark.parametrize("run", COPIED, ids=lambda p: p.name)
def test_a_committed_plain_text_copy_holds_the_rows_of_its_samples_file(run):
    """tools/runs/samples_csv.py's copy beside samples.arrows: every row, every column, the same values (times
    to the CSV's 0.1 ms, numbers to its ten digits)."""
    arrows, text = read_samples(run / "samples.arrows"), read_samples(run / "samples.csv")
    assert len(arrows) == len(text) > 0
    for name in arrows.names:
        a, t = arrows.col(name), text.col(name)
        if a.dtype == object:
            assert list(a) == list(t), name
        else:
            assert np.allclose(a, t, rtol=1e-9, atol=1e-4, equal_nan=True), name
