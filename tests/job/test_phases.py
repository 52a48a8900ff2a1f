"""A watched job's summary on the CPU, from synthetic samples and marks: one window per row, start-up and
teardown apart, energy, decode's yardsticks, the committed runs summarized again."""

from pathlib import Path

import pytest
from jobs import PEAKS, every, mark, rows, stamps, write_watch
from phasejobs import G, R0, by_name, summary

from gpubench.job.phases import summarize_watch
from gpubench.job.watcher import resummarize
from gpubench.metrics import finite

ROOT = Path(__file__).resolve().parents[2]


def typical_job():
    """Idle start-up to 3 s; warmup 3-5 s; train 5-15 s, a step every 0.1 s; eval 15-17 s, a step every
    0.05 s; then 1.5 s of teardown, the GPU idle."""

    def state(t, g):
        if 3 <= t < 5:
            return {"gpu_util_pct": 60.0, "sm_active_pct": 50.0, "tensor_active_pct": 5.0, "power_w": 300.0}
        if 5 <= t < 15:
            return {"gpu_util_pct": 100.0, "sm_active_pct": 90.0, "tensor_active_pct": 40.0, "power_w": 600.0}
        if 15 <= t < 17:
            return {"gpu_util_pct": 90.0, "sm_active_pct": 80.0, "tensor_active_pct": 30.0, "power_w": 500.0}
        return {}

    uuid = G[0].uuid
    events = [
        mark(3.0, R0, "warmup"),
        *stamps(R0, uuid, every(3.2, 4.9, 0.3), flops=1e13),
        mark(5.0, R0, "train"),
        *stamps(R0, uuid, every(5.1, 15.0, 0.1), flops=5e13, tokens=4096),
        mark(15.0, R0, "eval"),
        *stamps(R0, uuid, every(15.05, 17.0, 0.05), flops=2e13),
    ]
    return rows(1, 0.0, 18.5, state), events


def test_every_number_of_a_row_comes_from_its_window_and_start_up_and_teardown_are_rows_of_their_own():
    samples, events = typical_job()
    rows_ = by_name(summary(samples, events))
    assert list(rows_) == ["start-up", "warmup", "train", "eval", "teardown"]
    train, ev = rows_["train"], rows_["eval"]
    assert train["steps_per_s"] == pytest.approx(10.0) and train["seconds"] == pytest.approx(9.5)  # 5.5 .. 15.0
    assert train["tflops"] == pytest.approx(500.0) and train["mfu_pct"] == pytest.approx(50e3 / 989.4)
    assert train["tokens_per_s"] == pytest.approx(40960.0)
    # eval's window ends at its last step: the idle teardown after it is no part of it
    assert ev["gpu_util_pct_p10"] == 90.0 and ev["power_w_energy"] == pytest.approx(500.0)
    assert rows_["teardown"]["gpu_util_pct"] == 0.0 and rows_["teardown"]["verdict_rules"] == "teardown"
    assert rows_["start-up"]["verdict_rules"] == "start-up" and "no advice" in rows_["start-up"]["verdict"]
    for r in rows_.values():  # the invariant: a GPU busy x% of the time cannot do more than x% of its peak
        assert not finite(r.get("mfu_pct")) or r["mfu_pct"] <= r["gpu_util_mean_pct"]


def test_power_percentiles_skip_the_second_nvml_averages_over_and_energy_is_exact():
    samples, events = typical_job()
    train = by_name(summary(samples, events))["train"]
    # the sampled power of the first second still averages what came before: only rows from 1 s in count
    assert train["power_w_p10"] == 600.0
    assert train["energy_used_j"] == pytest.approx(600.0 * train["seconds"], rel=0.02)
    assert train["j_per_step"] == pytest.approx(60.0, rel=0.02)
    assert train["tokens_per_j"] == pytest.approx(40960.0 / 600.0, rel=0.02)
    assert train["tflop_per_kj"] == pytest.approx(500.0 / 600.0 * 1e3, rel=0.02)


def test_a_phase_too_short_for_numbers_says_so_instead_of_giving_them():
    samples = rows(1, 0.0, 6.0, lambda t, g: {"gpu_util_pct": 100.0})
    events = [
        mark(1.0, R0, "warmup"),
        *stamps(R0, G[0].uuid, [1.1, 1.2, 1.3], flops=1e12),
        mark(1.35, R0, "train"),
        *stamps(R0, G[0].uuid, every(1.4, 6.0, 0.1), flops=1e12),
    ]
    warmup = by_name(summary(samples, events))["warmup"]
    assert warmup["verdict_rules"] == "too-short" and warmup["verdict"].startswith("Too short to measure")
    assert not finite(warmup["steps_per_s"]) and not finite(warmup["mfu_pct"]) and not finite(warmup["gpu_util_pct"])


def test_two_steps_inside_one_sample_interval_give_no_rate_beside_missing_counters():
    """Two steps 30 ms apart, after the trim, inside one 100 ms sample row: a rate without counters would
    mix windows (seen on a checkpointed warmup of two steps); the row is too short instead."""
    samples = rows(1, 0.0, 6.0, lambda t, g: {"gpu_util_pct": 100.0})
    events = [
        mark(1.0, R0, "warmup"),
        *stamps(R0, G[0].uuid, [1.1, 1.52, 1.55], flops=1e12),
        mark(1.58, R0, "train"),
        *stamps(R0, G[0].uuid, every(1.6, 6.0, 0.1), flops=1e12),
    ]
    warmup = by_name(summary(samples, events))["warmup"]
    assert warmup["verdict_rules"] == "too-short" and warmup["n_samples"] == 0
    assert not finite(warmup["steps_per_s"]) and not finite(warmup["mfu_pct"])


@pytest.mark.parametrize("times,rule", [([], "no-steps"), ([1.2], "one-step")])
def test_no_steps_and_one_step_say_different_things(times, rule):
    samples = rows(1, 0.0, 4.0, lambda t, g: {"gpu_util_pct": 100.0, "sm_active_pct": 90.0, "tensor_active_pct": 50.0})
    events = [mark(0.5, R0, "eval"), *stamps(R0, G[0].uuid, times, flops=1e12), mark(3.0, R0, "done")]
    ev = by_name(summary(samples, events))["eval"]
    assert ev["verdict_rules"].split(", ")[-1] == rule


def test_a_rule_needing_a_metric_fires_only_where_the_run_never_recorded_it():
    samples = [
        {k: v for k, v in r.items() if k != "sm_active_pct"}
        for r in rows(1, 0.0, 4.0, lambda t, g: {"gpu_util_pct": 100.0, "tensor_active_pct": 50.0})
    ]
    events = [mark(0.0, R0, "train"), *stamps(R0, G[0].uuid, every(0.6, 4.0, 0.1), flops=1e12)]
    res = summarize_watch(samples, events, G[:1], 0.0, 4.0, PEAKS, "bf16", ["gpu_util_pct", "tensor_active_pct"], {})
    assert by_name(res)["train"]["verdict_rules"].startswith("tensor-busy")  # SM activity unrecorded: no rule on it
    res = summarize_watch(
        samples, events, G[:1], 0.0, 4.0, PEAKS, "bf16", ["gpu_util_pct", "tensor_active_pct", "sm_active_pct"], {}
    )
    assert by_name(res)["train"]["verdict_rules"].startswith("tensor-busy")  # a column empty everywhere: unrecorded


# --- decode: bytes and tokens, and what the work is judged by -------------------------------------------


def test_a_decode_step_is_judged_by_mbu_and_tokens():
    events = [
        mark(0.0, R0, "decode"),
        *stamps(R0, G[0].uuid, every(0.6, 5.6, 0.001), flops=2 * 3.5e9 / 2, nbytes=3.0e9, tokens=1),
    ]
    samples = rows(
        1,
        0.0,
        5.7,
        lambda t, g: {
            "gpu_util_pct": 100.0,
            "sm_active_pct": 95.0,
            "dram_active_pct": 90.0,
            "tensor_active_pct": 2.0,
            "power_w": 500.0,
        },
    )
    row = by_name(summary(samples, events))["decode"]
    assert row["tokens_per_s"] == pytest.approx(1000.0) and row["gbps"] == pytest.approx(3000.0)
    assert row["mbu_pct"] == pytest.approx(100 * 3.0e12 / 3.35e12) and row["mfu_pct"] < 1
    assert row["verdict_rules"] == "memory-bound-decode, mbu-high"
    assert row["j_per_token"] == pytest.approx(0.5, rel=0.02)


@pytest.mark.parametrize("flops,rule", [(1e16, "mfu-impossible"), (None, "no-flops")])
def test_impossible_or_missing_flops_get_no_rating(flops, rule):
    events = [mark(0.0, R0, "train"), *stamps(R0, G[0].uuid, every(0.6, 5.0, 0.1), flops=flops)]
    samples = rows(1, 0.0, 5.0, lambda t, g: {"gpu_util_pct": 100.0, "sm_active_pct": 90, "tensor_active_pct": 60})
    row = by_name(summary(samples, events))["train"]
    assert row["verdict_rules"] == f"tensor-busy, {rule}"
    assert "well-tuned" not in row["verdict"]


def test_model_and_hardware_flops_give_mfu_and_hfu():
    events = [mark(0.0, R0, "train"), *stamps(R0, G[0].uuid, every(0.6, 5.0, 0.1), flops=1e13, hw_flops=1.3e13)]
    samples = rows(1, 0.0, 5.0, lambda t, g: {"gpu_util_pct": 100.0})
    row = by_name(summary(samples, events))["train"]
    assert row["hfu_pct"] == pytest.approx(1.3 * row["mfu_pct"])


# --- recorded runs -----------------------------------------------------------------------------------


def test_a_run_directory_summarizes_again_to_the_same_rows(tmp_path):
    samples, events = typical_job()
    run = write_watch(tmp_path / "run", 1, 0.0, 18.5, samples, events)
    again = resummarize(run).summary
    direct = summary(samples, events, t1=18.5).summary
    assert [r["scenario"] for r in again] == [r["scenario"] for r in direct]
    for a, b in zip(again, direct):
        for k, v in b.items():
            assert a[k] == pytest.approx(v, nan_ok=True, rel=1e-6) if isinstance(v, float) else a[k] == v


WATCH_RUNS = sorted(p.parent for p in (ROOT / "results").glob("*/marks.tsv"))


@pytest.mark.parametrize("run", WATCH_RUNS, ids=lambda p: p.name)
def test_every_committed_watch_run_keeps_mfu_within_the_time_its_gpu_was_busy(run):
    """Each committed watch, summarized by this code from its samples and marks: MFU <= the share of time
    the GPU was busy, wherever both exist (NVML's utilization has a resolution of one point)."""
    for r in resummarize(run).summary:
        if finite(r.get("mfu_pct")) and r["mfu_pct"] <= 100:
            assert finite(r["gpu_util_mean_pct"]), r["scenario"]
            assert r["mfu_pct"] <= r["gpu_util_mean_pct"] + 1.0, r["scenario"]


def test_no_watch_row_mixes_windows_in_the_committed_runs():
    """Rows with a rate have samples from the same window; rows without either say they are too short."""
    for run in WATCH_RUNS:
        for r in resummarize(run).summary:
            if r["kind"] == "phase" and r["verdict_rules"] != "too-short":
                assert r["n_samples"] > 0, (run.name, r["scenario"])
            if r["verdict_rules"] == "too-short":
                assert not finite(r["steps_per_s"]) and not finite(r["mfu_pct"]), (run.name, r["scenario"])


def test_the_groups_around_a_window_are_found_as_a_scan_of_every_group_would():
    """tally.around bisects (a summary of thousands of phases asks it once a phase); groups may overlap."""
    import random
    from types import SimpleNamespace

    from gpubench.job.tally import around

    rng = random.Random(1)
    for _ in range(2000):
        firsts = sorted(rng.random() * 10 for _ in range(rng.randint(0, 12)))
        groups = [SimpleNamespace(t_first=a, t_last=a + rng.random() * rng.choice([0.1, 3.0])) for a in firsts]
        ws = rng.random() * 10
        we = ws + rng.random() * 3
        scanned = (
            next((g for g in reversed(groups) if g.t_last < ws), None),
            next((g for g in groups if g.t_first > we), None),
        )
        assert around(groups, ws, we) == scanned
