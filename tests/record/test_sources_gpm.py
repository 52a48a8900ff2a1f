"""The GPM source with gpubench's NVML door patched: every read a fresh interval chained to the last, an id the
driver refuses named once while the other columns read on, a pair of samples with no refresh between them no
reading, and a GPU without GPM or a GPM that cannot start given as a reason."""

import math
from unittest import mock

import pynvml
import pytest
from test_sources_nvml import nvml_error

from gpubench.record import nvml
from gpubench.record.sources import SourceUnavailable
from gpubench.record.sources.gpm import GpmSource


def _gpm_patches(values, supported=True):
    ticks = iter(range(10**6))
    return [
        mock.patch.object(nvml, "handle", lambda g: f"h{g}"),
        mock.patch.object(nvml, "gpm_supported", lambda h: supported),
        mock.patch.object(nvml, "gpm_sample_alloc", lambda: {"id": next(ticks)}),
        mock.patch.object(nvml, "gpm_sample_free", mock.Mock()),
        mock.patch.object(nvml, "gpm_sample_get", lambda h, s: s.update(t=next(ticks))),
        mock.patch.object(nvml, "gpm_metrics", mock.Mock(side_effect=values)),
    ]


def test_gpm_every_read_is_a_fresh_interval_chained_to_the_last():
    calls = []

    def metrics(s1, s2, ids):
        calls.append((s1["t"], s2["t"]))
        return [float(len(calls))] + [math.nan] * (len(ids) - 1)

    patches = _gpm_patches(metrics)
    for p in patches:
        p.start()
    try:
        src = GpmSource()
        src.open([0])
        reads = [src.read()[0] for _ in range(3)]
    finally:
        for p in patches:
            p.stop()
    # the sampler never reads faster than min_interval_s, so no read repeats the last interval
    assert [r["graphics_active_pct"] for r in reads] == [1.0, 2.0, 3.0]
    assert math.isnan(reads[0]["sm_active_pct"])
    # each interval starts where the previous one ended: no gap between them
    assert calls[1][0] == calls[0][1] and calls[2][0] == calls[1][1]
    assert GpmSource.min_interval_s == 0.1


def test_a_gpm_id_the_driver_refuses_is_named_once_and_the_other_columns_read_on():
    from gpubench.record.sources.gpm import METRIC_IDS, MetricsRefused

    refused = METRIC_IDS["fp16_active_pct"]

    def metrics(s1, s2, ids):  # a driver that does not know one id refuses every request that holds it
        if refused in ids:
            raise nvml_error(pynvml.NVML_ERROR_INVALID_ARGUMENT)
        return [float(i) for i in ids]

    patches = _gpm_patches(metrics)
    for p in patches:
        p.start()
    try:
        src = GpmSource()
        src.open([0])
        with pytest.raises(MetricsRefused, match=r"fp16_active_pct \(id 13\)"):
            src.read()  # the sampler leaves this row empty and keeps the source
        values = src.read()[0]
    finally:
        for p in patches:
            p.stop()
    assert math.isnan(values["fp16_active_pct"]) and set(values) == set(METRIC_IDS)
    assert values["tensor_active_pct"] == float(METRIC_IDS["tensor_active_pct"])


def test_gpm_refused_whole_by_every_id_alone_is_raised_as_it_came():
    def metrics(s1, s2, ids):
        raise nvml_error(pynvml.NVML_ERROR_INVALID_ARGUMENT)

    patches = _gpm_patches(metrics)
    for p in patches:
        p.start()
    try:
        src = GpmSource()
        src.open([0])
        with pytest.raises(pynvml.NVMLError):
            src.read()
    finally:
        for p in patches:
            p.stop()


def test_a_gpm_pair_with_no_refresh_between_is_no_reading_and_the_next_pairs_with_the_last_good_sample():
    """Two samples the driver had not refreshed between: every activity exactly 0, DRAM 0 or missing, in busy
    work as recorded on an H200. An idle GPU's row (DRAM still moving a little) stays a reading of 0."""
    calls = []
    busy = {
        "graphics_active_pct": 97.0,
        "sm_active_pct": 83.0,
        "sm_occupancy_pct": 40.0,
        "tensor_active_pct": 26.0,
        "dram_active_pct": 37.0,
    }
    answers = [
        busy,
        dict.fromkeys(busy, 0.0),
        {**dict.fromkeys(busy, 0.0), "dram_active_pct": math.nan},
        busy,
        {**dict.fromkeys(busy, 0.0), "dram_active_pct": 0.0004},
    ]

    def metrics(s1, s2, ids):
        calls.append((s1["t"], s2["t"]))
        got = answers[len(calls) - 1]
        return [got.get(c, math.nan) for c in GpmSource.columns]

    patches = _gpm_patches(metrics)
    for p in patches:
        p.start()
    try:
        src = GpmSource()
        src.open([0])
        reads = [src.read()[0] for _ in answers]
    finally:
        for p in patches:
            p.stop()
    assert reads[0]["tensor_active_pct"] == 26.0 and reads[3]["sm_active_pct"] == 83.0
    assert all(math.isnan(v) for r in reads[1:3] for v in r.values())  # missing, never 0
    assert reads[4]["sm_active_pct"] == 0.0 and reads[4]["dram_active_pct"] == 0.0004  # idle is a reading
    assert calls[1][0] == calls[2][0] == calls[3][0] == calls[0][1]  # paired with the last good sample
    assert calls[4][0] == calls[3][1]


def test_gpm_unsupported_gpu_names_the_reason():
    patches = _gpm_patches(lambda *a: [], supported=False)
    for p in patches:
        p.start()
    try:
        with pytest.raises(SourceUnavailable, match="Hopper or newer"):
            GpmSource().open([0])
    finally:
        for p in patches:
            p.stop()


def test_an_nvml_error_while_opening_gpm_is_a_reason_not_a_traceback():
    patches = _gpm_patches(lambda *a: [])
    for p in patches:
        p.start()
    try:
        with mock.patch.object(nvml, "gpm_sample_alloc", side_effect=nvml_error(pynvml.NVML_ERROR_INSUFFICIENT_SIZE)):
            with pytest.raises(SourceUnavailable, match="NVML GPM could not start"):
                GpmSource().open([0])
    finally:
        for p in patches:
            p.stop()
