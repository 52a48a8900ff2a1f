"""What a report's sentences say and leave out: a watch report that advises a larger batch says how much memory
the batch could grow into (and nothing of memory where the advice names no batch or a reading is missing); the
first screen names a rank that holds a many-GPU job back before anything else; no sentence writes n/a for a
number its row lacks."""

import json
from pathlib import Path

from gpubench.show.point import points, sentence
from gpubench.show.report import blocks, headroom

RESULTS = Path(__file__).parents[2] / "results"
RUN = RESULTS / "watch-auto-llama-own-8-h200"


def _run():
    return json.loads((RUN / "manifest.json").read_text()), json.loads((RUN / "summary.json").read_text())


def test_a_phase_advised_to_raise_its_batch_is_told_its_memory_headroom():
    manifest, summary = _run()
    train = next(r for r in summary if r["scenario"] == "train")
    assert "batch" in train["verdict"]
    used, total = train["mem_used_mib"] / 1024, manifest["gpu"]["memory_mib"] / 1024
    said = headroom(train, manifest)
    assert said == f" Memory: {used:.3g} of {total:.3g} GiB in use (the phase's median), {total - used:.3g} GiB free."
    paragraphs = [b[1] for b in blocks(manifest, summary, set()) if b[0] == "p"]
    assert any(p.endswith(said) for p in paragraphs)


def test_no_memory_is_said_where_the_advice_names_no_batch_or_a_reading_is_missing():
    manifest, summary = _run()
    train = next(r for r in summary if r["scenario"] == "train")
    assert headroom(dict(train, verdict="the tensor cores are busy: no advice"), manifest) == ""
    assert headroom(dict(train, mem_used_mib=None), manifest) == ""
    assert headroom(train, {"gpu": {}}) == ""
    assert headroom(dict(train, mem_used_mib=2 * manifest["gpu"]["memory_mib"]), manifest) == ""  # not a reading
    start = next(r for r in summary if r["scenario"] == "start-up")
    assert headroom(start, manifest) == ""


def test_the_first_screen_of_a_job_with_a_slow_rank_names_it_first():
    """Above the headline figure, whose bars show every rank alike: the rank that holds the job back."""
    from gpubench.show.point import stragglers

    summary = json.loads((RESULTS / "watch-ddp-slow-rank-h200-x2" / "summary.json").read_text())
    manifest = json.loads((RESULTS / "watch-ddp-slow-rank-h200-x2" / "manifest.json").read_text())
    bl = blocks(manifest, summary, {"headline"})
    first = next(k for k, b in enumerate(bl) if b[0] == "p" and b[1].startswith("**Rank 1 holds the job back"))
    assert first < next(k for k, b in enumerate(bl) if b[0] == "img")
    assert bl[first][1].startswith("**Rank 1 holds the job back: its GPU was busy 40% of the time (mean GPU-Util)")
    assert bl[first][1].endswith("(train · GPU 1 · rank 1)") and stragglers(summary) == [bl[first]]
    told = points(summary, True)[0][1]
    assert len(told) == 6 and not [t for t in told if t.startswith(("**start-up", "**teardown"))]
    assert points(summary, True)[1] == ("p", "Start-up and teardown, outside the job's steps, are in the table below.")
    even = json.loads((RESULTS / "watch-ddp-even-h200-x2" / "summary.json").read_text())
    assert not stragglers(even)
    assert points(even, True)[0][0] == "ul"  # no rank held the other back: nothing is named


def test_a_sentence_leaves_out_the_numbers_its_row_lacks():
    assert sentence({"scenario": "warmup", "verdict": "Too short. More."}, True) == "**warmup**: Too short."
    assert sentence({"scenario": "teardown", "gpu_util_pct": 3.0}, True) == "**teardown**: median GPU-Util 3%."
    assert sentence({"scenario": "x"}, True) == "**x**: no GPU-Util, MFU or verdict was recorded."
    hang = {"scenario": "hang", "gpu_util_pct": 100.0, "sm_active_pct": 18.0, "unit": "bf16_tensor", "bound": "compute"}
    assert sentence(dict(hang, rate_withheld="its 2 timed calls cover 75%"), False).endswith(
        "its MFU is withheld (below)."
    )
    assert sentence(dict(hang, gpu_util_pct=None), False).startswith("**hang**: nvidia-smi's GPU-Util was not recorded")
    for run in sorted(RESULTS.glob("*/summary.json")):
        rows = json.loads(run.read_text())
        for job in (True, False):
            assert not [t for t in map(lambda r: sentence(r, job), rows) if "n/a" in t], run.parent.name


def test_a_jobs_table_leads_with_what_nvidia_smi_said_the_work_done_and_the_ceiling():
    manifest, summary = _run()
    head, rows = next(b[1:] for b in blocks(manifest, summary, set()) if b[0] == "table")
    assert head[:4] == ["phase", "nvidia-smi util", "MFU", "ceiling"] and head[-1] == "verdict"
    train = next(r for r in rows if r[0] == "train")
    assert train[3].endswith("%") and train[3] != "—"  # the ceiling of a phase that ran tensor work
    start = next(r for r in rows if r[0] == "start-up")
    assert start[2] == "—"  # no MFU: the start-up does no steps, and says so with the mark for "does not apply"


def test_a_story_sentence_cut_before_its_first_number_is_left_out():
    """A sentence is cut before the first number its row lacks; where that leaves only the phase's name ("In
    warmup, the medians."), nothing of it is said."""
    from gpubench.job.phases import STORY
    from gpubench.show.report import story

    manifest = {"families": {"watch": {"story": STORY[:1]}}}
    row = {"family": "watch", "phase": "warmup", "scenario": "warmup", "gpu_util_pct": 97.0}
    assert story(row, manifest) == "In warmup, the medians: nvidia-smi's GPU-Util 97%."
    assert "In warmup" not in story({**row, "gpu_util_pct": None}, manifest)
