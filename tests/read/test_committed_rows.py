"""Committed summaries as a reader takes them: each suite decode row names the unit its launch ran on, each phase
of a bf16 or fp16 watch carries an HFU or says why it has none, and summarizing a committed run again changes
nothing."""

from __future__ import annotations

import json
from pathlib import Path

from gpubench.metrics import finite
from gpubench.read.summary import row_label

ROOT = Path(__file__).resolve().parents[2]
RUNS = sorted(p.parent for p in (ROOT / "results").glob("*/summary.json"))


def test_every_committed_suite_row_names_the_unit_its_launch_ran_on():
    """MFU divides by the peak of the unit that ran the FLOPs, and only tensor work is held to the tensor ceiling:
    a decode whose launch ran on CUDA cores (the FMA tiles, the CuPy kernel) is FP32 work. The H100's reference
    run was recorded saying bf16_tensor for its FMA tiles at batch 1 (MFU 0.31% against a ceiling of 0.02%)."""
    from gpubench.kernels import decode

    wrong = []
    for run in RUNS:
        for row in json.loads((run / "summary.json").read_text()):
            if row.get("family") == "decode" and row.get("unit") != decode.unit_of(row["impl"], row.get("launch", "")):
                wrong.append(f"{run.name} {row_label(row)}: {row.get('unit')} for '{row.get('launch')}'")
    assert wrong == []


def test_every_watch_row_of_a_bf16_or_fp16_job_carries_an_hfu_or_says_why_it_has_none():
    """A row that counts FLOPs (an MFU) of a job whose --dtype names the tensor pipes is held to the ceiling by its
    HFU: where it has none, hfu_unknown or hfu_withheld says why, so no row escapes the bound unsaid."""
    rows = 0
    for run in RUNS:
        manifest = json.loads((run / "manifest.json").read_text())
        if manifest.get("kind") != "watch" or manifest.get("dtype", "bf16") not in ("bf16", "fp16"):
            continue
        for row in json.loads((run / "summary.json").read_text()):
            if row.get("kind") == "phase" and finite(row.get("mfu_pct")):
                rows += 1
                assert finite(row.get("hfu_pct")) or row.get("hfu_unknown") or row.get("hfu_withheld"), (
                    run.name,
                    row["phase"],
                )
    assert rows > 100


def test_summarizing_a_committed_run_again_changes_nothing(tmp_path):
    """tools/runs/resummarize.py over its own output: every computed column is computed anew, none carried over as
    a fact (a column carried so would move, or keep a number of an earlier day)."""
    import shutil
    import subprocess
    import sys

    runs = [tmp_path / name for name in ("h200-x2-20261129-154637", "watch-visible1-h200-x2")]
    for run in runs:
        shutil.copytree(ROOT / "results" / run.name, run, ignore=shutil.ignore_patterns("figures", "report.*"))
    once = []
    for _ in range(2):
        r = subprocess.run(
            [sys.executable, "-m", "tools.runs.resummarize", *map(str, runs)],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=600,
        )
        assert r.returncode == 0, r.stderr
        once.append([(run / "summary.json").read_text() for run in runs])
    assert once[0] == once[1]
    assert once[0][0] == (ROOT / "results" / runs[0].name / "summary.json").read_text()  # as committed
