"""A watched job's summary on the CPU, from synthetic samples and marks: one window per row, start-up and
teardown apart, the job's own GPUs and processes, energy, decode's yardsticks, a straggler named."""

from pathlib import Path

import pytest
from jobs import PEAKS, every, gpus, mark, rows, stamps, write_watch

from gpubench.job.contexts import Contexts, tree
from gpubench.job.credit import credit
from gpubench.job.markreader import Stream
from gpubench.job.phases import cut, summarize_watch
from gpubench.job.watcher import resummarize
from gpubench.metrics import finite

ROOT = Path(__file__).resolve().parents[2]
R0 = Stream(0, 100)
G = gpus(8)


def summary(samples, events, n_gpus=1, t1=None, contexts=None, all_gpus=False, dtype="bf16"):
    t1 = t1 if t1 is not None else max(r["t_end_s"] for r in samples)
    return summarize_watch(
        samples,
        events,
        G[:n_gpus],
        0.0,
        t1,
        PEAKS,
        dtype,
        [
            "gpu_util_pct",
            "power_w",
            "energy_j",
            "sm_active_pct",
            "sm_occupancy_pct",
            "tensor_active_pct",
            "dram_active_pct",
        ],
        contexts or {},
        all_gpus,
    )


def by_name(result):
    return {r["scenario"]: r for r in result.summary}


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


# --- the job's GPUs and processes ---------------------------------------------------------------------


@pytest.mark.parametrize("n", [1, 2, 8])
def test_steps_are_credited_only_to_the_gpu_the_process_ran_on(n):
    samples = rows(n, 0.0, 6.0, lambda t, g: {"gpu_util_pct": 100.0 if g == n - 1 else 0.0})
    events = [mark(0.0, R0, "train"), *stamps(R0, G[n - 1].uuid, every(0.6, 6.0, 0.1), flops=1e13)]
    res = summary(samples, events, n_gpus=n)
    assert res.used == [n - 1] and [r["gpu"] for r in res.summary] == [n - 1] * len(res.summary)
    kept = summary(samples, events, n_gpus=n, all_gpus=True)
    train = [r for r in kept.summary if r["phase"] == "train"]
    assert len(train) == n
    for r in train:
        assert (r["steps"] > 0) == (r["gpu"] == n - 1)  # nothing credited to an idle GPU
        assert finite(r["mfu_pct"]) == (r["gpu"] == n - 1)
        assert (r["verdict_rules"] == "idle-gpu") == (r["gpu"] != n - 1)  # and no advice for it


@pytest.mark.parametrize("n", [1, 2, 8])
def test_a_process_without_a_gpu_uuid_is_credited_where_it_held_a_context(n):
    host_only = Stream(None, 4242)
    events = [mark(0.0, host_only, "train"), *stamps(host_only, "", every(0.6, 6.0, 0.1), flops=1e13, clock="host")]
    credited, used, notes = credit(events, G[:n], {n - 1: {4242, 7}})
    assert credited == {host_only: n - 1} and used == [n - 1] and notes == []
    credited, used, notes = credit(events, G[:n], {})
    assert (credited == {host_only: 0}) == (n == 1)
    if n > 1:
        assert used == list(range(n)) and any("credited to no GPU" in x for x in notes)


def test_the_gpus_the_command_holds_are_found_through_its_process_tree(tmp_path):
    proc = tmp_path / "proc"
    for pid, ppid in {1: 0, 50: 1, 51: 50, 52: 51, 60: 1}.items():  # 50 is the command; 51, 52 below it
        (proc / str(pid)).mkdir(parents=True)
        (proc / str(pid) / "stat").write_text(f"{pid} (py (thon)) S {ppid} 1 1 0")
    assert tree(50, {1: 0, 50: 1, 51: 50, 52: 51, 60: 1}) == {50, 51, 52}
    held = {0: [60], 1: [52], 2: [], 3: [51, 60]}
    watch = Contexts(gpus(4), 50, compute_processes=lambda i: held[i], proc=proc)
    watch.poll()
    assert watch.used == {1: {52}, 3: {51}} and watch.foreign == {0: {60}, 3: {60}}


def test_two_processes_on_one_gpu_keep_their_own_step_rates_and_sum_their_work():
    a, b = Stream(None, 300), Stream(None, 301)
    uuid = G[0].uuid
    events = [
        mark(0.0, a, "train"),
        mark(0.01, b, "train"),
        *stamps(a, uuid, every(0.6, 10.6, 1 / 23.7), flops=1e13),
        *stamps(b, uuid, every(0.62, 10.62, 1 / 23.7), flops=1e13),
    ]
    samples = rows(1, 0.0, 11.0, lambda t, g: {"gpu_util_pct": 100.0})
    train = by_name(summary(samples, events))["train"]
    assert train["streams"] == 2 and train["steps_per_s"] == pytest.approx(23.7, rel=0.01)  # not 47.4
    assert train["tflops"] == pytest.approx(2 * 23.7 * 10, rel=0.02)  # the GPU's work is their sum
    assert "pid 300: 23.7/s" in train["stream_rates"] and "pid 301" in train["stream_rates"]


def test_phases_follow_the_lowest_rank_and_without_ranks_the_first_to_mark():
    r0, r1 = Stream(0, 1), Stream(1, 2)
    evs = [
        mark(5.0, r1, "warmup"),
        mark(6.0, r0, "warmup"),
        mark(10.0, r0, "train"),
        mark(10.5, r1, "eval"),
        mark(20.0, r0, "eval"),
        mark(25.0, r0, "train"),
    ]
    assert [(p.name, p.spans) for p in cut(evs, 1.0, 30.0)] == [
        ("run", [(1.0, 6.0)]),
        ("warmup", [(6.0, 10.0)]),
        ("train", [(10.0, 20.0), (25.0, 30.0)]),
        ("eval", [(20.0, 25.0)]),
    ]
    u1, u2 = Stream(None, 9), Stream(None, 3)
    assert [p.name for p in cut([mark(2.0, u1, "a"), mark(3.0, u2, "b")], 1.0, 5.0)] == ["run", "a"]


def test_a_mark_before_the_recording_names_its_first_phase():
    phases = cut([mark(1.0, R0, "train"), mark(8.0, R0, "eval")], 5.0, 10.0)
    assert [(p.name, p.spans) for p in phases] == [("train", [(5.0, 8.0)]), ("eval", [(8.0, 10.0)])]


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


# --- a straggler among 2, 4 and 8 ranks ------------------------------------------------------------------


def ranked_job(n: int, slow: int | None, rates=None):
    """n ranks in lock-step at 10 steps/s (or at `rates`); the slow rank's GPU idles 40% of the time."""
    rates = rates or [10.0] * n
    events = []
    for r in range(n):
        s = Stream(r, 1000 + r)
        events += [
            mark(0.0, s, "train"),
            *stamps(s, G[r].uuid, every(0.6, 10.6, 1 / rates[r]), flops=1e13, lead_s=0.002 if r == slow else 0.08),
        ]
    samples = rows(
        n,
        0.0,
        11.0,
        lambda t, g: {
            "gpu_util_pct": 56.0 if g == slow else 97.0,
            "sm_active_pct": 50.0 if g == slow else 45.0,
            "tensor_active_pct": 25.0,
        },
    )
    return summary(samples, events, n_gpus=n)


@pytest.mark.parametrize("n", [2, 4, 8])
def test_the_straggler_is_named_with_its_evidence_and_the_others_wait_on_it(n):
    slow = n - 1
    rows_ = ranked_job(n, slow).summary
    train = [r for r in rows_ if r["phase"] == "train"]
    assert {r["straggler_rank"] for r in train} == {slow}
    late = next(r for r in train if r["rank"] == slow)
    assert late["verdict_rules"].startswith("straggler") and f"Rank {slow} holds the job back" in late["verdict"]
    assert "host" in late["verdict"] and "raise the batch" not in late["verdict"]
    for r in train:
        if r["rank"] != slow:
            assert r["verdict_rules"].startswith("waits-on-rank") and f"waits on rank {slow}" in r["verdict"]


@pytest.mark.parametrize("n", [2, 4, 8])
def test_nobody_is_named_on_an_even_job_or_where_ranks_do_not_step_together(n):
    for rows_ in (ranked_job(n, None).summary, ranked_job(n, 0, rates=[10.0 + 2 * r for r in range(n)]).summary):
        assert not any("straggler" in r["verdict_rules"] or "waits-on" in r["verdict_rules"] for r in rows_)


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
