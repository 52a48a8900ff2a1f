"""How a recording is made: one typed configuration, shared by `gpubench run`, `gpubench watch`, the runs
under torchrun and gpubench.recording().

The command line builds it once from its options (gpubench.cli); everything below takes this object, never
the parser's namespace. A new recording option is a field here, a flag in gpubench.cli, and the code that
reads it.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from gpubench.read.receipt import check_price
from gpubench.record.sources.policy import DEFAULT_INTERVAL_S, PROFILING_CHOICES


@dataclass(frozen=True, kw_only=True, slots=True)
class RecordingConfig:
    out: Path | None = None
    """The run directory (--out). None: a new one under results/, named for the GPU and the time."""

    device: int | None = None
    """The GPU in CUDA's numbering, as the process sees it under CUDA_VISIBLE_DEVICES (--device). None:
    `run` uses device 0; `watch` the GPUs its command sees, else every GPU."""

    all_gpus: bool = False
    """Sample every GPU of the machine, not only the one(s) in use (--all-gpus); `watch` then keeps a row
    for the idle ones too."""

    interval_s: float = DEFAULT_INTERVAL_S
    """Seconds between two samples (--interval); the source policy never samples faster than the profiling
    counters refresh."""

    profiling: str = "auto"
    """Where SM activity and the other profiling metrics come from (--profiling): auto, gpm, dcgm, cupti or
    none."""

    smi: bool = True
    """Run nvidia-smi beside NVML (False: --no-smi)."""

    peaks: bool = False
    """Measure this GPU's sustained copy and matmul peaks before anything else runs: `run` does unless
    --no-peaks, `watch` only with --peaks."""

    price_per_gpu_hour: float | None = None
    """What one GPU-hour costs (--price-per-gpu-hour, `watch`): the receipt then prices the job's GPU-hours and
    those that did no tensor work (gpubench.read.receipt). None: the receipt names no cost."""

    command: Sequence[str] | None = None
    """The command line the manifest records. None: this process's sys.argv."""

    sources: Sequence | None = None
    """Metric sources that replace the policy's choice (replays, tests); never set from the command line."""

    def __post_init__(self):
        if self.profiling not in PROFILING_CHOICES:
            raise ValueError(f"profiling must be one of {', '.join(PROFILING_CHOICES)}, not {self.profiling!r}")
        if not self.interval_s > 0:
            raise ValueError(f"interval_s must be positive, not {self.interval_s!r}")
        check_price(self.price_per_gpu_hour)
