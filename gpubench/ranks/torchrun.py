"""`gpubench run` under torchrun: what every rank must agree on before anything runs, the distributed run,
and rank 0's tables. A problem on any rank is one sentence, printed once by rank 0, and exit 2 on every rank.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from gpubench.ranks.launch import Comm, Launch, RankProblem, start, stop
from gpubench.record.config import RecordingConfig
from gpubench.record.preflight import check_out, need_cuda_torch, require_gpu
from gpubench.record.recording import Reporter
from gpubench.suite.runcmd import chosen, without_distributed
from gpubench.suite.loop import RunOptions
from gpubench.usage import UsageError, interrupted_code, say_error

# The longest a rank waits for the others at one step (a scenario's warm-up and measurement on the slowest
# rank) before the job fails instead of hanging.
TIMEOUT_S = 600.0
DIST_TABLE = (
    "gpu_util_pct",
    "sm_active_pct",
    "power_w_energy",
    "kernel_ms",
    "algbw_gbps",
    "busbw_gbps",
    "nvlink_pct",
    "arrival_delay_ms",
    "wait_ms",
)


def run(
    config: RecordingConfig,
    launch: Launch,
    names: list[str],
    duration_s: float,
    gap_s: float,
    slow_rank: int | None = None,
) -> int:
    """`gpubench run` on every rank of a torchrun job; the exit code of this rank."""
    scenarios = chosen(names, duration_s, distributed=True)
    import torch

    cuda = torch.cuda.is_available()
    comm = start(launch, "nccl" if cuda else "gloo", TIMEOUT_S)
    try:
        opts = RunOptions(
            scenarios=scenarios,
            out_dir=Path("."),
            recording=config,
            duration_s=duration_s,
            gap_s=gap_s,
            slow_rank=slow_rank,
        )
        return _run(opts, launch, comm)
    except (RankProblem, UsageError) as err:  # raised on every rank alike
        if launch.is_root:
            say_error("run", err)
        comm.all_gather(None)  # the others exit only once rank 0 has said why: torchrun then stops the job
        return 2
    finally:
        stop()


def _problem(check) -> str | None:
    try:
        check()
    except UsageError as err:
        return str(err)
    return None


def _gpu_check() -> None:
    require_gpu("run")
    need_cuda_torch()


def _run(opts: RunOptions, launch: Launch, comm: Comm) -> int:
    """The run of `opts` (its out_dir not yet chosen) on this rank."""
    from gpubench.ranks.lockstep import DistBackend, run_distributed
    from gpubench.record.rundir import default_run_dir

    config = opts.recording
    if opts.slow_rank is not None and not -launch.world_size <= opts.slow_rank < launch.world_size:
        raise UsageError(f"--slow-rank {opts.slow_rank} is not a rank of this job (0 to {launch.world_size - 1})")
    if launch.world_size < 2:  # a collective of one rank measures nothing
        opts = replace(opts, scenarios=without_distributed(opts.scenarios))
    backend = DistBackend()
    comm.agree(_problem(_gpu_check))
    import torch

    if launch.local_rank < torch.cuda.device_count():  # else the next step says which rank has no GPU
        torch.cuda.set_device(launch.local_rank)  # before anything can make a context on another GPU
    out, problem = None, None
    if launch.is_root:  # only rank 0 writes, so only its file system matters
        try:
            gpu, _ = backend.resolve(launch.local_rank, False)
            out = config.out or default_run_dir(f"{gpu.name} x{launch.world_size}")
            problem = _problem(lambda: check_out(out))
        except IndexError as err:
            problem = f"LOCAL_RANK {launch.local_rank} names no GPU: {err}"
    comm.agree(problem)
    opts = replace(opts, out_dir=out or Path("."))
    reporter = Reporter()
    if launch.is_root:
        from gpubench.show.console import ConsoleReporter

        reporter = ConsoleReporter()
        if config.device not in (None, 0):
            reporter.warn(f"--device {config.device} is ignored under torchrun: each rank uses CUDA device LOCAL_RANK")
    try:
        run_dir, summary = run_distributed(opts, launch, comm, backend, reporter)
    except KeyboardInterrupt as err:
        if launch.is_root:
            print(f"interrupted: what was recorded is in {out} (manifest says incomplete)")
        return interrupted_code(err)
    if launch.is_root:
        _print(run_dir, summary, launch)
    return 0


def _print(run_dir: Path, summary: list[dict], launch: Launch) -> None:
    from gpubench.read.summary import row_label
    from gpubench.show.console import make_console, print_table, say_run_dir
    from gpubench.suite.scenarios import BY_NAME

    rows = [{**r, "scenario": row_label(r)} for r in summary]
    print_table(rows, f"{launch.world_size} ranks — medians over each scenario's steady window, per rank")
    dist_rows = [
        {**r, "scenario": row_label(r)} for r in summary if getattr(BY_NAME.get(r["scenario"]), "distributed", False)
    ]
    if dist_rows:
        print_table(
            dist_rows,
            "collectives: busbw as nccl-tests defines it; arrival delay after the first rank",
            columns=DIST_TABLE,
        )
    say_run_dir(make_console(), run_dir)
