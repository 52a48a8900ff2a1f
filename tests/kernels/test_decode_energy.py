"""Decode in the suite and power in the ladder: the energy columns, decode judged by both roofs, the ridge,
the sweep as scenarios, the decode and energy figures, the report's sentences, and the tuned table."""

import math
from pathlib import Path

import pytest
from gpubench.kernels import decode
from synthetic import DECODE, make_run

from gpubench.read.energy import energy_used_j, joules, per_joule
from gpubench.read.summary import batch_at, derive, ridge_flop_per_byte, windows_of
from gpubench.record.rundir import load_run
from gpubench.show.figures import common, figures_for
from gpubench.show.figures import decode as decode_figure
from gpubench.show.figures import energy as energy_figure
from gpubench.show.report import blocks, to_markdown
from gpubench.suite import scenarios
from gpubench.suite.loop import RunOptions, estimate_s

ROOT = Path(__file__).resolve().parents[2]
H100 = {"datasheet": {"bf16_tensor": 989.4e12, "fp32": 66.9e12, "dram": 3.35e12}, "measured": {}}


def row(bound, flops, nbytes, unit="fp32", tokens=math.nan, power_w=500.0, kernel_ms=2.0):
    return {
        "bound": bound,
        "unit": unit,
        "flops_per_call": flops,
        "bytes_per_call": nbytes,
        "tokens_per_call": tokens,
        "power_w_energy": power_w,
        "kernel_ms": kernel_ms,
    }


# --- energy: per call, and useful work per joule by the ground truth's rules ---------------------------


def test_a_calls_energy_is_the_windows_power_times_its_gpu_time():
    j = per_joule(row("dram", 0.0, 2e9))
    assert j["j_per_call"] == pytest.approx(500.0 * 2e-3)  # 1 J
    assert j["gb_per_j"] == pytest.approx(2.0)  # 2 GB of useful bytes for 1 J
    assert j["tflop_per_kj"] == 0.0  # a copy does no arithmetic: none, not unknown


@pytest.mark.parametrize(
    "bound,unit,gb,tflop",
    [
        ("compute", "bf16_tensor", False, True),  # a GEMM's bytes are its least traffic, not the work it does
        ("dram", "fp32", True, True),
        ("both", "bf16_tensor", True, True),
        ("link", None, True, False),
        ("none", "fp32", False, True),  # a spin: zero FLOPs per joule, the truth about a busy GPU
    ],
)
def test_work_per_joule_follows_the_ground_truth(bound, unit, gb, tflop):
    j = per_joule(row(bound, 1e12, 1e9, unit=unit))
    assert common.finite(j["gb_per_j"]) == gb and common.finite(j["tflop_per_kj"]) == tflop
    if tflop:
        assert j["tflop_per_kj"] == pytest.approx(1000.0)  # 1 TFLOP for 1 J


def test_no_time_or_no_power_gives_no_energy_rather_than_zero():
    for r in (row("dram", 0, 1e9, kernel_ms=math.nan), row("dram", 0, 1e9, power_w=math.nan)):
        assert all(math.isnan(v) for v in per_joule(r).values())


def test_tokens_per_joule_and_joules_per_token():
    j = per_joule(row("both", 2e9, 1e9, unit="bf16_tensor", tokens=16.0, power_w=400.0, kernel_ms=0.25))
    assert j["j_per_call"] == pytest.approx(0.1)
    assert j["tokens_per_j"] == pytest.approx(160.0) and j["j_per_token"] == pytest.approx(0.1 / 16)
    assert math.isnan(per_joule(row("dram", 0, 1e9))["tokens_per_j"])


def test_energy_used_is_the_counters_rise_over_the_window():
    window = [{"energy_j": e} for e in (100.0, math.nan, 130.0, 175.5)]
    assert energy_used_j(window) == pytest.approx(75.5)
    assert math.isnan(energy_used_j(window[:1]))


def test_the_summary_carries_the_energy_columns_of_every_row(tmp_path):
    _, _, summary = load_run(make_run(tmp_path / "run"))
    by = {r["scenario"]: r for r in summary}
    copy_row = by["copy-triton"]
    assert copy_row["j_per_call"] == pytest.approx(copy_row["power_w_energy"] * copy_row["kernel_ms"] / 1e3)
    assert copy_row["gb_per_j"] == pytest.approx(copy_row["bytes_per_call"] / 1e9 / copy_row["j_per_call"])
    assert by["spin-1thread"]["tflop_per_kj"] == 0.0 and by["spin-1thread"]["power_w_energy"] > 0
    assert math.isnan(by["idle"]["j_per_call"])
    # the counter read at the window's two ends: the energy of the whole window, at its mean power
    ((ws, we),) = windows_of(copy_row["windows"])
    assert we - ws == pytest.approx(copy_row["t_end"] - copy_row["t_start"] - 0.5) and copy_row["n_samples"] >= 10
    assert copy_row["energy_used_j"] == pytest.approx(copy_row["power_w_energy"] * (we - ws))


def test_runs_summarized_before_the_energy_columns_get_them_from_power_and_time():
    old = row("dram", 0.0, 2e9)  # a summary row of an older run: power and time, no energy columns
    assert joules(old)["gb_per_j"] == pytest.approx(2.0)
    assert joules(dict(old, gb_per_j=7.0))["gb_per_j"] == 7.0  # what a summary holds is what is shown


# --- decode: both roofs, tokens/s, and the ridge -------------------------------------------------------


def test_decode_is_judged_by_both_roofs_and_counts_tokens():
    w = decode.work(1, 8192, 28672)
    d = derive(
        {
            "kernel_ms": 0.16,
            "flops_per_call": w.flops,
            "bytes_per_call": w.bytes,
            "tokens_per_call": 1.0,
            "bound": "both",
            "unit": "bf16_tensor",
        },
        H100,
    )
    assert d["mbu_pct"] == pytest.approx(100 * w.bytes / 0.16e-3 / 3.35e12)  # ~88%: the weights at DRAM speed
    assert d["mfu_pct"] < 0.5 and d["tokens_per_s"] == pytest.approx(1 / 0.16e-3)
    name, value = common.work_fraction({"bound": "both", **d})
    assert (name, value) == ("MBU", d["mbu_pct"])
    assert common.work_fraction({"bound": "both", "mbu_pct": 20.0, "mfu_pct": 60.0}) == ("MFU", 60.0)
    assert math.isnan(derive({"kernel_ms": 1.0, "bytes_per_call": 1.0, "bound": "dram"}, H100)["tokens_per_s"])


def test_the_ridge_from_the_datasheets_and_the_batch_that_reaches_it():
    h100 = ridge_flop_per_byte(H100)
    h200 = ridge_flop_per_byte({"datasheet": {"bf16_tensor": 989.4e12, "dram": 4.8e12}})
    assert h100 == pytest.approx(295.3, abs=0.1) and h200 == pytest.approx(206.1, abs=0.1)
    sweep = [
        {
            "tokens_per_call": float(b),
            "flops_per_call": decode.work(b, 8192, 28672).flops,
            "bytes_per_call": decode.work(b, 8192, 28672).bytes,
        }
        for b in scenarios.DECODE_B
    ]
    # intensity = B·K·N / (K·N + B·(K+N)): the ridge needs a little more than its FLOP per byte in tokens
    assert batch_at(sweep, h100) == pytest.approx(309, abs=3) and batch_at(sweep, h200) == pytest.approx(213, abs=3)
    assert math.isnan(batch_at(sweep, 1e4))  # past the sweep's last point: not extrapolated
    assert ridge_flop_per_byte({"datasheet": {"dram": 1.0}}) is None
    measured = {**H100, "measured": {"bf16_tensor": 704e12, "dram": 3.01e12}}
    assert ridge_flop_per_byte(measured) == pytest.approx(233.9, abs=0.1)  # measured where known
    assert ridge_flop_per_byte(measured, "datasheet") == pytest.approx(h100)


# --- the sweep as scenarios, and the default suite's time ----------------------------------------------


def test_the_sweep_is_data_with_four_points_in_the_default_suite():
    sweep = [s for s in scenarios.SCENARIOS if s.family == "decode" and s.impl == "triton"]
    assert [s.sizes["b"] for s in sweep] == list(scenarios.DECODE_B)
    default = [s.sizes["b"] for s in scenarios.select(None) if s.family == "decode"]
    assert default == list(scenarios.DECODE_DEFAULT_B)
    assert min(default) == 1 and max(default) > 300  # both sides of the ridge on an H100 and an H200
    assert {s.name for s in scenarios.select(["decode-*"])} >= {"decode-b2", "decode-torch-b1", "decode-cupy-b1"}
    for s in scenarios.SCENARIOS:
        if s.family == "decode":
            assert s.measured_s() == scenarios.DECODE_S and s.prepare  # every point: 2 s in the default run


def test_a_sweep_points_duration_scales_with_the_runs_and_keeps_a_window():
    point = scenarios.BY_NAME["decode-b1"]
    assert point.measured_s(scenarios.DURATION_S) == scenarios.DECODE_S
    assert point.measured_s(2 * scenarios.DURATION_S) == 2 * scenarios.DECODE_S
    assert point.measured_s(1.5) == scenarios.SHORTEST_S  # never under a second where the run allows
    assert point.measured_s(0.8) == 0.8
    assert scenarios.BY_NAME["copy-triton"].measured_s(7.0) == 7.0


def test_the_default_suite_plans_well_inside_two_minutes():
    # Measured time, gaps and peaks as planned; setup (checks, compiles, allocation) and start-up took about
    # 13 s in the H100 reference run of 2026-11-22, so the plan must leave that and more.
    opts = RunOptions(scenarios=scenarios.select(None), out_dir=Path("unused"))
    planned = sum(s.measured_s(opts.duration_s) + opts.gap_s for s in opts.scenarios) + 12.0
    assert planned <= 100.0, planned
    assert estimate_s(opts) == pytest.approx(planned + len(opts.scenarios))


# --- the figures and the report -------------------------------------------------------------------------


@pytest.fixture
def run(tmp_path):
    return load_run(make_run(tmp_path / "run"))


def test_the_decode_figure_is_drawn_for_suite_runs_that_ran_decode(run):
    manifest = run[0]
    names = lambda m: {f.name for f in figures_for(m)}  # noqa: E731
    assert "decode" in names(manifest)
    assert "decode" not in names({**manifest, "families": {"copy": {}}})
    assert "decode" not in names({**manifest, "kind": "watch"}) and "energy" not in names({**manifest, "kind": "watch"})


def test_the_decode_figure_annotates_the_summarys_numbers(run, tmp_path):
    manifest, samples, summary = run
    _, notes = decode_figure.draw(summary, samples, manifest, tmp_path)
    by = {r["scenario"]: r for r in summary}
    for b in DECODE:
        marks = notes[f"decode-b{b}"]
        for col in ("tokens_per_s", "kernel_ms", "gpu_util_pct", "mbu_pct", "mfu_pct"):
            assert marks[col] == pytest.approx(by[f"decode-b{b}"][col])
    sweep = notes["sweep"]
    assert sweep["tokens_x"] == pytest.approx(by["decode-b512"]["tokens_per_s"] / by["decode-b1"]["tokens_per_s"])
    assert sweep["ridge"] == pytest.approx(790e12 / 4.28e12)  # the measured peaks the roofline draws
    assert 128 < sweep["ridge_batch"] < 512 and sweep["mfu_over_mbu"] == 512


def test_the_roofline_puts_decode_on_both_sides_of_its_ridge(run, tmp_path):
    manifest, samples, summary = run
    _, notes = __import__("gpubench.show.figures.roofline", fromlist=["draw"]).draw(
        summary, samples, manifest, tmp_path
    )
    points = {n: m for n, m in notes.items() if n.startswith("decode-")}
    ridge = {m["ridge"] for m in points.values()}
    assert len(ridge) == 1 and min(m["intensity"] for m in points.values()) < ridge.pop() < max(
        m["intensity"] for m in points.values()
    )


def test_the_energy_figure_annotates_the_summarys_numbers_and_names_a_busy_idler(run, tmp_path, monkeypatch):
    manifest, samples, summary = run
    titles = []
    monkeypatch.setattr(
        energy_figure, "save", lambda fig, manifest, out, name: titles.append(fig._suptitle.get_text()) or []
    )
    _, notes = energy_figure.draw(summary, samples, manifest, tmp_path)
    by = {r["scenario"]: r for r in summary}
    assert notes["copy-triton"]["gb_per_j"] == pytest.approx(by["copy-triton"]["gb_per_j"])
    assert notes["gemm-torch"]["tflop_per_kj"] == pytest.approx(by["gemm-torch"]["tflop_per_kj"])
    assert "gb_per_j" not in notes["gemm-torch"] and "tflop_per_kj" not in notes["softmax-fused"]
    spin = by["spin-1thread"]
    assert f"spin-1thread drew {spin['power_w_energy']:.0f} W for no work" in titles[0]
    assert titles[0].startswith("At 100% GPU-Util")


def test_the_report_speaks_of_energy_and_of_the_decode_sweep(run):
    manifest, _, summary = run
    md = to_markdown(blocks(manifest, summary, set()))
    energy = md[md.index("## Energy") : md.index("## Decode")]
    assert "drew" in energy and "| spin-1thread | 100% |" in energy
    decode_text = md[md.index("## Decode") : md.index("## Figures")]
    by = {r["scenario"]: r for r in summary}
    assert f"{by['decode-b1']['tokens_per_s']:,.0f} to {by['decode-b512']['tokens_per_s']:,.0f}" in decode_text
    assert "206 FLOP per byte from the datasheet peaks" in decode_text
    assert "GPU-Util read 100% throughout" in decode_text
    old = [{k: v for k, v in r.items() if k not in ("tokens_per_call", "tokens_per_s")} for r in summary]
    assert "## Decode" not in to_markdown(blocks(manifest, old, set()))  # no batch, no sweep to speak of
