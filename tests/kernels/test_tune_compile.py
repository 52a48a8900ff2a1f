"""The sweeps' compiling ahead (tools/tune/timing.py): every failure is named, and a kernel that breaks its
worker's CUDA context does not fail the settings queued after it in that worker."""

import pytest
import torch

timing = pytest.importorskip("tools.tune.timing")

GOOD = {"BLOCK_N": 16, "BLOCK_B": 16, "BLOCK_K": 32, "num_warps": 4, "num_stages": 2}
BAD = {**GOOD, "BLOCK_N": 24}  # not a power of two: Triton refuses the tile
SIZES = {"k": 64, "n": 32}
# the jobs run through Triton's interpreter (dry=True), which a process that has set up a GPU driver does not
on_the_interpreter = pytest.mark.skipif(torch.cuda.is_available(), reason="Triton's interpreter, on the CPU")


@on_the_interpreter
def test_a_worker_whose_context_broke_hands_the_rest_of_its_jobs_back(monkeypatch):
    monkeypatch.setattr(timing, "_context_ok", lambda dry: False)  # as after a kernel that faulted on a GPU
    done, left = timing._compile([("decode", 2, BAD), ("decode", 2, GOOD)], SIZES, dry=True)
    assert len(done) == 1 and done[0][3] and left == [("decode", 2, GOOD)]


@on_the_interpreter
def test_a_failure_that_leaves_the_context_whole_goes_on_to_the_next_job():
    done, left = timing._compile([("decode", 2, BAD), ("decode", 2, GOOD)], SIZES, dry=True)
    assert [err is None for *_, err in done] == [False, True] and left == []


@on_the_interpreter
def test_precompile_names_each_setting_that_failed(capsys):
    out = timing.precompile([("decode", 2, BAD), ("decode", 2, GOOD)], SIZES, workers=2, seconds=120, dry=True)
    assert sorted(err is None for err in out.values()) == [False, True]
    printed = capsys.readouterr().out
    assert "decode-b2: ptr-24x16x32-w4-s2 failed to compile or launch" in printed
    assert "compiled 2 of 2 settings" in printed and "1 failed" in printed
