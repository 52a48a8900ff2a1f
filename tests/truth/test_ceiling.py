"""The tensor-pipe ceiling: its arithmetic, its calibrations, and what it says about a row's FLOPs."""

import json
import math

import pytest
from jobs import PEAKS, every, gpus, mark, rows, stamps

from gpubench.job.markreader import Stream
from gpubench.job.phases import summarize_watch
from gpubench.read import phase_verdict
from gpubench.read.samples import as_samples
from gpubench.truth import ceiling

H100 = "NVIDIA H100 80GB HBM3"
SHEET = {
    "bf16_tensor": 989.4e12,
    "fp16_tensor": 989.4e12,
    "tf32_tensor": 494.7e12,
    "fp8_tensor": 1978.9e12,
    "fp32": 66.9e12,
}
R0 = Stream(0, 100)


def window(tensor: float, clock: float, n: int = 10) -> object:
    return as_samples(
        [
            {"t_start_s": i / 10, "t_end_s": (i + 1) / 10, "tensor_active_pct": tensor, "sm_clock_mhz": clock}
            for i in range(n)
        ]
    )


def calibrated(tmp_path, factor=1.0, error=0.01, dtypes=("bf16",)):
    data = {"gpu": H100, "dtypes": {d: {"factor": factor, "error": error, "n": 3} for d in dtypes}}
    (tmp_path / "tensor-h100-80gb-hbm3.json").write_text(json.dumps(data))
    return ceiling.ceiling_for(H100, SHEET, where=tmp_path)


def test_the_ceiling_is_tensor_active_times_the_clock_over_the_peaks_clock(tmp_path):
    found = calibrated(tmp_path, factor=0.9)
    cols = ceiling.columns(window(50.0, 1830.0), found, "bf16")
    assert cols["tensor_ceiling_pct"] == pytest.approx(50.0 * 0.9)
    assert cols["tensor_ceiling_tflops"] == pytest.approx(0.5 * 0.9 * 989.4)
    # at the boost clock the pipes deliver more per second than the peak's clock assumes
    assert ceiling.columns(window(50.0, 1980.0), found, "bf16")["tensor_ceiling_pct"] == pytest.approx(
        50.0 * 0.9 * 1980 / 1830
    )
    assert cols["tensor_ceiling_dtype"] == "bf16" and cols["tensor_ceiling_basis"].startswith("calibrated")


def test_active_cycles_average_tensor_active_times_clock_row_by_row():
    rows_ = as_samples(
        [{"tensor_active_pct": 100.0, "sm_clock_mhz": 1000.0}, {"tensor_active_pct": 0.0, "sm_clock_mhz": 2000.0}]
    )
    assert ceiling.active_cycles_mhz(rows_) == (500.0, 2)  # not 50% x 1500 MHz


def test_only_what_was_measured_is_claimed(tmp_path):
    found = calibrated(tmp_path, dtypes=("bf16",))
    assert ceiling.columns(window(50.0, 1830.0), found, "fp8") == {}  # no calibration of fp8: no ceiling
    bare = ceiling.ceiling_for(H100, SHEET, where=tmp_path / "none")
    cols = ceiling.columns(window(50.0, 1830.0), bare, "bf16", ran_pct=80.0)
    assert cols["tensor_ceiling_pct"] == pytest.approx(50.0) and cols["tensor_ceiling_basis"].startswith("uncalibrated")
    assert math.isnan(cols["ran_over_ceiling"])  # the bare rule judges no FLOP count
    assert ceiling.ceiling_for("NVIDIA A10", SHEET) is None  # no peak clock known: no ceiling
    # fp32 work is said against bf16's peak: how much of it ran on the tensor pipes, at most
    assert ceiling.columns(window(5.0, 1830.0), found, "fp32")["tensor_ceiling_dtype"] == "bf16"


def test_flops_above_the_calibrated_limit_are_said_too_large(tmp_path):
    found = calibrated(tmp_path, factor=1.0, error=0.02)
    within = ceiling.columns(window(30.0, 1830.0), found, "bf16", ran_pct=30.5)
    above = ceiling.columns(window(30.0, 1830.0), found, "bf16", ran_pct=60.0)  # a global batch on one of 2 ranks
    assert within["ran_over_ceiling"] < 1 < above["ran_over_ceiling"]
    assert above["tensor_ceiling_limit_pct"] == pytest.approx(30.6)
    row = dict(
        gpu_util_mean_pct=99.0,
        sm_busy_pct=90.0,
        tensor_active_pct=30.0,
        steps_reported=50,
        steps_per_s=10.0,
        tflops=600.0,
        mfu_pct=60.0,
        hfu_pct=60.0,
        **above,
    )
    text, names = phase_verdict.verdict(row, "bf16", {"tensor_active_pct"})
    assert names[-1] == "flops-above-ceiling" and "FLOP count is too large" in text and "no rating" in text
    assert "HFU 60% is more than" in text and "(30% of the bf16 peak, 31% with its calibration" in text


def test_the_limit_takes_the_highest_clock_read_while_a_rows_activity_ran(tmp_path):
    """The clock is read at a row's end, GPM's value reaches back up to 0.2 s before the row's start: a clock
    that dips at one reading (a power cap for a moment) lowers the ceiling, not the limit, which takes the
    highest reading over that time, readings before the window included."""
    found = calibrated(tmp_path, factor=1.0, error=0.0)
    rows_ = [
        {"t_start_s": i / 10, "t_end_s": (i + 1) / 10, "tensor_active_pct": 50.0, "sm_clock_mhz": 1830.0}
        for i in range(12)
    ]
    rows_[6]["sm_clock_mhz"] = 915.0  # read at 0.7 s
    everything = as_samples(rows_)
    inside = everything.window(0.5, 1.2)  # the rows from 0.5 s: the readings at 0.3 and 0.4 s lie before it
    assert list(ceiling.highest_clock_mhz(inside, everything)) == [1830.0] * 7
    assert list(ceiling.highest_clock_mhz(inside)) == [1830.0] * 7  # its own readings bracket it here too
    cols = ceiling.columns(inside, found, "bf16", ran_pct=49.0, clocks=everything)
    assert cols["tensor_ceiling_pct"] == pytest.approx(50.0 * (6 + 0.5) / 7)  # the dipped reading, as read
    assert cols["tensor_ceiling_limit_pct"] == pytest.approx(50.0) and cols["ran_over_ceiling"] < 1
    dips = [dict(r, sm_clock_mhz=915.0) if 4 <= i <= 8 else r for i, r in enumerate(rows_)]  # a long dip is a dip
    assert ceiling.highest_clock_mhz(as_samples(dips).window(0.8, 0.9))[0] == 915.0
    assert ceiling.highest_clock_mhz(as_samples(dips).window(0.8, 0.9), as_samples(dips))[0] == 915.0


def test_a_row_without_steps_or_flops_says_how_much_ran_on_the_tensor_pipes_at_most(tmp_path):
    found = calibrated(tmp_path)
    cols = ceiling.columns(window(20.0, 1830.0), found, "bf16")
    for row in (dict(steps_reported=0), dict(steps_reported=30, steps_per_s=8.0)):
        text, names = phase_verdict.verdict(
            dict(gpu_util_mean_pct=99.0, sm_busy_pct=90.0, tensor_active_pct=20.0, **row, **cols),
            "bf16",
            {"tensor_active_pct"},
        )
        assert names[-1] == "tensor-ceiling" and "at most 20% of the bf16 peak ran on the tensor pipes" in text
        assert "gpubench.step" not in text


def test_every_watch_row_with_tensor_activity_and_a_clock_gets_its_ceiling():
    def state(t, g):
        return {
            "gpu_util_pct": 100.0,
            "sm_active_pct": 90.0,
            "tensor_active_pct": 40.0,
            "sm_clock_mhz": 1830.0,
            "power_w": 500.0,
        }

    uuid = gpus(1)[0].uuid
    events = [mark(1.0, R0, "train"), *stamps(R0, uuid, every(1.6, 5.0, 0.1), flops=1e14)]
    samples = rows(1, 0.0, 6.0, state)
    for r in samples:
        r["sm_clock_mhz"] = 1830.0
    out = summarize_watch(
        samples,
        events,
        gpus(1),
        0.0,
        6.0,
        {**PEAKS, "datasheet": SHEET},
        "bf16",
        ["gpu_util_pct", "power_w", "energy_j", "sm_active_pct", "tensor_active_pct", "sm_clock_mhz"],
        {},
    )
    by = {r["scenario"]: r for r in out.summary}
    assert by["train"]["tensor_ceiling_pct"] == pytest.approx(40.0 * ceiling.load_calibrations(H100)["bf16"].factor)
    assert "tensor_ceiling_pct" in by["start-up"]  # start-up and teardown rows too: what the pipes did there
    # 1e14 FLOPs at 10 steps/s is 1000 TFLOP/s: more than the pipes could deliver at 40% active
    assert by["train"]["verdict_rules"].endswith("flops-above-ceiling")


def test_the_suite_holds_each_kernels_mfu_to_the_ceiling_of_its_unit(tmp_path):
    hook = ceiling.for_suite(H100, SHEET, where=tmp_path)
    calibrated(tmp_path, dtypes=("bf16", "fp16"))
    hook = ceiling.for_suite(H100, SHEET, where=tmp_path)
    gemm = hook(window(90.0, 1830.0), {"unit": "fp16_tensor", "mfu_pct": 95.0})
    assert gemm["tensor_ceiling_dtype"] == "fp16" and gemm["ran_over_ceiling"] > 1
    softmax = hook(window(1.0, 1830.0), {"unit": "fp32", "mfu_pct": 3.0})
    assert softmax["tensor_ceiling_dtype"] == "bf16" and math.isnan(softmax["ran_over_ceiling"])


def test_a_calibration_is_the_median_and_the_farthest_point_from_it():
    cal = ceiling.calibrate(
        [
            {"dtype": "bf16", "factor": f, "what": w}
            for f, w in ((0.90, "mm square"), (0.92, "sdpa causal backward"), (0.91, "bmm"))
        ]
        + [{"dtype": "tf32", "factor": math.nan}]
    )
    assert cal == {
        "bf16": {
            "factor": 0.91,
            "error": pytest.approx(0.01 / 0.91),
            "n": 3,
            "highest": 0.92,
            "highest_what": "sdpa causal backward",
            "lowest": 0.90,
            "spread": pytest.approx(0.92 / 0.90 - 1),
        }
    }


def test_the_committed_calibrations_load_and_name_their_points():
    for path in ceiling._calibration_files():
        data = json.loads(path.read_text())
        assert data["gpu"] in ceiling.PEAK_CLOCK_MHZ and data["points"]
        for dtype, cal in data["dtypes"].items():
            points = [p["factor"] for p in data["points"] if p["dtype"] == dtype]
            assert cal == ceiling.calibrate([p for p in data["points"] if p["dtype"] == dtype])[dtype]
            assert len(points) == cal["n"] >= 2
        assert set(ceiling.load_calibrations(data["gpu"])) == set(data["dtypes"])
        # the highest of every kernel measured: made again from the file's points and the files it names
        beside = [
            q for name in data["highest"]["files"] for q in json.loads((path.parent / name).read_text())["points"]
        ]
        assert data["highest"]["dtypes"] == ceiling.highest(data["points"] + beside)
        for dtype, top in data["highest"]["dtypes"].items():
            assert top["factor"] >= data["dtypes"][dtype]["highest"] and top["median"] <= top["factor"]


def test_the_highest_is_of_every_kernel_whose_flops_ran_on_the_tensor_pipes():
    """A depthwise convolution's FLOPs run on the FP32 pipes: over its few tensor cycles they read many times
    any tensor pipe's rate (5.7 to 16.8 on an H200), so it is named beside and sets nothing."""
    points = [
        {"dtype": "bf16", "factor": f, "what": w, "tensor_active_pct": t, "counters": {"fp32_active_pct": fp}}
        for f, w, t, fp in (
            (0.90, "mm square", 93.0, 0.0),
            (0.95, "sdpa forward", 34.0, 9.0),
            (0.23, "conv groups 32", 18.7, 0.7),
            (16.8, "conv depthwise", 0.06, 16.1),
        )
    ]
    points.append({"dtype": "bf16", "factor": 0.91, "what": "gemm scenario"})  # a suite GEMM: no pipe counters
    top = ceiling.highest(points)["bf16"]
    assert top["factor"] == 0.95 and top["what"] == "sdpa forward" and top["n"] == 4
    assert top["median"] == pytest.approx(0.905) and top["lowest"] == 0.23 and top["beside"] == ["conv depthwise"]
    assert top["spread"] == pytest.approx(0.95 / 0.23 - 1)
