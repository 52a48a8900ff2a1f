"""The README's CUPTI part is made from the committed comparison: GPM and CUPTI side by side, and a verdict
per column held to one stated rule."""

import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def tables():
    from tools.readme import cupti as tables

    return tables


def committed(tmp_path, monkeypatch, tables, gpm_rows, cupti_rows, costs=None):
    runs = {}
    for kind, rows in (("gpm", gpm_rows), ("cupti", cupti_rows)):
        d = tmp_path / "results" / f"profiling-{kind}-h100-80gb-hbm3"
        d.mkdir(parents=True)
        (d / "manifest.json").write_text("{}")
        manifest = {
            "sources": {
                "columns": {
                    "sm_active_pct": {
                        "source": "cupti",
                        "resolution": "CUPTI PM sampling of sm__cycles_active.avg.pct_of_peak_sustained_elapsed, "
                        "one sample every 10 ms; a row ...",
                    }
                }
            }
        }
        runs[str(d)] = (manifest if kind == "cupti" else {}, [], rows)
    monkeypatch.setattr(tables, "load_run", lambda p: runs[str(p)])
    if costs:
        (tmp_path / "results" / "logs").mkdir()
        (tmp_path / "results" / "logs" / "cupti-h100-80gb-hbm3.json").write_text(json.dumps(costs))
    return tmp_path / "results"


def row(scenario, sm, occ=float("nan"), tensor=0.0, dram=0.0, fp32=float("nan")):
    return {
        "scenario": scenario,
        "sm_active_pct": sm,
        "sm_occupancy_pct": occ,
        "tensor_active_pct": tensor,
        "dram_active_pct": dram,
        "fp32_active_pct": fp32,
    }


def test_nothing_committed_says_how_to_make_it(tables, tmp_path):
    assert "no comparison committed yet" in tables.cupti_table(tmp_path)


def test_side_by_side_with_a_verdict_per_column(tables, tmp_path, monkeypatch):
    results = committed(
        tmp_path,
        monkeypatch,
        tables,
        [
            row("spin-1thread", 0.76, 0.012),
            row("copy-torch", 99.0, 78.0, 0.0, 90.0),
            row("gemm-torch", 97.0, 14.0, 93.0, 26.0),
        ],
        [
            row("spin-1thread", 0.80, 0.012),
            row("copy-torch", 99.0, 78.0, 0.0, 45.0),
            row("gemm-torch", 96.0, 14.5, 91.0, 25.0),
        ],
        costs={
            "selfcheck": {"process_mib": 512.0, "in_compute_processes": True},
            "selfcheck_nobody": {"used": ["nvml"], "unavailable": {"cupti": "the driver lets only"}},
            "watch": {"summary": [{"phase": "run", "sm_active_pct": 97.0, "tensor_active_pct": 92.0}]},
            "overhead": {"cupti_pct": 0.4, "gpm_pct": 0.1, "pairs": 6, "clock_off_mhz": 1755, "clock_cupti_mhz": 1755},
            "two_readers": [{"case": "gpm then cupti", "said": "the second used cupti"}],
        },
    )
    text = tables.cupti_table(results)
    assert "| `spin-1thread` | 0.76% / 0.8% |" in text
    assert "| `copy-torch` |" in text and "90% / 45% ✗" in text  # DRAM off by half: marked
    assert "SM active matches GPM in every scenario (`sm__cycles_active.avg.pct_of_peak_sustained_elapsed`)" in text
    assert "DRAM active does not match GPM (`copy-torch`;" in text
    assert "FP32 active: not offered by PM sampling here, so not recorded" in text
    assert "512 MiB of device memory once CUPTI samples (a CUDA context)" in text
    assert "an ordinary user (nobody) is refused: the driver lets only" in text
    assert "read SM active 97% and tensor active 92%: the watched job's kernels are seen from outside it" in text
    assert "+0.40% slower with the CUPTI source" in text and "gpm then cupti: the second used cupti" in text


@pytest.mark.parametrize(
    "gpm, cupti, ok", [(0.76, 0.8, True), (0.76, 1.4, False), (0.0, 0.4, True), (90.0, 81.0, True), (90.0, 80.0, False)]
)
def test_the_rule(tables, gpm, cupti, ok):
    assert tables.close_enough(gpm, cupti) is ok
