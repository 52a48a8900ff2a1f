"""Who holds the GPU's counters: a fake process table, and what each source, run and watch then say."""

from pathlib import Path
from unittest import mock

import pynvml
import pytest
from fakecupti import World

from gpubench.record import nvml
from gpubench.record.config import RecordingConfig
from gpubench.record.gpus import Gpu
from gpubench.record.recording import Recording, Reporter
from gpubench.record.sources import cupti, holders
from gpubench.record.sources.dcgm import DcgmSource
from gpubench.record.sources.gpm import GpmSource
from gpubench.record.sources.holders import CountersBusy
from gpubench.record.sources.nvml_source import NvmlSource


@pytest.fixture
def proc(tmp_path, monkeypatch):
    d = tmp_path / "proc"
    d.mkdir()
    monkeypatch.setattr(holders, "PROC", d)

    def add(pid: int, comm: str, *argv: str):
        (d / str(pid)).mkdir()
        (d / str(pid) / "comm").write_text(comm + "\n")
        (d / str(pid) / "cmdline").write_bytes(b"\0".join(a.encode() for a in (argv or (comm,))) + b"\0")

    return add


def test_the_usual_holders_and_other_gpubench_recordings_are_found(proc):
    proc(812, "nv-hostengine")
    proc(900, "python3", "/usr/bin/python3", "train.py")
    proc(901, "gpubench", "/venv/bin/gpubench", "watch", "--", "python", "train.py")
    proc(902, "gpubench", "/venv/bin/gpubench", "list")  # not recording
    proc(4242, "ncu", "ncu", "--metrics", "sm__cycles_active.avg", "./app")
    assert holders.holders(me=1) == [(812, "nv-hostengine"), (901, "gpubench"), (4242, "ncu")]
    assert holders.holders(me=812) == [(901, "gpubench"), (4242, "ncu")]  # never itself


@pytest.mark.parametrize(
    "comm, who, tip",
    [
        ("nv-hostengine", "the DCGM host engine (nv-hostengine, pid 7)", "`dcgmi profile --pause`"),
        ("ncu", "Nsight Compute (ncu, pid 7)", "wait for it to finish, or stop it"),
        ("nsys", "Nsight Systems (nsys, pid 7)", "wait for it to finish, or stop it"),
    ],
)
def test_the_sentence_names_the_holder_and_what_to_do(proc, comm, who, tip):
    proc(7, comm)
    text = holders.busy_sentence()
    assert text.startswith(f"the GPU's performance counters serve one reader at a time and {who} holds them: ")
    assert tip in text and "\n" not in text


def test_dcgm_refused_does_not_blame_its_own_engine(proc):
    proc(812, "nv-hostengine")
    text = holders.busy_sentence(exclude=("nv-hostengine", "dcgm-exporter"))
    assert "another reader" in text and "dcgmi profile --pause" not in text and "nv-hostengine" not in text


def test_admin_only_reads_the_driver_parameter(tmp_path):
    params = tmp_path / "params"
    params.write_text("ResmanDebugLevel: 4294967295\nRmProfilingAdminOnly: 1\n")
    assert holders.admin_only(params) is True
    params.write_text("RmProfilingAdminOnly: 0\n")
    assert holders.admin_only(params) is False
    assert holders.admin_only(tmp_path / "absent") is None


def test_gpm_refused_in_use_names_the_holder_at_open_and_mid_run(proc):
    proc(4242, "ncu")
    in_use = pynvml.NVMLError(pynvml.NVML_ERROR_IN_USE)
    with (
        mock.patch.object(nvml, "handle", return_value="h0"),
        mock.patch.object(nvml, "gpm_supported", return_value=True),
        mock.patch.object(nvml, "gpm_sample_alloc", side_effect=[1, 2, 3, 4]),
        mock.patch.object(nvml, "gpm_sample_free"),
        mock.patch.object(nvml, "gpm_metrics", return_value=[1.0] * 8),
        mock.patch.object(nvml, "gpm_sample_get", side_effect=in_use),
    ):
        with pytest.raises(CountersBusy, match=r"Nsight Compute \(ncu, pid 4242\) holds them"):
            GpmSource().open([0])
    with (
        mock.patch.object(nvml, "handle", return_value="h0"),
        mock.patch.object(nvml, "gpm_supported", return_value=True),
        mock.patch.object(nvml, "gpm_sample_alloc", side_effect=[1, 2]),
        mock.patch.object(nvml, "gpm_sample_free"),
        mock.patch.object(nvml, "gpm_metrics", return_value=[1.0] * 8),
        mock.patch.object(nvml, "gpm_sample_get", side_effect=[None, in_use]),
    ):
        src = GpmSource()
        src.open([0])
        with pytest.raises(CountersBusy, match="Nsight Compute"):
            src.read()
        src.close()


def test_dcgmi_locked_out_says_so_in_one_sentence(fake_bin, proc):
    proc(4242, "ncu")
    fake_bin(
        "dcgmi",
        'echo "Error setting watches. Result: The third-party Profiling module returned an '
        'unrecoverable error"\nexit 1\n',
    )
    with pytest.raises(CountersBusy) as got:
        DcgmSource().open([0])
    assert str(got.value).startswith("the GPU's performance counters serve one reader at a time and Nsight Compute")
    # any other failure of dcgmi stays what it was
    fake_bin("dcgmi", 'echo "Error: unable to establish a connection to the specified host: localhost"\nexit 255\n')
    with pytest.raises(Exception) as other:
        DcgmSource().open([0])
    assert not isinstance(other.value, CountersBusy) and "unable to establish a connection" in str(other.value)


class Warnings(Reporter):
    def __init__(self):
        self.said = []

    def warn(self, message):
        self.said.append(message)


def test_run_and_watch_say_who_holds_the_counters_in_one_sentence(tmp_path, proc, monkeypatch):
    """Both verbs record through one Recording: its warning and manifest carry the sentence."""
    proc(812, "nv-hostengine")
    world = World(busy=True, offered={"sm__cycles_active.avg.pct_of_peak_sustained_elapsed"})
    monkeypatch.setattr(cupti, "load", world.modules)
    monkeypatch.setattr(cupti, "cuda_uuids", lambda: ["GPU-x"])
    monkeypatch.setattr(cupti, "libcupti_versions", lambda: {})
    monkeypatch.setattr(nvml, "handle", lambda i: i)
    monkeypatch.setattr(nvml, "uuid_of", lambda h: "GPU-x")
    monkeypatch.setattr(NvmlSource, "open", lambda self, gpus: None)
    monkeypatch.setattr(NvmlSource, "read", lambda self: {0: {"gpu_util_pct": 100.0}})
    reporter = Warnings()
    with Recording(
        tmp_path / "run",
        [Gpu(0, "GPU-x", "NVIDIA A100")],
        RecordingConfig(profiling="cupti", smi=False),
        reporter=reporter,
    ) as rec:
        pass
    said = [m for m in reporter.said if m.startswith("source cupti not used: ")]
    assert len(said) == 1 and "\n" not in said[0]
    assert "the DCGM host engine (nv-hostengine, pid 812) holds them" in said[0] and "--profiling dcgm" in said[0]
    assert "DCGM host engine" in rec.manifest["sources"]["unavailable"]["cupti"]
    assert Path(tmp_path / "run" / "manifest.json").is_file()
