"""The CUPTI PM-sampling source with a fake cupti-python (tests/fakecupti.py) patched where it is imported."""

import math
from unittest import mock

import pytest
from fakecupti import World

from gpubench.record import nvml
from gpubench.record.sources import SourceUnavailable, cupti, cupti_library, cupti_metrics, holders
from gpubench.record.sources.holders import CountersBusy

SM = "sm__cycles_active.avg.pct_of_peak_sustained_elapsed"
OCC = "sm__warps_active.avg.pct_of_peak_sustained_elapsed"
TENSOR = "sm__pipe_tensor_cycles_active_realtime.avg.pct_of_peak_sustained_elapsed"
FMA = "sm__pipe_fma_cycles_active_realtime.avg.pct_of_peak_sustained_elapsed"
UUIDS = ["GPU-aaaaaaaa-0000-0000-0000-000000000000", "GPU-bbbbbbbb-0000-0000-0000-000000000000"]


@pytest.fixture
def world(monkeypatch, tmp_path):
    """A machine with two GPUs; NVML's 0 and 1 are CUDA's 0 and 1, and no other process runs."""
    w = World(chips={0: "GH100", 1: "GH100"}, offered={SM, OCC, TENSOR, FMA})
    monkeypatch.setattr(cupti, "load", w.modules)
    monkeypatch.setattr(cupti, "cuda_uuids", lambda: list(UUIDS))
    monkeypatch.setattr(cupti, "libcupti_versions", lambda: {"/venv/nvidia/cu13/lib/libcupti.so.13": 130401})
    monkeypatch.setattr(cupti, "version", lambda dist: "13.4.0")
    monkeypatch.setattr(nvml, "handle", lambda i: i)
    monkeypatch.setattr(nvml, "uuid_of", lambda h: UUIDS[h])
    (tmp_path / "proc").mkdir()
    monkeypatch.setattr(holders, "PROC", tmp_path / "proc")
    return w


def fake_process(proc, pid: int, comm: str, *argv: str):
    d = proc / str(pid)
    d.mkdir()
    (d / "comm").write_text(comm + "\n")
    (d / "cmdline").write_bytes(b"\0".join(a.encode() for a in (argv or (comm,))) + b"\0")


def test_reads_average_the_samples_completed_since_the_last_read(world):
    src = cupti.CuptiSource()
    src.open([0])
    assert world.configured[0]["metrics"] == [SM, OCC, TENSOR, FMA]
    assert world.configured[0]["interval"] == 10_000_000 and world.configured[0]["trigger"] == 1
    world.emit(0, 4, {SM: 100.0, OCC: 50.0, TENSOR: 90.0, FMA: 20.0})
    world.emit(0, 6, {SM: 50.0, OCC: 25.0, TENSOR: 0.0, FMA: 80.0})
    first = src.read()[0]
    assert first["sm_active_pct"] == pytest.approx(70.0) and first["fp32_active_pct"] == pytest.approx(56.0)
    assert first["tensor_active_pct"] == pytest.approx(36.0) and first["sm_occupancy_pct"] == pytest.approx(35.0)
    # no sample completed since: the row is empty, never the last value again
    assert all(math.isnan(v) for v in src.read()[0].values())
    world.emit(0, 1, {SM: 1.0})
    assert src.read()[0]["sm_active_pct"] == 1.0
    src.close()


def test_columns_follow_what_the_chip_offers_and_the_manifest_names_each_metric(world):
    # no percentage for SM activity here, only its raw counters; no tensor metric at all
    world.offered = {"sm__cycles_active.avg", "sm__cycles_elapsed.avg", OCC, FMA}
    src = cupti.CuptiSource()
    src.open([0])
    assert src.columns == ("sm_active_pct", "sm_occupancy_pct", "fp32_active_pct")
    assert "100 x sm__cycles_active.avg / sm__cycles_elapsed.avg" in src.resolution["sm_active_pct"]
    assert FMA in src.resolution["fp32_active_pct"] and "10 ms" in src.resolution["fp32_active_pct"]
    # a ratio of counters adds them up before dividing: 100 x (10 + 30) / (100 + 100)
    world.emit(0, 1, {"sm__cycles_active.avg": 10.0, "sm__cycles_elapsed.avg": 100.0})
    world.emit(0, 1, {"sm__cycles_active.avg": 30.0, "sm__cycles_elapsed.avg": 100.0})
    assert src.read()[0]["sm_active_pct"] == pytest.approx(20.0)
    src.close()


def test_columns_that_do_not_fit_one_pass_are_left_out_least_important_first(world):
    world.per_pass = 2
    src = cupti.CuptiSource()
    src.open([0])
    assert src.columns == ("sm_active_pct", "sm_occupancy_pct")
    src.close()


def test_a_chip_without_sm_activity_is_refused_with_the_reason(world):
    world.offered = {FMA}
    with pytest.raises(SourceUnavailable, match=r"PM sampling on GPU 0 \(GH100\) offers none of the metrics"):
        cupti.CuptiSource().open([0])
    assert world.enabled == set()


def test_a_sample_decoded_twice_is_counted_once(world):
    src = cupti.CuptiSource()
    src.open([0])
    world.emit(0, 2, {SM: 40.0})
    again = list(world.pending[0])
    assert src.read()[0]["sm_active_pct"] == 40.0
    world.pending[0] = again + world.pending.get(0, [])
    world.emit(0, 1, {SM: 10.0})
    assert src.read()[0]["sm_active_pct"] == 10.0
    src.close()


def test_two_gpus_tear_the_profiler_down_once_after_the_last_collector(world):
    src = cupti.CuptiSource()
    src.open([0, 1])
    assert world.enabled == {0, 1}
    src.close()
    src.close()  # safe twice
    assert world.enabled == set() and world.deinits == 1
    assert world.log[-3:] == ["disable 0", "disable 1", "profiler_deinitialize"]


def test_a_gpu_cuda_cannot_see_is_refused(world, monkeypatch):
    monkeypatch.setattr(cupti, "cuda_uuids", lambda: UUIDS[1:])
    with pytest.raises(SourceUnavailable, match="GPU 0 is not visible to CUDA in this process"):
        cupti.CuptiSource().open([0])


def test_without_cupti_python_the_reason_says_what_to_install():
    absent = dict.fromkeys(["cupti", "cupti.cupti", "cupti.pm_sampling", "cupti.profiler_host"])
    with mock.patch.dict("sys.modules", absent):
        with pytest.raises(SourceUnavailable, match=r"cupti-python is not installed .*'gpubench-ladder\[cupti\]'"):
            cupti.CuptiSource().open([0])


def test_an_older_libcupti_than_cupti_python_needs_is_named(world, monkeypatch):
    monkeypatch.setattr(cupti, "libcupti_versions", lambda: {"/venv/nvidia/cu13/lib/libcupti.so.13": 130001})
    with pytest.raises(
        SourceUnavailable,
        match=r"needs libcupti 13.4 or newer, but this process loaded libcupti "
        r"13.0 .*pip install -U 'nvidia-cuda-cupti>=13.4'",
    ):
        cupti.CuptiSource().open([0])
    assert world.enabled == set()


def test_a_chip_this_cupti_does_not_know_is_named(world):
    world.chips = {0: "GX999"}
    with pytest.raises(SourceUnavailable, match=r"does not know GPU 0's chip \(GX999\)"):
        cupti.CuptiSource().open([0])


def test_counters_held_by_dcgm_name_it_and_what_to_do(world, tmp_path):
    world.busy = True
    fake_process(tmp_path / "proc", 812, "nv-hostengine")
    with pytest.raises(CountersBusy) as got:
        cupti.CuptiSource().open([0])
    text = str(got.value)
    assert "serve one reader at a time and the DCGM host engine (nv-hostengine, pid 812) holds them" in text
    assert "`dcgmi profile --pause`" in text and "--profiling dcgm" in text
    assert world.enabled == set() and world.profiler_up == 0  # torn down on the way out


def test_counters_held_by_an_unknown_reader_say_who_it_may_be(world):
    world.busy = True
    with pytest.raises(CountersBusy, match="another reader .*Nsight Compute or Systems.*second gpubench"):
        cupti.CuptiSource().open([0])


def test_no_permission_names_the_driver_option(world):
    world.admin_only = True
    with pytest.raises(SourceUnavailable, match="NVreg_RestrictProfilingToAdminUsers=0"):
        cupti.CuptiSource().open([0])


def test_a_driver_that_needs_a_context_gets_one_and_says_so(world, monkeypatch):
    world.needs_context = True
    made = []

    class FakeCuda:
        def retain(self, index):
            world.context = True
            made.append(index)
            return 0x1234, index

        def make_current(self, ctx):
            made.append(("current", ctx))

        def release(self, dev):
            made.append(("release", dev))

    monkeypatch.setattr(cupti, "Cuda", FakeCuda)
    src = cupti.CuptiSource()
    src.open([0])
    assert made == [0] and "GPU 0: CUPTI needed a CUDA context in this process" in src.notes[0]
    world.emit(0, 1, {SM: 5.0})
    assert src.read()[0]["sm_active_pct"] == 5.0 and ("current", 0x1234) in made
    src.close()
    assert ("release", 0) in made


def test_gpus_without_the_time_trigger_fall_back_to_clock_cycles(world):
    world.time_trigger = False  # Turing and GA100
    src = cupti.CuptiSource()
    src.open([0])
    assert world.configured[0]["trigger"] == 0 and world.configured[0]["append"] == 0
    src.close()


def test_check_libcupti_compares_major_and_minor():
    cupti_library.check_libcupti({"a": 130500}, "13.4.0")
    cupti_library.check_libcupti({"a": 130401}, "13.4.0")
    cupti_library.check_libcupti({"a": 120800}, None)  # unknown cupti-python version: nothing to compare
    with pytest.raises(SourceUnavailable, match="libcupti 13.3"):
        cupti_library.check_libcupti({"a": 130300}, "13.4.0")


def test_a_candidate_the_host_api_answers_with_an_error_is_skipped_not_fatal(world):
    world.offered |= {"sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_elapsed"}
    world.host_errors = {TENSOR}
    src = cupti.CuptiSource()
    src.open([0])
    assert "sm__pipe_tensor_cycles_active.avg.pct" in src.resolution["tensor_active_pct"]
    src.close()
    # cupti-python's own teardown is back in place, as the staticmethod it was
    pm = world.modules()[1]
    assert isinstance(pm.Collector.__dict__["_profiler_deinitialize"], staticmethod)


def test_an_error_without_a_cupti_status_creates_no_context(world, monkeypatch):
    world.enable_error = RuntimeError("CUPTI could not load the nvperf* libraries required for profiling.")
    monkeypatch.setattr(cupti, "Cuda", lambda: pytest.fail("no context should be made for this"))
    with pytest.raises(SourceUnavailable, match="could not start on GPU 0: RuntimeError: CUPTI could not load"):
        cupti.CuptiSource().open([0])


def test_no_column_ships_that_the_committed_comparison_found_off_gpm():
    """A CUPTI column whose values missed GPM's in a committed comparison (the README's rule) is not read."""
    from pathlib import Path

    from gpubench.record.rundir import load_run
    from tools.readme import cupti as tables

    root = Path(__file__).resolve().parents[2]

    compared = 0
    for gpm_run in sorted((root / "results").glob("profiling-gpm-*")):
        cupti_run = gpm_run.with_name(gpm_run.name.replace("profiling-gpm-", "profiling-cupti-"))
        gpm = {r["scenario"]: r for r in load_run(gpm_run)[2]}
        for r in load_run(cupti_run)[2]:
            for column in ("sm_active_pct", "sm_occupancy_pct", "tensor_active_pct", "dram_active_pct"):
                a, b = gpm[r["scenario"]].get(column), r.get(column)
                if isinstance(a, float) and isinstance(b, float) and a == a and b == b:
                    compared += 1
                    if not tables.close_enough(a, b):
                        shipped, why = cupti_metrics.CANDIDATES, cupti_metrics.NOT_SHIPPED
                        assert column not in shipped and column in why, (gpm_run.name, column)
    assert compared >= 30  # the committed comparisons exist and were read
