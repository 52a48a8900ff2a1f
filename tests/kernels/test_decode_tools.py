"""The decode research probes (research/) run only on a GPU; here, on the CPU, what can break without one: their
settings, their launches and their command lines."""

import importlib
import subprocess
import sys
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[2]


def _tool(name):
    return importlib.import_module(f"research.{name}")


@pytest.mark.parametrize("b", [256, 512])
def test_every_decode_waves_setting_makes_a_launch_or_says_it_would_not_split(b):
    waves = _tool("decode_waves")
    x = torch.zeros(b, 64, dtype=torch.bfloat16)
    w = torch.zeros(waves.N, 64, dtype=torch.bfloat16)
    y = torch.empty(b, waves.N, dtype=torch.bfloat16)
    named = waves.settings(b)
    assert "in-use" in named and "before" in named
    made = {name: waves.runner(x, w, y, head, tail, 132) for name, (head, tail) in named.items()}
    assert all(run is None or callable(run) for run in made.values())
    assert sum(run is not None for run in made.values()) >= len(made) - 8  # only splits with nothing to split
    assert all(made[name] is not None for name, (_, tail) in named.items() if tail is None)


@pytest.mark.parametrize("tool", ["decode_waves", "decode_profile"])
def test_the_decode_tools_teach_their_options_and_refuse_a_machine_without_a_gpu(tool):
    helped = subprocess.run(
        [sys.executable, "-m", f"research.{tool}", "--help"], cwd=ROOT, capture_output=True, text=True
    )
    assert helped.returncode == 0 and "--batches" in helped.stdout
    if not torch.cuda.is_available():
        ran = subprocess.run(
            [sys.executable, "-m", f"research.{tool}", "--batches", "256"], cwd=ROOT, capture_output=True, text=True
        )
        assert ran.returncode == 2 and "GPU" in ran.stderr and "Traceback" not in ran.stderr
