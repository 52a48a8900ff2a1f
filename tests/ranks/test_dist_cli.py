"""Distributed runs from the command line, on the CPU: distributed scenarios without torchrun skipped with the
command that runs them, a partial torchrun environment refused, a problem under torchrun said once by rank 0;
and a run directory that reads back a GPU no rank used."""

import json
import subprocess
import sys

import pytest


# --- the command line ----------------------------------------------------------------------------------


def _gpubench(*args, env=None):
    return subprocess.run(
        [sys.executable, "-m", "gpubench", *args], capture_output=True, text=True, timeout=600, env=env
    )


def test_distributed_scenarios_without_torchrun_are_skipped_with_the_command_to_run_them():
    r = _gpubench("run", "allreduce-*", "straggler")
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert (
        "allreduce-1gib, allreduce-8kib, straggler need several GPUs, one process each: launch with "
        "`torchrun --nproc-per-node=2 -m gpubench run allreduce-1gib allreduce-8kib straggler`"
    ) in r.stderr
    mixed = _gpubench("run", "idle", "straggler-hang")
    assert "skipped: straggler-hang needs several GPUs" in mixed.stderr and "Traceback" not in mixed.stderr


def test_a_partial_torchrun_environment_is_refused():
    import os

    r = _gpubench("run", "idle", env={**os.environ, "RANK": "0"})
    assert r.returncode == 2 and "start distributed runs with `torchrun" in r.stderr and "Traceback" not in r.stderr


def _torchrun(*args):
    return subprocess.run(
        [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node=2", "-m", "gpubench", *args],
        capture_output=True,
        text=True,
        timeout=600,
    )


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
        sink(
            {
                "t_start_s": 0.0,
                "t_end_s": 0.1,
                "t_wall": 1.0,
                "gpu": gpu,
                "rank": rank,
                "uuid": f"GPU-{gpu}",
                "phase": "start",
                "gpu_util_pct": 100.0,
            }
        )
    sink.close()
    assert [r["rank"] for r in read_samples(path)] == [0, None]
    assert json.dumps(RANKED_SAMPLE_KEYS).count("rank") == 1
