"""Whole jobs under torchrun on the CPU, of 2 and 4 processes over gloo (fake GPUs and sources, real
collectives, the real run loop): one run directory with a rank on every row, each rank's own window and
ceiling, the straggler named by its arrival, the all-reduce checked as nccl-tests defines it, the ranks figure
and report, every node's samples sent to rank 0, and Ctrl-C on every rank."""

from pathlib import Path

import pytest
from distfakes import NVLINK_BYTES_PER_S, CpuBackend, RankSource, spawn
from fakes import scenario
from gpubench.kernels.common import CheckFailed

from gpubench.metrics import finite
from gpubench.ranks.lockstep import run_distributed
from gpubench.record.config import RecordingConfig
from gpubench.record.rundir import load_run
from gpubench.suite.loop import RunOptions
from gpubench.suite.scenarios import Scenario


# --- whole jobs over gloo ------------------------------------------------------------------------------


def _fails_on_rank_1():
    import torch.distributed as d

    if d.get_rank() == 1:
        raise CheckFailed("wrong[fake]: 3 elements differ from the reference")
    return {}


DELAY_MS = 40.0


def _scenarios():
    straggler = Scenario(
        "straggler",
        "straggler",
        "torch",
        "-",
        distributed=True,
        sizes={"m": 32, "n": 32, "k": 32, "gemms": 1, "delay_ms": DELAY_MS, "device": "cpu"},
    )
    allreduce = Scenario(
        "allreduce-8kib", "allreduce", "nccl", "-", {"size_bytes": 8192, "device": "cpu"}, distributed=True
    )
    return {
        "bad": scenario("bad", check=_fails_on_rank_1),
        "copy": scenario("copy", nbytes=6e3, bound="dram"),
        "straggler": straggler,
        "allreduce-8kib": allreduce,
        "second": scenario("second"),
    }


def _job(launch, comm, out_dir, names, slow_rank=None, all_gpus=False, interrupt_at=None):
    config = RecordingConfig(
        interval_s=0.05, command=["torchrun", "-m", "gpubench", "run"], sources=[RankSource()], all_gpus=all_gpus
    )
    opts = RunOptions(
        scenarios=[_scenarios()[n] for n in names],
        out_dir=out_dir,
        recording=config,
        duration_s=1.0,
        gap_s=0.1,
        slow_rank=slow_rank,
    )
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
        ("copy", 0),
        ("copy", 1),
        ("straggler", 0),
        ("straggler", 1),
        ("allreduce-8kib", 0),
        ("allreduce-8kib", 1),
    ]
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

    rows = as_samples(
        [
            {
                "t_start_s": i / 10,
                "t_end_s": (i + 1) / 10,
                "gpu": g,
                "uuid": f"GPU-node0-{g}",
                "rank": g,
                "tensor_active_pct": 50.0 - 32 * g,
                "sm_clock_mhz": 1830.0,
            }
            for i in range(30)
            for g in (0, 1)
        ]
    )
    results = [
        {
            "scenario": "gemm",
            "gpu": g,
            "uuid": f"GPU-node0-{g}",
            "rank": g,
            "t_start": 0.0,
            "t_end": 3.0,
            "kernel_ms": 10.0,
            "flops_per_call": 2e12,
            "bytes_per_call": 0.0,
            "unit": "bf16_tensor",
            "bound": "compute",
        }
        for g in (0, 1)
    ]
    sheet = {"bf16_tensor": 989.4e12}
    peaks = {g: {"datasheet": sheet, "measured": None} for g in (0, 1)}
    out = summarize_ranks(
        rows, results, peaks, ["tensor_active_pct", "sm_clock_mhz"], {"gemm": 0}, {0: "NVIDIA H200", 1: "NVIDIA H200"}
    )
    factor = ceiling.load_calibrations("NVIDIA H200")["bf16"].factor
    assert [r["tensor_ceiling_pct"] for r in out] == pytest.approx([50.0 * factor, 18.0 * factor])
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

    run = Path(__file__).resolve().parents[2] / "results" / "h200-x2-20261129-154637"
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
    assert ranked == {
        ("GPU-node0-0", 0),
        ("GPU-node0-1", 1),
        ("GPU-node1-0", 2),
        ("GPU-node1-1", 3),
        ("GPU-node0-7", None),
        ("GPU-node1-7", None),
    }  # --all-gpus: a sampled GPU no rank used
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
