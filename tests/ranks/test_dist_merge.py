"""Runs under torchrun, read without starting a process: the launch recognised from torchrun's environment,
and the merge of the ranks' payloads onto rank 0's clock, with the straggler named by the arrival times. Whole
jobs over gloo: test_dist_jobs.py; the command line: test_dist_cli.py; NVLink: test_dist_nvlink.py."""

import pytest

from gpubench.ranks import launch as dist
from gpubench.ranks.merge import Clock, arrival_stats, merge_results, merge_rows

TORCHRUN_ENV = {"RANK": "1", "WORLD_SIZE": "4", "LOCAL_RANK": "1", "LOCAL_WORLD_SIZE": "2", "GROUP_RANK": "0"}


# --- the launch --------------------------------------------------------------------------------------


def test_torchrun_is_recognised_by_its_environment():
    assert dist.launch_from({}) is None
    launch = dist.launch_from(TORCHRUN_ENV)
    assert (launch.rank, launch.world_size, launch.local_rank, launch.node) == (1, 4, 1, "node0")
    assert not launch.is_root and not launch.samples
    assert dist.is_quiet_rank(TORCHRUN_ENV) and not dist.is_quiet_rank({})


@pytest.mark.parametrize(
    "env,message",
    [
        ({"RANK": "0"}, "RANK is set but not WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE: start distributed runs with"),
        ({**TORCHRUN_ENV, "WORLD_SIZE": "two"}, "must be whole numbers"),
        ({**TORCHRUN_ENV, "RANK": "4"}, "do not describe a rank of a job"),
    ],
)
def test_a_broken_torchrun_environment_is_one_sentence(env, message):
    with pytest.raises(dist.LaunchError, match=message):
        dist.launch_from(env)


# --- the merge, from payloads --------------------------------------------------------------------------


def test_arrival_times_name_the_rank_that_came_late():
    steps = 20
    stamps = {
        0: [10.0 + k for k in range(steps)],
        1: [10.0001 + k for k in range(steps)],
        2: [10.030 + k for k in range(steps)],
    }  # rank 2 reaches every step 30 ms after rank 0
    stats = arrival_stats(stamps)
    assert stats[2]["arrival_delay_ms"] == pytest.approx(30.0)
    assert stats[0]["arrival_delay_ms"] == 0.0 and stats[0]["wait_ms"] == pytest.approx(30.0)
    assert stats[2]["wait_ms"] == 0.0 and stats[1]["n_steps"] == steps
    assert {s["straggler_rank"] for s in stats.values()} == {2}
    assert "name rank 2 as the straggler" in stats[0]["straggler_text"]


def test_no_straggler_is_named_where_every_rank_arrives_together():
    stats = arrival_stats({0: [1.0, 2.0], 1: [1.0002, 2.0001]})
    assert stats[1]["straggler_rank"] is None and "name no straggler" in stats[1]["straggler_text"]
    assert arrival_stats({0: [1.0, 2.0]}) == {}  # one rank: nobody to be late against


def test_a_clock_follows_its_drift_between_the_two_measurements():
    c = Clock(t_start=100.0, offset_start=5.0, t_end=200.0, offset_end=5.002)
    assert c.to_root(100.0) == pytest.approx(105.0)
    assert c.to_root(150.0) == pytest.approx(155.001)
    assert Clock(t_start=1.0, offset_start=-2.0).to_root(10.0) == pytest.approx(8.0)


def _payload(rank, node, skew, rows=None, arrivals=None):
    uuid = f"GPU-{node}-{rank % 2}"
    res = {
        "scenario": "straggler",
        "gpu": rank % 2,
        "uuid": uuid,
        "t_start": 10.0 + skew,
        "t_end": 20.0 + skew,
        "kernel_ms": 31.0 + rank / 10,
        "bound": "compute",
        "timing_window": f"{10.5 + skew:.6f}-{20.0 + skew:.6f}",
    }
    p = {
        "rank": rank,
        "local_rank": rank % 2,
        "node": node,
        "gpu": {"uuid": uuid, "nvml_index": rank % 2},
        "info": {"name": "NVIDIA H200"},
        "results": [res],
        "arrivals": {"straggler": arrivals or []},
        "clock": {"t_start": 0.0 + skew, "offset_start": -skew},
    }
    if rows is not None:
        p["rows"] = rows
    return p


def test_every_node_lands_on_rank_0s_clock_with_a_rank_on_every_row():
    skew = 1000.0  # node1's monotonic clock reads 1000 s more than node0's
    remote_rows = [
        {"t_start_s": 11.0 + skew, "t_end_s": 11.1 + skew, "gpu": g, "uuid": f"GPU-node1-{g}"} for g in (0, 1, 7)
    ]
    root_rows = [{"t_start_s": 11.0, "t_end_s": 11.1, "gpu": g, "uuid": f"GPU-node0-{g}"} for g in (0, 1)]
    arrivals = {0: [12.0, 13.0], 1: [12.0, 13.0], 2: [12.005 + skew, 13.005 + skew], 3: [12.0 + skew, 13.0 + skew]}
    payloads = [
        _payload(0, "node0", 0.0, arrivals=arrivals[0]),
        _payload(1, "node0", 0.0, arrivals=arrivals[1]),
        _payload(2, "node1", skew, rows=remote_rows, arrivals=arrivals[2]),
        _payload(3, "node1", skew, arrivals=arrivals[3]),
    ]
    rows = merge_rows(root_rows, payloads, {p["gpu"]["uuid"]: p["rank"] for p in payloads})
    assert {(r["uuid"], r["rank"]) for r in rows} == {
        ("GPU-node0-0", 0),
        ("GPU-node0-1", 1),
        ("GPU-node1-0", 2),
        ("GPU-node1-1", 3),
        ("GPU-node1-7", None),
    }
    assert all(r["t_end_s"] == pytest.approx(11.1) for r in rows)
    results = {r["rank"]: r for r in merge_results(payloads)}
    assert results[3]["t_start"] == pytest.approx(10.0) and results[3]["node"] == "node1"
    assert results[3]["timing_window"] == "10.500000-20.000000"  # its calls' window, on rank 0's clock too
    assert results[2]["arrival_delay_ms"] == pytest.approx(5.0) and results[0]["straggler_rank"] == 2
    assert results[0]["step_spread_pct"] == pytest.approx(100 * 0.3 / 31.15, rel=1e-3)
