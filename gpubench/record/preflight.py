"""What must hold before a recording starts: a GPU and its driver, a run directory that can be written,
a PyTorch that can use the GPU. Each failure is a UsageError of one sentence, raised before anything
runs or is written; without a GPU the sentence says how to explore a recorded run instead."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

from gpubench.record import nvml
from gpubench.record.rundir import check_writable
from gpubench.usage import UsageError

EXPLORE_DIR = Path(tempfile.gettempdir()) / "gpubench-report"


REFERENCE_GPU = "NVIDIA H100 80GB HBM3"  # the GPU of the reference run the README shows


def reference_run(roots) -> Path | None:
    """The run to explore without a GPU: the fullest suite run (kind "run", the most families) of the reference GPU,
    else the fullest suite run of any GPU, else any run; of those alike, the newest by the manifest's start
    time. A comparison run of a few families (a profiling source against another) is never the one named."""
    found = []
    for manifest in sorted({m.resolve() for root in roots if root.is_dir() for m in root.glob("*/manifest.json")}):
        try:
            m = json.loads(manifest.read_text())
            kind, gpu, start = m.get("kind"), (m.get("gpu") or {}).get("name"), str(m.get("start_wall") or "")
            families = len(m.get("families") or {}) if kind == "run" else 0
        except (OSError, ValueError, AttributeError, TypeError):  # a damaged run is no run to suggest
            continue
        found.append(((kind == "run", gpu == REFERENCE_GPU and kind == "run", families, start), manifest.parent))
    return max(found, key=lambda f: f[0])[1] if found else None


def reference_hint() -> str:
    run = reference_run([Path.cwd() / "results", Path(__file__).resolve().parents[2] / "results"])
    if run is not None:
        return f"to explore a recorded run without a GPU: gpubench report {run} --out {EXPLORE_DIR}"
    return (
        f"to explore a recorded run without a GPU: gpubench report RUN_DIR --out {EXPLORE_DIR}, with a reference "
        "run from results/ in the gpubench repository"
    )


def check_out(out: Path | None) -> None:
    if out is not None and (problem := check_writable(out)):
        raise UsageError(f"cannot write the run to --out: {problem}")


def require_gpu(command: str) -> None:
    """UsageError, with the way to explore a recorded run instead, where NVML finds no driver."""
    try:
        nvml.device_count()
    except nvml.GpuUnavailable as err:
        raise UsageError(f"gpubench {command} needs an NVIDIA GPU: {err}; {reference_hint()}") from None


def need_cuda_torch() -> None:
    import torch

    from gpubench.install import TORCH_HINT

    if not torch.cuda.is_available():
        raise UsageError(
            f"PyTorch cannot use the GPU (torch {torch.__version__}, CUDA {torch.version.cuda}); {TORCH_HINT}"
        )
