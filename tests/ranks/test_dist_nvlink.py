"""What NVML says about the NVLink links (pynvml patched where it is imported), and what the summary makes of
it: the peak of the active links, the links a collective can use (none across nodes), no peak without NVLink,
and busbw as algbw times the all-reduce factor, for collectives only."""

import math

import pytest


# --- what NVML says about the links, and what the summary makes of it -------------------------------


def test_nvlink_peak_is_what_nvml_reports_for_the_active_links():
    from types import SimpleNamespace
    from unittest import mock

    import pynvml

    from gpubench.record import nvml

    def field(value, ok=True):
        return SimpleNamespace(
            nvmlReturn=pynvml.NVML_SUCCESS if ok else pynvml.NVML_ERROR_NOT_SUPPORTED,
            valueType=pynvml.NVML_VALUE_TYPE_UNSIGNED_INT,
            value=SimpleNamespace(uiVal=value),
        )

    def fields(h, ids):
        if ids[0][0] == pynvml.NVML_FI_DEV_NVLINK_LINK_COUNT:
            return [field(4)]
        return [field(26562), field(26562), field(26562), field(0, ok=False)]

    with mock.patch("gpubench.record.nvml.pynvml", autospec=True) as m:
        for name in (
            "NVML_SUCCESS",
            "NVML_FEATURE_ENABLED",
            "NVML_FI_DEV_NVLINK_LINK_COUNT",
            "NVML_FI_DEV_NVLINK_GET_SPEED",
        ):
            setattr(m, name, getattr(pynvml, name))
        m.nvmlDeviceGetFieldValues.side_effect = fields
        m.nvmlDeviceGetNvLinkState.side_effect = lambda h, link: 0 if link == 2 else 1  # link 2 is down
        m.nvmlDeviceGetNvLinkVersion.return_value = 6
        m.nvmlDeviceGetNvLinkRemotePciInfo.side_effect = lambda h, link: SimpleNamespace(
            busId=f"0000:{link:02X}:00.0".encode()
        )
        m.nvmlDeviceGetNvLinkRemoteDeviceType.side_effect = lambda h, link: (
            pynvml.NVML_NVLINK_DEVICE_TYPE_SWITCH if link == 0 else pynvml.NVML_NVLINK_DEVICE_TYPE_GPU
        )
        info = nvml.nvlink("h0")
    assert info["active_links"] == 3 and info["bytes_per_s"] == 2 * 26562e6  # link 3 gave no speed
    assert [x["active"] for x in info["links"]] == [True, True, False, True]
    assert info["links"][0] == {
        "link": 0,
        "active": True,
        "version": 6,
        "speed_mbps": 26562,
        "peer_bus": "0000:00:00.0",
        "peer": "switch",
    }
    assert info["links"][1]["peer"] == "gpu"


def test_a_collective_is_held_against_the_links_it_can_use_and_across_nodes_against_none():
    from gpubench.ranks.merge import CROSS_NODE, job_nvlink, usable_links

    def link(i, bus, peer="gpu"):
        return {"link": i, "active": True, "speed_mbps": 25000.0, "peer_bus": bus, "peer": peer}

    info = {
        "nvlink": {
            "links": [link(i, "0000:1B:00.0") for i in range(4)]  # to a GPU of the job
            + [link(i, "0000:2C:00.0") for i in range(4, 8)]  # to a GPU the job does not use
            + [link(i, "0000:9A:00.0", "switch") for i in range(8, 10)]
        }
    }  # through a switch
    job = {"nodes": 1, "buses": {"0000:1A:00.0", "0000:1B:00.0"}}
    assert [x["link"] for x in usable_links(info, job)] == [0, 1, 2, 3, 8, 9]
    assert job_nvlink(info, job) == 6 * 25000e6
    assert usable_links(info, {"nodes": 2, "buses": job["buses"]}) == [] and "2 nodes" in CROSS_NODE.format(nodes=2)


def test_a_gpu_without_nvlink_has_no_nvlink_peak():
    from gpubench.truth.peaks import nvlink_peak

    assert nvlink_peak({"links": [], "active_links": 0, "bytes_per_s": None}) == {}
    assert nvlink_peak(None) == {}


def test_busbw_is_algbw_times_the_all_reduce_factor_and_only_for_collectives():
    from gpubench.read.summary import derive
    from gpubench.show.figures.common import work_fraction

    peaks = {"datasheet": {"nvlink": 450e9}}
    res = {"kernel_ms": 4.0, "link_bytes_per_call": 2**30, "bus_factor": 2 * 7 / 8, "bound": "interconnect"}
    d = derive(res, peaks)
    assert d["algbw_gbps"] == pytest.approx(2**30 / 4e-3 / 1e9)
    assert d["busbw_gbps"] == pytest.approx(d["algbw_gbps"] * 1.75)
    assert d["nvlink_pct"] == pytest.approx(100 * d["busbw_gbps"] / 450)
    assert math.isnan(d["link_pct"]) and math.isnan(d["mfu_pct"])
    assert work_fraction({**res, **d}) == ("NVLink", d["nvlink_pct"])
    host = derive({**res, "bound": "link"}, {"datasheet": {"link": 63e9, "nvlink": 450e9}})
    assert math.isnan(host["busbw_gbps"]) and math.isnan(host["nvlink_pct"])
