"""The command line's answers without a GPU: help, list, doctor, and refusals before anything runs."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from gpubench.cli import main
from gpubench.suite.scenarios import SCENARIOS, UnknownScenario, select


def run(*args):
    return subprocess.run([sys.executable, "-m", "gpubench", *args], capture_output=True, text=True, timeout=600)


def test_help_teaches():
    out = run("--help").stdout
    assert "100%" in out and "gpubench run 'spin-*'" in out
    for cmd in ("run", "list", "doctor", "plot", "report"):
        assert cmd in out


def test_list_names_every_scenario_with_its_story(capsys):
    assert main(["list"]) == 0
    out = capsys.readouterr().out
    for s in SCENARIOS:
        assert s.name in out and s.story in out


def test_default_suite_covers_what_the_suite_promises():
    names = {s.name for s in select(None)}
    for required in (
        "idle",
        "copy-triton",
        "copy-cupy",
        "copy-torch",
        "h2d-copy",
        "spin-1thread",
        "spin-1block",
        "spin-1warp-per-sm",
        "spin-half-sms",
        "softmax-naive-torch",
        "softmax-naive-cupy",
        "softmax-fused",
        "softmax-torch",
        "gemm-triton",
        "gemm-cupy",
        "gemm-torch",
        "launch-bound",
    ):
        assert required in names


def test_globs_select_in_suite_order():
    assert [s.name for s in select(["spin-*"])] == [
        "spin-1thread",
        "spin-1block",
        "spin-1warp-per-sm",
        "spin-half-sms",
        "spin-triton",
    ]
    with pytest.raises(UnknownScenario, match="valid names: idle, copy-triton"):
        select(["spni-*"])


@pytest.mark.parametrize(
    "args,message",
    [
        (["run", "nope"], "no scenario matches 'nope'; valid names:"),
        (["run", "--duration", "0"], "--duration: must be greater than 0"),
        (["run", "--duration", "-3"], "--duration: must be greater than 0"),
        (["run", "--interval", "abc"], "is not a number"),
        (["run", "--gap", "-1"], "--gap: must be 0 or more"),
        (["run", "--duration", "inf"], "--duration: must be a finite number"),
        (["run", "--duration", "nan"], "--duration: must be a finite number"),
        (["run", "--duration", "0.5"], "--duration must be longer than the 0.5 s"),
        (["run", "--out", "/proc/gpubench-run"], "lies under /proc, a kernel file system"),
        (["run", "--out", "/sys/gpubench-run"], "lies under /sys, a kernel file system"),
    ],
)
def test_bad_input_is_one_sentence_and_exit_2(args, message):
    r = run(*args)
    assert r.returncode == 2
    assert message in r.stderr and "Traceback" not in r.stderr


def test_unwritable_out_is_refused_before_anything_runs(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    r = run("run", "--out", str(blocker / "run"))
    assert r.returncode == 2 and "cannot write the run to --out" in r.stderr
    full = tmp_path / "full"
    full.mkdir()
    (full / "old.csv").write_text("x")
    r = run("run", "--out", str(full))
    assert r.returncode == 2 and "already holds files" in r.stderr
    assert sorted(p.name for p in full.iterdir()) == ["old.csv"]


@pytest.mark.skipif(__import__("torch").cuda.is_available(), reason="this machine has a GPU")
def test_run_without_a_gpu_points_to_the_reference(tmp_path):
    r = run("run", "--out", str(tmp_path / "run"))
    assert r.returncode == 2
    assert "needs an NVIDIA GPU: no NVIDIA driver found" in r.stderr
    assert "gpubench report" in r.stderr or "reference runs under results/" in r.stderr
    assert "Traceback" not in r.stderr and not (tmp_path / "run").exists()


@pytest.mark.skipif(__import__("torch").cuda.is_available(), reason="this machine has a GPU")
def test_doctor_without_a_driver_says_why_once_and_each_source_points_to_it():
    r = run("doctor")
    assert r.returncode == 2
    lines = r.stdout.splitlines()
    assert lines[0].startswith("no GPU: no NVIDIA driver found")
    assert r.stdout.count("no NVIDIA driver found") == 1
    for name in ("nvml", "gpm", "smi"):
        assert any(line.strip().startswith(name) and "unavailable: no GPU (above)" in line for line in lines)
    assert any(line.strip().startswith("dcgm") and "`dcgmi` is not on PATH" in line for line in lines)
    assert "Traceback" not in r.stderr


def test_doctor_on_a_machine_without_gpm(fake_bin, monkeypatch, capsys):
    """An older GPU: NVML works, GPM does not; doctor still reports and exits 0."""
    from unittest import mock

    from gpubench.record import doctor, nvml

    info = {
        "nvml_index": 0,
        "name": "NVIDIA A100-SXM4-80GB",
        "uuid": "GPU-a100",
        "memory_mib": 81920,
        "driver": "550.54",
        "cuda_driver": "12.4",
        "architecture": 8,
        "gpm_supported": False,
    }
    from gpubench.record.sources import SourceUnavailable, cupti, cupti_library

    def no_cupti():
        raise SourceUnavailable("cupti-python is not installed (No module named 'cupti'): " + cupti_library.HINT)

    monkeypatch.setattr(cupti, "load", no_cupti)
    fake_bin("nvidia-smi", 'echo "2026/11/21 12:00:00.100, 0, 0, 0, 60.00, 1410"\nsleep 30\n')
    with (
        mock.patch.object(nvml, "device_count", return_value=1),
        mock.patch.object(nvml, "device_info", return_value=info),
        mock.patch.object(nvml, "handle", return_value="h0"),
        mock.patch.object(nvml, "gpm_supported", return_value=False),
        mock.patch.object(nvml, "read_basic", return_value={"gpu_util_pct": 0.0}),
        mock.patch.object(doctor, "torch_cuda", return_value=(False, "no CUDA torch here")),
    ):
        code, lines = doctor.diagnose()
    text = "\n".join(lines)
    assert code == 0
    assert "GPU 0 (NVML numbering): NVIDIA A100-SXM4-80GB" in text
    # neither dcgmi nor cupti-python here: nothing reads the profiling counters, and each says why
    assert "profiling metrics by default from: none" in text
    assert "cupti unavailable: cupti-python is not installed" in text
    assert "nvml  available" in text and "smi   available" in text
    assert "gpm   unavailable: GPU 0 does not support NVML GPM, which needs a Hopper or newer" in text


def test_doctor_says_cupti_works_and_who_holds_the_counters_when_it_cannot(fake_bin, monkeypatch, tmp_path):
    """An A100 without DCGM: CUPTI reads the counters; then a DCGM host engine takes them, and doctor says so."""
    from unittest import mock

    from fakecupti import World

    from gpubench.record import doctor, nvml
    from gpubench.record.sources import cupti, holders

    world = World(chips={0: "GA100"}, offered={"sm__cycles_active.avg.pct_of_peak_sustained_elapsed"})
    monkeypatch.setattr(cupti, "load", world.modules)
    monkeypatch.setattr(cupti, "cuda_uuids", lambda: ["GPU-a100"])
    monkeypatch.setattr(cupti, "libcupti_versions", lambda: {})
    monkeypatch.setattr(holders, "PROC", tmp_path)
    info = {
        "nvml_index": 0,
        "name": "NVIDIA A100-SXM4-80GB",
        "uuid": "GPU-a100",
        "memory_mib": 81920,
        "driver": "550.54",
        "cuda_driver": "12.4",
        "architecture": 8,
        "gpm_supported": False,
    }
    fake_bin("nvidia-smi", 'echo "2026/11/21 12:00:00.100, 0, 0, 0, 60.00, 1410"\nsleep 30\n')

    def diagnose():
        with (
            mock.patch.object(nvml, "device_count", return_value=1),
            mock.patch.object(nvml, "device_info", return_value=info),
            mock.patch.object(nvml, "handle", return_value="h0"),
            mock.patch.object(nvml, "uuid_of", return_value="GPU-a100"),
            mock.patch.object(nvml, "gpm_supported", return_value=False),
            mock.patch.object(nvml, "read_basic", return_value={"gpu_util_pct": 0.0}),
            mock.patch.object(doctor, "torch_cuda", return_value=(False, "no CUDA torch here")),
        ):
            return "\n".join(doctor.diagnose()[1])

    text = diagnose()
    assert "profiling metrics by default from: cupti" in text and "cupti available" in text
    (tmp_path / "812").mkdir()
    (tmp_path / "812" / "comm").write_text("nv-hostengine\n")
    (tmp_path / "812" / "cmdline").write_bytes(b"nv-hostengine\0")
    world.busy = True
    text = diagnose()
    line = next(x for x in text.splitlines() if x.strip().startswith("cupti"))
    assert line.strip().startswith(
        "cupti unavailable: the GPU's performance counters serve one reader at a time "
        "and the DCGM host engine (nv-hostengine, pid 812) holds them: pause its profiling "
        "with `dcgmi profile --pause`"
    )
    assert "--profiling dcgm" in line and "profiling metrics by default from: none" in text


def test_version_and_list_load_no_gpu_library():
    code = (
        "import sys; from gpubench.cli import main; main(['list']); "
        "assert 'torch' not in sys.modules and 'triton' not in sys.modules, sorted(sys.modules)"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    v = run("--version")
    assert v.returncode == 0 and v.stdout.startswith("gpubench ")


def test_torch_built_for_a_newer_cuda_than_the_driver_is_named():
    from unittest import mock

    import torch

    from gpubench.record import doctor

    with mock.patch.object(torch.version, "cuda", "13.0"):
        ok, note = doctor.torch_cuda("12.4")
    assert not ok and "built for CUDA 13.0, newer than the driver supports (CUDA 12.4)" in note


def test_a_backend_matplotlib_does_not_know_does_not_stop_plot(tmp_path):
    """gpubench draws with Agg whatever MPLBACKEND says: a name matplotlib refuses is no reason to stop."""
    import os

    from synthetic import SCENARIOS, make_run

    run_dir = make_run(tmp_path / "run", kind="watch", scenarios=[s for s in SCENARIOS if s[0] == "gemm-torch"])
    r = subprocess.run(
        [sys.executable, "-m", "gpubench", "plot", str(run_dir), "--out", str(tmp_path / "out")],
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "MPLBACKEND": "no-such-backend"},
    )
    assert r.returncode == 0 and r.stderr == "", r.stderr
    assert (tmp_path / "out" / "timeline.png").is_file()


def test_doctor_says_triton_is_installed_but_has_no_gpu_to_run_on():
    from unittest import mock

    from gpubench.record import doctor, nvml

    with (
        mock.patch.object(nvml, "device_count", side_effect=nvml.GpuUnavailable("no NVIDIA driver found")),
        mock.patch.object(doctor, "_triton", return_value=(True, "Triton 3.9.0")),
    ):
        code, lines = doctor.diagnose()
    triton = next(line.strip() for line in lines if line.strip().startswith("triton"))
    assert code == 2
    assert triton == "triton unavailable: Triton 3.9.0 is installed, but there is no GPU here to run its kernels on"


def shell(command: str, cwd=None, **env) -> subprocess.CompletedProcess:
    """A gpubench command line as a shell runs it (redirections and all)."""
    gpubench = f"{sys.executable} -m gpubench"
    return subprocess.run(
        ["sh", "-c", command.replace("gpubench", gpubench, 1)],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=cwd,
        env=dict(os.environ, PYTHONPATH=str(Path(__file__).parents[1]), **env),
    )


@pytest.mark.parametrize("redirect,why", [(">&-", "it is closed"), ("> /dev/full", "No space left on device")])
def test_an_output_that_cannot_be_written_is_one_sentence_never_a_traceback(redirect, why):
    if redirect == "> /dev/full" and not Path("/dev/full").exists():
        pytest.skip("no /dev/full here")
    r = shell(f"gpubench list {redirect}")
    assert r.returncode == 2 and r.stderr == f"gpubench list: error: cannot write to standard output: {why}\n"


def test_a_pipe_closed_early_is_no_error():
    r = shell("gpubench list | head -1")
    assert r.returncode == 0 and len(r.stdout.splitlines()) == 1 and r.stderr == ""


def test_a_working_directory_deleted_under_gpubench_is_one_sentence(tmp_path):
    gone = tmp_path / "gone"
    gone.mkdir()
    for command in ("run", "report results/x", "plot x"):  # watch: tests/job/test_watch_cwd.py
        r = shell(f"cd {gone} && rmdir {gone} && gpubench {command}", cwd=tmp_path)
        assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
        assert r.stderr.endswith(
            "error: the current directory no longer exists (it was deleted or moved away): cd "
            "into one that does, and run gpubench again\n"
        ), r.stderr
        gone.mkdir()
    assert shell(f"cd {gone} && rmdir {gone} && gpubench list").returncode == 0  # list needs no directory


def test_a_path_the_output_cannot_encode_is_written_escaped_after_the_files(tmp_path):
    """PYTHONIOENCODING=ascii and an --out with ü: the files are written, and their paths printed escaped."""
    sys.path.insert(0, str(Path(__file__).parent))
    from synthetic import SCENARIOS, make_run

    run_dir = make_run(tmp_path / "run", kind="watch", scenarios=[s for s in SCENARIOS if s[0] == "copy-triton"])
    out = tmp_path / "bericht-ü"
    r = shell(f"gpubench report {run_dir} --out {out}", PYTHONIOENCODING="ascii")
    assert r.returncode == 0 and r.stderr == "", r.stderr
    assert r.stdout.splitlines() == [f"{tmp_path}/bericht-\\xfc/report.md", f"{tmp_path}/bericht-\\xfc/report.html"]
    assert (out / "report.md").is_file() and (out / "report.html").is_file()
