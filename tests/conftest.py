import os
import shutil

import pytest

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


def pytest_addoption(parser):
    parser.addoption("--slow-copy", action="store_true",
                     help="benchmarks: run the Triton copy with a tiny block size, a deliberate slowdown that "
                          "--benchmark-compare-fail must catch")


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
