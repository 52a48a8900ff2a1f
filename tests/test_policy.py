"""Which profiling source a recording uses: GPM where it works, else DCGM, GPM again if dcgmi fails."""

from unittest import mock

import pytest

from gpubench.record.sources import SourceUnavailable, policy
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

    for cls in (NvmlSource, GpmSource, DcgmSource, SmiSource):
        monkeypatch.setattr(cls, "open", fake_open)
    return state


def test_auto_prefers_gpm_where_the_gpu_supports_it(opens):
    with mock.patch.object(GpmSource, "supported", return_value=True):
        got = policy.open_sources([0])
    assert [s.name for s in got.sources] == ["nvml", "gpm", "smi"]
    assert "finer resolution" in got.unavailable["dcgm"]


def test_auto_uses_dcgm_where_gpm_is_not_supported(opens):
    with mock.patch.object(GpmSource, "supported", return_value=False):
        got = policy.open_sources([0])
    assert [s.name for s in got.sources] == ["nvml", "dcgm", "smi"]


def test_auto_falls_back_to_gpm_when_dcgmi_fails_to_start(opens):
    opens["fail"]["dcgm"] = "`dcgmi` stopped at once: unable to connect"
    with mock.patch.object(GpmSource, "supported", return_value=False):
        got = policy.open_sources([0])
    assert [s.name for s in got.sources] == ["nvml", "gpm", "smi"]
    assert got.unavailable == {"dcgm": "`dcgmi` stopped at once: unable to connect"}


def test_none_and_no_smi_say_why(opens):
    got = policy.open_sources([0], profiling="none", smi=False)
    assert [s.name for s in got.sources] == ["nvml"]
    assert got.unavailable == {"gpm": "--profiling none", "dcgm": "--profiling none", "smi": "--no-smi"}


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
