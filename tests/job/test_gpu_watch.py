"""A short real watch of the example training loop on the GPU."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from gpubench.metrics import finite
from gpubench.record.rundir import load_run

pytestmark = pytest.mark.gpu

ROOT = Path(__file__).resolve().parents[2]


def test_a_short_watch_of_the_example(tmp_path):
    out = tmp_path / "watch"
    cmd = [
        sys.executable,
        "-m",
        "gpubench",
        "watch",
        "--out",
        str(out),
        "--",
        sys.executable,
        str(ROOT / "examples" / "train_gpt.py"),
        "--layers",
        "4",
        "--width",
        "512",
        "--heads",
        "8",
        "--batch",
        "8",
        "--seq",
        "512",
        "--seconds",
        "4",
        "--eval-seconds",
        "2",
    ]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
    r = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=300)
    assert r.returncode == 0, r.stderr
    assert "FLOPs per training step" in r.stdout and "train:" in r.stdout  # the child's output, untouched
    manifest, samples, summary = load_run(out)
    assert manifest["kind"] == "watch" and manifest["completed"] and manifest["child"]["exit_code"] == 0
    assert {"warmup", "train", "eval"} <= {s["phase"] for s in samples}
    from gpubench.record.gpus import resolve

    used = resolve(0, False)[0]  # the GPU the example runs on, whatever else the machine has
    assert manifest["gpus_used"] == [used.nvml_index] and {r["gpu"] for r in summary} == {used.nvml_index}
    rows = {r["phase"]: r for r in summary}
    train = rows["train"]
    assert train["steps"] > 10 and train["gpu_util_pct"] >= 50 and train["tflops"] > 1
    assert train["step_clock"] == "GPU"  # stamped when the GPU reached each step, not when Python asked
    assert 0 < train["mfu_pct"] <= train["gpu_util_mean_pct"]
    # the example's attention is causal: its kernels skip the masked half of the scores that PaLM's convention
    # counts whole (gpubench.count_flops), so HFU may read below MFU, by no more than that half
    assert 0.75 * train["mfu_pct"] < train["hfu_pct"] < 1.25 * train["mfu_pct"]
    assert train["verdict"]
    if finite(train.get("tensor_active_pct")):  # GPM or DCGM: bf16 matmuls use the tensor cores
        assert train["tensor_active_pct"] > 1
    assert rows["eval"]["steps_reported"] > 0
