"""Every committed summary row against its own raw samples and marks: the checks of tools/truth/invariants.py
(whose docstring lists what no row may say) on every committed run, with no row excused, and each check shown to
fail on a row made to break it."""

from __future__ import annotations

import pytest

from gpubench.job.markreader import Steps
from gpubench.truth import ceiling
from tools.truth.invariants import (
    RUNS,
    check_ceiling,
    check_energy,
    check_one_window,
    check_rate_samples,
    violations,
)


@pytest.mark.parametrize("run", RUNS, ids=lambda p: p.name)
def test_every_committed_row_obeys_the_ceiling_one_window_its_energy_and_its_samples(run):
    assert violations(run) == {}


def test_the_invariants_catch_what_they_are_for():
    """Each check fails on a row made to break it."""
    found = ceiling.Ceiling(
        "X", 1830.0, {"bf16_tensor": 989.4e12}, {"bf16": ceiling.Calibration("bf16", 1.0, 0.01, 3, "x")}
    )
    from gpubench.read.samples import as_samples

    raw = [
        {
            "t_start_s": 1.0 + i / 10,
            "t_end_s": 1.1 + i / 10,
            "tensor_active_pct": 50.0,
            "sm_clock_mhz": 1830.0,
            "energy_j": 100.0 * i,
            "gpu_util_pct": 90.0,
        }
        for i in range(20)
    ]
    rows = as_samples(raw)
    windows = [(1.0, 3.0)]
    row = {
        "hfu_pct": 52.0,
        "tensor_ceiling_pct": 50.0,
        "tensor_ceiling_limit_pct": 50.5,
        "tflops": 1.0,
        "energy_used_j": 100.0,
        "steps_per_s": 1.0,
    }
    assert any("above the tensor ceiling" in v for v in check_ceiling(row, [rows], windows, found, {}, True))
    assert not check_ceiling(dict(row, hfu_pct=50.4), [rows], windows, found, {}, True)
    assert any(
        "limit" in v for v in check_ceiling(dict(row, tensor_ceiling_limit_pct=60.0), [rows], windows, found, {}, True)
    )  # a limit its window does not give
    dipped = as_samples([{**r, "sm_clock_mhz": 915.0 if i == 10 else 1830.0} for i, r in enumerate(raw)])
    # a clock read low at one row's end: the ceiling reads it (18 rows from 0.2 s in), the limit takes the highest
    # clock around each row
    assert (
        check_ceiling(dict(row, hfu_pct=50.4, tensor_ceiling_pct=50.0 * 17.5 / 18), [dipped], windows, found, {}, True)
        == []
    )
    assert check_energy(row, rows, windows)  # the counter rose 1900 J inside the window
    stamps = [Steps(1.0 + i, None, "", "gpu", 1.0 + i, 1, 1, 1e12, 1e12, 0, 0, 0, 0) for i in range(3)]
    assert check_one_window(dict(row, tflops=2.5), stamps, [(1.0, 3.0)])  # 5 TFLOP in 2 s: 3 stamped, 1 in progress
    assert not check_one_window(dict(row, tflops=1.0), stamps, [(1.0, 3.0)])
    assert check_rate_samples(row, [rows.window(1.0, 1.35)], [(1.0, 1.35)], {"gpu_util_pct"})
    assert not check_rate_samples(row, [rows], windows, {"gpu_util_pct"})


def test_a_row_that_says_its_flops_ran_beside_the_tensor_pipes_is_held_to_the_pipes_that_ran():
    """FP32 work watched with --dtype bf16: above the tensor ceiling, and honest about it where its own counters
    show the FP32 pipes ran and had room for its FLOPs; a count too large for every active pipe is not."""
    found = ceiling.Ceiling(
        "X", 1830.0, {"bf16_tensor": 989.4e12}, {"bf16": ceiling.Calibration("bf16", 1.0, 0.01, 3, "x")}
    )
    from gpubench.read.samples import as_samples

    rows = as_samples(
        [
            {"t_start_s": 1.0 + i / 10, "t_end_s": 1.1 + i / 10, "tensor_active_pct": 3.5, "sm_clock_mhz": 1830.0}
            for i in range(20)
        ]
    )
    manifest = {"dtype": "bf16", "peaks": {"datasheet": {"bf16_tensor": 989.4e12, "fp32": 66.9e12}}}
    fp32 = {
        "hfu_pct": 4.7,
        "tensor_ceiling_pct": 3.5,
        "tensor_ceiling_limit_pct": 3.535,
        "tensor_active_pct": 3.5,
        "fp32_active_pct": 60.0,
        "verdict_rules": "no-tensor-cores, flops-above-ceiling",
    }
    assert not check_ceiling(fp32, [rows], [(1.0, 3.0)], found, manifest, True)
    for lie in (
        {"verdict_rules": "no-tensor-cores, tensor-ceiling"},  # it does not say so
        {"fp32_active_pct": 2.0},  # its FP32 pipes did not run either
        {"hfu_pct": 12.0},
    ):  # more than the tensor and FP32 pipes together could deliver
        assert any(
            "above the tensor ceiling" in v
            for v in check_ceiling({**fp32, **lie}, [rows], [(1.0, 3.0)], found, manifest, True)
        ), lie
