"""top's verdict word per GPU: each rule on synthetic readings, its thresholds the phase verdict's where that one
draws the line, and the committed runs' rows (the ladder on an H100 and an H200, a hung collective, watched
jobs) read as the docstring of gpubench/show/top/verdict.py says they are."""

import csv
import json
import math
from pathlib import Path

import pytest

from gpubench.read.phase_verdict import WHERE
from gpubench.show.top import verdict as v

ROOT = Path(__file__).resolve().parents[2]
LIMIT = 700.0


def reading(util=100.0, sm=math.nan, tensor=math.nan, dram=math.nan, power=math.nan, **more):
    return {
        "gpu_util_pct": util,
        "sm_active_pct": sm,
        "tensor_active_pct": tensor,
        "dram_active_pct": dram,
        "power_w": power,
        **more,
    }


@pytest.mark.parametrize(
    "values,word,because",
    [
        (reading(util=0, sm=0, tensor=0, dram=0.0003, power=70), "idle", "GPU-Util 0% < 5%"),
        (reading(util=35, sm=0.02, power=128), "host-bound", "GPU-Util 35% < 50%"),
        (reading(sm=0.757, tensor=0, dram=0.0005, power=124), "fake-busy", "GPU-Util 100% ≥ 50%, SM active 0.76% < 5%"),
        # a collective waiting on a hung rank: 18% of the SMs spin, at idle power, moving no DRAM
        (
            reading(sm=18.2, tensor=0, dram=0.0004, power=132),
            "fake-busy",
            "GPU-Util 100% ≥ 50%, power/limit 19% < 30%, DRAM active <0.01% < 5%, tensor active 0% < 5%",
        ),
        # a rank whose all-reduce waits on a slow peer most of each step: its own few ms of work move a little DRAM
        (
            reading(sm=23.4, tensor=1.9, dram=3.1, power=173),
            "fake-busy",
            "GPU-Util 100% ≥ 50%, power/limit 25% < 30%, DRAM active 3.1% < 5%, tensor active 1.9% < 5%",
        ),
        # as light on power, but moving memory: work, not waiting
        (reading(sm=23.4, tensor=1.9, dram=5.0, power=173), "few-sms", "SM active/GPU-Util 23% < 50%"),
        (
            reading(power=132),
            "fake-busy",
            "GPU-Util 100% ≥ 50%, power/limit 19% < 30%, DRAM active not read, tensor active not read",
        ),
        (reading(sm=27.3, tensor=2.0, dram=25.0, power=261), "few-sms", "SM active/GPU-Util 27% < 50%"),
        (
            reading(sm=99.4, tensor=0, dram=90.1, power=507),
            "memory-bound",
            "DRAM active 90% ≥ 50%, tensor active 0% < 10%",
        ),
        (reading(sm=96.6, tensor=93.8, dram=25.9, power=697), "compute-bound", "tensor active 94% ≥ 50%"),
        (
            reading(sm=95.0, tensor=3.0, dram=17.0, power=680, fp32_active_pct=70.0),
            "compute-bound",
            "FP32 active 70% ≥ 50%",
        ),
        (
            reading(sm=89.2, tensor=23.5, dram=29.7, power=597),
            "busy",
            "tensor active 24%, DRAM active 30%: no single limit",
        ),
        (reading(power=500), "busy", "GPU-Util 100%; SM, tensor and DRAM activity not read (no GPM)"),
        (reading(util=math.nan, power=500), "unknown", "GPU-Util not read"),
    ],
)
def test_each_word_with_the_numbers_that_decided_it(values, word, because):
    assert v.verdict(values, LIMIT) == (word, because)


def test_a_threshold_is_shown_at_the_precision_that_shows_the_comparison():
    assert v.verdict(reading(sm=4.96, power=300), LIMIT)[1] == "GPU-Util 100% ≥ 50%, SM active 4.96% < 5%"
    assert v.verdict(reading(util=49.6), LIMIT)[1] == "GPU-Util 49.6% < 50%"


def test_no_power_limit_leaves_the_power_rule_out():
    assert v.verdict(reading(power=132), None)[0] == "busy"
    assert v.verdict(reading(power=132), 0)[0] == "busy"


def test_the_thresholds_the_phase_verdict_also_draws_are_its_own():
    def threshold(rule, column):
        return next(t for c, _, t in next(r for r in WHERE if r.name == rule).when if c == column)

    assert v.HOST_BOUND_UTIL_PCT == threshold("host-bound", "gpu_util_mean_pct") == 50
    assert v.FEW_SMS_PCT == threshold("few-sms", "sm_busy_pct")
    assert (v.MEMORY_BOUND_DRAM_PCT, v.MEMORY_BOUND_TENSOR_PCT) == (
        threshold("memory-bound", "dram_active_pct"),
        threshold("memory-bound", "tensor_active_pct"),
    )
    assert v.COMPUTE_BOUND_PIPE_PCT == threshold("tensor-busy", "tensor_active_pct")
    assert set(v.thresholds()) == {n for n in dir(v) if n.endswith("_PCT")}
    doc = v.__doc__
    assert all(f"{name}, {value:g}" in doc for name, value in v.thresholds().items())  # each one explained


def rows(run: str, key: str = "scenario") -> dict:
    """A committed run's summary rows by name (with the rank where there is one) and its GPU's power limit."""
    limit = json.loads((ROOT / "results" / run / "manifest.json").read_text())["gpu"]["power_limit_w"]
    out = {}
    with open(ROOT / "results" / run / "summary.csv") as f:
        for r in csv.DictReader(f):
            values = {c: float(x) for c, x in r.items() if c.endswith(("_pct", "_w")) and x not in ("", None)}
            out[r[key] + (f"/{r['rank']}" if r.get("rank") else "")] = v.verdict(values, limit)[0]
    return out


@pytest.mark.parametrize("run", ["h100-80gb-hbm3-20261124-232113", "h200-20261124-233527"])
def test_the_reference_ladder_reads_as_the_docstring_says(run):
    got = rows(run)
    assert got["idle"] == "idle" and got["launch-bound"] == "host-bound"
    for name in ("spin-1thread", "spin-1block", "spin-1warp-per-sm", "h2d-copy"):
        assert got[name] == "fake-busy", name  # 100% GPU-Util, nothing useful running
    assert {got[f"gemm-{i}"] for i in ("triton", "cupy", "torch")} == {"compute-bound"}
    assert {got[f"copy-{i}"] for i in ("triton", "cupy", "torch")} == {"memory-bound"}
    assert got["spin-half-sms"] != "compute-bound" and got["decode-b512"] == "compute-bound"


def test_a_collective_waiting_on_a_hung_rank_is_fake_busy_and_a_large_all_reduce_is_not():
    got = rows("h200-x2-20261129-154637")
    assert got["straggler-hang/0"] == "fake-busy" and got["straggler-hang/1"] == "idle"
    assert got["allreduce-1gib/0"] == got["allreduce-1gib/1"] == "few-sms"


def test_a_rank_waiting_on_a_slow_peer_reads_fake_busy_from_its_committed_readings():
    """top's JSON beside a live two-rank job whose rank 1 sleeps in its data loader, read again through the rules:
    rank 0 waits in its all-reduce most of each step (GPU-Util 100%, SM active 23%, DRAM 3.1%)."""
    frame = json.loads((ROOT / "results/logs/top-collective-h200-x2.json").read_text())
    words = {g["index"]: v.verdict(g, g["power_limit_w"])[0] for g in frame["gpus"]}
    assert words == {0: "fake-busy", 1: "idle"}


@pytest.mark.parametrize(
    "run,phase,word",
    [
        ("watch-decode-graph-b1-h200", "decode", "few-sms"),  # the lightest real work: not fake-busy
        ("watch-decode-eager-b1-h200", "decode", "host-bound"),
        ("watch-slow-loader-h100-80gb-hbm3", "train/0", "host-bound"),
        ("watch-healthy-h100-80gb-hbm3", "train/0", "busy"),
        ("watch-compiled-h200", "train", "busy"),
    ],
)
def test_watched_jobs_read_as_they_ran(run, phase, word):
    assert rows(run, key="phase")[phase] == word
