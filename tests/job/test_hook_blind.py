"""Every way the optimizer hook can be absent or blind is said in the run: a Python run isolated, told to ignore
the environment or to skip site, a launcher that clears the environment or replaces PYTHONPATH, a
sitecustomize.py of the job's first on PYTHONPATH; and a hook that was on and saw no step."""

import os
import sys
import textwrap
from pathlib import Path

import pytest

from fakes import FakeSource, GPU
from gpubench.inside.bootstrap import BOOTSTRAP
from gpubench.job import blind, contexts, watchcmd
from gpubench.job.watcher import WatchOptions
from gpubench.record.config import RecordingConfig
from gpubench.record.rundir import load_run

ROOT = Path(__file__).resolve().parents[2]
INFO = {
    "nvml_index": 0,
    "name": GPU.name,
    "uuid": GPU.uuid,
    "memory_mib": 81559,
    "driver": "580.0",
    "cuda_driver": "13.0",
}
PY = "/usr/bin/python3"
HOOKED = {"PYTHONPATH": BOOTSTRAP, "GPUBENCH_MARKS": "/run/marks.tsv"}


@pytest.mark.parametrize(
    "argv, env, said",
    [
        ([PY, "-I", "train.py"], HOOKED, "isolated (-I)"),
        ([PY, "-uE", "train.py"], HOOKED, "ignored the environment (-E)"),
        ([PY, "-X", "dev", "-S", "-m", "train"], HOOKED, "skipped the site module (-S)"),
        ([PY, "train.py"], {"PYTHONPATH": BOOTSTRAP}, "lost GPUBENCH_MARKS"),
        ([PY, "train.py"], {"PYTHONPATH": "/opt/lib", "GPUBENCH_MARKS": "/m"}, "no longer holds gpubench's bootstrap"),
    ],
)
def test_each_way_a_process_escapes_the_hook_is_named(argv, env, said):
    assert said in blind.reason({"argv": argv, "env": env}, BOOTSTRAP)


def test_a_sitecustomize_before_the_bootstrap_is_named_with_its_directory(tmp_path):
    (tmp_path / "sitecustomize.py").write_text("")
    env = {"PYTHONPATH": os.pathsep.join([str(tmp_path), BOOTSTRAP]), "GPUBENCH_MARKS": "/m"}
    reason = blind.reason({"argv": [PY, "t.py"], "env": env}, BOOTSTRAP)
    assert f"a sitecustomize.py in {tmp_path} comes before" in reason


@pytest.mark.parametrize(
    "argv", [[PY, "train.py", "-I"], [PY, "-c", "-I"], [PY, "-W", "-I", "t.py"], ["./serve", "-I"]]
)
def test_a_process_the_hook_reaches_or_no_python_is_not_named(argv):
    assert blind.reason({"argv": argv, "env": HOOKED}, BOOTSTRAP) is None


def watched(tmp_path, monkeypatch, flags: str, body: str):
    """Watch `python FLAGS -c body` with every process of the job seen on the GPU; the job ends once its own
    pid has been seen there (a file says so), whatever the machine's speed."""
    seen = tmp_path / "seen"

    def compute_processes(index):
        pids = list(contexts.tree(os.getpid(), contexts.parents()))
        seen.write_text(" ".join(map(str, pids)))
        return pids

    monkeypatch.setattr(contexts.nvml, "compute_processes", compute_processes)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
    wait = f"""
import os, time
deadline = time.monotonic() + 120  # a hang guard only
def seen():
    try:
        return str(os.getpid()) in open({str(seen)!r}).read().split()
    except OSError:
        return False
while time.monotonic() < deadline and not seen():
    time.sleep(0.02)
"""
    argv = [sys.executable, *filter(None, [flags]), "-c", wait + textwrap.dedent(body)]
    config = RecordingConfig(interval_s=0.05, sources=[FakeSource()], command=["gpubench", "watch"])
    code, _ = watchcmd.run(WatchOptions(tmp_path / "run", [GPU], INFO, config), argv)
    assert code == 0
    manifest, _, _ = load_run(tmp_path / "run")
    return manifest


def test_an_isolated_python_on_a_gpu_is_said_with_its_reason(tmp_path, monkeypatch):
    manifest = watched(tmp_path, monkeypatch, "-I", "")
    [missed] = manifest["auto"]["missed"]
    assert "isolated (-I)" in missed["why"] and "-I" in missed["argv"]
    assert any(w.startswith("gpubench's optimizer hook did not reach 1 process") for w in manifest["warnings"])


def test_a_hook_that_saw_no_step_says_so(tmp_path, monkeypatch):
    manifest = watched(tmp_path, monkeypatch, "", "")
    assert manifest["auto"]["hook"] == "on" and manifest["auto"]["missed"] == []
    assert blind.NO_STEP in manifest["warnings"]


def test_a_job_that_steps_gets_neither_warning(tmp_path, monkeypatch):
    manifest = watched(tmp_path, monkeypatch, "", "import gpubench\nfor _ in range(5): gpubench.step()\n")
    assert manifest["marks"]["steps"] == 5
    assert not [w for w in manifest["warnings"] if "hook" in w]


def test_a_job_that_removes_its_marks_file_is_counted_whole_and_said(tmp_path, monkeypatch):
    body = """
import gpubench
gpubench.mark("train")
for _ in range(20): gpubench.step()
gpubench.mark("train")  # writes the steps before it
os.remove(os.environ["GPUBENCH_MARKS"])
for _ in range(20): gpubench.step()
"""
    manifest = watched(tmp_path, monkeypatch, "", body)
    assert manifest["marks"]["steps"] == 40
    assert any("marks.tsv: the file was removed" in w for w in manifest["warnings"])
