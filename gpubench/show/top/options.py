"""`gpubench top`'s options and the help that teaches what each column and each verdict word means. It loads
no GPU library: `gpubench --help` builds it."""

from __future__ import annotations

import argparse
import textwrap

from gpubench.usage import number

from . import verdict
from .render import KEYS_HELP, SORTS

MIN_INTERVAL_S = 0.1  # GPM's refresh period (gpubench.record.sources.gpm): a faster refresh repeats values

COLUMNS_HELP = """\
columns, per GPU (each rung of the ladder tells apart what the one before it cannot):
  GPU-Util     nvidia-smi's number: the share of time in which any kernel, or a copy, ran; a single
               thread spinning on one SM reads 100%
  SM active    the share of time an SM held at least one warp, averaged over all SMs (GPM)
  occupancy    resident warps over the most the SMs can hold (GPM)
  tensor       the share of cycles the tensor (matrix) pipes were busy (GPM)
  DRAM         the share of cycles the memory interface was moving data (GPM)
  power/limit  board power (NVML's one-second average) against the power limit, in W
  SM clock     the SM clock now
  memory used  device memory in use, of the GPU's total
  under each GPU its processes: PID, user, the GPU memory it holds, its command line
  –            not read: SM active, occupancy, tensor and DRAM come from NVML GPM, which needs a Hopper or
               newer data-centre GPU (where a GPU has none, a note says so once)
"""


def _verdicts() -> str:
    lines = ["verdict, per GPU (the first that holds; the numbers behind it are in --json's `because`):"]
    for word, meaning, _ in verdict.RULES:
        lines.append(textwrap.fill(meaning, 110, initial_indent=f"  {word:<14}", subsequent_indent=" " * 16))
    lines.append(
        "  fake-busy is what GPU-Util hides: nvidia-smi, and every dashboard built on GPU-Util, show such\n"
        "  a GPU 100% busy while its SMs do nothing useful"
    )
    return "\n".join(lines) + "\n"


DESCRIPTION = (
    """\
Every GPU of this machine, live: the ladder of metrics, the processes on each GPU and a verdict word. No job
is wrapped and no root is needed; it reads NVML and its GPM counters only and never creates a CUDA context, so
looking costs the GPUs nothing. Works in tmux and over SSH. With no terminal (a pipe, a file, cron) it prints
one frame and exits, as with --once.

"""
    + COLUMNS_HELP
    + "\n"
)

EPILOG = f"""\
in the live view, {KEYS_HELP}:
  i GPU index, u GPU-Util, s SM active, o occupancy, t tensor, d DRAM, p power, m memory (largest first)

examples:
  gpubench top                          live on a terminal
  gpubench top --once                   one frame, then exit
  gpubench top --once --json | jq .     one JSON document: per GPU its readings, verdict and processes
  gpubench top --json --interval 5      a JSON line every 5 s until Ctrl-C
  gpubench top --loop --interval 60 >> gpus.log   a frame a minute, for a log
"""


def interval(text: str) -> float:
    value = number(text)
    if value < MIN_INTERVAL_S:
        raise argparse.ArgumentTypeError(
            f"must be at least {MIN_INTERVAL_S:g} s, the GPM counters' refresh period, got {text}"
        )
    return value


def add_parser(sub) -> None:
    t = sub.add_parser(
        "top",
        help="every GPU of this machine, live: the ladder, its processes, a verdict word "
        "(idle, fake-busy, host-bound, ...)",
        description=DESCRIPTION + _verdicts(),
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    t.add_argument(
        "--interval",
        type=interval,
        default=1.0,
        metavar="S",
        help="seconds between refreshes, and the window each reading covers (default 1)",
    )
    t.add_argument(
        "--once", action="store_true", help="print one frame (or one JSON document) after one interval, and exit"
    )
    t.add_argument(
        "--json",
        action="store_true",
        help="JSON instead of the frame: one document per line, per refresh until Ctrl-C (one with "
        "--once); a value not read is null",
    )
    t.add_argument(
        "--loop",
        action="store_true",
        help="a plain frame per refresh until Ctrl-C, with no screen control: for a log, or a terminal "
        "that cannot take the live view",
    )
    t.add_argument(
        "--sort",
        choices=list(SORTS),
        default="index",
        help="the order of the GPUs (default index); every key but the index puts the largest first",
    )
