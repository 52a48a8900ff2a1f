"""What tools/gate/effort.py expected of each step, against what the step got: one line per check (PASS, FAIL,
or N/A where this machine cannot tell), a table of every benchmark over the unchanged runs, and a summary.

    python -m tools.gate.effort_check WORK_DIR BASELINE_JSON SUMMARY_JSON

WORK_DIR holds what the script left: exits.tsv (step, exit status or "skipped", seconds) and, per step, the
verdicts with each run's round times and counters (--gpu-verdict-json) and its output. RERUNS (environment) says
how many unchanged runs the script asked for (20). Exits 1 when any check failed. The checks of the steps it
shares with tools/gate/baseline.sh are read as that script's checker reads them (tools/gate/checks.py).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from gpubench.gate import counters, floor, processes
from tools.gate import checks as shared  # the checks of the steps both scripts run

BASELINE_S = 120.0  # the README's recipe for the gate set, every process of it
LEAST = 1.0  # --gpu-noise-floor's default, which the script's steps keep
MEMORY_BOUND = ("test_saxpy", "test_sum_large")  # calls whose more work is more bytes
SLOWDOWNS = {
    "s-fp32": {"test_matmul_2048": ("left the tensor cores",)},
    "s-grid": {"test_fma_1ms": ("fewer SMs", "occupancy")},
}
SUMMARY_VERSION = 1


def moved(v: dict | None) -> str:
    return (v or {}).get("moved") or "nothing said"


def check_baseline(c: shared.Checks, baseline: dict, facts: dict) -> dict:
    """The README's recipe: its wall time, each floor settled from as few processes as it needs, and how sure."""
    c.exit("1-baseline", (0,))
    wall = c.seconds.get("1-baseline")
    c.add(
        "1-baseline",
        "the README's recipe, every process of it",
        f"at most {BASELINE_S:.0f} s",
        "did not run" if wall is None else f"{wall:.0f} s",
        wall is not None and wall <= BASELINE_S,
    )
    section = baseline.get("gpubench") or {}
    rows = {}
    for name, f in facts.items():
        fs = floor.floors(baseline, f["fullname"], LEAST)["median"]
        settled, why = processes.status(baseline, f["fullname"], LEAST)
        sure = processes.sure_range(fs)
        c.add(
            "1-baseline",
            name,
            "a floor settled by as few processes as it needs",
            f"{fs.width:.2f}% from {fs.processes} processes; {why}",
            settled,
        )
        info = next((b.get("extra_info") or {} for b in baseline.get("benchmarks", []) if b["name"] == name), {})
        rows[name] = {
            "processes": fs.processes,
            "floor_pct": fs.width,
            "spread_pct": fs.spread,
            "early": fs.early,
            "sure_pct": list(sure) if sure else None,
            "settled": why,
            "rounds": f.get("rounds"),
            "rounds_stopped": info.get("rounds_stopped"),
            "settle_s": info.get("settle_s"),
            "counters": info.get("counters"),
        }
    read = [n for n, r in rows.items() if counters.readable(r["counters"])]
    c.add(
        "1-baseline",
        "the counter fingerprint of each benchmark",
        f"read for all {len(facts)}",
        f"{len(read)} read",
        (len(read) == len(facts)) if read else None,
    )
    return {
        "wall_s": wall,
        "processes": section.get("processes"),
        "processes_max": section.get("processes_max"),
        "benchmarks": rows,
    }


def check_more_work(c: shared.Checks, facts: dict, readable: bool) -> dict:
    """5% and 10% more work in every call, and what the memory-bound calls' lines say moved."""
    more = {}
    for pct, least_us in shared.SLOWER_FROM_US.items():
        step = f"a-more-work-{pct}pct"
        got = shared.check_more_work(c, facts, pct, least_us)
        for name in MEMORY_BOUND:
            v = got.get(name)
            if v and v.get("word") == "slower":
                c.add(
                    step, f"{name}: what moved", "more bytes", moved(v), "more bytes" in moved(v) if readable else None
                )
        more[pct] = {
            n: {"word": v.get("word"), "median": shared.median_of(v), "moved": v.get("moved")} for n, v in got.items()
        }
    return more


def check_slowdowns(c: shared.Checks, readable: bool) -> dict:
    """The same work done worse: slower, and the counter that moved named in the line; both fingerprints kept."""
    out = {}
    for step, wanted in SLOWDOWNS.items():
        c.exit(step, (1,))
        got = c.verdicts(step)
        for name, words in wanted.items():
            v = got.get(name)
            c.add(step, name, "slower", shared.said(v), bool(v) and v.get("word") == "slower")
            c.add(
                step,
                f"{name}: what moved",
                " or ".join(words),
                moved(v),
                any(w in moved(v) for w in words) if readable else None,
            )
            fps = (v or {}).get("counters") or {}
            c.add(
                step,
                f"{name}: --gpu-verdict-json",
                "the baseline's and the run's fingerprints",
                ", ".join(k for k in ("baseline", "now") if fps.get(k)) or "none",
                bool(fps.get("baseline") and fps.get("now")) if readable else None,
            )
        out[step] = {
            n: {
                "word": v.get("word"),
                "why": v.get("why"),
                "moved": v.get("moved"),
                "notes": v.get("notes"),
                "counters": v.get("counters"),
            }
            for n, v in got.items()
        }
    return out


def check_rest(c: shared.Checks, work: Path, baseline: dict) -> dict:
    """Part of the calls slower, the refusals, and one GPU for every step (as tools/gate/baseline.sh checks them)."""
    got = shared.check_part(c)
    shared.check_refusals(c, work)
    shared.check_one_gpu(c, baseline)
    return {n: {"word": v.get("word"), "why": v.get("why")} for n, v in got.items()}


def check(work: Path, baseline_path: Path) -> tuple[shared.Checks, dict]:
    c, numbers = shared.Checks(work), {"version": SUMMARY_VERSION}
    baseline = shared.load(baseline_path) or {}
    facts = shared.baseline_facts(baseline)
    names = list(facts)
    numbers["baseline"] = check_baseline(c, baseline, facts)
    readable = any(counters.readable(r["counters"]) for r in numbers["baseline"]["benchmarks"].values())
    reruns, spread, numbers["reruns"] = shared.check_unchanged(c, names, int(os.environ.get("RERUNS", 20)))
    more = check_more_work(c, facts, readable)
    numbers["slowdowns"] = check_slowdowns(c, readable)
    numbers["part"] = check_rest(c, work, baseline)
    numbers["benchmarks"] = shared.table(facts, spread, more, numbers["baseline"]["processes"] or 1)
    for name, row in numbers["benchmarks"].items():
        row["moved_5"] = (more.get(5, {}).get(name) or {}).get("moved")
        row["moved_10"] = (more.get(10, {}).get(name) or {}).get("moved")
    numbers["time"] = shared.times(c, reruns)
    return c, numbers


def main(argv: list[str]) -> int:
    if len(argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    work, baseline_path, summary = (Path(a) for a in argv)
    c, numbers = check(work, baseline_path)
    shared.print_checks(c)
    shared.print_table(numbers["benchmarks"])
    b = numbers["baseline"]
    print(
        f"the baseline: {b['wall_s'] if b['wall_s'] is not None else '-'} s, processes per benchmark "
        + ", ".join(f"{n} {r['processes']}" for n, r in b["benchmarks"].items())
    )
    return shared.finish(c, numbers, baseline_path, summary)


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
