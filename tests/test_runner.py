"""The runner end to end on a CPU: fake kernels, fake sources, a real sampler and real files."""

import json
import math

import pytest

from gpubench.results import load_run
from gpubench.runner import Reporter, RunOptions, run_suite
from gpubench.kernels.common import CheckFailed

from fakes import FakeBackend, FakeSource, scenario


class Recorder(Reporter):
    def __init__(self):
        self.warnings = []
        self.steps = []

    def warn(self, message):
        self.warnings.append(message)

    def step(self, index, sc, what):
        self.steps.append((index, sc.name, what))


def _opts(tmp_path, scenarios, **kw):
    return RunOptions(scenarios=scenarios, out_dir=tmp_path / "run", duration_s=1.0, gap_s=0.2, interval_s=0.05,
                      command=["gpubench", "run"], **kw)


def test_run_writes_labelled_samples_and_summary(tmp_path):
    # the source reads 100% util while "gemm" runs and 0 otherwise, via the sampler's phase
    holder = {}
    src = FakeSource(lambda n: {"gpu_util_pct": 100.0 if holder["s"].phase == "gemm" else 0.0,
                                "sm_active_pct": 50.0, "power_w": 300.0})
    backend = FakeBackend([src], call_ms=2.0)
    gemm = scenario("gemm", flops=2e12, nbytes=1e9, unit="bf16_tensor", dram=False)
    copy = scenario("copy", nbytes=6e9, dram=True)
    opts = _opts(tmp_path, [gemm, copy])
    import gpubench.runner as runner_mod

    real = runner_mod.Sampler

    class Spy(real):
        def __init__(self, *a, **k):
            super().__init__(*a, **k)
            holder["s"] = self

    runner_mod.Sampler = Spy
    try:
        rec = Recorder()
        run_dir, summary = run_suite(opts, backend, rec)
    finally:
        runner_mod.Sampler = real
    manifest, samples, summary_csv = load_run(run_dir)
    assert manifest["completed"] is True and manifest["status"] == "completed"
    assert manifest["sources"]["used"] == ["fake"]
    assert "dcgm" in manifest["sources"]["unavailable"]
    assert any("4242" in w for w in manifest["warnings"])  # another process on the GPU
    phases = {r["phase"] for r in samples}
    assert {"gemm", "copy", "gap"} <= phases
    rows = {r["scenario"]: r for r in summary_csv}
    # steady window only: every gemm row read 100, none of the gap rows leaked in
    assert rows["gemm"]["gpu_util_pct"] == 100.0
    assert rows["copy"]["gpu_util_pct"] == 0.0
    assert rows["gemm"]["n_samples"] >= 5
    # 2e12 FLOP in 2 ms = 1000 TFLOP/s; datasheet 989.4 → 101%, measured 800 → 125%
    assert rows["gemm"]["tflops"] == pytest.approx(1000.0)
    assert rows["gemm"]["mfu_pct"] == pytest.approx(100 * 1000 / 989.4, rel=1e-4)
    assert rows["gemm"]["mfu_measured_pct"] == pytest.approx(125.0, rel=1e-4)
    assert math.isnan(rows["gemm"]["mbu_pct"])  # not DRAM-bound: no MBU
    assert rows["copy"]["gbps"] == pytest.approx(3000.0)
    assert rows["copy"]["mbu_measured_pct"] == pytest.approx(100.0)
    assert json.loads((run_dir / "summary.json").read_text())[0]["scenario"] == "gemm"
    assert src.closed >= 1


def test_steady_window_drops_the_first_half_second(tmp_path):
    src = FakeSource()
    opts = _opts(tmp_path, [scenario("a")])
    run_dir, summary = run_suite(opts, FakeBackend([src]), Recorder())
    _, samples, _ = load_run(run_dir)
    t0 = summary[0]["t_start"]
    in_phase = [r for r in samples if r["phase"] == "a"]
    counted = [r for r in in_phase if r["t_mono_s"] >= t0 + 0.5]
    assert 0 < summary[0]["n_samples"] == len(counted) < len(in_phase)


def test_interrupt_keeps_samples_and_marks_manifest_incomplete(tmp_path):
    src = FakeSource()
    opts = _opts(tmp_path, [scenario("first"), scenario("second"), scenario("third")])
    with pytest.raises(KeyboardInterrupt):
        run_suite(opts, FakeBackend([src], interrupt_at="second"), Recorder())
    manifest, samples, summary = load_run(tmp_path / "run")
    assert manifest["completed"] is False and manifest["status"] == "interrupted"
    assert manifest["scenarios_done"] == ["first"]
    assert [r["scenario"] for r in summary] == ["first"]
    assert any(r["phase"] == "first" for r in samples)


def test_failed_check_skips_the_scenario_and_is_recorded(tmp_path):
    def wrong():
        raise CheckFailed("softmax[wrong]: relative error 0.5 exceeds 1e-05")

    rec = Recorder()
    opts = _opts(tmp_path, [scenario("bad", check=wrong), scenario("good")])
    run_dir, summary = run_suite(opts, FakeBackend([FakeSource()]), rec)
    manifest, _, _ = load_run(run_dir)
    assert [r["scenario"] for r in summary] == ["good"]
    assert any("relative error 0.5" in e for e in manifest["errors"])
    assert manifest["completed"] is True


def test_source_failing_mid_run_is_reported_not_zero(tmp_path):
    src = FakeSource(fail_after=3)
    rec = Recorder()
    run_dir, summary = run_suite(_opts(tmp_path, [scenario("a")]), FakeBackend([src]), rec)
    manifest, samples, _ = load_run(run_dir)
    assert manifest["source_failures"][0]["source"] == "fake"
    assert any("failed mid-run" in w for w in rec.warnings)
    later = samples[5:]
    assert later and all(math.isnan(r["gpu_util_pct"]) for r in later)
    assert math.isnan(summary[0]["gpu_util_pct"])
