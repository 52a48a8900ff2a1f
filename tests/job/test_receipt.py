"""The receipt at the end of a watch (gpubench.read.receipt): recomputed by hand from committed summaries, printed
after the table, kept in the manifest, read back by the report, and its price refused in one sentence when it is
not one."""

from __future__ import annotations

import io
import json
import math
import os
import re
import sys
import textwrap
import time
from pathlib import Path

import pytest
from fakes import GPU, FakeSource
from rich.console import Console

from gpubench.cli import main
from gpubench.inside import markwriter
from gpubench.job import watchcmd as watch
from gpubench.job.watcher import WatchOptions
from gpubench.read.receipt import lines, receipt
from gpubench.record.config import RecordingConfig
from gpubench.record.rundir import RunDirError, load_run, read_manifest, read_summary
from gpubench.show import markdown as md
from gpubench.show.report import blocks

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "results"
INFO = {
    "nvml_index": 0,
    "name": GPU.name,
    "uuid": GPU.uuid,
    "memory_mib": 81559,
    "driver": "580.0",
    "cuda_driver": "13.0",
}


def _h(row: dict) -> float:
    return row["seconds"] / 3600


def _known(value) -> bool:
    return isinstance(value, (int, float)) and math.isfinite(value)


# --- from the committed summaries ------------------------------------------------------------------


def test_a_committed_summary_gives_its_receipt_again_by_hand():
    """An H200 job with a phase that recurs (train, busy, train): every figure summed by hand from summary.csv,
    and summary.json gives the same receipt."""
    run = RESULTS / "bound-train_eval-h200"
    rows = read_summary(run / "summary.csv")
    r = receipt(rows, price_per_gpu_hour=2.0)
    by = {row["phase"]: row for row in rows}
    assert r["gpus"] == 1
    wall = max(row["t_end"] for row in rows) - min(row["t_start"] for row in rows)
    assert r["wall_s"] == pytest.approx(wall) and r["gpu_hours"] == pytest.approx(wall / 3600)
    # train has two spans with busy between them: its time is its windows, not the reach of its start and end
    train = by["train"]
    assert train["spans"] == 2 and train["t_end"] - train["t_start"] > train["seconds"] + by["busy"]["seconds"]
    phases = {e["phase"]: e for e in r["phases"]}
    assert list(phases) == ["start-up", "warmup", "train", "busy", "teardown"]
    assert phases["train"]["gpu_hours"] == pytest.approx(_h(train))
    measured = sum(_h(row) for row in rows)
    assert r["measured_gpu_hours"] == pytest.approx(measured)
    assert r["unmeasured_gpu_hours"] == pytest.approx(wall / 3600 - measured)
    # the warmup was too short for a tensor ceiling: not known, never counted as waste or as work
    assert not _known(by["warmup"]["tensor_ceiling_pct"]) and phases["warmup"]["no_tensor_work_gpu_hours"] is None
    waste = sum(_h(row) * (1 - row["tensor_ceiling_pct"] / 100) for row in rows if _known(row["tensor_ceiling_pct"]))
    assert r["no_tensor_work_gpu_hours"] == pytest.approx(waste)
    assert r["tensor_not_known_gpu_hours"] == pytest.approx(_h(by["warmup"]))
    with_ceiling = measured - _h(by["warmup"])
    assert r["no_tensor_work_pct"] == pytest.approx(100 * waste / with_ceiling)
    # MFU: train's alone is known; start-up and teardown hold no step (0); warmup and busy are not known
    assert r["mfu_pct"] == pytest.approx(
        train["mfu_pct"] * _h(train) / sum(_h(by[p]) for p in ("start-up", "train", "teardown"))
    )
    assert r["mfu_not_known_gpu_hours"] == pytest.approx(_h(by["warmup"]) + _h(by["busy"]))
    assert r["energy_kwh"] == pytest.approx(sum(row["energy_used_j"] for row in rows) / 3.6e6)
    util = [row for row in rows if _known(row["gpu_util_mean_pct"])]
    assert r["idle_pct"] == pytest.approx(
        100 * sum(_h(row) * (1 - row["gpu_util_mean_pct"] / 100) for row in util) / sum(_h(row) for row in util)
    )
    assert r["cost"] == pytest.approx(2.0 * wall / 3600) and r["no_tensor_work_cost"] == pytest.approx(2.0 * waste)
    again = receipt(json.loads((run / "summary.json").read_text()), 2.0)  # its times to the ns, the CSV's to 0.1 ms
    assert again.keys() == r.keys()
    for key, value in r.items():
        if isinstance(value, float):
            assert again[key] == pytest.approx(value, rel=1e-6, abs=1e-7), key


def test_two_gpus_count_twice():
    rows = read_summary(RESULTS / "watch-ddp-slow-rank-h200-x2" / "summary.csv")
    r = receipt(rows)
    assert r["gpus"] == 2 and {e["gpus"] for e in r["phases"]} == {2}
    per_gpu = [
        max(x["t_end"] for x in rows if x["gpu"] == g) - min(x["t_start"] for x in rows if x["gpu"] == g)
        for g in (0, 1)
    ]
    assert r["gpu_hours"] == pytest.approx(sum(per_gpu) / 3600) and r["wall_s"] == pytest.approx(max(per_gpu))
    train = [x for x in rows if x["phase"] == "train"]
    assert r["phases"][[e["phase"] for e in r["phases"]].index("train")]["gpu_hours"] == pytest.approx(
        sum(_h(x) for x in train)
    )
    assert r["cost"] is None and not any("per GPU-hour" in s for s in lines(r))


def test_the_readme_shows_the_receipt_of_a_committed_run():
    """The README's example is what lines() gives for the run and price it names, so it cannot drift."""
    text = (ROOT / "README.md").read_text()
    block = re.search(r"```\n(Receipt: .*?)\n```", text, re.S).group(1)
    lead = text[: text.index(block)][-400:]
    run, price = re.search(r"\(results/([\w-]+)/\)\), at ([\d.]+) per GPU-hour:\n\n```\n$", lead).groups()
    said = lines(receipt(read_summary(RESULTS / run / "summary.csv"), float(price)))
    assert block.splitlines() == [("  " if i else "") + s for i, s in enumerate(said)]
    assert json.loads((RESULTS / run / "manifest.json").read_text())["gpu"]["name"] == "NVIDIA H200"


# --- rows made here ---------------------------------------------------------------------------------


def _row(phase, kind="phase", gpu=0, t=(0.0, 10.0), seconds=9.0, **values):
    return {
        "phase": phase,
        "scenario": phase,
        "kind": kind,
        "gpu": gpu,
        "t_start": t[0],
        "t_end": t[1],
        "seconds": seconds,
        **values,
    }


def test_what_a_row_lacks_is_not_known_and_named():
    rows = [
        _row(
            "start-up",
            "start-up",
            t=(0, 100),
            seconds=99.5,
            gpu_util_mean_pct=0.0,
            tensor_ceiling_pct=0.0,
            energy_used_j=9950.0,
        ),
        _row(
            "train",
            t=(100, 3700),
            seconds=3599.5,
            gpu_util_mean_pct=100.0,
            mfu_pct=40.0,
            tensor_ceiling_pct=50.0,
            energy_used_j=2.5e6,
        ),
        _row(
            "eval",
            t=(3700, 4000),
            seconds=299.5,
            gpu_util_mean_pct=50.0,
            mfu_pct=float("nan"),
            tensor_ceiling_pct=None,
            energy_used_j=None,
        ),
    ]
    r = receipt(rows, 3.0)
    h = [row["seconds"] / 3600 for row in rows]
    assert r["gpu_hours"] == pytest.approx(4000 / 3600) and r["measured_gpu_hours"] == pytest.approx(sum(h))
    assert r["mfu_pct"] == pytest.approx(40.0 * h[1] / (h[0] + h[1])) and r["mfu_not_known_gpu_hours"] == h[2]
    assert r["no_tensor_work_gpu_hours"] == pytest.approx(h[0] + 0.5 * h[1])
    assert r["tensor_not_known_gpu_hours"] == pytest.approx(h[2])
    assert r["energy_kwh"] == pytest.approx((9950 + 2.5e6) / 3.6e6) and r["energy_not_known_gpu_hours"] == h[2]
    assert r["idle_pct"] == pytest.approx(100 * (h[0] + 0.5 * h[2]) / sum(h))
    assert r["cost"] == pytest.approx(3.0 * 4000 / 3600)
    assert r["no_tensor_work_cost"] == pytest.approx(3.0 * (h[0] + 0.5 * h[1]))
    eval_ = r["phases"][2]
    assert eval_["mfu_pct"] is None and eval_["no_tensor_work_gpu_hours"] is None
    head, *items = lines(r, md.text)
    assert head == "Receipt: 1.11 GPU-hours (1 GPU for 66.7 min), 1.11 of them in the phases' measured windows"
    assert items[0] == "by phase: start-up 0.0276, train 1.00 (MFU 40%), eval 0.0832 GPU-h"
    assert items[1] == (
        "MFU 39% over the measured GPU-hours (0 in start-up, teardown and unused GPUs); not known for "
        "0.0832 GPU-h (eval)"
    )
    assert items[2] == "did no tensor work: 0.528 GPU-h, 51% of those measured; not known for 0.0832 GPU-h (eval)"
    assert items[3].startswith("energy 0.697 kWh (not known for 0.0832 GPU-h); idle 6.2% of the measured time")
    assert items[4] == "at 3 per GPU-hour: 3.33 in all, 1.58 of it for GPU-hours that did no tensor work"
    assert receipt([]) is None and lines(None) == []
    blind = receipt([_row("train", mfu_pct=None, tensor_ceiling_pct=float("nan"))], 1.0)
    assert blind["no_tensor_work_gpu_hours"] is None and blind["no_tensor_work_cost"] is None
    assert lines(blind)[2:4] == [
        "MFU not known: no phase has one",
        "tensor work not known: no row has a tensor ceiling",
    ]


def test_a_phase_name_is_text_in_the_report():
    r = receipt([_row("a|*b*", tensor_ceiling_pct=10.0)])
    assert r"a\|\*b\*" in lines(r, md.text)[1]


@pytest.mark.parametrize("price", [-1, float("nan"), float("inf"), "2", True])
def test_a_price_that_is_not_one_is_refused_in_one_sentence(price):
    with pytest.raises(ValueError, match=r"^the price per GPU-hour must be a finite number of 0 or more, got "):
        receipt([_row("train")], price)
    with pytest.raises(ValueError, match="price per GPU-hour"):
        RecordingConfig(price_per_gpu_hour=price)


@pytest.mark.parametrize(
    "text,said",
    [
        ("-1", "must be 0 or more, got -1"),
        ("nan", "must be a finite number"),
        ("inf", "must be a finite number"),
        ("two", "'two' is not a number"),
    ],
)
def test_the_flag_refuses_bad_input_in_one_sentence_and_exit_2(text, said, capsys, tmp_path):
    with pytest.raises(SystemExit) as done:
        main(["watch", "--out", str(tmp_path / "run"), "--price-per-gpu-hour", text, "--", "true"])
    err = capsys.readouterr().err
    assert done.value.code == 2 and not (tmp_path / "run").exists()
    assert f"gpubench watch: error: argument --price-per-gpu-hour: {said}" in err and "Traceback" not in err


def test_the_manifest_refuses_a_price_that_is_not_one(tmp_path):
    path = tmp_path / "manifest.json"
    path.write_text(json.dumps({"kind": "watch", "receipt": {"price_per_gpu_hour": -2}}))
    with pytest.raises(RunDirError, match="receipt.price_per_gpu_hour"):
        read_manifest(path)
    path.write_text(json.dumps({"kind": "watch", "receipt": None}))
    assert read_manifest(path)["receipt"] == {}


# --- a watch with the fake sources ---------------------------------------------------------------------


class Busy(FakeSource):
    """A GPU at 90% GPU-Util, its tensor pipes active 30% at the H100's peak clock, drawing 300 W."""

    columns = ("gpu_util_pct", "sm_active_pct", "tensor_active_pct", "sm_clock_mhz", "power_w", "energy_j")

    def __init__(self):
        super().__init__(
            lambda n: {
                "gpu_util_pct": 90.0,
                "sm_active_pct": 80.0,
                "tensor_active_pct": 30.0,
                "sm_clock_mhz": 1980.0,
                "power_w": 300.0,
                "energy_j": 300.0 * time.monotonic(),
            }
        )


JOB = [
    sys.executable,
    "-c",
    textwrap.dedent("""
    import time, gpubench
    time.sleep(1.2)
    gpubench.mark("train")
    for _ in range(30):
        time.sleep(0.05); gpubench.step(flops=2e12)
    gpubench.mark("eval"); time.sleep(1.2)
"""),
]


@pytest.fixture(scope="module")
def watched(tmp_path_factory):
    """One watch of JOB at 2.5 per GPU-hour, and what it printed at its end."""
    out = tmp_path_factory.mktemp("receipt") / "run"
    env = {"PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    saved = {k: os.environ.get(k) for k in (*env, markwriter.ENV)}
    os.environ.update(env)
    os.environ.pop(markwriter.ENV, None)
    try:
        config = RecordingConfig(
            interval_s=0.05, sources=[Busy()], command=["gpubench", "watch"], price_per_gpu_hour=2.5
        )
        code, w = watch.run(WatchOptions(out, [GPU], INFO, config), JOB)
    finally:
        for k, v in saved.items():
            os.environ.pop(k, None) if v is None else os.environ.__setitem__(k, v)
    console = io.StringIO()
    watch.show(w, Console(file=console, width=200))
    assert code == 0
    return out, w, console.getvalue()


def test_the_watch_prints_its_receipt_after_the_table_and_keeps_it_in_the_manifest(watched):
    out, w, printed = watched
    manifest, _, summary = load_run(out)
    stored = json.loads((out / "manifest.json").read_text())["receipt"]
    again = receipt(summary, 2.5)  # from summary.csv alone
    assert stored["price_per_gpu_hour"] == 2.5 and [e["phase"] for e in stored["phases"]] == [
        r["phase"] for r in summary
    ]
    for key in (
        "gpu_hours",
        "measured_gpu_hours",
        "mfu_pct",
        "no_tensor_work_gpu_hours",
        "energy_kwh",
        "idle_pct",
        "cost",
        "no_tensor_work_cost",
    ):
        assert stored[key] == pytest.approx(again[key], rel=1e-6, abs=1e-7), key  # the CSV's times to 0.1 ms
    assert stored["no_tensor_work_gpu_hours"] > 0 and stored["mfu_pct"] > 0 and stored["idle_pct"] > 0
    said = lines(w.manifest["receipt"])
    text = printed.splitlines()
    at = text.index(said[0])
    assert text[at + 1 : at + len(said)] == ["  " + s for s in said[1:]]
    assert any("MFU" in t for t in text[:at]) and "the command exited with code 0" in text[at + len(said)]
    assert said[-1].startswith("at 2.5 per GPU-hour: ") and "did no tensor work" in said[-1]


def test_the_report_opens_with_the_receipt_at_the_price_of_its_watch(watched):
    out, _, _ = watched
    manifest, _, summary = load_run(out)
    bl = blocks(manifest, summary, set())
    kinds = [b[0] for b in bl]
    at = next(i for i, b in enumerate(bl) if b[0] == "p" and b[1].startswith("**Receipt: "))
    assert at < kinds.index("h2")  # before the summary's table: the first screen
    assert bl[at + 1][0] == "ul" and bl[at + 1][1][-1].startswith("at 2.5 per GPU-hour: ")
    assert bl[at][1] == f"**{lines(receipt(summary, 2.5))[0]}.**"
    suite = dict(manifest, kind="run")
    assert not any(b[0] == "p" and "Receipt" in b[1] for b in blocks(suite, summary, set()))
