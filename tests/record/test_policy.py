"""Which profiling source a recording uses: GPM, then DCGM, then CUPTI, the first that opens; the others say why."""

from unittest import mock

import pytest

from gpubench.record.sources import SourceUnavailable, policy
from gpubench.record.sources.cupti import CuptiSource
from gpubench.record.sources.dcgm import DcgmSource
from gpubench.record.sources.gpm import GpmSource
from gpubench.record.sources.nvml_source import NvmlSource
from gpubench.record.sources.smi import SmiSource


@pytest.fixture
def opens(monkeypatch):
    """Every source opens unless named in `fail`; records which were opened."""
    state = {"fail": {}, "opened": []}

    def fake_open(self, gpus):
        if self.name in state["fail"]:
            raise SourceUnavailable(state["fail"][self.name])
        state["opened"].append(self.name)

    for cls in (NvmlSource, GpmSource, DcgmSource, CuptiSource, SmiSource):
        monkeypatch.setattr(cls, "open", fake_open)
    return state


def test_auto_prefers_gpm_where_the_gpu_supports_it(opens):
    with mock.patch.object(GpmSource, "supported", return_value=True):
        got = policy.open_sources([0])
    assert [s.name for s in got.sources] == ["nvml", "gpm", "smi"]
    assert opens["opened"] == ["nvml", "gpm", "smi"]  # DCGM and CUPTI are not even tried
    for other in ("dcgm", "cupti"):
        assert got.unavailable[other] == (
            "NVML GPM works on this GPU and reads the same counters at full resolution, "
            f"with no daemon and no CUDA context (--profiling {other} to use {other} "
            "instead)"
        )


def test_auto_uses_dcgm_where_gpm_is_not_supported_and_says_why_not_gpm_or_cupti(opens):
    with mock.patch.object(GpmSource, "supported", return_value=False):
        got = policy.open_sources([0])
    assert [s.name for s in got.sources] == ["nvml", "dcgm", "smi"]
    assert got.unavailable["gpm"].startswith("GPU 0 does not support NVML GPM")
    assert got.unavailable["cupti"] == "DCGM reads the same counters here (--profiling cupti to use cupti instead)"


def test_auto_falls_back_to_cupti_when_neither_gpm_nor_dcgm_opens(opens):
    opens["fail"]["dcgm"] = "`dcgmi` is not on PATH: install DCGM"
    with mock.patch.object(GpmSource, "supported", return_value=False):
        got = policy.open_sources([0, 1])
    assert [s.name for s in got.sources] == ["nvml", "cupti", "smi"]
    assert got.unavailable == {
        "gpm": "a GPU sampled " + policy.UNSUPPORTED,
        "dcgm": "`dcgmi` is not on PATH: install DCGM",
    }


def test_counters_held_elsewhere_move_auto_on_to_the_next_reader(opens):
    """GPM locked out by a DCGM host engine: auto reads through DCGM, the engine that holds them."""
    opens["fail"]["gpm"] = (
        "the GPU's performance counters serve one reader at a time and the DCGM host engine holds them"
    )
    with mock.patch.object(GpmSource, "supported", return_value=True):
        got = policy.open_sources([0])
    assert [s.name for s in got.sources] == ["nvml", "dcgm", "smi"]
    assert "DCGM host engine holds them" in got.unavailable["gpm"]


def test_cupti_on_request_only_and_its_notes_reach_the_recording(opens, monkeypatch):
    fake_open = CuptiSource.open

    def open_with_a_note(self, gpus):
        fake_open(self, gpus)
        self.notes.append("GPU 0: CUPTI needed a CUDA context in this process (…)")

    monkeypatch.setattr(CuptiSource, "open", open_with_a_note)
    got = policy.open_sources([0], profiling="cupti")
    assert [s.name for s in got.sources] == ["nvml", "cupti", "smi"]
    assert opens["opened"] == ["nvml", "cupti", "smi"] and "gpm" not in got.unavailable
    assert "CUPTI needed a CUDA context" in got.notes[0]
    assert "cupti" in policy.PROFILING_CHOICES


def test_none_and_no_smi_say_why(opens):
    got = policy.open_sources([0], profiling="none", smi=False)
    assert [s.name for s in got.sources] == ["nvml"]
    assert got.unavailable == {
        "gpm": "--profiling none",
        "dcgm": "--profiling none",
        "cupti": "--profiling none",
        "smi": "--no-smi",
    }


def test_an_interval_faster_than_the_counters_refresh_is_raised_with_a_note(opens):
    got = policy.open_sources([0], profiling="gpm", interval_s=0.02)
    assert got.interval_s == 0.1 and "raised from 0.02 s to 0.1 s" in got.notes[0]
    assert [s.interval_ms for s in got.sources if s.name == "smi"] == [100]


def test_every_column_records_its_source_and_resolution(opens):
    got = policy.open_sources([0], profiling="gpm")
    cols = policy.describe(got.sources)
    assert cols["sm_active_pct"]["source"] == "gpm"
    assert cols["gpu_util_pct"]["resolution"].startswith("1 percentage point")
    assert "0.1 percentage point" in DcgmSource.resolution["sm_active_pct"]
