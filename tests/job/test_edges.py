"""Truth at the edges of a phase: every number of a watch row from its one window, whatever the processes, the
counters' lag or the energy counter's readings do there."""

import math
from pathlib import Path

import pytest
import torch
from jobs import PEAKS, every, gpus, mark, rows, stamps

import gpubench
from gpubench.job.markfile import read_all
from gpubench.job.markreader import Steps, Stream, parse
from gpubench.job.phases import summarize_watch
from gpubench.read.energy import energy_between
from gpubench.read.summary import TRAIL_S, windows_of
from gpubench.record.rundir import load_run

ROOT = Path(__file__).resolve().parents[2]
G = gpus(1)
UUID = G[0].uuid
COLUMNS = [
    "gpu_util_pct",
    "power_w",
    "energy_j",
    "sm_active_pct",
    "sm_occupancy_pct",
    "tensor_active_pct",
    "dram_active_pct",
]
A, B = Stream(None, 101), Stream(None, 102)


def summary(samples, events, t1, dtype="bf16"):
    out = summarize_watch(samples, events, G, 0.0, t1, PEAKS, dtype, COLUMNS, {0: {101, 102}})
    return {r["scenario"]: r for r in out.summary}


def busy(t, g):
    return {"gpu_util_pct": 100.0, "sm_active_pct": 90.0, "tensor_active_pct": 30.0, "power_w": 500.0}


# --- 1. two processes on one GPU: work summed over one window -----------------------------------------


def test_two_processes_whose_phases_end_apart_add_their_work_over_one_window():
    """A steps 10/s until 3.0 s; B steps 10/s beside it and 20/s alone after (its GPU to itself). Over the row's
    window, 1.0 to 4.0 s, they did 20 + 40 steps; A's 10/s and B's 13.3/s added would read 70 steps."""
    f = 1e13
    events = [
        mark(0.5, A, "eval"),
        *stamps(A, UUID, every(1.0, 3.0, 0.1), flops=f),
        *stamps(B, UUID, every(1.0, 3.0, 0.1), flops=f),
        *stamps(B, UUID, every(3.05, 4.0, 0.05), flops=f),
    ]
    ev = summary(rows(1, 0.0, 4.5, busy), events, 4.5)["eval"]
    assert windows_of(ev["windows"]) == [(1.0, 4.0)]
    assert ev["tflops"] == pytest.approx((20 + 40) * f / 3.0 / 1e12)  # what both did in the window, over it
    assert ev["stream_rates"] == "pid 101: 10/s; pid 102: 13.33/s"  # each process's own rate, as it stepped
    assert ev["j_per_step"] == pytest.approx(ev["energy_used_j"] / 60)


def test_a_step_in_progress_at_an_end_of_the_window_counts_by_its_share_inside():
    """B's steps straddle A's window: each end of it cuts one of B's steps in two."""
    f = 1e13
    events = [
        mark(0.5, A, "train"),
        *stamps(A, UUID, every(1.0, 3.0, 0.1), flops=f),
        *stamps(B, UUID, every(0.95, 3.15, 0.2), flops=f),
        mark(3.05, A, "eval"),
        *stamps(A, UUID, every(3.1, 3.4, 0.1), flops=f),
    ]
    train = summary(rows(1, 0.0, 3.5, busy), events, 3.5)["train"]
    assert windows_of(train["windows"]) == [(1.0, 3.0)]
    # A: 20 steps. B: stamps at 1.15 ... 2.95 are 10 steps inside, and the parts inside of the step that
    # ended at 1.15 (0.15 of 0.2 s) and of the one that ended at 3.15 (0.05 of 0.2 s)
    assert train["tflops"] == pytest.approx((20 + 9 + 0.75 + 0.25) * f / 2.0 / 1e12)


# --- 2. counters that trail their stamps: a row needs whole samples for every number ---------------------


def test_a_short_window_after_an_idle_compile_is_too_short_rather_than_a_rate_beside_stale_counters():
    """Eight steps in 0.19 s at the end of a 20 s warm-up that compiled (GPU idle); the one sample row inside
    the window covers, for GPM and NVML, time before it: the compile. No rate, no MFU."""

    def state(t, g):
        return busy(t, g) if t >= 20.75 else {"gpu_util_pct": 0.0, "power_w": 120.0}

    samples = rows(1, 0.0, 25.5, state)
    for r in samples:  # the row wholly inside the window reads, 0.1 s late, the compile before it
        if r["t_start_s"] == pytest.approx(20.8):
            r.update(gpu_util_pct=60.0, tensor_active_pct=5.3, sm_active_pct=5.0)
    events = [
        mark(0.5, A, "warmup"),
        *stamps(A, UUID, every(20.75, 20.94, 0.0271), flops=1e13),
        mark(21.0, A, "train"),
        *stamps(A, UUID, every(21.03, 25.0, 0.03), flops=1e13),
    ]
    warm = summary(samples, events, 25.5)["warmup"]
    assert warm["verdict_rules"] == "too-short" and warm["n_samples"] == 0
    assert not math.isfinite(warm["mfu_pct"]) and not math.isfinite(warm["steps_per_s"])


def test_each_column_counts_the_rows_its_value_can_cover_from_the_windows_start():
    """The phase starts busy at 2.0 s after idle; GPM's values trail by up to 0.15 s, NVML's utilization by 0.4
    s: rows beginning that close to the window's start carry the idle before it, and are not counted."""

    def state(t, g):
        return busy(t, g) if t >= 2.0 else {"gpu_util_pct": 0.0, "power_w": 120.0}

    events = [mark(1.5, A, "train"), *stamps(A, UUID, every(2.0, 6.0, 0.1), flops=1e13)]
    lagged = rows(1, 0.0, 6.5, state)
    for r in lagged:  # GPM read 0.1 s late, NVML's utilization 0.3 s late: as the committed runs show
        r["tensor_active_pct"] = 30.0 if r["t_start_s"] >= 2.1 - 1e-9 else 0.0
        r["gpu_util_pct"] = 100.0 if r["t_start_s"] >= 2.3 - 1e-9 else 0.0
    train = summary(lagged, events, 6.5)["train"]
    assert train["tensor_active_pct_p10"] == 30.0 and train["gpu_util_pct_p10"] == 100.0
    assert train["gpu_util_mean_pct"] == 100.0


def test_the_trails_cover_what_the_committed_runs_show():
    """Where a watched job stamped its last step on the GPU's timeline, its GPU stopped at a known time: no row
    that begins TRAIL_S after it still reads the work (GPM's SM activity, NVML's utilization), in every
    committed watch run. Steps its optimizer took (no code change) need not end its work: an evaluation may
    follow them unstamped."""
    checked = 0
    for marks in sorted((ROOT / "results").glob("watch-*/marks.tsv")):
        steps = [e for e in read_all(marks) if isinstance(e, Steps)]
        on_gpu = [e for e in steps if e.clock == "gpu"] if all(e.origin == "step" for e in steps) else []
        if not on_gpu:
            continue
        last = max(e.t_last for e in on_gpu)
        _, samples, summary_ = load_run(marks.parent)
        for gpu in {r["gpu"] for r in summary_}:
            g = samples.of("gpu", gpu)
            for col in ("sm_active_pct", "gpu_util_pct"):
                before = g.window(last - 0.3, last).col(col)
                after = g.window(last + TRAIL_S[col], last + TRAIL_S[col] + 0.3).col(col)
                if len(before) and before.max() >= 10:
                    assert (after <= 0.02 * before.max() + 1.0).all(), (marks.parent.name, gpu, col, after)
                    checked += 1
    assert checked >= 20


# --- 4. energy: the counter at the window's two ends ---------------------------------------------------


def test_the_energy_of_a_short_window_is_the_counter_between_its_ends():
    """0.193 s at 491 W is 94.8 J, not the 49 J of the one row wholly inside it."""
    readings = [{"t_start_s": i / 10, "t_end_s": (i + 1) / 10, "energy_j": 491.0 * (i + 1) / 10} for i in range(10)]
    assert energy_between(readings, 0.35, 0.543) == pytest.approx((491.0 * 0.193, 0.193))
    # before the first reading (the recording's start) nothing is known: the readings cover 0.1 to 0.5 s
    assert energy_between(readings, 0.05, 0.5) == pytest.approx((491.0 * 0.4, 0.4))


def test_a_rows_energy_and_power_cover_its_whole_window():
    events = [mark(0.5, A, "train"), *stamps(A, UUID, every(1.03, 3.07, 0.04), flops=1e13)]
    train = summary(rows(1, 0.0, 3.5, busy), events, 3.5)["train"]
    ((ws, we),) = windows_of(train["windows"])
    assert train["energy_used_j"] == pytest.approx(500.0 * (we - ws))
    assert train["power_w_energy"] == pytest.approx(500.0)


# --- 6. a row too short to measure shows no rate of any kind ---------------------------------------------


def test_a_too_short_row_keeps_no_process_rate_either():
    events = [
        mark(0.5, A, "warmup"),
        *stamps(A, UUID, every(1.0, 1.2, 0.0001375), clock="host"),
        mark(1.2, A, "train"),
        *stamps(A, UUID, every(1.25, 3.0, 0.05), clock="host"),
    ]
    warm = summary(rows(1, 0.0, 3.5, busy), events, 3.5)["warmup"]
    assert warm["verdict_rules"] == "too-short" and warm["stream_rates"] == ""


# --- 5. marks whose hardware count predates the count of what the kernels run ------------------------------


def test_marks_recorded_before_the_kernels_count_give_mfu_and_no_hfu(tmp_path):
    """A run whose manifest does not say its marks count what the kernels run (flop_count_version) keeps its
    model count and loses the hardware one: a hardware count of the whole T x T of causal attention would read
    above the tensor ceiling where the kernels ran within it."""
    from jobs import write_watch

    from gpubench.job.watcher import resummarize
    from gpubench.record.rundir import write_json

    events = [mark(0.5, A, "train"), *stamps(A, UUID, every(1.0, 3.0, 0.1), flops=1e13, hw_flops=1.2e13)]
    run = write_watch(tmp_path / "run", 1, 0.0, 3.5, rows(1, 0.0, 3.5, busy), events, contexts={0: [101]})
    today = {r["scenario"]: r for r in resummarize(run).summary}["train"]
    assert today["hfu_pct"] == pytest.approx(1.2 * today["mfu_pct"]) and "hfu_unknown" not in today
    manifest = load_json(run / "manifest.json")
    del manifest["flop_count_version"]
    write_json(run / "manifest.json", manifest)
    old = {r["scenario"]: r for r in resummarize(run).summary}["train"]
    assert old["mfu_pct"] == pytest.approx(today["mfu_pct"]) and not math.isfinite(old["hfu_pct"])
    assert "whole T×T" in old["hfu_unknown"] and not math.isfinite(old.get("ran_over_ceiling", math.nan))
    from gpubench.job.phases import STORY
    from gpubench.show.report import story

    told = story(
        old, {"kind": "watch", "dtype": "bf16", "families": {"watch": {"story": STORY}}, "flop_convention": "PaLM's"}
    )
    assert "No HFU: these marks were written before" in told and "HFU n/a" not in told
    assert "MFU 10% of the bf16 datasheet peak (PaLM's)." in told  # the FLOPs sentence, by the manifest's convention


def test_the_earlier_one_number_format_gives_neither_mfu_nor_hfu():
    """gpubench.count_flops gave one count then, the hardware count of its day: read as such, and not shown."""
    line = parse("2.5\t0\t476\tstep\t14308356390912.0\n")
    assert isinstance(line, Steps) and line.hw_flops == 14308356390912.0 and math.isnan(line.flops)
    events = [
        mark(0.5, A, "train"),
        *[Steps(t, A, UUID, "host", t, 1, 1, math.nan, 1e13, 0, 0, 0, 0) for t in every(1.0, 3.0, 0.1)],
    ]
    out = summarize_watch(
        rows(1, 0.0, 3.5, busy), events, G, 0.0, 3.5, PEAKS, "bf16", COLUMNS, {0: {101}}, hardware=False
    )
    train = {r["scenario"]: r for r in out.summary}["train"]
    assert not math.isfinite(train["mfu_pct"]) and not math.isfinite(train["hfu_pct"]) and train["hfu_unknown"]
    assert train["steps_per_s"] == pytest.approx(10.0)  # the rate stands: only the count is of another day


def load_json(path):
    import json

    return json.loads(Path(path).read_text())


# --- 7. the bytes a decode step reads ----------------------------------------------------------------


class Tiny(torch.nn.Module):
    def __init__(self, tied: bool):
        super().__init__()
        self.embed = torch.nn.Embedding(1000, 64)
        self.proj = torch.nn.Linear(64, 64, bias=False)
        self.head = torch.nn.Linear(64, 1000, bias=False)
        if tied:
            self.head.weight = self.embed.weight


def test_a_decode_step_reads_the_rows_of_its_tokens_from_an_embedding_and_a_tied_one_whole():
    untied, tied = Tiny(False), Tiny(True)
    row, proj, table = 64 * 4, 64 * 64 * 4, 1000 * 64 * 4
    assert gpubench.weight_bytes(untied, tokens=4) == 4 * row + proj + table  # the head is read whole
    assert gpubench.weight_bytes(untied) == table + proj + table  # without tokens: every weight, once
    assert gpubench.weight_bytes(tied, tokens=4) == proj + table  # the product reads the tied table whole


# --- 9. a report tells each row with the numbers its verdict uses ----------------------------------------


def test_the_report_labels_gpu_utils_median_and_mean_and_tells_nothing_of_a_row_too_short():
    """The story gives the table's median; the verdict weighs the mean, the share of time busy: each is named."""
    from gpubench.job.phases import STORY
    from gpubench.show.report import story

    def state(t, g):
        return {**busy(t, g), "gpu_util_pct": 100.0 if int(t * 10) % 4 else 50.0}  # median 100, mean 87.5

    events = [
        mark(0.5, A, "warmup"),
        *stamps(A, UUID, every(0.6, 0.8, 0.05), flops=1e13),
        mark(0.8, A, "train"),
        *stamps(A, UUID, every(0.9, 4.0, 0.1), flops=1e13),
    ]
    by = summary(rows(1, 0.0, 4.5, state), events, 4.5)
    manifest = {"families": {"watch": {"story": STORY}}}
    train, warm = story(by["train"], manifest), story(by["warmup"], manifest)
    assert by["train"]["gpu_util_pct"] == 100.0 and "the medians: nvidia-smi's GPU-Util 100%" in train
    assert f"mean GPU-Util {by['train']['gpu_util_mean_pct']:.0f}%" in train  # the verdict's number, named mean
    assert by["train"]["gpu_util_mean_pct"] < 95  # the two differ here, so each label matters
    assert by["warmup"]["verdict_rules"] == "too-short" and "n/a" not in warm
    # of a row too short, only where its steps came from (a fact of its spans, no number of another window)
    assert warm == f"{by['warmup']['provenance']}. Verdict: {by['warmup']['verdict']}"
    assert by["warmup"]["verdict"].startswith("Too short")


def test_no_committed_report_says_what_a_row_could_not_measure():
    for report in sorted((ROOT / "results").glob("watch-*/report.md")):
        assert "said n/a busy" not in report.read_text(), report.parent.name
