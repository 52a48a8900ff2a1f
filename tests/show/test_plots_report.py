"""Figures and report from a synthetic run and from the committed reference runs."""

import json
import shutil
import struct
from pathlib import Path

import pytest
from synthetic import make_run

from gpubench.cli import main
from gpubench.read.summary import row_label
from gpubench.record.rundir import load_run
from gpubench.show import figures
from gpubench.show import report as report_module
from gpubench.show.figures import common, compare
from gpubench.show.report import story

REFERENCE = sorted(p.parent for p in (Path(__file__).parents[2] / "results").glob("*/manifest.json"))


def png_size(path):
    head = path.read_bytes()[:24]
    assert head[:8] == b"\x89PNG\r\n\x1a\n", f"{path} is not a PNG"
    return struct.unpack(">II", head[16:24])


@pytest.fixture(scope="module", params=["synthetic"] + [p.name for p in REFERENCE])
def reported(request, tmp_path_factory):
    """A copy of the run (or a synthetic one) after one `gpubench report`, and what each figure's draw returned
    while the report drew it: the tests of a run share one drawing, read-only, instead of drawing it anew."""
    tmp = tmp_path_factory.mktemp("reported")
    if request.param == "synthetic":
        run_dir = make_run(tmp / "synthetic")
    else:
        run_dir = tmp / request.param
        shutil.copytree(
            REFERENCE[[p.name for p in REFERENCE].index(request.param)],
            run_dir,
            ignore=shutil.ignore_patterns("figures", "report.*"),
        )
    notes = {}
    real = report_module.draw_all

    def draw_all(manifest, samples, summary, out_dir, into=None):
        drawn = real(manifest, samples, summary, out_dir, into)
        notes.update(into or {})
        return drawn

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(report_module, "draw_all", draw_all)
        assert main(["report", str(run_dir)]) == 0
    return run_dir, notes


def test_every_figure_is_written_as_a_sensible_image(reported):
    run_dir, notes = reported
    manifest = manifest_of(run_dir)
    drawn = figures.figures_for(manifest)
    written = {p.stem for p in (run_dir / "figures").glob("*.png")}
    assert set(notes) == {f.name for f in drawn}  # the report drew every figure this kind of run gets
    for figure in drawn:  # a figure with nothing to draw leaves no placeholder file
        assert (figure.name in written) != ("empty" in notes[figure.name]), figure
    assert ("ranks" in {f.name for f in drawn}) == bool(manifest.get("distributed"))  # one GPU: no ranks figure
    assert ("roofline" in {f.name for f in drawn}) == (manifest.get("kind") != "watch")  # a job: no roofline
    drawn = [f for f in drawn if f.name in written]
    assert written == {f.name for f in drawn} and {"headline", "ladder", "timeline"} <= written
    for figure in drawn:
        w, h = png_size(run_dir / "figures" / f"{figure.name}.png")
        assert 600 <= w <= 2600 and 200 <= h <= 2600, (figure.name, w, h)
        assert (run_dir / "figures" / f"{figure.name}.svg").read_text().lstrip().startswith("<?xml")
    assert not list((run_dir / "figures").glob(".*tmp*"))


def test_annotated_numbers_match_the_summary(reported):
    run_dir, notes = reported
    _, _, summary = load_run(run_dir)
    by = {row_label(r): r for r in summary}
    for name, marks in notes["headline"].items():
        if "gpu_util_pct" in marks:  # a phase too short for a steady sample has none to mark
            assert marks["gpu_util_pct"] == pytest.approx(by[name]["gpu_util_pct"])
        if "work" in marks:  # a phase without FLOPs has no work to mark
            assert marks["work"] == pytest.approx(common.work_fraction(by[name])[1])
    for name, marks in notes["ladder"].items():
        assert marks["work"] == pytest.approx(common.work_fraction(by[name])[1], nan_ok=True)
        for col in ("gpu_util_pct", "sm_active_pct"):
            assert marks[col] == pytest.approx(by[name][col], nan_ok=True)
    roof = notes.get("roofline", {"empty": "not drawn for this kind of run"})
    for name, mark in ({} if "empty" in roof else roof).items():
        assert mark["tflops"] == pytest.approx(by[name]["tflops"])
        assert by[name]["bound"] != "link"  # a host copy is not drawn on a DRAM roof
    cmp = notes.get("compare", {"empty": "not drawn for this kind of run"})
    if "empty" in cmp:  # a run without a baseline beside what names it (a watch, a subset) says so instead
        assert not compare.compare_groups(summary)
    else:
        assert all(m["kernel_ms"] == pytest.approx(by[n]["kernel_ms"]) for n, m in cmp.items())


def test_the_ground_truth_rung_follows_each_rows_bound(tmp_path):
    _, _, summary = load_run(make_run(tmp_path / "r"))
    by = {r["scenario"]: r for r in summary}
    assert common.work_fraction(by["h2d-copy"])[0] == "link"
    assert common.work_fraction(by["copy-triton"])[0] == "MBU"
    assert common.work_fraction(by["gemm-torch"])[0] == "MFU"
    assert common.work_fraction(by["spin-1thread"]) == ("MFU", 0.0)


def test_missing_metrics_are_marked_unavailable_not_zero(tmp_path):
    run_dir = make_run(tmp_path / "nogpm", profiling=False)
    manifest, samples, summary = load_run(run_dir)
    assert "sm_active_pct" not in summary[0]
    out = tmp_path / "figs"
    out.mkdir()
    _, tl = figures.timeline.draw(summary, samples, manifest, out)
    assert {"sm_active_pct", "tensor_active_pct", "dram_active_pct"} <= set(tl["missing"])
    _, lad = figures.ladder.draw(summary, samples, manifest, out)
    assert not any(common.finite(m["sm_active_pct"]) for m in lad.values())
    assert main(["report", str(run_dir)]) == 0  # draws the figures too
    text = (run_dir / "report.md").read_text()
    assert "gpm not used: GPU 0 does not support NVML GPM" in text
    # a metric the machine cannot give reads "not recorded" in the tables, never 0, and no sentence says n/a
    assert "| not recorded |" in text and "SM activity read" not in text and "n/a" not in text
    assert "Nothing ran. nvidia-smi said 0% busy." in text


def manifest_of(run_dir):
    return load_run(run_dir)[0]


def test_report_has_every_scenario_and_no_nan_where_a_value_exists(reported):
    run_dir, _ = reported
    md = (run_dir / "report.md").read_text()
    page = (run_dir / "report.html").read_text()
    _, _, summary = load_run(run_dir)
    for row in summary:
        assert f"### {row_label(row)}" in md
        assert f"<h3>{row_label(row)}</h3>" in page
        if common.finite(row.get("gbps")) and row["gbps"] > 1:
            assert f"{row['gbps']:.4g}" in md  # the table shows the measured value
    assert "nan" not in md.lower().replace("nanosecond", "")
    drawn = [f.name for f in figures.FIGURES if f"figures/{f.name}.png" in md]
    assert page.count("data:image/png;base64,") == len(drawn) >= 3  # figures embedded: one file to share
    assert {"headline", "ladder", "timeline"} <= set(drawn)
    if not manifest_of(run_dir).get("distributed"):
        assert "ranks" not in drawn and "ranks." not in md  # a run on one GPU has no ranks figure to speak of
    assert "`" not in page and ("`" not in md or "<code>" in page)  # code spans, where the run has any
    assert "DCGM_FI_PROF_SM_ACTIVE" in md


def test_stories_come_from_the_family_and_skip_facts_a_row_lacks(tmp_path):
    manifest, _, summary = load_run(make_run(tmp_path / "r"))
    by = {r["scenario"]: r for r in summary}
    fused = story(by["softmax-fused"], manifest)
    assert "x the speed of softmax-naive-torch" in fused and "5 per element" in fused
    naive = story(by["softmax-naive-torch"], manifest)
    assert "the speed of" not in naive and "It moved 2.10 GB through DRAM" in naive
    assert "no SM ran at all" in story(by["h2d-copy"], manifest)
    assert "1 of 132 SMs" in story(by["spin-1thread"], manifest)


def test_a_partial_run_is_plotted_and_reported_as_partial(tmp_path):
    run_dir = make_run(tmp_path / "partial", completed=False)
    assert main(["report", str(run_dir)]) == 0
    assert "**a partial run**: it was interrupted before it finished" in (run_dir / "report.md").read_text()
    assert "<strong>a partial run</strong>" in (run_dir / "report.html").read_text()


def test_plot_refuses_a_directory_that_is_not_a_run(tmp_path, capsys):
    assert main(["plot", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "not a gpubench run directory" in err and "Traceback" not in err
    assert not (tmp_path / "figures").exists()


def test_percentages_in_the_stories_are_written_as_everywhere_else(tmp_path):
    manifest, _, summary = load_run(make_run(tmp_path / "r"))
    spin = dict(
        next(r for r in summary if r["scenario"] == "spin-1thread"), sm_active_pct=99.96, sm_occupancy_pct=0.004
    )
    text = story(spin, manifest)
    assert "SM activity read 100% and occupancy <0.01%" in text, text


def test_html_tables_align_numbers_right_and_words_left(tmp_path):
    from gpubench.show.report import blocks, to_html

    manifest, _, summary = load_run(make_run(tmp_path / "r"))
    page = to_html(blocks(manifest, summary, set()), tmp_path)
    assert "<td class=num>100%</td>" in page and "<th class=num>MFU</th>" in page
    assert "<td>share of cycles the FP32 pipe was busy</td>" in page and "<th>meaning</th>" in page


WATCHED = Path(__file__).parents[2] / "results" / "watch-llama-eager-h100-80gb-hbm3"


def test_a_watched_jobs_report_speaks_of_its_phases_and_of_the_job(tmp_path):
    run_dir = tmp_path / "run"
    shutil.copytree(WATCHED, run_dir, ignore=shutil.ignore_patterns("figures", "report.*"))
    assert main(["report", str(run_dir)]) == 0
    md = (run_dir / "report.md").read_text()
    assert md.startswith("# gpubench report: a job watched on NVIDIA H100 80GB HBM3\n")
    assert "The job: `sh -c 'exec python3 examples/train_llama.py --seconds 10'`, which exited with code 0." in md
    assert "| phase | nvidia-smi util |" in md and "## Phase by phase" in md
    assert "scenario" not in md.lower() and "each kernel fools" not in md  # the suite's words
    for unknown in ("? SMs", "n/a GB/s", "n/a TB/s", "n/a MHz", "n/a tokens/s"):  # facts this run did not record
        assert unknown not in md
    assert "![What nvidia-smi said in each phase of the job, against the work done (MFU)](figures/headline.png)" in md


def test_a_job_that_a_signal_ended_is_said_so(tmp_path):
    run_dir = make_run(tmp_path / "run", kind="watch")
    manifest = json.loads((run_dir / "manifest.json").read_text())
    manifest.update(
        child={"argv": ["python", "train.py", "--lr", "3e-4"], "exit_code": 143, "signal": "SIGTERM"},
        gpu={"name": "NVIDIA H200", "nvml_index": 0},
        peaks={"datasheet": {"bf16_tensor": 989.4e12}},
    )
    (run_dir / "manifest.json").write_text(json.dumps(manifest))
    assert main(["report", str(run_dir)]) == 0
    md = (run_dir / "report.md").read_text()
    assert "The job: `python train.py --lr 3e-4`, which SIGTERM ended (exit code 143)." in md
    assert "Watch of 2026-11-21T11:39:11+0000, completed.\n" in md
    about = md.split("## About this run")[1]  # where the run came from, last: no SMs, memory, driver, unknown
    assert "\nNVIDIA H200. gpubench test.\n" in about and "?" not in about
    assert "Peaks. Datasheet: bf16 989 TFLOP/s. MFU divides" in about


def test_words_from_the_run_are_text_in_both_reports_never_markup(tmp_path):
    run_dir = make_run(tmp_path / "run")
    manifest = json.loads((run_dir / "manifest.json").read_text())
    manifest["gpu"]["name"] = "<script>alert(1)</script> H200"
    manifest["warnings"] = ["<img src=x onerror=alert(2)> **not bold** `not code` a|b [x](y)"]
    (run_dir / "manifest.json").write_text(json.dumps(manifest))
    assert main(["report", str(run_dir)]) == 0
    md, page = (run_dir / "report.md").read_text(), (run_dir / "report.html").read_text()
    for text in (md, page):
        assert "<script" not in text and "<img src=x" not in text
    assert "# gpubench report: &lt;script>alert(1)&lt;/script> H200" in md
    assert r"Note: &lt;img src=x onerror=alert(2)> \*\*not bold\*\* \`not code\` a\|b [x\](y)" in md
    assert "<h1>gpubench report: &lt;script&gt;alert(1)&lt;/script&gt; H200</h1>" in page
    assert "<p>Note: &lt;img src=x onerror=alert(2)&gt; **not bold** `not code` a|b [x](y)</p>" in page


def test_a_reused_folder_loses_another_runs_figures_and_nothing_else(tmp_path):
    """report --out DIR where another run's report was: the figures this run does not draw (a suite's roofline
    beside a watched job's) are removed; plot into a run's own figures/ keeps files of other names and links."""
    suite, job = make_run(tmp_path / "suite"), make_run(tmp_path / "job", kind="watch")
    out = tmp_path / "out"
    assert main(["report", str(suite), "--out", str(out)]) == 0
    assert (out / "figures" / "roofline.png").is_file()
    assert main(["report", str(job), "--out", str(out)]) == 0
    assert {p.name for p in (out / "figures").iterdir()} == {
        f"{name}.{ext}" for name in ("headline", "ladder", "timeline") for ext in ("png", "svg")
    }
    assert "roofline" not in (out / "report.md").read_text()
    mine = job / "figures"
    mine.mkdir(exist_ok=True)
    (mine / "ranks.png").write_bytes(b"another run's")
    (mine / "notes.png").write_bytes(b"the user's")
    (tmp_path / "kept.svg").write_bytes(b"the user's")
    (mine / "roofline.svg").symlink_to(tmp_path / "kept.svg")
    assert main(["plot", str(job)]) == 0
    assert not (mine / "ranks.png").exists() and (mine / "notes.png").read_bytes() == b"the user's"
    assert (mine / "roofline.svg").is_symlink() and (tmp_path / "kept.svg").read_bytes() == b"the user's"
