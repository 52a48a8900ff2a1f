"""The verdict tables: each rule fires on its numbers, says them at the precision that shows why, and the
documentation shows the rules the code applies."""

from pathlib import Path

import pytest

from gpubench.read import phase_verdict
from gpubench.read.rules import SHOWN, _threshold

ROOT = Path(__file__).resolve().parents[2]
RECORDED = {"gpu_util_pct", "sm_active_pct", "sm_occupancy_pct", "tensor_active_pct", "dram_active_pct"}
LADDER = dict(
    gpu_util_mean_pct=99.0,
    sm_busy_pct=88.0,
    sm_active_pct=87.0,
    sm_occupancy_pct=30.0,
    tensor_active_pct=26.0,
    dram_active_pct=30.0,
    steps=100,
    steps_reported=120,
    steps_per_s=18.0,
    tflops=250.0,
    mfu_pct=25.3,
)


@pytest.mark.parametrize(
    "changes,recorded,names",
    [
        ({"gpu_util_mean_pct": 33.0, "mfu_pct": 8.0}, RECORDED, ["host-bound", "idle", "mfu-low"]),
        ({"sm_busy_pct": 20.0, "mfu_pct": 0.5}, RECORDED, ["few-sms", "mfu-low"]),
        ({"dram_active_pct": 70.0, "tensor_active_pct": 2.0}, RECORDED, ["memory-bound", "mfu-mid"]),
        ({"tensor_active_pct": 4.0, "mfu_pct": 4.0}, RECORDED, ["no-tensor-cores", "mfu-low"]),
        ({"tensor_active_pct": 60.0, "mfu_pct": 45.0}, RECORDED, ["tensor-busy", "mfu-high"]),
        ({}, RECORDED, ["tensor-part", "mfu-mid"]),
        ({"gpu_util_mean_pct": 80.0}, RECORDED, ["tensor-part", "idle", "mfu-mid"]),
        ({"sm_busy_pct": None, "tensor_active_pct": None}, {"gpu_util_pct"}, ["util-only", "mfu-mid"]),
        ({"tensor_active_pct": None}, RECORDED - {"tensor_active_pct"}, ["tensor-unknown", "mfu-mid"]),
        (
            {"steps": 0, "steps_reported": 0, "steps_per_s": None, "tflops": None, "mfu_pct": None},
            RECORDED,
            ["tensor-part", "no-steps"],
        ),
        ({"steps_per_s": None, "tflops": None, "mfu_pct": None}, RECORDED, ["tensor-part", "one-step"]),
        ({"tflops": None, "mfu_pct": None}, RECORDED, ["tensor-part", "no-flops"]),
        ({"tflops": None, "mfu_pct": None, "flops_bad": 3}, RECORDED, ["tensor-part", "flops-unusable"]),
        ({"mfu_pct": None}, RECORDED, ["tensor-part", "no-peak"]),
        ({"mfu_pct": 179.0}, RECORDED, ["tensor-part", "mfu-impossible"]),
        ({"mbu_pct": 85.0, "mfu_pct": 0.6}, RECORDED, ["memory-bound-decode", "mbu-high"]),
        ({"gpu_util_mean_pct": 40.0, "mbu_pct": 20.0, "mfu_pct": 0.1}, RECORDED, ["host-bound", "idle", "mbu-low"]),
        # a decode step in a CUDA graph: busy all the time, few SMs, far from the bandwidth: the kernels, not the host
        (
            {"gpu_util_mean_pct": 100.0, "sm_busy_pct": 27.0, "mbu_pct": 24.0, "mfu_pct": 0.1},
            RECORDED,
            ["few-sms", "mbu-low-kernels"],
        ),
    ],
)
def test_each_rule_is_triggered_by_its_numbers(changes, recorded, names):
    row = {k: v for k, v in {**LADDER, **changes}.items() if v is not None}
    text, got = phase_verdict.verdict(row, "bf16", recorded)
    assert got == names
    for name in names:
        rule = next(r for _, rules in phase_verdict.TABLES for r in rules if r.name == name)
        words = phase_verdict._fill(rule, dict(row, dtype="bf16", idle_pct=100 - row["gpu_util_mean_pct"]))
        assert words[1:40] in text  # its own sentence
        for column, op, threshold in rule.when:  # and the numbers that triggered it
            if op in SHOWN and column in row:
                assert f"{SHOWN[op]} {_threshold(column, threshold)}" in text


def test_the_evidence_never_contradicts_the_rule():
    """MFU 9.94% < 10% was printed as 'MFU 10% < 10%'."""
    text, names = phase_verdict.verdict({**LADDER, "mfu_pct": 9.94}, "bf16", RECORDED)
    assert names[-1] == "mfu-low" and "MFU 9.9% < 10%" in text and "MFU 9.9%:" in text and "10% < 10%" not in text
    text, _ = phase_verdict.verdict({**LADDER, "gpu_util_mean_pct": 49.996}, "bf16", RECORDED)
    assert "mean GPU-Util 49.996% < 50%" in text


def test_huge_numbers_do_not_grow_the_sentence():
    text, names = phase_verdict.verdict({**LADDER, "mfu_pct": 1e300}, "bf16", RECORDED)
    assert names[-1] == "mfu-impossible" and "1e+300%" in text and len(text) < 600


def test_the_waiting_and_the_straggler_sentences_replace_where_the_time_goes():
    text, names = phase_verdict.verdict(LADDER, "bf16", RECORDED, where=("waits-on-rank", "Rank 0 waits on rank 1."))
    assert names == ["waits-on-rank", "mfu-mid"] and text.startswith("Rank 0 waits on rank 1.")


def test_the_docs_show_the_rules_the_code_applies():
    assert phase_verdict.markdown_table() in (ROOT / "docs" / "watch.md").read_text()


OVER = dict(
    LADDER,
    tensor_active_pct=30.0,
    mfu_pct=60.0,
    hfu_pct=60.0,
    ran_over_ceiling=1.96,
    tensor_ceiling_pct=30.0,
    tensor_ceiling_limit_pct=30.6,
)


def test_a_jobs_own_count_over_the_ceiling_is_the_count_the_verdict_doubts():
    text, names = phase_verdict.verdict(dict(OVER, flops_source="step()"), "bf16", RECORDED)
    assert names[-1] == "flops-above-ceiling"
    assert "the FLOP count given to gpubench.step() by the job is too large" in text and "gpubench's own" not in text
    assert phase_verdict.withheld(dict(OVER, flops_source="step()"), names) == {}  # the job's HFU stays, doubted
    mixed, _ = phase_verdict.verdict(dict(OVER, flops_source="step() and one step counted"), "bf16", RECORDED)
    assert "the job's own gpubench.step(), or gpubench's count of one step" in mixed


def test_gpubenchs_own_count_over_the_ceiling_is_gpubenchs_error_and_its_hfu_is_withheld():
    """The hook counted the step (an unmodified job): the user gave no count, so none of theirs is blamed."""
    row = dict(OVER, flops_source="one step counted")
    text, names = phase_verdict.verdict(row, "bf16", RECORDED)
    assert names[-1] == "gpubench-count-above-ceiling"
    assert "HFU 60% by gpubench's own count of one step is more than" in text
    assert "not the job's" in text and "that HFU is not rated" in text
    assert "too large" not in text and "gpubench.step()" not in text and "global batch" not in text
    cols = phase_verdict.withheld(row, names)
    assert set(cols) == {"hfu_pct", "hfu_unknown"} and cols["hfu_pct"] != cols["hfu_pct"]  # NaN: withheld
    assert "gpubench's own, not the job's" in cols["hfu_unknown"] and "HFU 60% over" in cols["hfu_unknown"]
    within, names = phase_verdict.verdict(dict(row, ran_over_ceiling=0.98), "bf16", RECORDED)
    assert names[-1] == "mfu-high" and phase_verdict.withheld(row, names) == {}


def test_a_row_whose_own_count_gpubench_made_over_the_ceiling_shows_no_hfu_and_says_why():
    """judge() applies withheld(): the HFU of gpubench's own one-step count above the limit is not shown."""
    from gpubench.job.phaserow import Context, judge

    row = dict(OVER, flops_source="one step counted", gpu=0, n_samples=10)
    ctx = Context([], [], {}, {}, "bf16", [], RECORDED, used=frozenset({0}))
    judge(row, ctx, True, "phase")
    assert "gpubench-count-above-ceiling" in row["verdict_rules"]
    assert row["hfu_pct"] != row["hfu_pct"] and "over the tensor ceiling" in row["hfu_unknown"]
