"""The gpubench command line: run, list, doctor, plot, report."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

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
  gpubench plot results/<run>         figures from a run directory (no GPU needed)
  gpubench report results/<run>       report.md and report.html from a run directory
"""


class UsageError(Exception):
    """Bad input: one sentence for the user, exit code 2."""


def _positive(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be greater than 0, got {text}")
    return value


def _non_negative(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not value >= 0:
        raise argparse.ArgumentTypeError(f"must be 0 or more, got {text}")
    return value


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="gpubench", description=DESCRIPTION, epilog=EPILOG,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="command", metavar="COMMAND")

    r = sub.add_parser("run", help="run scenarios on the local GPU and write a run directory",
                       description="Run scenarios on the local GPU while sampling every metric; write "
                                   "manifest.json, samples.csv and summary.csv/json into a run directory.")
    r.add_argument("names", nargs="*", metavar="NAME", help="scenario names or globs (default: the default suite)")
    r.add_argument("--duration", type=_positive, default=5.0, metavar="S",
                   help="seconds each scenario runs while sampled (default 5; the first 0.5 s is not summarized)")
    r.add_argument("--gap", type=_non_negative, default=1.0, metavar="S",
                   help="idle seconds between scenarios so their metrics settle apart (default 1)")
    r.add_argument("--interval", type=_positive, default=0.1, metavar="S",
                   help="sampling interval (default 0.1, the GPM refresh; faster only repeats values)")
    r.add_argument("--device", type=int, default=0, metavar="N", help="GPU index to run on (default 0)")
    r.add_argument("--all-gpus", action="store_true", help="sample every GPU, not only --device")
    r.add_argument("--out", type=Path, metavar="DIR", help="run directory (default results/<gpu>-<YYYYmmdd-HHMMSS>)")
    r.add_argument("--profiling", choices=["auto", "gpm", "dcgm", "none"], default="auto",
                   help="where SM activity and the other profiling metrics come from (default auto: DCGM "
                        "if dcgmi is on PATH, else NVML GPM)")
    r.add_argument("--no-smi", action="store_true", help="do not run the nvidia-smi process beside NVML")
    r.add_argument("--no-peaks", action="store_true", help="skip measuring copy and matmul peaks at the start")

    sub.add_parser("list", help="list the scenarios and what each one demonstrates")
    sub.add_parser("doctor", help="show the GPUs and which metric sources work here, and why not")
    for name, what in (("plot", "write the figures of a run directory into RUN_DIR/figures/"),
                       ("report", "write report.md and report.html for a run directory")):
        s = sub.add_parser(name, help=what, description=what[0].upper() + what[1:] + "; needs no GPU.")
        s.add_argument("run_dir", type=Path, metavar="RUN_DIR")
    return p


def cmd_list(args) -> int:
    from gpubench.suite import SCENARIOS

    width = max(len(s.name) for s in SCENARIOS)
    for s in SCENARIOS:
        mark = " " if s.default else "+"
        print(f"{mark} {s.name:<{width}}  {s.impl:<6}  {s.story}")
    print("\n+ not in the default suite; run it by name")
    return 0


def cmd_doctor(args) -> int:
    from gpubench.doctor import diagnose

    code, lines = diagnose()
    print("\n".join(lines))
    return code


def reference_hint() -> str:
    roots = [Path.cwd() / "results", Path(__file__).resolve().parents[1] / "results"]
    runs = sorted({m.parent for root in roots if root.is_dir() for m in root.glob("*/manifest.json")})
    if runs:
        return f"to explore a recorded run without a GPU: gpubench plot {runs[-1]}"
    return "to explore a recorded run without a GPU, use the reference runs under results/ in the gpubench repository"


def cmd_run(args) -> int:
    from gpubench import nvml
    from gpubench.results import check_writable, default_run_dir
    from gpubench.suite import UnknownScenario, select

    try:
        scenarios = select(args.names)
    except UnknownScenario as err:
        raise UsageError(str(err)) from None
    if args.out is not None:
        problem = check_writable(args.out)
        if problem:
            raise UsageError(f"cannot write the run to --out: {problem}")
    try:
        count = nvml.device_count()
    except nvml.GpuUnavailable as err:
        raise UsageError(f"gpubench run needs an NVIDIA GPU: {err}; {reference_hint()}") from None
    if not 0 <= args.device < count:
        raise UsageError(f"--device {args.device} does not exist: this machine has {count} GPU(s)")
    import torch

    if not torch.cuda.is_available():
        raise UsageError(f"PyTorch cannot use the GPU (torch {torch.__version__}, CUDA {torch.version.cuda}); "
                         "install a CUDA build of PyTorch")
    name = nvml.device_info(args.device)["name"]
    out = args.out or default_run_dir(name)
    if args.out is None and (problem := check_writable(out)):
        raise UsageError(f"cannot write the run: {problem}")

    from gpubench.backend import CudaBackend
    from gpubench.console import ConsoleReporter, summary_table
    from gpubench.runner import RunOptions, run_suite

    opts = RunOptions(scenarios=scenarios, out_dir=out, device=args.device, duration_s=args.duration,
                      gap_s=args.gap, interval_s=args.interval, profiling=args.profiling, smi=not args.no_smi,
                      all_gpus=args.all_gpus, measure_peaks=not args.no_peaks)
    reporter = ConsoleReporter()
    try:
        run_dir, summary = run_suite(opts, CudaBackend(), reporter)
    except KeyboardInterrupt:
        reporter.console.print(f"interrupted: what was recorded is in {out} (manifest says incomplete)")
        return 130
    from rich.console import Console

    console = Console()
    if not console.is_terminal:  # a log file gets the whole table, not one cut to 80 columns
        console = Console(width=180)
    console.print(summary_table(summary, title=f"{name} — medians over each scenario's steady window"))
    print(f"run directory: {run_dir}\nnext: gpubench plot {run_dir} && gpubench report {run_dir}")
    return 0


def _load(run_dir: Path):
    from gpubench.results import RunDirError, load_run

    try:
        return load_run(run_dir)
    except RunDirError as err:
        raise UsageError(str(err)) from None


def cmd_plot(args) -> int:
    from gpubench.plots import plot_run

    manifest, samples, summary = _load(args.run_dir)
    for path in plot_run(args.run_dir, manifest, samples, summary):
        print(path)
    return 0


def cmd_report(args) -> int:
    from gpubench.report import write_report

    manifest, samples, summary = _load(args.run_dir)
    for path in write_report(args.run_dir, manifest, samples, summary):
        print(path)
    return 0


COMMANDS = {"run": cmd_run, "list": cmd_list, "doctor": cmd_doctor, "plot": cmd_plot, "report": cmd_report}


def main(argv: list[str] | None = None) -> int:
    p = parser()
    args = p.parse_args(argv)
    if args.command is None:
        p.print_help()
        return 2
    try:
        return COMMANDS[args.command](args)
    except UsageError as err:
        print(f"gpubench {args.command}: error: {err}", file=sys.stderr)
        return 2
