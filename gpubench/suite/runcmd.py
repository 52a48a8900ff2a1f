"""`gpubench run` on one GPU and `gpubench list`: the scenarios chosen, the checks before anything runs, the
suite inside a Recording, and the table at the end. (Under torchrun, gpubench.ranks.torchrun runs them.)"""

from __future__ import annotations

import sys

from gpubench.record.config import RecordingConfig
from gpubench.record.preflight import check_out, need_cuda_torch, require_gpu
from gpubench.usage import UsageError, interrupted_code


def chosen(names: list[str], duration_s: float, distributed: bool) -> list:
    """The scenarios `gpubench run` names (or the default suite), and a --duration that leaves a window."""
    from gpubench.read.summary import TRIM_S
    from gpubench.suite.scenarios import UnknownScenario, select

    try:
        scenarios = select(names, distributed=distributed)
    except UnknownScenario as err:
        raise UsageError(str(err)) from None
    if duration_s <= TRIM_S:
        raise UsageError(f"--duration must be longer than the {TRIM_S:g} s that each scenario's summary leaves out")
    return scenarios


def without_distributed(scenarios: list) -> list:
    """Outside torchrun the distributed scenarios are skipped, with the command that runs them."""
    from gpubench.suite.scenarios import torchrun_hint

    skipped = [s for s in scenarios if s.distributed]
    rest = [s for s in scenarios if not s.distributed]
    if skipped and not rest:
        raise UsageError(torchrun_hint(skipped))
    if skipped:
        print(f"gpubench run: skipped: {torchrun_hint(skipped)}", file=sys.stderr)
    return rest


def gpu_for(config: RecordingConfig):
    """The GPU that --device names, and the GPUs to sample; UsageError where there is none."""
    from gpubench.record.gpus import CudaUnavailable
    from gpubench.suite.backend import CudaBackend

    require_gpu("run")
    backend = CudaBackend()
    device = config.device or 0
    try:
        gpu, sampled = backend.resolve(device, config.all_gpus)
    except (IndexError, CudaUnavailable) as err:
        raise UsageError(f"--device {device}: {err}") from None
    return backend, gpu, sampled


def run(
    config: RecordingConfig, names: list[str], duration_s: float, gap_s: float, slow_rank: int | None = None
) -> int:
    """`gpubench run` on this process's GPU."""
    scenarios = without_distributed(chosen(names, duration_s, distributed=False))
    if slow_rank is not None:
        print("gpubench run: --slow-rank applies only under torchrun, and is ignored", file=sys.stderr)
    check_out(config.out)
    backend, gpu, _ = gpu_for(config)
    need_cuda_torch()
    from gpubench.record.rundir import default_run_dir
    from gpubench.show.console import ConsoleReporter, make_console, print_table, say, say_run_dir
    from gpubench.suite.loop import RunOptions, run_suite

    out = config.out or default_run_dir(gpu.name)
    if config.out is None:  # --out was checked before the GPU was asked for
        check_out(out)
    opts = RunOptions(scenarios=scenarios, out_dir=out, recording=config, duration_s=duration_s, gap_s=gap_s)
    reporter = ConsoleReporter()
    try:
        run_dir, summary = run_suite(opts, backend, reporter)
    except KeyboardInterrupt as err:
        say(reporter.console, f"interrupted: what was recorded is in {out} (manifest says incomplete)")
        return interrupted_code(err)
    print_table(summary, f"{gpu.name} — medians over each scenario's steady window")
    say_run_dir(make_console(), run_dir)
    return 0


def list_scenarios() -> int:
    """`gpubench list`: every scenario and the one sentence it demonstrates."""
    from gpubench.suite.scenarios import SCENARIOS, torchrun_hint

    width = max(len(s.name) for s in SCENARIOS)
    for s in SCENARIOS:
        mark = "*" if s.distributed else " " if s.default else "+"
        print(f"{mark} {s.name:<{width}}  {s.family:<9} {s.impl:<12} {s.story}")
    print("\n+ not in the default suite; run it by name")
    print(f"* {torchrun_hint([s for s in SCENARIOS if s.distributed])}")
    return 0
