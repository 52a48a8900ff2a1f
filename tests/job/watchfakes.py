"""What the tests of gpubench watch share (test_watch*.py): a fake ladder that follows the sampler's phase,
the watch's options on fake sources, a job given as Python code, and the command line in a process of its
own; children import this checkout's gpubench."""

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from fakes import GPU, FakeSource

from gpubench.inside import markwriter
from gpubench.job.watcher import WatchOptions
from gpubench.record.config import RecordingConfig

ROOT = Path(__file__).resolve().parents[2]
INFO = {
    "nvml_index": 0,
    "name": GPU.name,
    "uuid": GPU.uuid,
    "memory_mib": 81559,
    "driver": "580.0",
    "cuda_driver": "13.0",
}
BY_PHASE = {
    "warmup": (40.0, 20.0, 5.0),
    "train": (100.0, 85.0, 30.0),
    "eval": (100.0, 30.0, 8.0),
    "shutdown": (10.0, 5.0, 0.0),
}


class LadderSource(FakeSource):
    """Util, SM active and tensor active follow the sampler's current phase, so labels can be checked."""

    columns = ("gpu_util_pct", "sm_active_pct", "tensor_active_pct", "power_w")

    def __init__(self):
        super().__init__(self.values)
        self.sampler = None

    def values(self, n):
        util, sm, tensor = BY_PHASE.get(self.sampler.phase if self.sampler else "", (0.0, 0.0, 0.0))
        return {"gpu_util_pct": util, "sm_active_pct": sm, "tensor_active_pct": tensor, "power_w": 300.0}


@pytest.fixture
def ladder(monkeypatch):
    """A LadderSource that sees the sampler of the recording it is given to."""
    import gpubench.record.recording as recording

    source = LadderSource()

    class Spy(recording.Sampler):
        def __init__(self, *a, **k):
            super().__init__(*a, **k)
            source.sampler = self

    monkeypatch.setattr(recording, "Sampler", Spy)
    return source


@pytest.fixture(autouse=True)
def _children_import_this_gpubench(monkeypatch):
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
    monkeypatch.delenv(markwriter.ENV, raising=False)


def options(out, sources, peaks=False, **kw):
    config = RecordingConfig(interval_s=0.05, sources=sources, command=["gpubench", "watch"], peaks=peaks)
    return WatchOptions(out, [GPU], INFO, config, **kw)


def py(code: str) -> list[str]:
    return [sys.executable, "-c", textwrap.dedent(code)]


def run_cli(*args, **env):
    return subprocess.run(
        [sys.executable, "-m", "gpubench", *args],
        capture_output=True,
        text=True,
        timeout=120,
        env=dict(os.environ, **env),
    )
