"""What is installed, and how to install what is missing, in one place. This project installs from its
checkout (the folder with pyproject.toml); its distribution is named gpubench-ladder, because `gpubench`
on PyPI is an unrelated project."""

from __future__ import annotations

from importlib import metadata

DIST = "gpubench-ladder"
CHECKOUT = "in this project's checkout"
TORCH_INDEX = "https://download.pytorch.org/whl"
CUPY_HINT = f"{CHECKOUT}, install its CuPy extra: pip install -e '.[cu13]' (or '.[cu12]' on a CUDA 12 driver)"
TORCH_HINT = (
    f"install a CUDA build of PyTorch that the driver supports from PyTorch's index (pip install torch "
    f"--index-url {TORCH_INDEX}/cu130, or {TORCH_INDEX}/cu128 on a CUDA 12 driver), then, {CHECKOUT}: "
    "pip install -e '.[cu13]' (or '.[cu12]')"
)
TRITON_HINT = (
    f"Triton is not installed: on Linux, pip install -e . {CHECKOUT} installs it; it has no wheels for "
    "macOS or Windows, where gpubench can list, plot and report but not run"
)


def version(dist: str) -> str | None:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


def cupy_version() -> str | None:
    return version("cupy-cuda13x") or version("cupy-cuda12x") or version("cupy")
