"""A short real run of two scenarios through the command line, and the GPU it samples."""

import os
import subprocess
import sys

import pytest

from gpubench.cli import main
from gpubench.record.rundir import load_run

pytestmark = pytest.mark.gpu


def test_short_real_run(tmp_path):
    out = tmp_path / "run"
    rc = main(["run", "spin-1thread", "copy-torch", "--duration", "2", "--gap", "0.5", "--out", str(out), "--no-peaks"])
    assert rc == 0
    manifest, samples, summary = load_run(out)
    assert manifest["completed"] is True
    rows = {r["scenario"]: r for r in summary}
    assert set(rows) == {"spin-1thread", "copy-torch"}
    assert rows["spin-1thread"]["gpu_util_pct"] >= 90
    assert rows["copy-torch"]["gbps"] > 500
    assert {r["phase"] for r in samples} >= {"spin-1thread", "copy-torch", "gap"}
    assert manifest["gpus_sampled"][0]["uuid"] == manifest["gpu"]["uuid"]


def test_the_sampled_gpu_is_the_gpu_that_runs_the_kernels(tmp_path):
    """Under CUDA_VISIBLE_DEVICES=<last GPU>, CUDA's device 0 is NVML's last GPU, and that GPU is busy."""
    from gpubench.record import nvml

    last = nvml.device_count() - 1
    out = tmp_path / "visible"
    env = dict(os.environ, CUDA_VISIBLE_DEVICES=str(last))
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "gpubench",
            "run",
            "copy-triton",
            "--duration",
            "2",
            "--gap",
            "0.5",
            "--out",
            str(out),
            "--no-peaks",
            "--no-smi",
        ],
        env=env,
        capture_output=True,
        text=True,
    )
    assert r.returncode == 0, r.stderr
    manifest, _, summary = load_run(out)
    assert manifest["gpu"]["nvml_index"] == last and manifest["gpu"]["cuda_index"] == 0
    assert summary[0]["gpu"] == last
    assert summary[0]["gpu_util_pct"] >= 90 and summary[0]["sm_active_pct"] >= 50


def test_two_ranks_under_torchrun_measure_the_collective_and_name_the_straggler(tmp_path):
    """Two GPUs, one rank each: the all-reduce checked and reported as nccl-tests does, the straggler found."""
    import torch

    if torch.cuda.device_count() < 2:
        pytest.skip("needs two GPUs")
    out = tmp_path / "dist"
    env = dict(os.environ, NCCL_NVLS_ENABLE="0", TORCH_SYMM_MEM_DISABLE_MULTICAST="1", NVSHMEM_DISABLE_NVLS="1")
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "torch.distributed.run",
            "--nproc-per-node=2",
            "-m",
            "gpubench",
            "run",
            "allreduce-8kib",
            "straggler",
            "--duration",
            "2",
            "--gap",
            "0.5",
            "--no-peaks",
            "--no-smi",
            "--out",
            str(out),
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert r.returncode == 0, r.stderr[-4000:]
    manifest, samples, summary = load_run(out)
    rows = {(s["scenario"], s["rank"]): s for s in summary}
    assert set(rows) == {("allreduce-8kib", 0), ("allreduce-8kib", 1), ("straggler", 0), ("straggler", 1)}
    ranks = manifest["distributed"]["ranks"]
    assert len({x["gpu"]["uuid"] for x in ranks}) == 2 and {s["rank"] for s in samples} == {0, 1}
    for x in ranks:  # each rank's rows are its own GPU's
        assert {s["uuid"] for s in samples if s["rank"] == x["rank"]} == {x["gpu"]["uuid"]}
    ar = rows[("allreduce-8kib", 0)]
    assert ar["check"] == "exact" and ar["world_size"] == 2
    assert ar["busbw_gbps"] == pytest.approx(8192 / (ar["kernel_ms"] / 1e3) / 1e9 * 2 * (2 - 1) / 2)
    late, waiting = rows[("straggler", 1)], rows[("straggler", 0)]
    assert late["straggler_rank"] == 1 == late["slow_rank"]
    assert 5 < late["arrival_delay_ms"] < 40 and waiting["arrival_delay_ms"] < 2
    assert abs(late["kernel_ms"] - waiting["kernel_ms"]) / waiting["kernel_ms"] < 0.1
