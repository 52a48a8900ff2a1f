"""Long runs on the CPU: windows cut by binary search pick the rows a filter picks, the timeline's envelope
keeps every spike and dip in a bounded number of points, and a generated long watch (minutes, not a day:
tools/longrun/bench.py measures the day) is summarized, plotted and reported, its figures no larger than
a shorter run's."""

import sys
from pathlib import Path

import numpy as np
import pytest

from gpubench.cli import main
from gpubench.read.samples import Samples, as_samples
from gpubench.record.rundir import load_run
from gpubench.show.figures import common, timeline

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def longrun():
    from tools.longrun import synthetic

    return synthetic


def test_a_window_by_binary_search_is_the_window_a_filter_gives():
    rng = np.random.default_rng(3)
    ends = 100 + np.cumsum(rng.uniform(0.05, 0.15, 2000))
    rows = Samples({"t_start_s": np.r_[100.0, ends[:-1]], "t_end_s": ends, "gpu": np.zeros(2000)})
    for a, b in rng.uniform(99, ends[-1] + 1, (200, 2)):
        a, b = min(a, b), max(a, b)
        want = [(s, e) for s, e in zip(rows.col("t_start_s"), rows.col("t_end_s")) if s >= a and e <= b]
        got = rows.window(a, b)
        assert list(zip(got.col("t_start_s"), got.col("t_end_s"))) == want


def test_rows_as_dicts_and_as_columns_are_the_same_rows():
    rows = [
        {"t_start_s": 0.0, "t_end_s": 0.1, "gpu": 0, "rank": None, "phase": "a", "x": 1.0},
        {"t_start_s": 0.1, "t_end_s": 0.2, "gpu": 1, "rank": 3, "phase": "b"},
    ]
    back = list(as_samples(rows))
    assert back[0]["rank"] is None and back[1]["rank"] == 3 and np.isnan(back[1]["x"]) and back[1]["phase"] == "b"
    assert as_samples(rows).of("gpu", 1)[0]["rank"] == 3 and len(as_samples(rows)[1:]) == 1


def test_the_envelope_keeps_every_spike_and_dip_in_two_points_a_slice():
    rng = np.random.default_rng(5)
    t = np.arange(200_000) * 0.1
    y = 50 + rng.normal(0, 2, len(t))
    y[[1234, 99_999, 150_001]] = [0.0, 100.0, 3.0]  # one sample each
    y[50_000:50_500] = np.nan  # a gap
    tx, ty = common.envelope(t, y, 1000)
    assert len(tx) == len(ty) == 2000 and np.all(np.diff(tx[np.isfinite(tx)]) >= 0)
    for spike in (1234, 99_999, 150_001):
        assert t[spike] in tx and y[spike] in ty
    assert np.nanmin(ty) == 0.0 and np.nanmax(ty) == 100.0
    assert np.isnan(ty[(tx > 5010) & (tx < 5040)]).all()  # the gap still breaks the line
    short_t, short_y = t[:1500], y[:1500]
    assert np.array_equal(common.envelope(short_t, short_y, 1000)[1], short_y)  # a line that fits is drawn whole


def slice_by_slice(t, y, bins):
    """The envelope as its docstring defines it, a slice at a time: the first lowest and the last highest
    finite value of each slice, in time order; NaN at a slice's middle where it has none."""
    width = (t[-1] - t[0]) / bins
    slot = np.minimum(((t - t[0]) / width).astype(np.int64), bins - 1)
    tx, ty = [], []
    for k in range(bins):
        idx = [i for i in np.flatnonzero(slot == k) if np.isfinite(y[i])]
        if not idx:
            tx += [t[0] + (k + 0.5) * width] * 2
            ty += [np.nan, np.nan]
            continue
        lo = min(idx, key=lambda i: (y[i], i))
        hi = max(idx, key=lambda i: (y[i], i))
        tx += [t[min(lo, hi)], t[max(lo, hi)]]
        ty += [y[min(lo, hi)], y[max(lo, hi)]]
    return np.array(tx), np.array(ty)


@pytest.mark.parametrize("ordered", [True, False], ids=["time-ordered", "shuffled"])
def test_the_envelope_is_each_slices_first_lowest_and_last_highest_value(ordered):
    """Ties (integer percentages), gaps, infinities and repeated times: the envelope of time-ordered rows
    (found in a few passes) and of rows in any order (sorted) is the one its definition gives."""
    rng = np.random.default_rng(11)
    for trial in range(20):
        n, bins = int(rng.integers(300, 3000)), int(rng.integers(5, 120))
        t = np.repeat(np.sort(rng.uniform(0, 50, n // 2 + 1)), 2)[:n]
        y = rng.integers(0, 4, n).astype(float)
        y[rng.random(n) < 0.2] = np.nan
        y[rng.random(n) < 0.02] = np.inf
        y[int(rng.integers(n)) : int(rng.integers(n))] = np.nan  # a gap, some trials
        if not ordered:  # the first and last rows stay: they set the slices
            mid = 1 + rng.permutation(n - 2)
            t, y = t[np.r_[0, mid, n - 1]], y[np.r_[0, mid, n - 1]]
        want = slice_by_slice(t, y, bins)
        got = common.envelope(t, y, bins)
        assert all(np.array_equal(a, b, equal_nan=True) for a, b in zip(got, want)), trial


def test_several_gpus_rows_read_in_one_pass_are_the_rows_each_reads_alone(tmp_path, longrun):
    from gpubench.read.samples import load_together

    run = longrun.generate(tmp_path / "run", n_gpus=3, hours=0.05, steps_per_s=1.0)
    names = ["t_start_s", "t_end_s", "phase", "gpu_util_pct", "sm_active_pct"]
    _, alone, _ = load_run(run)
    _, together, _ = load_run(run)
    views = [together.of("gpu", g) for g in (2, 0)]
    passes, fetch = [], views[0]._fetch

    def counted(wanted, rows):  # every view of the file shares its fetch
        passes.append(len(rows))
        return fetch(wanted, rows)

    for v in views:
        v._fetch = counted
    load_together(views, *names)
    assert passes == [2 * len(views[0])]  # one pass, both GPUs' rows
    for g, view in zip((2, 0), views):
        mine = alone.of("gpu", g).load(*names)
        for name in names:
            assert np.array_equal(view.col(name), mine.col(name)), (g, name)


def lines(fig) -> dict:
    return {line.get_label(): line for ax in fig.axes for line in ax.get_lines()}


def test_a_generated_long_watch_is_summarized_plotted_and_reported(tmp_path, longrun, monkeypatch):
    run = longrun.generate(tmp_path / "run", n_gpus=2, hours=0.2, steps_per_s=5.0)
    manifest, samples, summary = load_run(run)
    assert len(samples) == 2 * 7200 and manifest["columns"][0] == "gpu_util_pct"
    assert [r["phase"] for r in summary if r["gpu"] == 1] == ["start-up", "warmup", "train"]
    train = next(r for r in summary if r["phase"] == "train" and r["gpu"] == 0)
    assert train["steps_per_s"] == pytest.approx(5.0, rel=0.01) and 0 < train["mfu_pct"] < train["gpu_util_pct"]
    drawn = {}
    monkeypatch.setattr(timeline, "save", lambda fig, manifest, out, name: drawn.setdefault(name, fig) and [])
    _, notes = timeline.draw(summary, samples, manifest, tmp_path)
    util = lines(drawn["timeline"])[timeline.LINE_LABELS["gpu_util_pct"]]
    assert len(util.get_xdata()) <= 2 * timeline.BINS  # 7,200 rows drawn as their envelope
    assert np.nanmin(util.get_ydata()) == 0.0  # the one-sample dips every 17 minutes still show
    assert notes["phases"] == ["start-up", "warmup", "train"]  # the summary's phases, not the samples' "run"
    assert drawn["timeline"].axes[-1].get_xlabel().endswith(", min")
    monkeypatch.undo()
    assert main(["report", str(run), "--out", str(tmp_path / "out")]) == 0
    assert (tmp_path / "out" / "figures" / "timeline.svg").stat().st_size < 2e6


def test_a_longer_run_draws_no_larger_a_timeline(tmp_path, longrun):
    sizes = []
    for hours in (0.15, 0.6):
        run = longrun.generate(tmp_path / f"h{hours}", n_gpus=1, hours=hours, steps_per_s=2.0)
        assert main(["plot", str(run), "--out", str(tmp_path / f"out{hours}")]) == 0
        sizes.append((tmp_path / f"out{hours}" / "timeline.svg").stat().st_size)
    assert sizes[1] < 1.3 * sizes[0], sizes  # four times the rows, about the same figure


def test_the_docs_long_run_part_is_made_from_the_committed_benchmark():
    import json

    from tools.longrun import bench

    results = json.loads((ROOT / "results" / "longrun" / "bench.json").read_text())
    text = (ROOT / "docs" / "storage.md").read_text()
    assert bench.readme(text, results) == text, "run python -m tools.longrun.bench --readme"
    day = results["cases"][-1]
    assert (day["hours"], day["gpus"]) == (24, 8) and day["plot_report_s"] > 0 and day["peak_rss_mb"] > 0


PEAK = """
import sys, time
from gpubench.cli import main
t0 = time.perf_counter()
code = main(sys.argv[1:])
took = time.perf_counter() - t0
peak = next(int(line.split()[1]) // 1024 for line in open("/proc/self/status") if line.startswith("VmHWM:"))
print(code, round(took, 1), peak, file=sys.stderr)
"""


def test_ten_thousand_phases_plot_and_report_in_a_minute_and_a_gigabyte_with_readable_figures(
    tmp_path, longrun, monkeypatch
):
    """A job that marks every epoch: 10,000 phases. plot and report (each its own process, as a user runs
    them; peak memory from the kernel) take at most 60 s together and 1 GB each on two cores, and the
    figures stay readable: the headline and the ladder draw the longest phases and say so, the timeline
    names what it has room for and says so, the report tells the longest phases and says so."""
    import subprocess

    from PIL import Image

    run = longrun.generate(tmp_path / "run", n_gpus=1, hours=3.0, steps_per_s=10.0, phases=10_000)
    took = {}
    for verb in ("plot", "report"):
        r = subprocess.run(
            [sys.executable, "-c", PEAK, verb, str(run), "--out", str(tmp_path / verb)],
            capture_output=True,
            text=True,
            timeout=600,
            env=dict(__import__("os").environ, PYTHONPATH=str(ROOT), OMP_NUM_THREADS="1"),
        )
        code, seconds, peak_mb = r.stderr.split()[-3:]
        assert code == "0", r.stderr
        took[verb] = (float(seconds), int(peak_mb))
    assert sum(s for s, _ in took.values()) <= 60 and all(mb <= 1024 for _, mb in took.values()), took
    for name in ("headline", "ladder"):
        with Image.open(tmp_path / "plot" / f"{name}.png") as png:
            assert png.height < 4000, (name, png.size)  # 200 phases drew 14,510 pixels
    md = (tmp_path / "report" / "report.md").read_text()
    assert "The headline and ladder figures draw the 32 longest of 10,001 phases; summary.csv holds every one." in md
    assert "The table holds the 1,000 rows that lasted longest of 10,001" in md
    assert "Told here: the 100 phases that lasted longest of 10,001" in md and md.count("\n### ") == 100
    assert (tmp_path / "report" / "report.html").stat().st_size < 5e6
    drawn = {}
    manifest, samples, summary = load_run(run)
    monkeypatch.setattr(
        timeline, "save", lambda fig, manifest, out, name: drawn.setdefault(name, fig.get_suptitle()) and []
    )
    timeline.draw(summary, samples, manifest, tmp_path)
    assert "phases named: no room for more)" in drawn["timeline"]
