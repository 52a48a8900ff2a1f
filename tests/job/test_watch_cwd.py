"""`gpubench watch` in a working directory that was deleted: the job runs there as it would alone, and the
run is recorded wherever it can be written."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from gpubench.record.rundir import load_run

ROOT = Path(__file__).resolve().parents[2]

# The command line itself, its GPU and metrics faked: NVML lists one GPU and a fake source samples it. The
# harness deletes its working directory only once everything is imported, as a shell's user would.
HARNESS = """
import os, sys
sys.path.insert(0, {tests!r})
from unittest import mock
from fakes import GPU, FakeSource
from gpubench.cli import main
from gpubench.job import watchcmd
from gpubench.record import nvml, recording
from gpubench.record.sources import policy

gone = sys.argv[1]
os.mkdir(gone)
os.chdir(gone)
os.rmdir(gone)
info = {{"nvml_index": 0, "name": GPU.name, "uuid": GPU.uuid, "memory_mib": 81559, "driver": "580.0"}}
with mock.patch.object(nvml, "device_count", return_value=1), \\
        mock.patch.object(nvml, "device_info", return_value=info), \\
        mock.patch.object(watchcmd, "resolve_gpus", return_value=([GPU], None)), \\
        mock.patch.object(recording, "open_sources",
                          lambda gpus, *a, **k: policy.open_given([FakeSource()], gpus, 0.05)):
    sys.exit(main(sys.argv[2:]))
"""
JOB = ["sh", "-c", "echo hi; exit 4"]


def watch_in_a_deleted_directory(tmp_path, *args):
    script = tmp_path / "harness.py"
    script.write_text(HARNESS.format(tests=str(ROOT / "tests")))
    return subprocess.run(
        [sys.executable, str(script), str(tmp_path / "gone"), "watch", *args],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
        env=dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))),
    )


def test_the_job_runs_and_is_recorded_where_the_run_directory_is_absolute(tmp_path):
    r = watch_in_a_deleted_directory(tmp_path, "--out", str(tmp_path / "run"), "--", *JOB)
    assert r.returncode == 4, r.stderr  # the job's own exit code: it ran
    assert r.stdout == "hi\n" and "Traceback" not in r.stderr
    manifest, _, _ = load_run(tmp_path / "run")
    assert manifest["child"]["argv"] == JOB and manifest["child"]["exit_code"] == 4


@pytest.mark.parametrize("out", [[], ["--out", "run"]])
def test_the_job_runs_unrecorded_where_the_run_directory_would_lie_in_the_deleted_one(tmp_path, out):
    """No entry can be made in a deleted directory: the job still runs, and one sentence says why nothing is
    recorded and how to record it."""
    r = watch_in_a_deleted_directory(tmp_path, *out, "--", *JOB)
    assert r.returncode == 4 and r.stdout == "hi\n"
    said = [line for line in r.stderr.splitlines() if line.startswith("gpubench")]
    assert said == [
        f"gpubench watch: nothing can be recorded here (the current directory no longer exists, and the "
        f"run directory {'run' if out else 'results/'} would lie in it; an absolute --out records it): "
        "the command runs unrecorded"
    ]
    assert "Traceback" not in r.stderr


def test_attach_mode_in_a_deleted_directory_is_one_sentence_and_exit_2(tmp_path):
    """Nothing of the user's runs in attach mode: it refuses as the other commands do, before recording."""
    r = watch_in_a_deleted_directory(tmp_path, "--out", str(tmp_path / "run"), "--duration", "2")
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert r.stderr.strip() == (
        "gpubench watch: error: the current directory no longer exists: cd into one that does, and watch from there"
    )
    assert not (tmp_path / "run").exists()
