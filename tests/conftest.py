import argparse
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from gpubench.usage import non_negative, positive

# The gpu_benchmark fixture, also where gpubench was installed before its pytest11 entry point existed.
pytest_plugins = ["gpubench.pytest_plugin"]


def _cuda() -> bool:
    try:
        import torch
    except ImportError:
        return False
    return torch.cuda.is_available()


HAS_CUDA = _cuda()
if not HAS_CUDA:
    # Triton kernels run on the CPU through its interpreter; must be set before triton is imported.
    os.environ.setdefault("TRITON_INTERPRET", "1")


def _share(text: str) -> float:
    value = positive(text)
    if value > 1:
        raise argparse.ArgumentTypeError(f"a share of the calls is at most 1, got {text}")
    return value


def pytest_addoption(parser):
    parser.addoption(
        "--slow-copy",
        action="store_true",
        help="benchmarks: run the Triton copy with a tiny block size, a deliberate slowdown that "
        "--benchmark-compare-fail must catch",
    )
    parser.addoption(
        "--slow-calls",
        metavar="PCT",
        type=non_negative,
        default=0.0,
        help="benchmarks: each copy and GEMM call also runs its own kernel on PCT%% of its size, "
        "real work that slows it by about PCT%%, which the gate must never read as same",
    )
    parser.addoption(
        "--slow-share",
        metavar="F",
        type=_share,
        default=1.0,
        help="benchmarks: with --slow-calls or --more-work, slow only a share F of the calls, in bursts "
        "that slow whole rounds (default 1: every call)",
    )
    parser.addoption(
        "--more-work",
        metavar="PCT",
        type=non_negative,
        default=0.0,
        help="gate benchmarks (tests/gate_benchmarks): every call does PCT%% more work, its size grown "
        "by as much, which the gate must read as slower",
    )


def pytest_collection_modifyitems(config, items):
    if HAS_CUDA:
        return
    skip = pytest.mark.skip(reason="needs an NVIDIA GPU (torch.cuda.is_available() is False)")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(autouse=True)
def _fresh_nvml():
    """NVML's init state is a module singleton: on a machine without it, every test starts from scratch."""
    from gpubench.record import nvml

    if not HAS_CUDA:
        nvml.reset_for_tests()
    yield


@pytest.fixture(autouse=True)
def _not_a_worker_to_sessions_inside(monkeypatch):
    """Under pytest-xdist a worker's environment names it, and pytest-benchmark turns itself off in any session
    that sees the name: the gate's tests run sessions of their own (pytester, `gpubench`'s pytest processes), which
    are no worker of this one and must time their benchmarks."""
    monkeypatch.delenv("PYTEST_XDIST_WORKER", raising=False)


@pytest.fixture
def fake_bin(tmp_path, monkeypatch):
    """A folder first on PATH where tests put fake executables (dcgmi, nvidia-smi)."""
    d = tmp_path / "bin"
    d.mkdir()
    monkeypatch.setenv("PATH", f"{d}{os.pathsep}{os.environ['PATH']}")

    def make(name: str, script: str):
        path = d / name
        path.write_text("#!/bin/sh\n" + script)
        path.chmod(0o755)
        assert shutil.which(name) == str(path)
        return path

    return make


# --- the end of the session -------------------------------------------------------------------------------
# pytest's count line is the last thing a session prints, and its exit status is what CI judges by. After it,
# the interpreter's shutdown printed the native libraries' own complaints (Triton's nanobind counting the
# objects it leaked, Arrow failing to close its signal pipe): lines after the counts, saying nothing of the
# tests. So once pytest is done (its last hook, trylast), Python's atexit handlers run and the process ends
# with pytest's status, skipping the native teardown that prints them.

_SESSION = pytest.StashKey()


@pytest.hookimpl(tryfirst=True)
def pytest_sessionstart(session):
    session.config.stash[_SESSION] = session


@pytest.hookimpl(trylast=True)
def pytest_unconfigure(config):
    session = config.stash.get(_SESSION, None)
    if session is None or config.invocation_params.args != tuple(sys.argv[1:]):
        return  # not a session started from the command line (pytest.main() inside a program): leave it be
    import atexit

    status = int(session.exitstatus)
    atexit._run_exitfuncs()  # what Python would run at exit: temporary folders' locks, loggers, caches
    for stream in (sys.stdout, sys.stderr, sys.__stdout__, sys.__stderr__):
        try:
            stream.flush()
        except (AttributeError, OSError, ValueError):  # closed, or not a file
            pass
    os._exit(status)


@pytest.fixture(scope="session")
def site(tmp_path_factory):
    """The documentation site, built once for the session with --strict: every warning (a link to nothing, a
    missing anchor) fails it. tests/test_docs.py reads its files; tests/show/test_browser.py draws its pages."""
    pytest.importorskip("mkdocs")
    pytest.importorskip("mkdocs_jupyter")
    out = tmp_path_factory.mktemp("site")
    r = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-d", str(out)],
        cwd=Path(__file__).resolve().parents[1],
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
    )
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert not re.search(r"^WARNING", r.stderr, re.M), r.stderr[-3000:]
    return out
