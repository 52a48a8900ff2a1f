"""The runner end to end on a CPU: fake kernels, fake sources, a real sampler, a real Recording, real files."""

import json
import math
import time

import pytest
from fakes import GPU, FakeBackend, FakeSource, scenario
from gpubench.kernels.common import CheckFailed

from gpubench.record.recording import Reporter
from gpubench.record.config import RecordingConfig
from gpubench.record.rundir import load_run
from gpubench.suite.loop import RunOptions, run_suite
from gpubench.truth.timing import Timings


class Recorder(Reporter):
    def __init__(self):
        self.warnings = []
        self.steps = []

    def warn(self, message):
        self.warnings.append(message)

    def step(self, index, sc, what):
        self.steps.append((index, sc.name, what))


def _opts(tmp_path, scenarios, sources, peaks=False, duration_s=1.0):
    config = RecordingConfig(interval_s=0.05, command=["gpubench", "run"], sources=sources, peaks=peaks)
    return RunOptions(scenarios=scenarios, out_dir=tmp_path / "run", recording=config, duration_s=duration_s, gap_s=0.2)


def phase_source():
    """util reads 100 while the phase 'gemm' is current, else 0: which rows get which label is then checkable."""
    holder = {}

    def values(n):
        sampler = holder.get("sampler")
        return {
            "gpu_util_pct": 100.0 if sampler and sampler.phase == "gemm" else 0.0,
            "sm_active_pct": 50.0,
            "power_w": 300.0,
        }

    return FakeSource(values), holder


def test_run_writes_labelled_samples_and_summary(tmp_path, monkeypatch):
    src, holder = phase_source()
    import gpubench.record.recording as recording

    real = recording.Sampler

    class Spy(real):
        def __init__(self, *a, **k):
            super().__init__(*a, **k)
            holder["sampler"] = self

    monkeypatch.setattr(recording, "Sampler", Spy)
    gemm = scenario("gemm", flops=2e12, nbytes=1e9, unit="bf16_tensor", bound="compute")
    copy = scenario("copy", nbytes=6e9, bound="dram", traffic=6e9)
    # 3 s a scenario: its steady window (after the first 0.5 s) holds whole sample intervals even where a loaded
    # machine keeps the sampler's thread waiting for a second
    opts = _opts(tmp_path, [gemm, copy], [src], peaks=True, duration_s=3.0)
    run_dir, summary = run_suite(opts, FakeBackend(), Recorder())
    manifest, samples, summary_csv = load_run(run_dir)
    assert manifest["completed"] is True and manifest["status"] == "completed" and manifest["kind"] == "run"
    assert manifest["sources"]["used"] == ["fake"]
    assert manifest["gpus_sampled"][0]["uuid"] == GPU.uuid and manifest["gpus_sampled"][0]["cuda_index"] == 0
    assert any("4242" in w for w in manifest["warnings"])  # another process on the GPU
    assert manifest["peaks"]["conditions"]["bf16_tensor"]["power_w"] == 300.0
    assert manifest["families"]["fake"]["story"]
    phases = {r["phase"] for r in samples}
    assert {"peaks", "gemm", "copy", "gap"} <= phases
    assert all(r["uuid"] == GPU.uuid for r in samples)
    rows = {r["scenario"]: r for r in summary_csv}
    # steady window only: every gemm row read 100, none of the gap rows leaked in
    assert rows["gemm"]["gpu_util_pct"] == 100.0
    assert rows["copy"]["gpu_util_pct"] == 0.0
    # rows whole for every column: from 0.4 s into the 0.5 s window, as far as GPU-Util's value reaches back
    assert rows["gemm"]["n_samples"] >= 1
    # 2e12 FLOP in 2 ms = 1000 TFLOP/s; datasheet 989.4 → 101%, measured 800 → 125%
    assert rows["gemm"]["tflops"] == pytest.approx(1000.0)
    assert rows["gemm"]["mfu_pct"] == pytest.approx(100 * 1000 / 989.4, rel=1e-4)
    assert rows["gemm"]["mfu_measured_pct"] == pytest.approx(125.0, rel=1e-4)
    assert math.isnan(rows["gemm"]["mbu_pct"])  # compute-bound: no MBU
    assert rows["copy"]["gbps"] == pytest.approx(3000.0)
    assert rows["copy"]["traffic_gbps"] == pytest.approx(3000.0)
    assert rows["copy"]["mbu_measured_pct"] == pytest.approx(100.0)
    assert rows["copy"]["launch"] == "1 block x 1 thread" and rows["copy"]["gpu"] == 0
    assert json.loads((run_dir / "summary.json").read_text())[0]["scenario"] == "gemm"
    assert src.closed >= 1


def test_steady_window_holds_only_whole_intervals_after_the_trim(tmp_path):
    opts = _opts(tmp_path, [scenario("a")], [FakeSource()])
    run_dir, summary = run_suite(opts, FakeBackend(), Recorder())
    _, samples, _ = load_run(run_dir)
    t0, t1 = summary[0]["t_start"], summary[0]["t_end"]
    # whole for GPU-Util too, whose value reaches 0.4 s back (gpubench.read.summary.TRAIL_S)
    inside = [r for r in samples if r["t_start_s"] >= t0 + 0.5 + 0.4 - 1e-9 and r["t_end_s"] <= t1]
    assert 0 < summary[0]["n_samples"] == len(inside) < len([r for r in samples if r["phase"] == "a"])


def test_interrupt_keeps_samples_and_marks_manifest_incomplete(tmp_path):
    opts = _opts(tmp_path, [scenario("first"), scenario("second"), scenario("third")], [FakeSource()])
    with pytest.raises(KeyboardInterrupt):
        run_suite(opts, FakeBackend(interrupt_at="second"), Recorder())
    manifest, samples, summary = load_run(tmp_path / "run")
    assert manifest["completed"] is False and manifest["status"] == "interrupted"
    assert manifest["scenarios_done"] == ["first"]
    assert [r["scenario"] for r in summary] == ["first"]
    assert any(r["phase"] == "first" for r in samples)


def test_failed_check_skips_the_scenario_and_is_recorded(tmp_path):
    def wrong():
        raise CheckFailed("softmax[wrong]: relative error 0.5 exceeds 1e-05")

    rec = Recorder()
    opts = _opts(tmp_path, [scenario("bad", check=wrong), scenario("good")], [FakeSource()])
    run_dir, summary = run_suite(opts, FakeBackend(), rec)
    manifest, _, _ = load_run(run_dir)
    assert [r["scenario"] for r in summary] == ["good"]
    assert any("relative error 0.5" in e for e in manifest["errors"])
    assert manifest["completed"] is True


def test_source_failing_mid_run_is_reported_not_zero(tmp_path):
    rec = Recorder()
    run_dir, summary = run_suite(_opts(tmp_path, [scenario("a")], [FakeSource(fail_after=3)]), FakeBackend(), rec)
    manifest, samples, _ = load_run(run_dir)
    assert manifest["source_failures"][0]["source"] == "fake"
    assert any("failed mid-run" in w for w in rec.warnings)
    later = samples[5:]
    assert later and all(math.isnan(r["gpu_util_pct"]) for r in later)
    assert math.isnan(summary[0]["gpu_util_pct"])


def test_baselines_give_speedups(tmp_path):
    slow, fast = scenario("slow"), scenario("fast", baseline="slow")
    backend = FakeBackend()
    calls = iter([4.0, 1.0])
    real_time = backend.time

    def timed(prepared, duration_s, calls_per_timing):
        backend.call_ms = next(calls)
        return real_time(prepared, duration_s, calls_per_timing)

    backend.time = timed
    _, summary = run_suite(_opts(tmp_path, [slow, fast], [FakeSource()]), backend, Recorder())
    by = {r["scenario"]: r for r in summary}
    assert by["fast"]["speedup_vs_baseline"] == pytest.approx(4.0)
    assert "speedup_vs_baseline" not in by["slow"]


def test_the_manifest_on_disk_names_the_gpu_before_the_first_kernel_runs(tmp_path):
    """A run killed outright (kill -9) keeps only what is on disk: the GPU, versions and stories."""
    seen = {}

    def check():
        seen.update(json.loads((tmp_path / "run" / "manifest.json").read_text()))
        return {}

    run_suite(_opts(tmp_path, [scenario("a", check=check)], [FakeSource()]), FakeBackend(), Recorder())
    assert seen["status"] == "running" and seen["gpu"]["name"] == GPU.name
    assert seen["versions"] and "fake" in seen["families"]


class WarmFirstBackend(FakeBackend):
    """Groups stamped on the monotonic clock: those of the first 0.6 s faster (a GPU's clock is higher
    before its power limit holds it), the rest 1.0 ms a call."""

    def time(self, prepared, duration_s, calls):
        t0 = time.monotonic()
        time.sleep(duration_s)
        spans = [(t0 + k * duration_s / 10, t0 + (k + 1) * duration_s / 10) for k in range(10)]
        return Timings([0.5 if b <= t0 + 0.6 * duration_s else 1.0 for _, b in spans], 10 * calls, spans)


def test_the_time_per_call_covers_the_window_the_counters_cover(tmp_path):
    """The first half second of a scenario is not summarized: its calls are not timed into kernel_ms either."""
    _, summary = run_suite(_opts(tmp_path, [scenario("a")], [FakeSource()]), WarmFirstBackend(), Recorder())
    row = summary[0]
    assert row["kernel_ms"] == 1.0 and row["n_timings"] == 5  # the groups after t_start + 0.5 s only
    a, _, b = row["timing_window"].partition("-")
    assert float(a) == pytest.approx(row["t_start"] + 0.5) and float(b) == pytest.approx(row["t_end"])
