"""A job nobody changed, watched on a CPU: its optimizer's steps, the FLOPs of one step counted by gpubench,
phases from its GPU's activity, and where each number came from in the summary, the manifest, the console,
the report and the metrics endpoint."""

import io
import os
import sys
import textwrap
from pathlib import Path

import pytest
import torch
from fakes import GPU, FakeSource

import gpubench
from gpubench.job import markfile, markreader, watchcmd as watch
from gpubench.job.live import Snapshot
from gpubench.job.watcher import WatchOptions
from gpubench.record.config import RecordingConfig
from gpubench.record.rundir import load_run

ROOT = Path(__file__).resolve().parents[2]
JOB = textwrap.dedent("""
    import time, torch
    from torch import nn
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(32, 64), nn.GELU(), nn.Linear(64, 32))
    opt = torch.optim.AdamW(model.parameters())
    x = torch.randn(8, 32)
    for _ in range(60):
        model(x).square().mean().backward()
        opt.step()
        opt.zero_grad()
        time.sleep(0.03)
    print("trained")
""")


def busy(n):
    return {"gpu_util_pct": 100.0, "sm_active_pct": 60.0, "power_w": 300.0}


@pytest.fixture(scope="module")
def watched(tmp_path_factory):
    out = tmp_path_factory.mktemp("auto") / "run"
    script = out.parent / "job.py"
    script.write_text(JOB)
    old = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), old]))
    try:
        opts = WatchOptions(
            out, [GPU], {"name": GPU.name}, RecordingConfig(interval_s=0.05, sources=[FakeSource(busy)])
        )
        code, w = watch.run(opts, [sys.executable, str(script)])
    finally:
        os.environ.pop("PYTHONPATH") if old is None else os.environ.__setitem__("PYTHONPATH", old)
    return code, w, out


def expected():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.GELU(), torch.nn.Linear(64, 32))
    x = torch.randn(8, 32)
    return gpubench.count_flops(lambda: model(x).square().mean().backward())


def test_an_unchanged_job_gets_steps_flops_and_phases_and_the_manifest_says_which_came_automatically(watched):
    code, w, out = watched
    assert code == 0
    manifest, _, summary = load_run(out)
    auto = manifest["auto"]
    assert auto["hook"] == "on" and auto["phases_from"] == "activity"
    (process,) = auto["processes"]
    assert process["steps"] == 60 and process["kept"]
    assert process["counted"]["model_flops"] == pytest.approx(expected(), rel=0.01)
    assert len(auto["counted_steps_s"]) == 1
    rows = {r["phase"]: r for r in summary}
    assert {"warmup", "train"} <= set(rows)
    train = rows["train"]
    assert train["steps_source"] == "optimizer" and train["flops_source"] == "one step counted"
    assert train["flops_per_step"] == pytest.approx(expected(), rel=0.01)
    assert auto["rows"]["train"] == {"steps": "optimizer", "flops": "one step counted"}
    a, b = auto["counted_steps_s"][0]
    for phase in manifest["phases"]:  # the counted step is in no phase
        assert all(e <= a or s >= b for s, e in phase["spans"])


def test_the_console_and_the_report_say_where_the_numbers_came_from(watched, tmp_path):
    from rich.console import Console

    from gpubench.cli import main

    _, w, out = watched
    console = Console(file=io.StringIO(), width=200)
    watch.show(w, console)
    text = console.file.getvalue()
    assert "Steps from the job's optimizer steps (no code change); FLOPs counted by gpubench from one step" in text
    assert main(["report", str(out), "--out", str(tmp_path / "report")]) == 0
    report = (tmp_path / "report" / "report.md").read_text()
    assert "counted by gpubench from one whole step" in report and "marked no phases" in report
    assert "FLOPs counted by gpubench from one step." in report  # the phase's own sentence


def test_the_metrics_endpoint_labels_where_the_numbers_came_from():
    pytest.importorskip("prometheus_client")
    from gpubench.job.exporter import families

    row = {
        "gpu": GPU.nvml_index,
        "phase": "train",
        "verdict_rules": "tensor-part",
        "mfu_pct": 20.0,
        "steps_source": "optimizer",
        "flops_source": "one step counted",
    }
    bare = dict(row, steps_source="", flops_source="")
    for rows, labels in (([row], [("optimizer", "one step counted")]), ([bare], [])):
        found = [
            f for f in families(Snapshot({}, rows, {}, "train", None), [GPU], "host") if f.name == "gpubench_source"
        ]
        assert [(s.labels["steps"], s.labels["flops"]) for f in found for s in f.samples] == labels


EXAMPLES = ROOT / "examples"
TINY = {
    "train_gpt.py": [
        "--layers",
        "2",
        "--width",
        "64",
        "--heads",
        "4",
        "--vocab",
        "256",
        "--seq",
        "32",
        "--batch",
        "2",
        "--warmup-steps",
        "2",
        "--steps",
        "16",
        "--eval-steps",
        "2",
    ],
    "train_llama.py": [
        "--layers",
        "2",
        "--width",
        "64",
        "--heads",
        "4",
        "--kv-heads",
        "2",
        "--ffn",
        "128",
        "--vocab",
        "256",
        "--seq",
        "32",
        "--batch",
        "2",
        "--warmup-steps",
        "2",
        "--seconds",
        "3",
        "--eval-seconds",
        "0.5",
    ],
}


def watch_example(tmp_path, name, *flags):
    opts = WatchOptions(
        tmp_path / f"run-{name}{'-'.join(flags)}",
        [GPU],
        {"name": GPU.name},
        RecordingConfig(interval_s=0.05, sources=[FakeSource(busy)]),
    )
    code, w = watch.run(opts, [sys.executable, str(EXAMPLES / name), *TINY[name], "--device", "cpu", *flags])
    assert code == 0
    return {r["phase"]: r for r in w.summary}, w.manifest


@pytest.mark.parametrize("name", sorted(TINY))
def test_an_example_with_its_gpubench_calls_off_is_counted_as_it_counts_itself(tmp_path, monkeypatch, name):
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    own, own_manifest = watch_example(tmp_path, name)
    auto, auto_manifest = watch_example(tmp_path, name, "--no-gpubench")
    assert own["train"]["steps_source"] == "step()" and own["train"]["flops_source"] == "step()"
    assert own_manifest["auto"]["rows"] == {} and own_manifest["auto"]["phases_from"] == "marks"
    assert auto["train"]["steps_source"] == "optimizer" and auto["train"]["flops_source"] == "one step counted"
    assert auto_manifest["auto"]["phases_from"] == "activity"
    # the same step, counted by the example itself and by gpubench with no code change
    reported = {
        e.flops / e.counted
        for e in markfile.read_all(tmp_path / f"run-{name}" / "marks.tsv")
        if isinstance(e, markreader.Steps) and e.counted
    }  # train and eval steps: train's is the larger
    (process,) = auto_manifest["auto"]["processes"]
    assert process["counted"]["model_flops"] == pytest.approx(max(reported), rel=0.01)
