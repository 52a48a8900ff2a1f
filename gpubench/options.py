"""The gpubench command line's parser: run, watch, top, list, doctor, plot, report and compare, their help, and the
recording options each field of RecordingConfig gives its verbs (gpubench.cli reads them back and dispatches).
Imports are deferred to the parser's build, and load no GPU library."""

from __future__ import annotations

import argparse
from pathlib import Path

from gpubench.usage import non_negative, positive

DESCRIPTION = """\
gpubench runs small, honest GPU kernels that each fool one utilization metric, records every metric a
user would look at while they run (nvidia-smi's GPU-Util, DCGM's SM activity and occupancy, tensor and
DRAM activity, power, clocks) and sets them beside what the kernel really achieved: FLOP/s and bytes/s
as a fraction of this GPU's peaks. A GPU can read 100% busy while doing almost no arithmetic.
"""

EPILOG = """\
examples:
  gpubench doctor                     what this machine can measure, and why not
  gpubench list                       the scenarios and what each one shows
  gpubench run                        the default suite (about 2 minutes), into results/<gpu>-<time>/
  gpubench run 'spin-*' copy-triton   a subset, by name or glob
  gpubench watch -- python train.py   your own job: the ladder per phase, MFU and a verdict
  torchrun --nproc-per-node=2 -m gpubench run allreduce-1gib straggler
                                      several GPUs, one process each; rank 0 writes one run directory
  gpubench plot results/<run>         figures from a run directory (no GPU needed)
  gpubench report results/<run>       report.md and report.html from a run directory
  gpubench report results/<run> --out /tmp/r   the same, leaving the run directory untouched
  gpubench compare results/<before> results/<after>   two runs side by side: is the change beyond their spread?
"""

COMPARE_DESCRIPTION = """\
Two or more run directories of one kind side by side, the first the base: phase by phase for watched jobs,
scenario by scenario for suite runs. For each phase or scenario they share: nvidia-smi's GPU-Util, the work
done (MFU, or MBU where memory bounds the row), the tensor ceiling and the rate (steps/s, or a call's time),
with each later run's change of the rate against the first, and whether it lies beyond the runs' own spread
(the two rows' p10-p90 ranges of the time a step or a call took do not overlap). Printed, and written with
one figure as report.md and report.html; needs no GPU.
"""

COMPARE_EPILOG = """\
examples:
  gpubench compare results/watch-eager results/watch-compiled     before and after torch.compile
  gpubench compare results/batch8 results/batch16 results/batch32 --out /tmp/batches
"""


TORCHRUN_HELP = """\
several GPUs:
  torchrun --nproc-per-node=N -m gpubench run [NAME ...] runs one process per GPU: each rank runs every
  scenario on its own GPU, CUDA device LOCAL_RANK (--device is ignored), single-GPU scenarios included,
  all at once and in step. Local rank 0 of each node samples that node's GPUs; rank 0 gathers everything
  and writes one run directory, with a rank and GPU UUID on every row. The distributed scenarios
  (allreduce-*, straggler*) run only under torchrun, and join the default suite there.
"""


def add_recording_options(p: argparse.ArgumentParser, verb: str, *names: str) -> None:
    """The flags of RecordingConfig's fields `names` (default: every field with a flag on `verb`, in field
    order), as each field's metadata gives them (gpubench.record.config.Flag), the value under the field's name."""
    from dataclasses import fields

    from gpubench.record.config import RecordingConfig

    by_name = {f.name: f for f in fields(RecordingConfig)}
    for f in [by_name[n] for n in names] or by_name.values():
        for flag in f.metadata.get("flags", ()):
            if verb in flag.verbs:
                options = flag.options if "action" in flag.options else {"default": f.default, **flag.options}
                p.add_argument(flag.name, dest=f.name, help=flag.help, **options)


def parser() -> argparse.ArgumentParser:
    from gpubench import __version__
    from gpubench.read.summary import TRIM_S
    from gpubench.show.top.options import add_parser as add_top_parser
    from gpubench.suite.scenarios import DECODE_S, DURATION_S, GAP_S

    p = argparse.ArgumentParser(
        prog="gpubench", description=DESCRIPTION, epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--version", action="version", version=f"gpubench {__version__}")
    sub = p.add_subparsers(dest="command", metavar="COMMAND")

    r = sub.add_parser(
        "run",
        help="run scenarios on the local GPU and write a run directory",
        description="Run scenarios on the local GPU while sampling every metric; write "
        "manifest.json, samples.arrows and summary.csv/json into a run directory.",
        epilog=TORCHRUN_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    r.add_argument("names", nargs="*", metavar="NAME", help="scenario names or globs (default: the default suite)")
    r.add_argument(
        "--duration",
        type=positive,
        default=DURATION_S,
        metavar="S",
        help=f"seconds each scenario runs while sampled (default {DURATION_S:g}, and {DECODE_S:g} for "
        f"the decode sweep's points, which scale alike; the first {TRIM_S:g} s is not summarized, "
        "so it must be longer than that)",
    )
    r.add_argument(
        "--gap",
        type=non_negative,
        default=GAP_S,
        metavar="S",
        help=f"idle seconds between scenarios so their metrics settle apart (default {GAP_S:g})",
    )
    add_recording_options(r, "run")  # --interval, --device, --all-gpus, --out, --profiling, --no-smi, --no-peaks
    r.add_argument(
        "--slow-rank",
        type=int,
        metavar="R",
        help="straggler scenarios under torchrun: the rank that sleeps before each step (default the last)",
    )

    add_watch_parser(sub)
    add_top_parser(sub)
    sub.add_parser("list", help="list the scenarios and what each one demonstrates")
    sub.add_parser("doctor", help="show the GPUs and which metric sources work here, and why not")
    for name, what, where in (
        ("plot", "write the figures of a run directory", "RUN_DIR/figures"),
        ("report", "write report.md and report.html (figures embedded) for a run directory", "RUN_DIR"),
    ):
        s = sub.add_parser(
            name,
            help=what,
            description=what[0].upper() + what[1:] + "; needs no GPU. A "
            "partial run (interrupted or killed) works too, and says so.",
        )
        s.add_argument("run_dir", type=Path, metavar="RUN_DIR")
        s.add_argument(
            "--out",
            type=Path,
            metavar="DIR",
            help=f"write into DIR instead of {where}, leaving the run directory untouched (for a "
            "committed or read-only run); DIR must be new, empty, or hold only gpubench's figures "
            f"and reports, and lie outside the run directory unless it is {where} itself, as "
            "without --out",
        )
    c = sub.add_parser(
        "compare",
        help="two or more runs side by side: GPU-Util, the work done and the change of the rate",
        description=COMPARE_DESCRIPTION,
        epilog=COMPARE_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    c.add_argument("run_dirs", type=Path, nargs="+", metavar="RUN", help="run directories; the first is the base")
    c.add_argument(
        "--out",
        type=Path,
        metavar="DIR",
        help="write report.md, report.html and figures/ into DIR (default compare-A-vs-B in the current "
        "directory); DIR must be new, empty or hold only what compare wrote, and lie outside the runs",
    )
    return p


WATCH_DESCRIPTION = """\
Run CMD as a child and record every metric while it runs: nvidia-smi's GPU-Util, SM activity and
occupancy, tensor and DRAM activity, power and clocks. The command's output passes through untouched,
Ctrl-C reaches it first, and gpubench exits with its exit code (128+N where signal N ended it; 127
where it is not found, 126 where it cannot be run); on a machine without a GPU it still runs,
unrecorded, as it would alone. In your code, gpubench.mark("eval") starts a phase and
gpubench.step(flops=...) records a step and its FLOPs (gpubench.count_flops counts them); outside a
watch both cost nothing. A PyTorch job that calls neither still gets steps (each optimizer step) and
FLOPs (one step counted), and phases from what its GPU did (--no-auto turns the optimizer hook off).
The summary has one row per phase: the metric ladder, steps/s, TFLOP/s, MFU, where each number came
from, and a verdict from the rules in gpubench/read/phase_verdict.py.
"""

WATCH_EPILOG = """\
examples:
  gpubench watch -- python train.py --batch 16
  gpubench watch --dtype fp32 -- python train.py --fp32    MFU against the FP32 peak
  CUDA_VISIBLE_DEVICES=1 gpubench watch -- torchrun --nproc-per-node 1 train.py
  gpubench watch --duration 60                            attach: record the GPUs for 60 s
  gpubench watch --metrics-port 9401 -- python train.py   Prometheus scrapes MFU beside DCGM's util
  gpubench watch --price-per-gpu-hour 3.5 -- ./train.sh   the receipt at the end names the cost
  gpubench watch --every 30 -- ./train.sh >log 2>&1      a live line in the log every 30 s
"""


def add_watch_parser(sub) -> None:
    from gpubench.job.live import WINDOW_S
    from gpubench.truth.peaks import UNITS
    from gpubench.job.speak import add_options

    w = sub.add_parser(
        "watch",
        help="run your own command and record the metric ladder per phase, with a verdict",
        usage="gpubench watch [options] -- CMD [ARG ...]\n       gpubench watch [options] --duration S",
        description=WATCH_DESCRIPTION,
        epilog=WATCH_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    w.add_argument("cmd", nargs=argparse.REMAINDER, metavar="-- CMD [ARG ...]", help="the command to run and watch")
    w.add_argument(
        "--duration",
        type=positive,
        metavar="S",
        help="no command: record whatever runs on the GPUs for S seconds (or until Ctrl-C)",
    )
    w.add_argument(
        "--dtype",
        choices=list(UNITS),
        default="bf16",
        help="the precision whose datasheet peak MFU divides by (default bf16)",
    )
    add_recording_options(w, "watch", "peaks")
    w.add_argument(
        "--metrics-port",
        type=port,
        metavar="PORT",
        help="while the command runs, serve the ladder of the latest interval per GPU and the job's "
        f"steps/s, MFU, MBU and verdict over the last {WINDOW_S:g} s at http://HOST:PORT/metrics, in "
        "Prometheus' text format with dcgm-exporter's names (0: a free port; needs the "
        "[metrics] extra)",
    )
    w.add_argument(
        "--no-auto",
        action="store_true",
        help="no steps or FLOPs from the command's PyTorch optimizer: only what its own "
        "gpubench.step() calls report (the same as GPUBENCH_AUTO=0 in its environment)",
    )
    add_recording_options(w, "watch", "price_per_gpu_hour")
    add_options(w)  # --every, --quiet: the live rows while the command runs
    add_recording_options(w, "watch", "interval_s", "device", "all_gpus", "out", "profiling", "smi")


def port(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a port number") from None
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"a port is 0 to 65535, got {text}")
    return value
