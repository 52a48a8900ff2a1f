"""How a recording is made: one typed configuration, shared by `gpubench run`, `gpubench watch`, the runs
under torchrun and gpubench.recording().

The command line builds it once from its options (gpubench.cli); everything below takes this object, never
the parser's namespace. Each field set from the command line carries its flags in its metadata (Flag: name,
help, the verbs that have it, and argparse's metavar, type, choices, action or default); gpubench.options
adds them to each verb's parser and gpubench.cli builds the configuration from what they parse, so a new
recording option is a field here, with its Flag, and the code that reads it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

from gpubench.read.receipt import check_price
from gpubench.record.sources.policy import DEFAULT_INTERVAL_S, PROFILING_CHOICES
from gpubench.usage import non_negative, positive

RUN, WATCH = ("run",), ("watch",)  # `run` is also the torchrun path: the same parser


class Flag:
    """One command-line flag of a RecordingConfig field: argparse's add_argument(name, help=help, **options)
    on the parsers of `verbs`, its value stored under the field's name. Without an action, the default is the
    field's unless options name one; with store_true or store_false, argparse's own."""

    __slots__ = ("name", "help", "verbs", "options")

    def __init__(self, name: str, help: str, verbs: tuple[str, ...] = RUN + WATCH, **options):
        self.name, self.help, self.verbs, self.options = name, help, verbs, options


def flags(*each: Flag) -> dict:
    """A field's metadata: its flags, at most one per verb."""
    return {"flags": each}


DEVICE_HELP = "GPU in CUDA's numbering, as this process sees it under CUDA_VISIBLE_DEVICES ({})"
OUT_HELP = "run directory (default results/{}<gpu>-<YYYYmmdd-HHMMSS>)"


@dataclass(frozen=True, kw_only=True, slots=True)
class RecordingConfig:
    interval_s: float = field(
        default=DEFAULT_INTERVAL_S,
        metadata=flags(
            Flag(
                "--interval",
                f"sampling interval (default {DEFAULT_INTERVAL_S:g}; never shorter than the profiling "
                "counters refresh: faster rows would only repeat values)",
                type=positive,
                metavar="S",
            )
        ),
    )
    """Seconds between two samples (--interval); the source policy never samples faster than the profiling
    counters refresh."""

    device: int | None = field(
        default=None,
        metadata=flags(
            Flag("--device", DEVICE_HELP.format("default 0"), RUN, type=int, default=0, metavar="N"),
            Flag(
                "--device",
                DEVICE_HELP.format("default: the GPUs the command sees under its CUDA_VISIBLE_DEVICES, else every GPU"),
                WATCH,
                type=int,
                metavar="N",
            ),
        ),
    )
    """The GPU in CUDA's numbering, as the process sees it under CUDA_VISIBLE_DEVICES (--device). None:
    `run` uses device 0; `watch` the GPUs its command sees, else every GPU."""

    all_gpus: bool = field(
        default=False,
        metadata=flags(Flag("--all-gpus", "sample every GPU of the machine, not only --device", action="store_true")),
    )
    """Sample every GPU of the machine, not only the one(s) in use (--all-gpus); `watch` then keeps a row
    for the idle ones too."""

    out: Path | None = field(
        default=None,
        metadata=flags(
            Flag("--out", OUT_HELP.format(""), RUN, type=Path, metavar="DIR"),
            Flag("--out", OUT_HELP.format("watch-"), WATCH, type=Path, metavar="DIR"),
        ),
    )
    """The run directory (--out). None: a new one under results/, named for the GPU and the time."""

    profiling: str = field(
        default="auto",
        metadata=flags(
            Flag(
                "--profiling",
                "where SM activity and the other profiling metrics come from (default auto: the first of "
                "NVML GPM, DCGM and CUPTI PM sampling that works here)",
                choices=PROFILING_CHOICES,
            )
        ),
    )
    """Where SM activity and the other profiling metrics come from (--profiling): auto, gpm, dcgm, cupti or
    none."""

    smi: bool = field(
        default=True,
        metadata=flags(Flag("--no-smi", "do not run the nvidia-smi process beside NVML", action="store_false")),
    )
    """Run nvidia-smi beside NVML (False: --no-smi)."""

    peaks: bool = field(
        default=False,
        metadata=flags(
            Flag("--no-peaks", "skip measuring the sustained copy and matmul peaks", RUN, action="store_false"),
            Flag(
                "--peaks",
                "measure this GPU's sustained copy and matmul peaks before the command starts (about "
                "12 s); the summary then also has mfu_measured_pct",
                WATCH,
                action="store_true",
            ),
        ),
    )
    """Measure this GPU's sustained copy and matmul peaks before anything else runs: `run` does unless
    --no-peaks, `watch` only with --peaks."""

    price_per_gpu_hour: float | None = field(
        default=None,
        metadata=flags(
            Flag(
                "--price-per-gpu-hour",
                "what one GPU-hour costs: the receipt at the end then gives the cost of the job's "
                "GPU-hours and of those that did no tensor work",
                WATCH,
                type=non_negative,
                metavar="X",
            )
        ),
    )
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
