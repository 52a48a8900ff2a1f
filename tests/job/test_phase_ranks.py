"""A watched job's GPUs, processes and ranks on the CPU, from synthetic samples and marks: steps credited to
the GPU their process ran on, the command's process tree, the phases cut by the lowest rank, a straggler named."""

import pytest
from jobs import every, gpus, mark, rows, stamps
from phasejobs import G, R0, by_name, summary

from gpubench.job.contexts import Contexts, tree
from gpubench.job.credit import credit
from gpubench.job.markreader import Stream
from gpubench.job.phases import cut
from gpubench.metrics import finite


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
