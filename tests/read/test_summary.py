"""What the summary calls work done: useful bytes, not traffic; the link for host copies; power from energy."""

import math

import pytest
from gpubench.kernels import h2d, softmax

from gpubench.read.energy import energy_power_w
from gpubench.read.summary import derive, derive_per_second, steady_rows, summarize

PEAKS = {"datasheet": {"dram": 4.8e12, "fp32": 66.9e12, "link": 63.0e9}, "measured": {"dram": 4.2e12}}


def _result(work, kernel_ms, bound, unit="fp32"):
    return {
        "kernel_ms": kernel_ms,
        "flops_per_call": work.flops,
        "bytes_per_call": work.bytes,
        "traffic_per_call": work.traffic if work.traffic is not None else math.nan,
        "link_bytes_per_call": work.link_bytes,
        "bound": bound,
        "unit": unit,
    }


def test_the_naive_softmax_ground_truth_counts_useful_bytes_not_its_five_passes():
    # 8192 x 8192 float32 in 0.728 ms (the naive torch sequence on an H200)
    d = derive(_result(softmax.work("torch-naive", 8192, 8192), 0.728, "dram"), PEAKS)
    assert d["gbps"] == pytest.approx(2 * 8192 * 8192 * 4 / 0.728e-3 / 1e9)
    assert d["mbu_pct"] == pytest.approx(100 * d["gbps"] * 1e9 / 4.8e12)
    assert 14 < d["mbu_pct"] < 17  # ~15%, not the ~62% its traffic would read
    assert d["traffic_gbps"] == pytest.approx(4 * d["gbps"], rel=0.01)


def test_torch_softmax_traffic_is_unknown_not_guessed():
    d = derive(_result(softmax.work("torch", 8192, 8192), 0.277, "dram"), PEAKS)
    assert math.isnan(d["traffic_gbps"]) and d["gbps"] > 0


def test_a_host_to_device_copy_is_judged_by_its_link():
    n = 2**26
    d = derive(_result(h2d.work(n), 4.9, "link", unit=None), PEAKS)
    assert d["link_gbps"] == pytest.approx(n * 4 / 4.9e-3 / 1e9)
    assert d["link_pct"] == pytest.approx(100 * d["link_gbps"] / 63.0)
    assert d["gbps"] == pytest.approx(2 * d["link_gbps"])  # the convention: bytes read + bytes written
    assert math.isnan(d["mfu_pct"]) and math.isnan(d["mbu_pct"])


def test_work_per_second_is_judged_as_the_same_work_in_a_timed_call():
    """A watched job's second of work (derive_per_second) reads as a call of that work timed at one second,
    to the last bit; a rate that is not a finite number is NaN, never a rate."""
    peaks = {"datasheet": {"bf16_tensor": 989e12, "dram": 3.35e12}, "measured": {"bf16_tensor": 700e12}}
    for flops_s, bytes_s, bound in ((3.7e14, 0.0, "compute"), (0.0, 1.9e12, "dram"), (math.nan, 0.0, "compute")):
        timed = derive(
            {
                "kernel_ms": 1e3,
                "flops_per_call": flops_s,
                "bytes_per_call": bytes_s,
                "unit": "bf16_tensor",
                "bound": bound,
            },
            peaks,
        )
        per_s = derive_per_second(
            {"flops_per_s": flops_s, "bytes_per_s": bytes_s, "unit": "bf16_tensor", "bound": bound}, peaks
        )
        assert repr(per_s) == repr(timed)
    assert per_s["tflops"] != per_s["tflops"]  # NaN
    got = derive_per_second({"flops_per_s": math.inf, "bound": "compute", "unit": "bf16_tensor"}, peaks)
    assert math.isnan(got["tflops"]) and math.isnan(got["mfu_pct"])
    assert derive_per_second({"flops_per_s": 4.945e14, "bound": "compute", "unit": "bf16_tensor"}, peaks)[
        "mfu_pct"
    ] == pytest.approx(50.0)


def test_mean_power_comes_from_the_energy_counter():
    rows = [{"t_end_s": t, "energy_j": 1000 + 600 * t} for t in (1.0, 1.5, 2.0, 3.0)]
    assert energy_power_w(rows) == pytest.approx(600.0)
    assert math.isnan(energy_power_w(rows[:1]))


def test_rows_straddling_a_window_edge_are_not_counted():
    rows = [{"gpu": 0, "t_start_s": a, "t_end_s": a + 0.1} for a in (0.95, 1.45, 1.5, 1.9, 1.95)]
    inside = steady_rows(rows, 0, t_start=1.0, t_end=2.0, trim_s=0.5)
    assert [r["t_start_s"] for r in inside] == [1.5, 1.9]


def test_n_samples_counts_rows_of_the_window_and_power_energy_is_beside_sampled_power():
    rows = [
        {"gpu": 0, "t_start_s": t / 10, "t_end_s": (t + 1) / 10, "power_w": 500.0, "energy_j": 60.0 * t}
        for t in range(30)
    ]
    res = [
        {
            "scenario": "x",
            "gpu": 0,
            "t_start": 0.0,
            "t_end": 3.0,
            "kernel_ms": 1.0,
            "flops_per_call": 0.0,
            "bytes_per_call": 1e9,
            "bound": "dram",
            "unit": "fp32",
        }
    ]
    row = summarize(rows, res, PEAKS, columns=("power_w", "energy_j"))[0]
    assert row["n_samples"] == 25
    assert row["power_w"] == 500.0 and row["power_w_energy"] == pytest.approx(600.0)


@pytest.mark.parametrize(
    "calls,ms,timed_s,rated",
    [
        (2, 1500.0, None, False),  # two calls of 1.5 s in a 4 s window: 75%, the committed straggler-hang rows
        (2, 1500.0, 3.61, True),  # their own GPU seconds, where the result has them, decide
        (3500, 1.0, None, True),  # short calls that tile the window: 3.5 s of 3.5
        (3100, 1.0, None, False),  # as short, with gaps between them: 3.1 s of 3.5 (89%)
        (0, math.nan, None, True),  # nothing timed: nothing withheld, there is no rate to withhold
    ],
)
def test_a_rate_is_given_only_where_the_timed_calls_cover_the_counters_window(calls, ms, timed_s, rated):
    """A window of 3.5 s (4 s less its first half second); the calls timed wholly inside it rate it only where
    they cover 90% of it."""
    rows = [
        {"gpu": 0, "t_start_s": t / 10, "t_end_s": (t + 1) / 10, "power_w": 500.0, "energy_j": 50.0 * t}
        for t in range(40)
    ]
    res = [
        {
            "scenario": "x",
            "gpu": 0,
            "t_start": 0.0,
            "t_end": 4.0,
            "kernel_ms": ms,
            "n_calls": calls,
            "flops_per_call": 1e12,
            "bytes_per_call": 1e9,
            "bound": "compute",
            "unit": "fp32",
            **({"timed_s": timed_s} if timed_s else {}),
        }
    ]
    row = summarize(rows, res, PEAKS, columns=("power_w", "energy_j"))[0]
    if rated or not calls:
        assert "rate_withheld" not in row and (math.isfinite(row["tflops"]) or not calls)
    else:
        assert all(math.isnan(row[k]) for k in ("tflops", "mfu_pct", "gbps", "mbu_pct"))
        assert row["kernel_ms"] == ms and row["rate_withheld"].startswith(f"its {calls} timed calls cover ")
        assert "of its 3.50 s window" in row["rate_withheld"]
