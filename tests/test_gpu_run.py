"""A short real run of two scenarios through the command line, and the GPU it samples."""

import os
import subprocess
import sys

import pytest

from gpubench.cli import main
from gpubench.rundir import load_run

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
    from gpubench import nvml

    last = nvml.device_count() - 1
    out = tmp_path / "visible"
    env = dict(os.environ, CUDA_VISIBLE_DEVICES=str(last))
    r = subprocess.run([sys.executable, "-m", "gpubench", "run", "copy-triton", "--duration", "2", "--gap", "0.5",
                        "--out", str(out), "--no-peaks", "--no-smi"], env=env, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    manifest, _, summary = load_run(out)
    assert manifest["gpu"]["nvml_index"] == last and manifest["gpu"]["cuda_index"] == 0
    assert summary[0]["gpu"] == last
    assert summary[0]["gpu_util_pct"] >= 90 and summary[0]["sm_active_pct"] >= 50
