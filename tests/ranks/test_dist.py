"""Runs under torchrun, on the CPU: the launch, the merge onto one clock, straggler identification, and whole
jobs of 2 and 4 processes over gloo (fake GPUs and sources, real collectives, the real run loop)."""

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest
from distfakes import NVLINK_BYTES_PER_S, CpuBackend, RankSource, spawn
from fakes import scenario
from gpubench.kernels.common import CheckFailed

from gpubench.metrics import finite
from gpubench.ranks import launch as dist
from gpubench.ranks.lockstep import run_distributed
from gpubench.ranks.merge import Clock, arrival_stats, merge_results, merge_rows
from gpubench.record.config import RecordingConfig
from gpubench.record.rundir import load_run
from gpubench.suite.loop import RunOptions
from gpubench.suite.scenarios import Scenario

TORCHRUN_ENV = {"RANK": "1", "WORLD_SIZE": "4", "LOCAL_RANK": "1", "LOCAL_WORLD_SIZE": "2", "GROUP_RANK": "0"}


# --- the launch --------------------------------------------------------------------------------------

def test_torchrun_is_recognised_by_its_environment():
    assert dist.launch_from({}) is None
    launch = dist.launch_from(TORCHRUN_ENV)
    assert (launch.rank, launch.world_size, launch.local_rank, launch.node) == (1, 4, 1, "node0")
    assert not launch.is_root and not launch.samples
    assert dist.is_quiet_rank(TORCHRUN_ENV) and not dist.is_quiet_rank({})


@pytest.mark.parametrize("env,message", [
    ({"RANK": "0"}, "RANK is set but not WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE: start distributed runs with"),
    ({**TORCHRUN_ENV, "WORLD_SIZE": "two"}, "must be whole numbers"),
    ({**TORCHRUN_ENV, "RANK": "4"}, "do not describe a rank of a job"),
])
def test_a_broken_torchrun_environment_is_one_sentence(env, message):
    with pytest.raises(dist.LaunchError, match=message):
        dist.launch_from(env)


# --- the merge, from payloads --------------------------------------------------------------------------

def test_arrival_times_name_the_rank_that_came_late():
    steps = 20
    stamps = {0: [10.0 + k for k in range(steps)], 1: [10.0001 + k for k in range(steps)],
              2: [10.030 + k for k in range(steps)]}  # rank 2 reaches every step 30 ms after rank 0
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
    res = {"scenario": "straggler", "gpu": rank % 2, "uuid": uuid, "t_start": 10.0 + skew, "t_end": 20.0 + skew,
           "kernel_ms": 31.0 + rank / 10, "bound": "compute", "timing_window": f"{10.5 + skew:.6f}-{20.0 + skew:.6f}"}
    p = {"rank": rank, "local_rank": rank % 2, "node": node, "gpu": {"uuid": uuid, "nvml_index": rank % 2},
         "info": {"name": "NVIDIA H200"}, "results": [res], "arrivals": {"straggler": arrivals or []},
         "clock": {"t_start": 0.0 + skew, "offset_start": -skew}}
    if rows is not None:
        p["rows"] = rows
    return p


def test_every_node_lands_on_rank_0s_clock_with_a_rank_on_every_row():
    skew = 1000.0  # node1's monotonic clock reads 1000 s more than node0's
    remote_rows = [{"t_start_s": 11.0 + skew, "t_end_s": 11.1 + skew, "gpu": g, "uuid": f"GPU-node1-{g}"}
                   for g in (0, 1, 7)]
    root_rows = [{"t_start_s": 11.0, "t_end_s": 11.1, "gpu": g, "uuid": f"GPU-node0-{g}"} for g in (0, 1)]
    arrivals = {0: [12.0, 13.0], 1: [12.0, 13.0], 2: [12.005 + skew, 13.005 + skew], 3: [12.0 + skew, 13.0 + skew]}
    payloads = [_payload(0, "node0", 0.0, arrivals=arrivals[0]), _payload(1, "node0", 0.0, arrivals=arrivals[1]),
                _payload(2, "node1", skew, rows=remote_rows, arrivals=arrivals[2]),
                _payload(3, "node1", skew, arrivals=arrivals[3])]
    rows = merge_rows(root_rows, payloads, {p["gpu"]["uuid"]: p["rank"] for p in payloads})
    assert {(r["uuid"], r["rank"]) for r in rows} == {("GPU-node0-0", 0), ("GPU-node0-1", 1), ("GPU-node1-0", 2),
                                                       ("GPU-node1-1", 3), ("GPU-node1-7", None)}
    assert all(r["t_end_s"] == pytest.approx(11.1) for r in rows)
    results = {r["rank"]: r for r in merge_results(payloads)}
    assert results[3]["t_start"] == pytest.approx(10.0) and results[3]["node"] == "node1"
    assert results[3]["timing_window"] == "10.500000-20.000000"  # its calls' window, on rank 0's clock too
    assert results[2]["arrival_delay_ms"] == pytest.approx(5.0) and results[0]["straggler_rank"] == 2
    assert results[0]["step_spread_pct"] == pytest.approx(100 * 0.3 / 31.15, rel=1e-3)


# --- whole jobs over gloo ------------------------------------------------------------------------------

def _fails_on_rank_1():
    import torch.distributed as d

    if d.get_rank() == 1:
        raise CheckFailed("wrong[fake]: 3 elements differ from the reference")
    return {}


DELAY_MS = 40.0


def _scenarios():
    straggler = Scenario("straggler", "straggler", "torch", "-", distributed=True,
                         sizes={"m": 32, "n": 32, "k": 32, "gemms": 1, "delay_ms": DELAY_MS, "device": "cpu"})
    allreduce = Scenario("allreduce-8kib", "allreduce", "nccl", "-", {"size_bytes": 8192, "device": "cpu"},
                         distributed=True)
    return {"bad": scenario("bad", check=_fails_on_rank_1), "copy": scenario("copy", nbytes=6e3, bound="dram"),
            "straggler": straggler, "allreduce-8kib": allreduce, "second": scenario("second")}


def _job(launch, comm, out_dir, names, slow_rank=None, all_gpus=False, interrupt_at=None):
    config = RecordingConfig(interval_s=0.05, command=["torchrun", "-m", "gpubench", "run"], sources=[RankSource()],
                             all_gpus=all_gpus)
    opts = RunOptions(scenarios=[_scenarios()[n] for n in names], out_dir=out_dir, recording=config, duration_s=1.0,
                      gap_s=0.1, slow_rank=slow_rank)
    try:
        run_dir, summary = run_distributed(opts, launch, comm, CpuBackend(launch.node, interrupt_at))
    except KeyboardInterrupt:
        assert interrupt_at
        return
    if launch.is_root:
        assert run_dir == out_dir and summary
    else:
        assert run_dir is None and summary == []


@pytest.fixture(scope="module")
def two_ranks(tmp_path_factory):
    out = tmp_path_factory.mktemp("job") / "run"
    spawn(_job, 2, out, ["bad", "copy", "straggler", "allreduce-8kib"])
    return out


def test_two_ranks_write_one_run_directory_with_a_rank_on_every_row(two_ranks):
    manifest, samples, summary = load_run(two_ranks)
    assert manifest["completed"] and manifest["distributed"]["world_size"] == 2
    assert manifest["distributed"]["ranks_reported"] == 2
    assert {(r["rank"], r["uuid"]) for r in samples} == {(0, "GPU-node0-0"), (1, "GPU-node0-1")}
    # each GPU's own values: the merge kept every row with its GPU
    assert all(r["gpu_util_pct"] == 100.0 - r["gpu"] for r in samples)
    assert [(r["scenario"], r["rank"]) for r in summary] == [
        ("copy", 0), ("copy", 1), ("straggler", 0), ("straggler", 1), ("allreduce-8kib", 0), ("allreduce-8kib", 1)]
    # rows whole for every column (from 0.4 s into the window: gpubench.read.summary.TRAIL_S)
    assert all(r["uuid"] == f"GPU-node0-{r['rank']}" and r["n_samples"] > 0 for r in summary)
    by = {(r["scenario"], r["rank"]): r for r in summary}
    assert by[("copy", 1)]["gpu_util_pct"] == 99.0  # rank 1's row is summarized from rank 1's GPU
    assert any("bad skipped: rank 1: wrong[fake]" in e for e in manifest["errors"])
    assert manifest["scenarios_done"] == ["copy", "straggler", "allreduce-8kib"]  # the skip kept ranks in step


def test_each_rank_times_the_window_its_counters_cover(two_ranks):
    """The calls of a scenario's first half second are not timed into its time per call: the counters skip it."""
    _, _, summary = load_run(two_ranks)
    timed = [r for r in summary if finite(r.get("kernel_ms"))]
    assert len(timed) == len(summary) == 6
    for r in timed:
        assert r["timing_window"] == r["windows"], (r["scenario"], r["rank"])


def test_torchrun_rows_carry_the_tensor_ceiling_of_their_gpu():
    from gpubench.ranks.merge import summarize_ranks
    from gpubench.read.samples import as_samples
    from gpubench.truth import ceiling

    rows = as_samples([{"t_start_s": i / 10, "t_end_s": (i + 1) / 10, "gpu": g, "uuid": f"GPU-node0-{g}",
                        "rank": g, "tensor_active_pct": 50.0 - 30 * g, "sm_clock_mhz": 1830.0}
                       for i in range(30) for g in (0, 1)])
    results = [{"scenario": "gemm", "gpu": g, "uuid": f"GPU-node0-{g}", "rank": g, "t_start": 0.0, "t_end": 3.0,
                "kernel_ms": 10.0, "flops_per_call": 2e12, "bytes_per_call": 0.0, "unit": "bf16_tensor",
                "bound": "compute"} for g in (0, 1)]
    sheet = {"bf16_tensor": 989.4e12}
    peaks = {g: {"datasheet": sheet, "measured": None} for g in (0, 1)}
    out = summarize_ranks(rows, results, peaks, ["tensor_active_pct", "sm_clock_mhz"], {"gemm": 0},
                          {0: "NVIDIA H200", 1: "NVIDIA H200"})
    factor = ceiling.load_calibrations("NVIDIA H200")["bf16"].factor
    assert [r["tensor_ceiling_pct"] for r in out] == pytest.approx([50.0 * factor, 20.0 * factor])
    # 200 TFLOP/s is 20% of the peak: within rank 0's ceiling, above rank 1's
    assert out[0]["ran_over_ceiling"] < 1 < out[1]["ran_over_ceiling"]


def test_the_straggler_is_named_by_its_arrival_not_its_step_time(two_ranks):
    _, _, summary = load_run(two_ranks)
    late, waiting = (next(r for r in summary if r["scenario"] == "straggler" and r["rank"] == k) for k in (1, 0))
    assert late["slow_rank"] == 1 and late["straggler_rank"] == 1 and waiting["straggler_rank"] == 1
    assert DELAY_MS * 0.8 < late["arrival_delay_ms"] < DELAY_MS * 1.5
    assert waiting["arrival_delay_ms"] < 5 and waiting["wait_ms"] > DELAY_MS * 0.8
    assert late["n_steps"] == waiting["n_steps"] > 5
    assert late["step_spread_pct"] < 25  # equal step times on both ranks: they cannot tell who is late
    assert finite(waiting["mfu_pct"]) and waiting["check"].startswith("rel err")


def test_allreduce_is_checked_and_reported_as_nccl_tests_defines_it(two_ranks):
    _, _, summary = load_run(two_ranks)
    for r in (r for r in summary if r["scenario"] == "allreduce-8kib"):
        assert r["check"] == "exact" and r["world_size"] == 2 and r["bound"] == "interconnect"
        algbw = 8192 / (r["kernel_ms"] / 1e3) / 1e9
        assert r["algbw_gbps"] == pytest.approx(algbw)
        assert r["busbw_gbps"] == pytest.approx(algbw * 2 * (2 - 1) / 2)
        assert r["nvlink_pct"] == pytest.approx(100 * r["busbw_gbps"] * 1e9 / NVLINK_BYTES_PER_S)
        assert r["nvlink_links"] == 18 and r["launch"] == "gloo-chosen, in place"


def test_the_ranks_figure_and_report_tell_the_straggler_story(two_ranks, tmp_path):
    from gpubench.show import figures
    from gpubench.show.report import write_report

    manifest, samples, summary = load_run(two_ranks)
    _, notes = figures.ranks.draw(summary, samples, manifest, tmp_path)
    assert notes["ranks"] == [0, 1] and notes["straggler"] == {"straggler": 1}
    by = {(r["scenario"], r["rank"]): r for r in summary}
    assert notes["delays"][("straggler", 1)] == pytest.approx(by[("straggler", 1)]["arrival_delay_ms"])
    write_report(two_ranks, manifest, samples, summary, tmp_path)
    md = (tmp_path / "report.md").read_text()
    assert "### straggler · rank 1" in md and "the arrival times name rank 1 as the straggler" in md
    assert "Waiting a median" in md and "Rank 1's GPU idled while its host slept" in md
    assert "Run under torchrun: 2 ranks on 1 node(s)" in md and "algbw" in md


def test_the_ranks_figure_says_each_scenario_apart(tmp_path):
    """Its title took medians over the waiting rows of two scenarios together: a state no scenario was in."""
    from gpubench.show.figures import ranks

    run = Path(__file__).resolve().parents[2] / "results" / "h200-x2-20261122-132845"
    manifest, samples, summary = load_run(run)
    _, notes = ranks.draw(summary, samples, manifest, tmp_path)
    by = {(r["scenario"], r["rank"]): r for r in summary}
    for name in ("straggler", "straggler-hang", "allreduce-1gib"):
        [line] = [x for x in notes["findings"] if x.startswith(name + ":")]
        waiting = by[(name, 0)]  # rank 1 is the straggler; in an all-reduce nobody is
        if name != "allreduce-1gib":
            assert f"at {waiting['power_w_energy']:.0f} W" in line and "rank 1 reached the all-reduce" in line


def test_four_ranks_on_two_nodes_send_every_nodes_samples_to_rank_0(tmp_path):
    out = tmp_path / "run"
    spawn(_job, 4, out, ["straggler"], 1, True, nodes=2)
    manifest, samples, summary = load_run(out)
    ranked = {(r["uuid"], r["rank"]) for r in samples}
    assert ranked == {("GPU-node0-0", 0), ("GPU-node0-1", 1), ("GPU-node1-0", 2), ("GPU-node1-1", 3),
                      ("GPU-node0-7", None), ("GPU-node1-7", None)}  # --all-gpus: a sampled GPU no rank used
    assert set(manifest["distributed"]["nodes"]) == {"node0", "node1"}
    assert all(abs(r["clock"]["offset_start"]) < 0.05 for r in manifest["distributed"]["ranks"])
    strag = [r for r in summary if r["scenario"] == "straggler"]
    assert [r["rank"] for r in strag] == [0, 1, 2, 3] and {r["straggler_rank"] for r in strag} == {1}
    rows_of_3 = [r for r in samples if r["rank"] == 3 and r["phase"] == "straggler"]
    # rank 3's row is read from its own GPU's samples, GPU-Util included (a loaded machine may sample it seldom)
    row_of_3 = next(r for r in strag if r["rank"] == 3)
    assert rows_of_3 and 1 <= row_of_3["n_samples"] <= len(rows_of_3) and row_of_3["gpu_util_pct"] == 99.0


def test_ctrl_c_on_every_rank_leaves_rank_0s_part_of_the_run(tmp_path):
    out = tmp_path / "run"
    spawn(_job, 2, out, ["copy", "second"], None, False, "second")
    manifest, samples, summary = load_run(out)
    assert manifest["status"] == "interrupted" and not manifest["completed"]
    assert [(r["scenario"], r["rank"]) for r in summary] == [("copy", 0)]
    assert {r["rank"] for r in samples} == {0, 1}  # rank 0's node sampler saw both GPUs to the end
    assert any("the run ended before the other ranks reported" in w for w in manifest["warnings"])


def _broken_collective(launch, comm):
    import torch.distributed as d
    from gpubench.kernels import allreduce

    allreduce.prepare("nccl", size_bytes=2**12, device="cpu").check()  # the real all-reduce passes
    real, d.all_reduce = d.all_reduce, lambda *a, **k: None
    try:
        with pytest.raises(CheckFailed, match="elements differ"):
            allreduce.prepare("nccl", size_bytes=2**12, device="cpu").check()
    finally:
        d.all_reduce = real


def test_the_allreduce_check_catches_a_collective_that_does_nothing():
    spawn(_broken_collective, 2)


# --- the command line ----------------------------------------------------------------------------------

def _gpubench(*args, env=None):
    return subprocess.run([sys.executable, "-m", "gpubench", *args], capture_output=True, text=True, timeout=600,
                          env=env)


def test_distributed_scenarios_without_torchrun_are_skipped_with_the_command_to_run_them():
    r = _gpubench("run", "allreduce-*", "straggler")
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert ("allreduce-1gib, allreduce-8kib, straggler need several GPUs, one process each: launch with "
            "`torchrun --nproc-per-node=2 -m gpubench run allreduce-1gib allreduce-8kib straggler`") in r.stderr
    mixed = _gpubench("run", "idle", "straggler-hang")
    assert "skipped: straggler-hang needs several GPUs" in mixed.stderr and "Traceback" not in mixed.stderr


def test_a_partial_torchrun_environment_is_refused():
    import os

    r = _gpubench("run", "idle", env={**os.environ, "RANK": "0"})
    assert r.returncode == 2 and "start distributed runs with `torchrun" in r.stderr and "Traceback" not in r.stderr


def _torchrun(*args):
    return subprocess.run([sys.executable, "-m", "torch.distributed.run", "--nproc-per-node=2", "-m", "gpubench",
                           *args], capture_output=True, text=True, timeout=600)


@pytest.mark.skipif(__import__("torch").cuda.is_available(), reason="this machine has a GPU")
def test_under_torchrun_a_problem_is_said_once_by_rank_0_and_every_rank_exits_2(tmp_path):
    r = _torchrun("run", "idle", "--out", str(tmp_path / "run"))
    assert r.returncode != 0
    assert r.stderr.count("gpubench run: error: rank 0: gpubench run needs an NVIDIA GPU") == 1
    assert "exitcode  : 2" in r.stderr and not (tmp_path / "run").exists()
    bad = _torchrun("run", "straggler", "--slow-rank", "2")
    assert bad.stderr.count("--slow-rank 2 is not a rank of this job (0 to 1)") == 1


@pytest.mark.parametrize("name", ["samples.arrows", "samples.csv"])
def test_a_run_directory_reads_back_a_gpu_that_no_rank_used(tmp_path, name):
    from gpubench.record.csvfile import CsvSink
    from gpubench.record.rundir import RANKED_SAMPLE_KEYS, open_sink, read_samples

    path = tmp_path / name
    sink = (open_sink if name.endswith(".arrows") else CsvSink)(path, ["gpu_util_pct"], keys=RANKED_SAMPLE_KEYS)
    for gpu, rank in ((0, 0), (1, None)):  # GPU 1 sampled (--all-gpus), no rank on it
        sink({"t_start_s": 0.0, "t_end_s": 0.1, "t_wall": 1.0, "gpu": gpu, "rank": rank, "uuid": f"GPU-{gpu}",
              "phase": "start", "gpu_util_pct": 100.0})
    sink.close()
    assert [r["rank"] for r in read_samples(path)] == [0, None]
    assert json.dumps(RANKED_SAMPLE_KEYS).count("rank") == 1


# --- what NVML says about the links, and what the summary makes of it -------------------------------

def test_nvlink_peak_is_what_nvml_reports_for_the_active_links():
    from types import SimpleNamespace
    from unittest import mock

    import pynvml

    from gpubench.record import nvml

    def field(value, ok=True):
        return SimpleNamespace(nvmlReturn=pynvml.NVML_SUCCESS if ok else pynvml.NVML_ERROR_NOT_SUPPORTED,
                               valueType=pynvml.NVML_VALUE_TYPE_UNSIGNED_INT, value=SimpleNamespace(uiVal=value))

    def fields(h, ids):
        if ids[0][0] == pynvml.NVML_FI_DEV_NVLINK_LINK_COUNT:
            return [field(4)]
        return [field(26562), field(26562), field(26562), field(0, ok=False)]

    with mock.patch("gpubench.record.nvml.pynvml", autospec=True) as m:
        for name in ("NVML_SUCCESS", "NVML_FEATURE_ENABLED", "NVML_FI_DEV_NVLINK_LINK_COUNT",
                     "NVML_FI_DEV_NVLINK_GET_SPEED"):
            setattr(m, name, getattr(pynvml, name))
        m.nvmlDeviceGetFieldValues.side_effect = fields
        m.nvmlDeviceGetNvLinkState.side_effect = lambda h, link: 0 if link == 2 else 1  # link 2 is down
        m.nvmlDeviceGetNvLinkVersion.return_value = 6
        m.nvmlDeviceGetNvLinkRemotePciInfo.side_effect = lambda h, link: SimpleNamespace(
            busId=f"0000:{link:02X}:00.0".encode())
        m.nvmlDeviceGetNvLinkRemoteDeviceType.side_effect = lambda h, link: (
            pynvml.NVML_NVLINK_DEVICE_TYPE_SWITCH if link == 0 else pynvml.NVML_NVLINK_DEVICE_TYPE_GPU)
        info = nvml.nvlink("h0")
    assert info["active_links"] == 3 and info["bytes_per_s"] == 2 * 26562e6  # link 3 gave no speed
    assert [x["active"] for x in info["links"]] == [True, True, False, True]
    assert info["links"][0] == {"link": 0, "active": True, "version": 6, "speed_mbps": 26562,
                                "peer_bus": "0000:00:00.0", "peer": "switch"}
    assert info["links"][1]["peer"] == "gpu"


def test_a_collective_is_held_against_the_links_it_can_use_and_across_nodes_against_none():
    from gpubench.ranks.merge import CROSS_NODE, job_nvlink, usable_links

    def link(i, bus, peer="gpu"):
        return {"link": i, "active": True, "speed_mbps": 25000.0, "peer_bus": bus, "peer": peer}

    info = {"nvlink": {"links": [link(i, "0000:1B:00.0") for i in range(4)] +  # to a GPU of the job
                                 [link(i, "0000:2C:00.0") for i in range(4, 8)] +  # to a GPU the job does not use
                                 [link(i, "0000:9A:00.0", "switch") for i in range(8, 10)]}}  # through a switch
    job = {"nodes": 1, "buses": {"0000:1A:00.0", "0000:1B:00.0"}}
    assert [x["link"] for x in usable_links(info, job)] == [0, 1, 2, 3, 8, 9]
    assert job_nvlink(info, job) == 6 * 25000e6
    assert usable_links(info, {"nodes": 2, "buses": job["buses"]}) == [] and "2 nodes" in CROSS_NODE.format(nodes=2)


def test_a_gpu_without_nvlink_has_no_nvlink_peak():
    from gpubench.truth.peaks import nvlink_peak

    assert nvlink_peak({"links": [], "active_links": 0, "bytes_per_s": None}) == {}
    assert nvlink_peak(None) == {}


def test_busbw_is_algbw_times_the_all_reduce_factor_and_only_for_collectives():
    from gpubench.read.summary import derive
    from gpubench.show.figures.common import work_fraction

    peaks = {"datasheet": {"nvlink": 450e9}}
    res = {"kernel_ms": 4.0, "link_bytes_per_call": 2**30, "bus_factor": 2 * 7 / 8, "bound": "interconnect"}
    d = derive(res, peaks)
    assert d["algbw_gbps"] == pytest.approx(2**30 / 4e-3 / 1e9)
    assert d["busbw_gbps"] == pytest.approx(d["algbw_gbps"] * 1.75)
    assert d["nvlink_pct"] == pytest.approx(100 * d["busbw_gbps"] / 450)
    assert math.isnan(d["link_pct"]) and math.isnan(d["mfu_pct"])
    assert work_fraction({**res, **d}) == ("NVLink", d["nvlink_pct"])
    host = derive({**res, "bound": "link"}, {"datasheet": {"link": 63e9, "nvlink": 450e9}})
    assert math.isnan(host["busbw_gbps"]) and math.isnan(host["nvlink_pct"])
