"""What scripts/gate_effort.py expected of each step, against what the step got: one line per check (PASS, FAIL,
or N/A where this machine cannot tell), a table of every benchmark over the unchanged runs, and a summary.

    python scripts/gate_effort_check.py WORK_DIR BASELINE_JSON SUMMARY_JSON

WORK_DIR holds what the script left: exits.tsv (step, exit status or "skipped", seconds) and, per step, the
verdicts with each run's round times and counters (--gpu-verdict-json) and its output. RERUNS (environment) says
how many unchanged runs the script asked for (20). Exits 1 when any check failed. The checks of the steps it
shares with scripts/bench_baseline.sh are read as that script's checker reads them (bench_baseline_check).
"""

from __future__ import annotations

import json
import os
import statistics
import sys
from datetime import datetime, timezone
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import bench_baseline_check as bbc  # noqa: E402 - the checker of the steps both scripts run

from gpubench.gate import counters, floor, processes  # noqa: E402

BASELINE_S = 120.0  # the README's recipe for the gate set, every process of it
LEAST = 1.0  # --gpu-noise-floor's default, which the script's steps keep
MEMORY_BOUND = ("test_saxpy", "test_sum_large")  # calls whose more work is more bytes
SLOWDOWNS = {"s-fp32": {"test_matmul_2048": ("left the tensor cores",)},
             "s-grid": {"test_fma_1ms": ("fewer SMs", "occupancy")}}
SUMMARY_VERSION = 1


def moved(v: dict | None) -> str:
    return (v or {}).get("moved") or "nothing said"


def check_baseline(c: bbc.Checks, baseline: dict, facts: dict) -> dict:
    """The README's recipe: its wall time, each floor settled from as few processes as it needs, and how sure."""
    c.exit("1-baseline", (0,))
    wall = c.seconds.get("1-baseline")
    c.add("1-baseline", "the README's recipe, every process of it", f"at most {BASELINE_S:.0f} s",
          "did not run" if wall is None else f"{wall:.0f} s", wall is not None and wall <= BASELINE_S)
    section = baseline.get("gpubench") or {}
    rows = {}
    for name, f in facts.items():
        fs = floor.floors(baseline, f["fullname"], LEAST)["median"]
        settled, why = processes.status(baseline, f["fullname"], LEAST)
        sure = processes.sure_range(fs)
        c.add("1-baseline", name, "a floor settled by as few processes as it needs",
              f"{fs.width:.2f}% from {fs.processes} processes; {why}", settled)
        info = next((b.get("extra_info") or {} for b in baseline.get("benchmarks", []) if b["name"] == name), {})
        rows[name] = {"processes": fs.processes, "floor_pct": fs.width, "spread_pct": fs.spread, "early": fs.early,
                      "sure_pct": list(sure) if sure else None, "settled": why, "rounds": f.get("rounds"),
                      "rounds_stopped": info.get("rounds_stopped"), "settle_s": info.get("settle_s"),
                      "counters": info.get("counters")}
    read = [n for n, r in rows.items() if counters.readable(r["counters"])]
    c.add("1-baseline", "the counter fingerprint of each benchmark", f"read for all {len(facts)}",
          f"{len(read)} read", (len(read) == len(facts)) if read else None)
    return {"wall_s": wall, "processes": section.get("processes"), "processes_max": section.get("processes_max"),
            "benchmarks": rows}


def check_unchanged(c: bbc.Checks, names: list[str], asked: int) -> tuple[list[str], dict]:
    reruns = c.ran("c-rerun-")
    c.add("c", "unchanged runs", f"{asked} or more", f"{len(reruns)} ran", len(reruns) >= asked)
    for step in reruns:
        c.exit(step, (0,))
        got = c.verdicts(step)
        odd = [f"{n} {bbc.said(v)}" for n, v in got.items() if v.get("word") not in ("same", "unsure")]
        c.add(step, "every benchmark", f"same or unsure for all {len(names)}",
              f"{len(got)} verdicts" + (f"; {'; '.join(odd)}" if odd else ""), len(got) == len(names) and not odd)
    spread = bbc.unchanged_spread(c, reruns, names)
    words = [w for s in spread.values() for w in s["words"]]
    summary = {"runs": len(reruns), **{w: words.count(w) for w in ("same", "unsure", "slower", "faster")},
               "failed": sum(c.exits.get(s) != "0" for s in reruns)}
    return reruns, {"spread": spread, "summary": summary}


def check_more_work(c: bbc.Checks, facts: dict, readable: bool) -> dict:
    """5% and 10% more work in every call, and what the memory-bound calls' lines say moved."""
    more = {}
    for pct, least_us in bbc.SLOWER_FROM_US.items():
        step = f"a-more-work-{pct}pct"
        got = c.verdicts(step)
        c.exit(step, (1,))
        allowed = ("slower",) if pct == 5 else ("slower", "unsure")
        for name, f in facts.items():
            v = got.get(name)
            if f["median_us"] >= least_us:
                c.add(step, name, " or ".join(allowed) + f" (a call of {f['median_us']:.1f} us)", bbc.said(v),
                      bool(v) and v.get("word") in allowed)
        for name in MEMORY_BOUND:
            v = got.get(name)
            if v and v.get("word") == "slower":
                c.add(step, f"{name}: what moved", "more bytes", moved(v),
                      "more bytes" in moved(v) if readable else None)
        more[pct] = {n: {"word": v.get("word"), "median": bbc.median_of(v), "moved": v.get("moved")}
                     for n, v in got.items()}
    return more


def check_slowdowns(c: bbc.Checks, readable: bool) -> dict:
    """The same work done worse: slower, and the counter that moved named in the line; both fingerprints kept."""
    out = {}
    for step, wanted in SLOWDOWNS.items():
        c.exit(step, (1,))
        got = c.verdicts(step)
        for name, words in wanted.items():
            v = got.get(name)
            c.add(step, name, "slower", bbc.said(v), bool(v) and v.get("word") == "slower")
            c.add(step, f"{name}: what moved", " or ".join(words), moved(v),
                  any(w in moved(v) for w in words) if readable else None)
            fps = (v or {}).get("counters") or {}
            c.add(step, f"{name}: --gpu-verdict-json", "the baseline's and the run's fingerprints",
                  ", ".join(k for k in ("baseline", "now") if fps.get(k)) or "none",
                  bool(fps.get("baseline") and fps.get("now")) if readable else None)
        out[step] = {n: {"word": v.get("word"), "why": v.get("why"), "moved": v.get("moved"),
                         "notes": v.get("notes"), "counters": v.get("counters")} for n, v in got.items()}
    return out


def check_rest(c: bbc.Checks, work: Path, baseline: dict) -> dict:
    """Part of the calls slower, the refusals, and one GPU for every step (as bench_baseline.sh checks them)."""
    got = c.verdicts("b-part-of-calls")
    c.exit("b-part-of-calls", (1,))
    for name in bbc.PART:
        c.add("b-part-of-calls", name, "slower", bbc.said(got.get(name)), got.get(name, {}).get("word") == "slower")
    c.exit("e-no-gpu", (4,))
    out = (work / "e-no-gpu.out").read_text() if (work / "e-no-gpu.out").is_file() else ""
    c.add("e-no-gpu", "the refusal", "--gpu-fail-slower, but there is no GPU here",
          next((x for x in out.splitlines() if x.startswith("ERROR:")), "no ERROR line"),
          "ERROR: --gpu-fail-slower, but there is no GPU here" in out)
    c.exit("e-another-model", (4,))
    out = (work / "e-another-model.out").read_text() if (work / "e-another-model.out").is_file() else ""
    errors = [x for x in out.splitlines() if x.startswith("ERROR:")]
    c.add("e-another-model", "the refusal", "one sentence: another GPU model is not comparable",
          errors[0] if errors else "no ERROR line", len(errors) == 1 and "not comparable" in errors[0])
    uuids = {((c.data(s).get("gpu") or {}).get("uuid")) for s in c.exits if c.data(s).get("gpu")}
    first = ((baseline.get("machine_info") or {}).get("gpu") or {}).get("uuid")
    uuids = sorted(u for u in uuids | {first} if u)
    c.add("gpu", "the GPU of every step", "the baseline's", f"{len(uuids)} GPU{'s' * (len(uuids) != 1)}: "
          f"{', '.join(uuids)}", True if len(uuids) == 1 else None)
    return {n: {"word": v.get("word"), "why": v.get("why")} for n, v in got.items()}


def check(work: Path, baseline_path: Path) -> tuple[bbc.Checks, dict]:
    c, numbers = bbc.Checks(work), {"version": SUMMARY_VERSION}
    baseline = bbc.load(baseline_path) or {}
    facts = bbc.baseline_facts(baseline)
    names = list(facts)
    numbers["baseline"] = check_baseline(c, baseline, facts)
    readable = any(counters.readable(r["counters"]) for r in numbers["baseline"]["benchmarks"].values())
    reruns, unchanged = check_unchanged(c, names, int(os.environ.get("RERUNS", 20)))
    numbers["reruns"] = unchanged["summary"]
    more = check_more_work(c, facts, readable)
    numbers["slowdowns"] = check_slowdowns(c, readable)
    numbers["part"] = check_rest(c, work, baseline)
    numbers["benchmarks"] = bbc.table(facts, unchanged["spread"], more, numbers["baseline"]["processes"] or 1)
    for name, row in numbers["benchmarks"].items():
        row["moved_5"] = (more.get(5, {}).get(name) or {}).get("moved")
        row["moved_10"] = (more.get(10, {}).get(name) or {}).get("moved")
    sessions = [c.seconds[s] for s in reruns if s in c.seconds]
    numbers["time"] = {"session_s": statistics.median(sessions) if sessions else None,
                       "steps_s": c.seconds, "total_s": sum(c.seconds.values())}
    return c, numbers


def main(argv: list[str]) -> int:
    if len(argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    work, baseline_path, summary = (Path(a) for a in argv)
    c, numbers = check(work, baseline_path)
    marks = {True: "PASS", False: "FAIL", None: "N/A "}
    for r in c.rows:
        print(f"{marks[r['ok']]}  {r['step']}: {r['what']}: expected {r['expected']}; got {r['got']}")
    bbc.print_table(numbers["benchmarks"])
    b = numbers["baseline"]
    print(f"the baseline: {b['wall_s'] if b['wall_s'] is not None else '-'} s, processes per benchmark "
          + ", ".join(f"{n} {r['processes']}" for n, r in b["benchmarks"].items()))
    t = numbers["time"]
    if t["session_s"] is not None:
        print(f"an unchanged run took {t['session_s']:.0f} s (median); the steps {t['total_s']:.0f} s in all")
    failed = sum(r["ok"] is False for r in c.rows)
    na = sum(r["ok"] is None for r in c.rows)
    print(f"{failed} of {len(c.rows) - na} checks failed" + (f" ({na} N/A)" if na else ""))
    gpu = (((bbc.load(baseline_path) or {}).get("machine_info") or {}).get("gpu") or {})
    when = datetime.now(timezone.utc).isoformat(timespec="seconds")
    summary.write_text(json.dumps({"gpu": gpu.get("name"), "date": when, "failed": failed, "checks": c.rows,
                                   "numbers": numbers}, indent=2, default=str))
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
