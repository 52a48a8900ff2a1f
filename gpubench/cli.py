"""The gpubench command line: run, watch, list, doctor, plot, report.

Imports are deferred to the command that needs them: `gpubench list` and `--help` load no GPU library.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import tempfile
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
  gpubench watch -- python train.py   your own job: the ladder per phase, MFU and a verdict
  torchrun --nproc-per-node=2 -m gpubench run allreduce-1gib straggler
                                      several GPUs, one process each; rank 0 writes one run directory
  gpubench plot results/<run>         figures from a run directory (no GPU needed)
  gpubench report results/<run>       report.md and report.html from a run directory
  gpubench report results/<run> --out /tmp/r   the same, leaving the run directory untouched
"""


TORCHRUN_HELP = """\
several GPUs:
  torchrun --nproc-per-node=N -m gpubench run [NAME ...] runs one process per GPU: each rank runs every
  scenario on its own GPU, CUDA device LOCAL_RANK (--device is ignored), single-GPU scenarios included,
  all at once and in step. Local rank 0 of each node samples that node's GPUs; rank 0 gathers everything
  and writes one run directory, with a rank and GPU UUID on every row. The distributed scenarios
  (allreduce-*, straggler*) run only under torchrun, and join the default suite there.
"""


class UsageError(Exception):
    """Bad input: one sentence for the user, exit code 2."""


def say_error(command: str, err) -> None:
    print(f"gpubench {command}: error: {err}", file=sys.stderr)


def number(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"must be a finite number, got {text}")
    return value


def positive(text: str) -> float:
    value = number(text)
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be greater than 0, got {text}")
    return value


def non_negative(text: str) -> float:
    value = number(text)
    if not value >= 0:
        raise argparse.ArgumentTypeError(f"must be 0 or more, got {text}")
    return value


def add_recording_options(p: argparse.ArgumentParser, device_default: int | None = 0,
                          out_default: str = "results/<gpu>-<YYYYmmdd-HHMMSS>") -> None:
    """Options every recording verb shares, with one meaning."""
    from gpubench.sources.policy import DEFAULT_INTERVAL_S, PROFILING_CHOICES

    device_note = (f"default {device_default}" if device_default is not None else
                   "default: the GPUs the command sees under its CUDA_VISIBLE_DEVICES, else every GPU")

    p.add_argument("--interval", type=positive, default=DEFAULT_INTERVAL_S, metavar="S",
                   help=f"sampling interval (default {DEFAULT_INTERVAL_S:g}; never shorter than the profiling "
                        "counters refresh: faster rows would only repeat values)")
    p.add_argument("--device", type=int, default=device_default, metavar="N",
                   help=f"GPU in CUDA's numbering, as this process sees it under CUDA_VISIBLE_DEVICES ({device_note})")
    p.add_argument("--all-gpus", action="store_true", help="sample every GPU of the machine, not only --device")
    p.add_argument("--out", type=Path, metavar="DIR", help=f"run directory (default {out_default})")
    p.add_argument("--profiling", choices=PROFILING_CHOICES, default="auto",
                   help="where SM activity and the other profiling metrics come from (default auto: NVML GPM "
                        "where the GPU supports it, else DCGM if dcgmi is on PATH)")
    p.add_argument("--no-smi", action="store_true", help="do not run the nvidia-smi process beside NVML")


def parser() -> argparse.ArgumentParser:
    from gpubench import __version__
    from gpubench.suite import DURATION_S, GAP_S
    from gpubench.summary import TRIM_S

    p = argparse.ArgumentParser(prog="gpubench", description=DESCRIPTION, epilog=EPILOG,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--version", action="version", version=f"gpubench {__version__}")
    sub = p.add_subparsers(dest="command", metavar="COMMAND")

    r = sub.add_parser("run", help="run scenarios on the local GPU and write a run directory",
                       description="Run scenarios on the local GPU while sampling every metric; write "
                                   "manifest.json, samples.csv and summary.csv/json into a run directory.",
                       epilog=TORCHRUN_HELP, formatter_class=argparse.RawDescriptionHelpFormatter)
    r.add_argument("names", nargs="*", metavar="NAME", help="scenario names or globs (default: the default suite)")
    r.add_argument("--duration", type=positive, default=DURATION_S, metavar="S",
                   help=f"seconds each scenario runs while sampled (default {DURATION_S:g}; the first "
                        f"{TRIM_S:g} s is not summarized, so it must be longer than that)")
    r.add_argument("--gap", type=non_negative, default=GAP_S, metavar="S",
                   help=f"idle seconds between scenarios so their metrics settle apart (default {GAP_S:g})")
    add_recording_options(r)
    r.add_argument("--no-peaks", action="store_true", help="skip measuring the sustained copy and matmul peaks")
    r.add_argument("--slow-rank", type=int, metavar="R",
                   help="straggler scenarios under torchrun: the rank that sleeps before each step (default the last)")

    add_watch_parser(sub)
    sub.add_parser("list", help="list the scenarios and what each one demonstrates")
    sub.add_parser("doctor", help="show the GPUs and which metric sources work here, and why not")
    for name, what, where in (
            ("plot", "write the figures of a run directory", "RUN_DIR/figures"),
            ("report", "write report.md and report.html (figures embedded) for a run directory", "RUN_DIR")):
        s = sub.add_parser(name, help=what, description=what[0].upper() + what[1:] + "; needs no GPU. A "
                           "partial run (interrupted or killed) works too, and says so.")
        s.add_argument("run_dir", type=Path, metavar="RUN_DIR")
        s.add_argument("--out", type=Path, metavar="DIR",
                       help=f"write into DIR instead of {where}, leaving the run directory untouched (for a "
                            "committed or read-only run); DIR must be new, empty, or hold only gpubench's figures "
                            "and reports")
    return p


WATCH_DESCRIPTION = """\
Run CMD as a child and record every metric while it runs: nvidia-smi's GPU-Util, SM activity and
occupancy, tensor and DRAM activity, power and clocks. The command's output passes through untouched,
Ctrl-C reaches it first, and gpubench exits with its exit code (128+N where signal N ended it; 127
where it is not found, 126 where it cannot be run). In your code, gpubench.mark("eval") starts a phase
and gpubench.step(flops=...) records a step and its FLOPs (gpubench.count_flops counts them); outside
a watch both cost nothing. The summary has one row per phase: the metric ladder, steps/s, TFLOP/s,
MFU, and a verdict from the rules in gpubench/verdict.py.
"""

WATCH_EPILOG = """\
examples:
  gpubench watch -- python train.py --batch 16
  gpubench watch --dtype fp32 -- python train.py --fp32    MFU against the FP32 peak
  CUDA_VISIBLE_DEVICES=1 gpubench watch -- torchrun --nproc-per-node 1 train.py
  gpubench watch --duration 60                            attach: record the GPUs for 60 s
"""


def add_watch_parser(sub) -> None:
    from gpubench.phases import UNITS

    w = sub.add_parser("watch", help="run your own command and record the metric ladder per phase, with a verdict",
                       usage="gpubench watch [options] -- CMD [ARG ...]\n       gpubench watch [options] --duration S",
                       description=WATCH_DESCRIPTION, epilog=WATCH_EPILOG,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    w.add_argument("cmd", nargs=argparse.REMAINDER, metavar="-- CMD [ARG ...]", help="the command to run and watch")
    w.add_argument("--duration", type=positive, metavar="S",
                   help="no command: record whatever runs on the GPUs for S seconds (or until Ctrl-C)")
    w.add_argument("--dtype", choices=list(UNITS), default="bf16",
                   help="the precision whose datasheet peak MFU divides by (default bf16)")
    w.add_argument("--peaks", action="store_true",
                   help="measure this GPU's sustained copy and matmul peaks before the command starts (about "
                        "12 s); the summary then also has mfu_measured_pct")
    add_recording_options(w, device_default=None, out_default="results/watch-<gpu>-<YYYYmmdd-HHMMSS>")


def cmd_watch(args) -> int:
    from gpubench.watch import cmd

    return cmd(args)


def cmd_list(args) -> int:
    from gpubench.suite import SCENARIOS, torchrun_hint

    width = max(len(s.name) for s in SCENARIOS)
    for s in SCENARIOS:
        mark = "*" if s.distributed else " " if s.default else "+"
        print(f"{mark} {s.name:<{width}}  {s.family:<9} {s.impl:<12} {s.story}")
    print("\n+ not in the default suite; run it by name")
    print(f"* {torchrun_hint([s for s in SCENARIOS if s.distributed])}")
    return 0


def cmd_doctor(args) -> int:
    from gpubench.doctor import diagnose

    code, lines = diagnose()
    print("\n".join(lines))
    return code


EXPLORE_DIR = Path(tempfile.gettempdir()) / "gpubench-report"


def reference_hint() -> str:
    roots = [Path.cwd() / "results", Path(__file__).resolve().parents[1] / "results"]
    runs = sorted({m.parent for root in roots if root.is_dir() for m in root.glob("*/manifest.json")})
    if runs:
        return f"to explore a recorded run without a GPU: gpubench report {runs[-1]} --out {EXPLORE_DIR}"
    return (f"to explore a recorded run without a GPU: gpubench report RUN_DIR --out {EXPLORE_DIR}, with a reference "
            "run from results/ in the gpubench repository")


def check_out(out: Path | None) -> None:
    from gpubench.rundir import check_writable

    if out is not None and (problem := check_writable(out)):
        raise UsageError(f"cannot write the run to --out: {problem}")


def require_gpu(command: str) -> None:
    """UsageError, with the way to explore a recorded run instead, where NVML finds no driver."""
    from gpubench import nvml

    try:
        nvml.device_count()
    except nvml.GpuUnavailable as err:
        raise UsageError(f"gpubench {command} needs an NVIDIA GPU: {err}; {reference_hint()}") from None


def gpu_for(args):
    """The GPU that --device names, and the GPUs to sample; UsageError where there is none."""
    from gpubench.backend import CudaBackend
    from gpubench.gpus import CudaUnavailable

    require_gpu(args.command)
    backend = CudaBackend()
    try:
        gpu, sampled = backend.resolve(args.device, args.all_gpus)
    except (IndexError, CudaUnavailable) as err:
        raise UsageError(f"--device {args.device}: {err}") from None
    return backend, gpu, sampled


def need_cuda_torch() -> None:
    import torch

    from gpubench.hints import TORCH_HINT

    if not torch.cuda.is_available():
        raise UsageError(f"PyTorch cannot use the GPU (torch {torch.__version__}, CUDA {torch.version.cuda}); "
                         f"{TORCH_HINT}")


def torchrun_launch():
    """The torchrun launch this process belongs to, or None."""
    from gpubench.dist import LaunchError, launch_from

    try:
        return launch_from(os.environ)
    except LaunchError as err:
        raise UsageError(str(err)) from None


def without_distributed(scenarios: list) -> list:
    """Outside torchrun the distributed scenarios are skipped, with the command that runs them."""
    from gpubench.suite import torchrun_hint

    skipped = [s for s in scenarios if s.distributed]
    rest = [s for s in scenarios if not s.distributed]
    if skipped and not rest:
        raise UsageError(torchrun_hint(skipped))
    if skipped:
        print(f"gpubench run: skipped: {torchrun_hint(skipped)}", file=sys.stderr)
    return rest


def cmd_run(args) -> int:
    from gpubench.suite import UnknownScenario, select
    from gpubench.summary import TRIM_S

    launch = torchrun_launch()
    try:
        scenarios = select(args.names, distributed=launch is not None)
    except UnknownScenario as err:
        raise UsageError(str(err)) from None
    if args.duration <= TRIM_S:
        raise UsageError(f"--duration must be longer than the {TRIM_S:g} s that each scenario's summary leaves out")
    if launch is not None:
        from gpubench.torchrun import run_under_torchrun

        return run_under_torchrun(args, launch, scenarios)
    scenarios = without_distributed(scenarios)
    if args.slow_rank is not None:
        print("gpubench run: --slow-rank applies only under torchrun, and is ignored", file=sys.stderr)
    check_out(args.out)
    backend, gpu, _ = gpu_for(args)
    need_cuda_torch()
    from gpubench.console import ConsoleReporter, print_table
    from gpubench.rundir import default_run_dir
    from gpubench.runner import RunOptions, run_suite

    out = args.out or default_run_dir(gpu.name)
    if args.out is None:  # --out was checked before the GPU was asked for
        check_out(out)
    opts = RunOptions(scenarios=scenarios, out_dir=out, device=args.device, duration_s=args.duration,
                      gap_s=args.gap, interval_s=args.interval, profiling=args.profiling, smi=not args.no_smi,
                      all_gpus=args.all_gpus, measure_peaks=not args.no_peaks)
    reporter = ConsoleReporter()
    try:
        run_dir, summary = run_suite(opts, backend, reporter)
    except KeyboardInterrupt:
        reporter.console.print(f"interrupted: what was recorded is in {out} (manifest says incomplete)")
        return 130
    print_table(summary, f"{gpu.name} — medians over each scenario's steady window")
    print(f"run directory: {run_dir}\nnext: gpubench plot {run_dir} && gpubench report {run_dir}")
    return 0


def _load(run_dir: Path):
    from gpubench.rundir import RunDirError, load_run

    try:
        return load_run(run_dir)
    except RunDirError as err:
        raise UsageError(str(err)) from None
    except OSError as err:  # unreadable: permissions, a file vanished mid-read
        raise UsageError(f"cannot read {err.filename or run_dir}: {err.strerror or err}") from None


def output_dir(args, default: Path) -> Path:
    """Where plot or report writes: --out DIR, or default inside the run directory; UsageError, before
    anything is written, where that cannot work."""
    from gpubench.plots import FIGURES
    from gpubench.rundir import check_writable

    if args.out is not None:
        own = {"figures", "report.md", "report.html"} | {f"{f.name}.{x}" for f in FIGURES for x in ("png", "svg")}
        if problem := check_writable(args.out, may_hold=own):
            raise UsageError(f"cannot write to --out: {problem}")
        return args.out
    figures = args.run_dir / "figures"
    if figures.exists() and not figures.is_dir():
        raise UsageError(f"{figures} is a file, not a folder of figures: move it away, or write elsewhere with --out DIR")
    if args.run_dir.is_dir() and (problem := check_writable(default, may_hold=None)):
        raise UsageError(f"cannot write into the run directory: {problem}; write elsewhere with --out DIR")
    return default


def _written(args, write) -> int:
    """Run write() -> paths and print them; a refusal of the disk (read-only, full) is one sentence."""
    try:
        paths = write()
    except OSError as err:
        hint = "" if args.out else "; write elsewhere with --out DIR"
        raise UsageError(f"cannot write {err.filename or 'the output'}: {err.strerror or err}{hint}") from None
    for path in paths:
        print(path)
    return 0


def cmd_plot(args) -> int:
    from gpubench.plots import plot_run

    manifest, samples, summary = _load(args.run_dir)
    out = output_dir(args, args.run_dir / "figures")
    return _written(args, lambda: plot_run(args.run_dir, manifest, samples, summary, out))


def cmd_report(args) -> int:
    from gpubench.report import write_report

    manifest, samples, summary = _load(args.run_dir)
    out = output_dir(args, args.run_dir)
    return _written(args, lambda: write_report(args.run_dir, manifest, samples, summary, out))


COMMANDS = {"run": cmd_run, "watch": cmd_watch, "list": cmd_list, "doctor": cmd_doctor, "plot": cmd_plot,
            "report": cmd_report}


def main(argv: list[str] | None = None) -> int:
    p = parser()
    args = p.parse_args(argv)
    if args.command is None:
        p.print_help()
        return 2
    try:
        return COMMANDS[args.command](args)
    except UsageError as err:
        from gpubench.dist import is_quiet_rank

        if not is_quiet_rank(os.environ):  # under torchrun rank 0 speaks for every rank
            say_error(args.command, err)
        return 2
