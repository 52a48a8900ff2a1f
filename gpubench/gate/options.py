"""The pytest plugin's options, in one group: how a benchmark is timed, where its baseline is kept and how it
is measured, and how the gate decides."""

from __future__ import annotations

import argparse

from gpubench.gate.fixture import MAX_TIME_S, MIN_TIME_S, SETTLE_MIN_S, SETTLE_S
from gpubench.gate.judgement import LEAST_FLOOR_PCT
from gpubench.gate.runs import FEW_RUNS, RUNS, SECONDS
from gpubench.usage import non_negative, positive


def count(text: str) -> int:
    """A whole number of one or more, for an option's parser."""
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"a whole number of one or more, not {text}")
    return value


def add_options(parser) -> None:
    group = parser.getgroup("gpu-benchmark", "gpu_benchmark (GPU time per call with CUDA events; gpubench)")
    group.addoption(
        "--gpu-min-time",
        metavar="S",
        type=positive,
        default=MIN_TIME_S,
        help=f"the least GPU time of each gpu_benchmark's rounds, in seconds (default {MIN_TIME_S:g}); "
        "they go on until the intervals of their median and quartiles are within a quarter of the "
        "floor they are held against, or --gpu-max-time",
    )
    group.addoption(
        "--gpu-max-time",
        metavar="S",
        type=positive,
        default=MAX_TIME_S,
        help=f"the most GPU time of each gpu_benchmark's rounds, in seconds (default {MAX_TIME_S:g}; "
        "4 times both while a power or thermal limit sways the clock)",
    )
    group.addoption(
        "--gpu-settle",
        metavar="S",
        type=non_negative,
        default=SETTLE_S,
        help=f"run each benchmark back to back before its timed rounds: {SETTLE_MIN_S:g} s, and on to S "
        "seconds where a power or thermal limit holds by then, so the rounds start at the clock the "
        f"GPU sustains (default {SETTLE_S:g})",
    )
    group.addoption(
        "--gpu-no-flush-l2",
        action="store_true",
        help="never flush L2 between rounds: time back-to-back calls even when the working set fits "
        "in L2 (by default such calls are timed one per round after an L2 flush)",
    )
    group.addoption(
        "--gpu-baseline",
        metavar="DIR",
        help="compare with the baseline of this GPU model in DIR (DIR/<gpu>.json, e.g. "
        "DIR/h100-80gb-hbm3.json): sets --benchmark-compare to that file and refuses a file "
        "measured on another GPU model, memory size or MIG mode",
    )
    group.addoption(
        "--gpu-save-baseline",
        metavar="DIR",
        help="save this run as the baseline of this GPU model, DIR/<gpu>.json (replaced only "
        "when the run has written it in full), then run the same command again in fresh processes "
        "until --gpu-baseline-runs processes have measured its between-run floor",
    )
    group.addoption(
        "--gpu-baseline-runs",
        metavar="N",
        type=count,
        default=RUNS,
        help="the most processes that measure a saved baseline, one after another, this one first "
        f"(default {RUNS}): a process moves a small call's time in ways its own rounds cannot show "
        "(where its buffers land, its launches), and the floor is the bound on the next process "
        "that N of them give, t(N-1) x their spread x sqrt(1 + 1/N): 14 spreads from 4 runs, 5.7 "
        "from 8, 5.0 from 10; a benchmark whose floor is as narrow as it needs is left out of "
        "the processes that follow, and the command stops once none is left",
    )
    group.addoption(
        "--gpu-baseline-seconds",
        metavar="S",
        type=non_negative,
        default=SECONDS,
        help="with --gpu-save-baseline, start no further process that would end more than S seconds "
        f"after the command began, once {FEW_RUNS} have measured (default {SECONDS:g}; 0: no "
        "limit): the floors still open then come from the processes that ran, wider for the ones "
        "they lack, and the baseline's end says so",
    )
    group.addoption(
        "--gpu-measure-floor",
        metavar="DIR",
        help="rerun the benchmarks unchanged against DIR/<gpu>.json and add the rerun to that file's "
        "between-run floor (what --gpu-save-baseline's runs do, by hand)",
    )
    group.addoption(
        "--gpu-noise-floor",
        metavar="PCT",
        type=non_negative,
        default=LEAST_FLOOR_PCT,
        help="the least floor: a change within PCT%% of the baseline is never read as slower or faster, "
        "whatever the reruns measured; the floor of a baseline without reruns (default "
        f"{LEAST_FLOOR_PCT:g})",
    )
    group.addoption(
        "--gpu-allow-different-limits",
        action="store_true",
        help="compare with a baseline measured at another power limit, application clock or ECC mode "
        "(refused otherwise), and say so with every verdict",
    )
    group.addoption(
        "--gpu-fail-slower",
        action="store_true",
        help="fail the session (exit 1) when any benchmark reads slower against the baseline, or when "
        "none was compared; without a GPU, a usage error (exit 4): a gate that cannot compare "
        "must not pass",
    )
    group.addoption(
        "--gpu-verdict-json",
        metavar="PATH",
        help="write every verdict against the baseline, with its numbers, to PATH as JSON",
    )
