"""tools/truth/gpu.py's arithmetic on the CPU: a calibration point and a column's lag, from rows made to hold
known answers (its GPU path runs on a GPU; its dry run, `--dry-run`, on any machine)."""

import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from gpubench.truth import ceiling
from tools.truth import device, probe

ROOT = Path(__file__).resolve().parents[2]


def rows_of(value, t0=0.0, t1=6.0, dt=0.1, clock=1830.0):
    out, k = [], 0
    while t0 + (k + 1) * dt <= t1 + 1e-9:
        a, b = t0 + k * dt, t0 + (k + 1) * dt
        out.append({"t_start_s": a, "t_end_s": b, "gpu": 0, "sm_clock_mhz": clock, **value(a, b)})
        k += 1
    return out


def test_a_point_is_the_gemms_rate_over_the_bare_ceiling_of_its_window():
    dev = SimpleNamespace(ceiling=ceiling.Ceiling("X", 1830.0, {"bf16_tensor": 989.4e12}))
    rows = rows_of(lambda a, b: {"tensor_active_pct": 90.0, "hmma_tensor_util_pct": 90.0, "fp32_active_pct": 0.0})
    p = probe.point(rows, (1.0, 3.0), 0.9 * 0.8 * 989.4e12 * 2.0, "bf16", dev)  # 80% of what 90% active allows
    assert p["factor"] == pytest.approx(0.8) and p["rows"] == 18  # the rows from 0.2 s into the window
    assert set(p["moved"]) == {"hmma_tensor_util_pct", "tensor_active_pct"}  # not FP32's, which read 0


def test_a_point_leaves_out_the_stale_gpm_rows_of_its_window():
    """A GPM pair with no refresh reads every activity 0 and DRAM nothing in the middle of busy work (a 1x1
    convolution on an H200: 1.347 of the datasheet rate with two such rows in its window, 0.962 without)."""
    dev = SimpleNamespace(ceiling=ceiling.Ceiling("X", 1830.0, {"bf16_tensor": 989.4e12}))
    busy = {"sm_active_pct": 95.0, "sm_occupancy_pct": 14.0, "tensor_active_pct": 90.0, "dram_active_pct": 17.0}
    stale = dict.fromkeys(("sm_active_pct", "sm_occupancy_pct", "tensor_active_pct", "dram_active_pct"), 0.0)
    rows = rows_of(lambda a, b: stale if 1.95 < a < 2.05 or 2.45 < a < 2.55 else busy)
    p = probe.point(rows, (1.0, 3.0), 0.9 * 0.8 * 989.4e12 * 2.0, "bf16", dev)
    assert p["factor"] == pytest.approx(0.8) and p["rows"] == 16  # 18 rows, less the two stale ones
    idle = rows_of(lambda a, b: dict(stale, dram_active_pct=0.0005))  # an idle GPU still moves DRAM: a reading
    assert probe.point(idle, (1.0, 3.0), 1.0, "bf16", dev)["rows"] == 18


def test_the_lag_of_a_column_is_found_at_known_edges():
    edges = [(1.0 + k, 1.5 + k) for k in range(4)]

    def busy(a, b, lag=0.12):
        share = sum(max(0.0, min(b - lag, off) - max(a - lag, on)) for on, off in edges) / (b - a)
        return {"sm_active_pct": 100.0 * share}

    found = probe.lags(rows_of(busy), edges)["sm_active_pct"]
    assert found["lag_p50_s"] == pytest.approx(0.12, abs=1e-6) and found["edges"] >= 8
    assert 0.05 < found["trail_s"] <= 0.12  # a row begun after the GPU stopped still reads it


def test_a_job_past_its_time_gets_ctrl_c_then_a_kill_and_one_on_time_its_exit_code(tmp_path):
    import subprocess
    import time

    said = tmp_path / "interrupted"
    polite = (
        f"import signal, sys, time\nsignal.signal(signal.SIGINT, lambda *a: (open({str(said)!r}, 'w').close(), "
        "sys.exit(3)))\ntime.sleep(30)"
    )
    stubborn = "import signal, time\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\ntime.sleep(30)"
    t0 = time.monotonic()
    for code, grace in ((polite, 10.0), (stubborn, 0.5)):
        child = subprocess.Popen([sys.executable, "-c", code], start_new_session=True)
        time.sleep(0.5)  # its handler in place
        assert probe.bounded(child, 1.0, grace) is None and child.poll() is not None
    assert said.exists() and time.monotonic() - t0 < 10  # Ctrl-C reached the first: it wrote what it had
    done = subprocess.Popen([sys.executable, "-c", "raise SystemExit(4)"], start_new_session=True)
    assert probe.bounded(done, 10.0) == 4


def _nvml_refusing(refused_id: int, calls: list):
    """NVML's GPM calls faked: a sample is taken or not, and a request is refused whole where it holds
    refused_id (a driver that does not know it) or pairs a sample never taken."""
    import itertools

    import pynvml

    from gpubench.record import nvml

    ticks = itertools.count()

    def metrics(s1, s2, ids):
        calls.append(list(ids))
        if not (s1.get("t") is not None and s2.get("t") is not None) or refused_id in ids:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_INVALID_ARGUMENT)
        return [float(i) for i in ids]

    from unittest import mock

    return [
        mock.patch.object(nvml, "gpm_sample_alloc", lambda: {"t": None}),
        mock.patch.object(nvml, "gpm_sample_get", lambda h, s: s.update(t=next(ticks))),
        mock.patch.object(nvml, "gpm_sample_free", lambda s: None),
        mock.patch.object(nvml, "gpm_metrics", metrics),
    ]


def test_a_gpm_id_the_driver_refuses_is_dropped_and_named_and_the_rest_are_read(capsys):
    import math

    calls = []
    patches = _nvml_refusing(probe.COUNTERS["dmma_cycles_active"], calls)
    for p in patches:
        p.start()
    try:
        gpm = device.GpmCounters("h0", probe.COUNTERS)
        first = gpm.read()  # the first read pairs a sample taken when the counters were opened: no empty one
        second = gpm.read()
    finally:
        for p in patches:
            p.stop()
    assert list(gpm.refused) == ["dmma_cycles_active"] and "Invalid Argument" in gpm.refused["dmma_cycles_active"]
    for values in (first, second):
        assert math.isnan(values["dmma_cycles_active"]) and set(values) == set(probe.COUNTERS)
        assert values["tensor_active_pct"] == probe.COUNTERS["tensor_active_pct"]  # the others read on
    # the whole request, then each id alone once, then the kept ones: the second read asks only those
    assert calls[0] == list(probe.COUNTERS.values())
    assert [len(c) for c in calls[1 : 1 + len(probe.COUNTERS)]] == [1] * len(probe.COUNTERS)
    assert calls[-1] == [i for c, i in probe.COUNTERS.items() if c != "dmma_cycles_active"]
    assert "dmma_cycles_active" in capsys.readouterr().err  # said, not silent


def test_a_refusal_of_every_id_alone_is_not_an_ids_fault_and_is_raised():
    import pynvml

    calls = []
    patches = _nvml_refusing(-1, calls)
    for p in patches:
        p.start()
    try:
        gpm = device.GpmCounters("h0", {"sm_active_pct": 2, "tensor_active_pct": 5})
        gpm._prev["t"] = None  # as if the first sample had never been taken
        with pytest.raises(pynvml.NVMLError):
            gpm.read()
    finally:
        for p in patches:
            p.stop()
    assert gpm.refused == {}


def test_the_broad_set_holds_every_kind_of_tensor_work_in_each_dtype_and_shrinks_for_the_dry_run():
    """tools.truth.gpu --broad: products of every shape, attention both ways and both passes, convolutions dense to
    depthwise, FP8 and TF32 apart; the dry run builds the same set on the CPU, shrunk, and counts its FLOPs."""
    torch = pytest.importorskip("torch")
    from tools.truth import kernels as truth_kernels

    import gpubench

    found = truth_kernels.kernels(torch)
    labels = [label for label, _, _ in found]
    assert len(set(labels)) == len(labels)
    assert {dtype for _, dtype, _ in found} == set(ceiling.TENSOR_DTYPES)
    for kind in (
        "mm 16x",
        "bmm",
        "+bias",
        "causal forward",
        "causal backward",
        "x128 backward",
        "conv dense",
        "conv depthwise",
        "conv groups",
        "_scaled_mm",
        "tf32",
    ):
        assert any(kind in label for label in labels), kind
    small = {label: make for label, _, make in truth_kernels.kernels(torch, "cpu", 16)}
    assert list(small) == labels  # the labels name the full sizes either way
    # 512³ at 1/16 of 8192³; a 7x7 depthwise convolution of 8 x 24 channels x 3² pixels, forward: one
    # multiply-add per weight tap and output element
    assert gpubench.count_flops(small["mm 8192x8192x8192 bf16"]()).hardware == 2 * 512**3
    assert gpubench.count_flops(small["conv depthwise 7x7 128x384->384x56x56 forward bf16"]()).hardware == (
        2 * 8 * 24 * 3 * 3 * 49
    )


def test_the_committed_points_are_what_their_committed_samples_give(tmp_path):
    """Each points file of tools/truth/gpu.py, made again from the raw samples beside it by today's point()
    (python -m tools.truth.calibrate --repoint), is the file as committed: no point is a number its rows do not give."""
    import json
    import shutil

    from tools.truth import calibrate as calibrate_tensor

    files = sorted((ROOT / "results" / "calibration").glob("points-*.json"))
    assert files
    for path in files:
        data = json.loads(path.read_text())
        shutil.copy(path, tmp_path / path.name)
        shutil.copy(path.parent / data["samples"], tmp_path / data["samples"])
        calibrate_tensor.repoint(tmp_path / path.name)
        assert (tmp_path / path.name).read_text() == path.read_text(), path.name
