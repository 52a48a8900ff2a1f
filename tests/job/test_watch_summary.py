"""gpubench watch end to end on a CPU, what it records and summarizes: fake sources, a real sampler and
Recording, real child processes. Phases label the samples and each gets a summary row; plot and report on a
watch run; attach mode; the recording in process; memory that stays flat; peaks that cannot be measured; only
the GPUs the command holds summarized; a summary that never ends holds neither the watch nor the exit code."""

import json
import os
import time
import tracemalloc

import pytest
from fakes import GPU, FakeSource
from watchfakes import BY_PHASE, INFO, _children_import_this_gpubench, ladder, options, py

import gpubench
from gpubench.cli import main
from gpubench.inside import markwriter
from gpubench.job import watchcmd as watch
from gpubench.job.watcher import WatchOptions
from gpubench.record.config import RecordingConfig
from gpubench.record.rundir import load_run
from gpubench.inside.flops import hardware_known

FIXTURES = (_children_import_this_gpubench, ladder)  # pytest finds them by their names in this module

PHASED = py("""
    import time, gpubench
    gpubench.mark("warmup"); time.sleep(1.2)
    gpubench.mark("train")
    for _ in range(30):
        time.sleep(0.05); gpubench.step(flops=2e12)
    gpubench.mark("eval"); time.sleep(1.2)
    print("child says goodbye")
""")


def test_phases_label_the_samples_and_each_gets_a_summary_row(tmp_path, ladder, capfd):
    code, w = watch.run(options(tmp_path / "run", [ladder]), PHASED)
    assert code == 0
    assert "child says goodbye" in capfd.readouterr().out  # the child's output passes through
    manifest, samples, summary = load_run(tmp_path / "run")
    assert manifest["kind"] == "watch" and manifest["status"] == "completed"
    assert manifest["child"]["argv"] == PHASED and manifest["child"]["exit_code"] == 0
    assert manifest["marks"]["steps"] == 30 and manifest["families"]["watch"]["story"]
    assert hardware_known(manifest)  # its marks count what the kernels run: a summary may give HFU
    labels = [r["phase"] for r in samples]
    assert {"warmup", "train", "eval"} <= set(labels)
    assert labels.index("warmup") < labels.index("train") < labels.index("eval")
    rows = {r["phase"]: r for r in summary}
    assert list(rows) == ["warmup", "train", "eval"] and all(r["family"] == "watch" for r in summary)
    for phase, (util, sm, tensor) in BY_PHASE.items():
        if phase in rows:  # every steady row of a phase was sampled while that phase was current
            assert (rows[phase]["gpu_util_pct"], rows[phase]["sm_active_pct"]) == (util, sm)
    train = rows["train"]
    assert 10 <= train["steps"] < 30 and 14 < train["steps_per_s"] <= 20.5  # the steps of its window
    assert train["tflops"] == pytest.approx(2.0 * train["steps_per_s"], rel=1e-6)
    assert train["mfu_pct"] == pytest.approx(100 * train["tflops"] / 989.4, rel=1e-6)
    assert train["verdict_rules"] == "tensor-part, mfu-low" and "tensor active 30% ≥ 10%" in train["verdict"]
    assert train["step_clock"] == "host"  # no CUDA in this child
    assert rows["warmup"]["verdict_rules"] == "host-bound, idle, no-steps"
    assert json.loads((tmp_path / "run" / "summary.json").read_text())[1]["phase"] == "train"


def test_plot_and_report_work_on_a_watch_run(tmp_path, ladder):
    watch.run(options(tmp_path / "run", [ladder]), PHASED)
    assert main(["plot", str(tmp_path / "run")]) == 0
    assert main(["report", str(tmp_path / "run")]) == 0
    report = (tmp_path / "run" / "report.md").read_text()
    assert "### train" in report and " steps at " in report and "Verdict: The tensor cores work part" in report


def test_attach_mode_records_for_the_duration(tmp_path, ladder):
    t0 = time.monotonic()
    with open(tmp_path / "job-marks.tsv", "w") as f:  # a job that marked "train" before the watch began
        f.write(f"{t0 - 5:.6f}\t0\t1\tmark\ttrain\n")
    code, w = watch.run(options(tmp_path / "run", [ladder], marks_path=tmp_path / "job-marks.tsv"), [], 1.5)
    elapsed = time.monotonic() - t0
    assert code == 0 and 1.5 <= elapsed < 4.0
    manifest, samples, summary = load_run(tmp_path / "run")
    assert "child" not in manifest and manifest["status"] == "completed"
    assert [r["phase"] for r in summary] == ["train"] and summary[0]["gpu_util_pct"] == 100.0
    assert not (tmp_path / "run" / "marks.tsv").exists()


def test_recording_in_process(tmp_path, ladder):
    with gpubench.recording(
        tmp_path / "nb", gpus=[GPU], info=INFO, sources=[ladder], interval_s=0.05, quiet=True
    ) as rec:
        gpubench.mark("train")
        for _ in range(20):
            time.sleep(0.05)
            gpubench.step(flops=1e12)
        gpubench.mark("eval")
        time.sleep(1.0)
    assert [r["phase"] for r in rec.summary] == ["train", "eval"]
    assert 8 <= rec.summary[0]["steps"] <= 20 and rec.summary[0]["gpu_util_pct"] == 100.0
    assert rec.manifest["kind"] == "watch" and (tmp_path / "nb" / "summary.csv").is_file()
    assert markwriter._path is None and markwriter.ENV not in os.environ  # marks are no-ops again


def test_memory_stays_flat_however_long_the_watch(tmp_path):
    """Rows stream to disk and none stay in memory beyond the batch being gathered: at about 2000 rows a
    second, memory stays flat."""
    from gpubench.record.arrowread import scan

    path = tmp_path / "run" / "samples.arrows"
    rows_on_disk = lambda: sum(scan(path)[1])  # noqa: E731 -- the rows of the batches written so far
    with gpubench.recording(
        tmp_path / "run", gpus=[GPU], info=INFO, sources=[FakeSource()], interval_s=0.0005, quiet=True
    ) as w:
        tracemalloc.start()
        try:

            def stamp_for(seconds, until=lambda: False):
                t_end = time.monotonic() + seconds
                while time.monotonic() < t_end and not until():
                    gpubench.step(flops=1e9)  # the marks file grows too
                    time.sleep(0.001)

            def just_written():
                # the sink holds up to a batch of rows before writing them: compare memory as each batch lands
                before = rows_on_disk()
                stamp_for(15.0, until=lambda: rows_on_disk() > before)
                return tracemalloc.get_traced_memory()[0], rows_on_disk()

            stamp_for(2.0)  # past start-up: the first allocations of the recording are made
            assert len(w.rec.sampler.rows) == 0
            mem_a, rows_a = just_written()
            stamp_for(10.0)
            mem_b, rows_b = just_written()
        finally:
            tracemalloc.stop()
    assert rows_b > rows_a + 5_000  # thousands more rows went to disk meanwhile
    assert mem_b - mem_a < 1_000_000, f"memory grew by {(mem_b - mem_a) / 1e6:.1f} MB in 10 s"


@pytest.mark.skipif(__import__("torch").cuda.is_available(), reason="this machine has a GPU")
def test_peaks_that_cannot_be_measured_are_a_warning_and_the_command_still_runs(tmp_path):
    code, w = watch.run(options(tmp_path / "run", [FakeSource()], peaks=True), py("print('ran')"))
    assert code == 0
    manifest, samples, summary = load_run(tmp_path / "run")
    assert any(m.startswith("the peaks could not be measured (") for m in manifest["warnings"])
    assert manifest["peaks"]["measured"] is None and manifest["peaks"]["datasheet"]["bf16_tensor"] == 989.4e12
    assert samples[0]["phase"] in ("start", "peaks") and any(r["phase"] == "peaks" for r in samples)
    assert "peaks" not in {r["phase"] for r in summary}


def test_only_the_gpus_the_command_holds_are_summarized_the_others_are_listed_idle(tmp_path, monkeypatch, capsys):
    """Two GPUs sampled, the command holds a context on the second only (a fake NVML process list)."""
    from gpubench.job import contexts
    from gpubench.record.gpus import Gpu

    other = Gpu(1, "GPU-11111111-1111-2222-3333-444444444444", GPU.name, 1)
    monkeypatch.setattr(contexts.nvml, "compute_processes", lambda i: list(contexts.parents()) if i == 1 else [])
    argv = py("""
        import time, gpubench
        gpubench.mark("train")
        for _ in range(40):
            time.sleep(0.04); gpubench.step(flops=1e12)
    """)
    opts = WatchOptions(
        tmp_path / "run",
        [GPU, other],
        INFO,
        RecordingConfig(interval_s=0.05, sources=[FakeSource()], command=["gpubench", "watch"]),
    )
    code, w = watch.run(opts, argv)
    assert code == 0
    manifest, _, summary = load_run(tmp_path / "run")
    assert manifest["gpus_used"] == [1] and [g["nvml_index"] for g in manifest["gpus_idle"]] == [0]
    assert {r["gpu"] for r in summary} == {1} and manifest["contexts"]["used"]["1"]
    watch.show(w)
    assert "idle, no process of the command used them: GPU 0" in capsys.readouterr().out


def test_a_summary_that_never_ends_holds_neither_the_watch_nor_the_exit_code(tmp_path, monkeypatch):
    """Whatever goes wrong in summarizing, the watch ends and hands back the command's exit code: the summary
    gets SUMMARY_S, the samples and marks stay whole, and the manifest and the warning say so."""
    import threading

    import gpubench.job.watcher as watcher

    never = threading.Event()
    monkeypatch.setattr(watcher, "summarize_watch", lambda *a, **k: never.wait())
    monkeypatch.setattr(watcher, "SUMMARY_S", 2.0)
    monkeypatch.setattr(watcher, "SUMMARY_ROW_S", 0.0)
    started = time.monotonic()
    # the job lasts a second, so that the sampler has rows to keep on a loaded machine too
    job = py("import time, gpubench; gpubench.step(); time.sleep(1.0); raise SystemExit(3)")
    rc, w = watch.run(options(tmp_path / "run", [FakeSource()]), job)
    never.set()
    assert rc == 3 and time.monotonic() - started < 20
    manifest, samples, summary = load_run(tmp_path / "run")
    assert manifest["status"] == "completed" and manifest["summary_unfinished"] and summary == []
    assert len(samples) > 0 and manifest["marks"]["steps"] == 1 and manifest["gpus_idle"] == []
    assert any("the summary did not finish within 2 s" in x for x in manifest["warnings"])


def test_bounded_hands_back_the_result_or_the_error_of_its_work():
    from gpubench.job.timelimit import bounded

    assert bounded(lambda: 7, 5.0) == 7
    with pytest.raises(ZeroDivisionError):
        bounded(lambda: 1 / 0, 5.0)
