"""What tools/gate/baseline.sh expected of each step, against what the step got: one line per check
(PASS, FAIL, or N/A where this machine cannot tell), a table of every benchmark over the unchanged runs
(how far processes moved it, its floor, the false-alarm rate a normal model gives at that floor, what each
slowdown read), and a summary that tools/readme/tables.py reads for the README.

    python -m tools.gate.baseline_check WORK_DIR BASELINE_JSON SUMMARY_JSON

WORK_DIR holds what the script left: exits.tsv (step, exit status or "skipped", seconds; a step run again by
--resume: its last line) and, per step, the verdicts with each run's round times (--gpu-verdict-json), its
output, and any probe's files (probe-N.json, research/bench_baseline_probe.py). BASELINE_RUNS and RERUNS
(environment) say how many the script asked for (8 and 20). Exits 1 when any check failed.
"""

from __future__ import annotations

import os
import statistics
import sys
from pathlib import Path

from tools.gate.checks import (
    SLOWER_FROM_US,
    Checks,
    baseline_facts,
    check_more_work,
    check_one_gpu,
    check_part,
    check_refusals,
    check_unchanged,
    finish,
    load,
    median_of,
    print_checks,
    print_table,
    table,
    times,
)
from tools.gate.checks import PART  # noqa: F401 - step b's benchmarks, named here as before

SUMMARY_VERSION = 2


def unsettled(baseline: dict) -> list[str]:
    """The benchmarks whose floors still needed processes when the baseline's command stopped."""
    from gpubench.gate import processes

    return processes.unsettled(baseline, 1.0)


def check(work: Path, baseline_path: Path) -> tuple[Checks, dict]:
    c, numbers = Checks(work), {"version": SUMMARY_VERSION}
    runs_asked, reruns_asked = int(os.environ.get("BASELINE_RUNS", 8)), int(os.environ.get("RERUNS", 20))
    baseline = load(baseline_path) or {}
    facts = baseline_facts(baseline)
    names = list(facts)

    # x. the experiment, where it ran: what moves a small call from one process to the next
    probes = [load(p) for p in sorted(work.glob("probe-*.json"))]
    broken = [p for p in probes if not p or p.get("errors")]
    c.add(
        "x-probe",
        "the experiment's processes",
        "every one that ran, whole",
        f"{len(probes)} ran"
        + (f", {len(broken)} with errors: {[p.get('errors') for p in broken if p]}" if broken else ""),
        not broken if probes else None,
    )
    numbers["probe"] = probe_summary([p for p in probes if p])

    # 1. the baseline, made by the README's recipe, and its floor
    c.exit("1-baseline", (0,))
    section = baseline.get("gpubench") or {}
    processes = section.get("processes", 1 + len(section.get("reruns") or []))
    if section.get("processes_max"):  # each benchmark measured by as few processes as its floor needs
        counts = section.get("floor_processes") or {}
        c.add(
            "1-baseline",
            "the baseline's processes",
            f"at most {runs_asked}, each benchmark's floor settled",
            f"{processes} processes; per benchmark "
            + ", ".join(f"{n.rsplit('::', 1)[-1]} {k}" for n, k in counts.items()),
            processes <= runs_asked and len(counts) == len(names) > 0 and not unsettled(baseline),
        )
    else:
        c.add(
            "1-baseline",
            "the baseline's processes",
            f"{runs_asked}, each measuring all {len(names)} benchmarks",
            f"{processes} processes, {len(section.get('floor_pct') or {})} benchmarks measured",
            processes == runs_asked and len(section.get("floor_pct") or {}) == len(names) > 0,
        )
    numbers["baseline"] = {"processes": processes, "benchmarks": facts}

    # c. unchanged runs: no slower, no faster, none fails
    reruns, spread, numbers["reruns"] = check_unchanged(c, names, reruns_asked)

    # a. more work in every call
    more = {}
    for pct, least_us in SLOWER_FROM_US.items():
        got = check_more_work(c, facts, pct, least_us)
        more[pct] = {n: {"word": v.get("word"), "median": median_of(v)} for n, v in got.items()}

    # b. more work in part of the calls
    got = check_part(c)
    numbers["part"] = {n: {"word": v.get("word"), "why": v.get("why"), "median": median_of(v)} for n, v in got.items()}

    # e. a gate that cannot compare refuses to pass
    check_refusals(c, work)

    # every step on the baseline's GPU: the floor holds processes on one GPU, not another of its model
    check_one_gpu(c, baseline)

    numbers["benchmarks"] = table(facts, spread, more, processes)
    numbers["time"] = times(c, reruns)
    return c, numbers


def probe_summary(probes: list[dict]) -> dict:
    """The experiment across its processes: for each call and way of timing it, the spread of the first
    placement's median across processes (the same code in another process) beside the spread across placements
    within a process, the L2 flush by reading against the one by writing, the graph's own launch, the timer."""

    def cv(xs):
        return 100 * statistics.stdev(xs) / statistics.mean(xs) if len(xs) > 1 else None

    out = {"processes": len(probes), "calls": {}}
    for call in sorted({c for p in probes for c in (p.get("placements") or {})}):
        rows = [p["placements"][call] for p in probes if call in (p.get("placements") or {})]
        methods = {}
        for m in ("host_us", "graph1_us", "warm_graph_us"):
            firsts = [r[0][m] for r in rows if r]
            within = [cv([x[m] for x in r]) for r in rows if len(r) > 1]
            methods[m] = {
                "median_us": statistics.median(firsts) if firsts else None,
                "between_processes_pct": cv(firsts),
                "across_placements_pct": statistics.mean(within) if within else None,
            }
        first = [r[0] for r in rows if r]
        flush = {
            k: statistics.median([x[k] for x in first if k in x]) if any(k in x for x in first) else None
            for k in ("host_us", "host_read_flush_us", "host_write_flush_again_us")
        }
        out["calls"][call] = {"methods": methods, "flush": flush}
    launch = [p["graph_launch"]["per_replay_us"] for p in probes if "graph_launch" in p]
    steps = [p["timer"]["step_ns"] for p in probes if "timer" in p]
    out["graph_launch_us"] = (
        {"median": statistics.median(launch), "spread_us": statistics.pstdev(launch)} if launch else None
    )
    out["timer_step_ns"] = statistics.median(steps) if steps else None
    return out


def print_probe(probe: dict) -> None:
    """The experiment in a few lines: how each way of timing a small call moved between processes and between
    placements within one."""

    def num(x, fmt):
        return "-" if x is None else format(x, fmt)

    if not probe.get("processes"):
        return
    print(
        f"probe, {probe['processes']} processes: timer step {num(probe.get('timer_step_ns'), '.1f')} ns; a graph "
        f"replay's own launch {num((probe.get('graph_launch_us') or {}).get('median'), '.2f')} us"
    )
    for call, row in probe.get("calls", {}).items():
        parts = [
            f"{m.removesuffix('_us')} {num(v['median_us'], '.3f')} us, moved "
            f"{num(v['between_processes_pct'], '.2f')}% between processes, "
            f"{num(v['across_placements_pct'], '.2f')}% across placements"
            for m, v in row["methods"].items()
        ]
        f = row["flush"]
        print(
            f"  {call}: {'; '.join(parts)}; flushed by reading {num(f['host_read_flush_us'], '.3f')} us against "
            f"writing {num(f['host_us'], '.3f')} and {num(f['host_write_flush_again_us'], '.3f')} us"
        )


def main(argv: list[str]) -> int:
    if len(argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    work, baseline_path, summary = (Path(a) for a in argv)
    c, numbers = check(work, baseline_path)
    print_checks(c)
    print_table(numbers["benchmarks"])
    print_probe(numbers["probe"])
    return finish(c, numbers, baseline_path, summary)


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
