"""What the tests of gpubench.mark / step share (test_marks*.py): marks of this process sent to a file, a
child process whose marks go to a given file, and a fake torch whose CUDA events the fake GPU reaches a
moment after they are recorded."""

import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from gpubench.inside import linewriter, markwriter

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def to_file(tmp_path):
    """Marks of this process go to a file for the test, and off again after it."""
    path = tmp_path / "marks.tsv"
    markwriter.target(path)
    yield path
    markwriter.target(None)


def child(code: str, path, **env) -> subprocess.CompletedProcess:
    environ = dict(os.environ, PYTHONPATH=str(ROOT), **{markwriter.ENV: str(path)}, **env)
    for var in linewriter.RANK_VARS:
        if var not in env:
            environ.pop(var, None)
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], env=environ, capture_output=True, text=True, timeout=120
    )


class FakeEvent:
    """A CUDA event the fake GPU reaches `lag_s` after it is recorded."""

    lag_s = 0.2

    def __init__(self, blocking=False):
        assert blocking  # the waiting thread must sleep, not spin a core
        self.due = None

    def record(self):
        self.due = time.monotonic() + self.lag_s

    def synchronize(self):
        time.sleep(max(0.0, self.due - time.monotonic()))


class FakeCuda:
    Event = FakeEvent
    capturing = False

    def is_initialized(self):
        return True

    def is_current_stream_capturing(self):
        return self.capturing

    def current_device(self):
        return 0

    def get_device_properties(self, index):
        return type("Props", (), {"uuid": "0001-02"})()


@pytest.fixture
def fake_torch(monkeypatch):
    torch = type(sys)("torch")
    torch.cuda = FakeCuda()
    monkeypatch.setitem(sys.modules, "torch", torch)
    return torch
