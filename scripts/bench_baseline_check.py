"""What scripts/bench_baseline.sh expected of each step, against what the step got: one line per check
(PASS, FAIL, or N/A where this machine cannot tell), a table of every benchmark over the unchanged runs
(how far processes moved it, its floor, the false-alarm rate a normal model gives at that floor, what each
slowdown read), and a summary that scripts/readme_tables.py reads for the README.

    python scripts/bench_baseline_check.py WORK_DIR BASELINE_JSON SUMMARY_JSON

WORK_DIR holds what the script left: exits.tsv (step, exit status or "skipped", seconds; a step run again by
--resume: its last line) and, per step, the verdicts with each run's round times (--gpu-verdict-json), its
output, and any probe's files (probe-N.json, scripts/bench_baseline_probe.py). BASELINE_RUNS and RERUNS
(environment) say how many the script asked for (8 and 20). Exits 1 when any check failed.
"""

from __future__ import annotations

import json
import math
import os
import statistics
import sys
from datetime import datetime, timezone
from pathlib import Path

SLOWER_FROM_US = {5: 100.0, 10: 10.0}  # more work in every call: the least call that must not read `same`
PART = ("test_saxpy", "test_sum_large")  # step b's benchmarks: calls timed back to back, bursts of slower calls
SUMMARY_VERSION = 2


def load(path: Path):
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def normal_tail(z: float) -> float:
    """P(|Z| > z) for a standard normal Z."""
    return math.erfc(z / math.sqrt(2))


class Checks:
    def __init__(self, work: Path):
        self.work = work
        self.exits: dict[str, str] = {}
        self.seconds: dict[str, float] = {}
        for line in (work / "exits.tsv").read_text().splitlines() if (work / "exits.tsv").is_file() else []:
            name, rc, *rest = line.split("\t") + [""]
            self.exits[name] = rc
            if rest and rest[0].isdigit():
                self.seconds[name] = float(rest[0])
        self.rows: list[dict] = []

    def add(self, step: str, what: str, expected: str, got: str, ok: bool | None) -> None:
        self.rows.append({"step": step, "what": what, "expected": expected, "got": got, "ok": ok})

    def exit(self, step: str, expected: tuple[int, ...]) -> None:
        rc = self.exits.get(step)
        got = "did not run" if rc is None else ("skipped: out of time" if rc == "skipped" else rc)
        self.add(step, "exit status", " or ".join(map(str, expected)), got, rc in {str(e) for e in expected})

    def data(self, step: str) -> dict:
        return load(self.work / f"{step}.json") or {}

    def verdicts(self, step: str) -> dict:
        return {v["name"]: v for v in self.data(step).get("verdicts", [])}

    def ran(self, prefix: str) -> list[str]:
        return sorted((s for s in self.exits if s.startswith(prefix) and self.exits[s] != "skipped"),
                      key=lambda s: int(s.rsplit("-", 1)[1]))


def said(v: dict | None) -> str:
    if not v:
        return "no verdict"
    if v.get("word") is None:
        return f"not compared: {v.get('not_compared')}"
    return f"{v['word']}: {v['why']}"


def median_of(v: dict | None) -> dict:
    return ((v or {}).get("changes") or {}).get("median") or {}


def baseline_facts(baseline: dict) -> dict:
    """Per benchmark name: its median in us, how it was timed, its floor of the median and its processes."""
    section = baseline.get("gpubench") or {}
    floors, centers = section.get("floor_pct") or {}, section.get("floor_center_pct") or {}
    out = {}
    for b in baseline.get("benchmarks", []):
        info = b.get("extra_info") or {}
        how = ("flushed" if info.get("l2_flush") else f"graph of {info['cuda_graph_calls']}"
               if info.get("cuda_graph_calls") else f"{info.get('calls_per_round')} back to back")
        out[b["name"]] = {"median_us": b["stats"]["median"] * 1e6, "timed": how, "fullname": b["fullname"],
                          "floor_pct": (floors.get(b["fullname"]) or {}).get("median"),
                          "center_pct": (centers.get(b["fullname"]) or {}).get("median"),
                          "timer_step_us": info.get("timer_step_us"), "rounds": b["stats"].get("rounds")}
    return out


def unchanged_spread(c: Checks, runs: list[str], names: list[str]) -> dict:
    """Per benchmark, over the unchanged runs: their medians' change from the baseline's first process (raw) and
    from the center of its processes, the spread of the raw ones, the words, and the rounds left out as late."""
    out = {n: {"raw_pct": [], "pct": [], "words": [], "late": []} for n in names}
    for step in runs:
        data = c.data(step)
        late = {r["name"]: len(r.get("rounds_host_late") or []) for r in (data.get("runs") or {}).values()}
        for v in data.get("verdicts", []):
            row = out.get(v["name"])
            if row is None:
                continue
            m = median_of(v)
            if "raw_pct" in m:
                row["raw_pct"].append(m["raw_pct"])
                row["pct"].append(m["pct"])
            row["words"].append(v.get("word"))
            row["late"].append(late.get(v["name"], 0))
    return out


def unsettled(baseline: dict) -> list[str]:
    """The benchmarks whose floors still needed processes when the baseline's command stopped."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
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
    c.add("x-probe", "the experiment's processes", "every one that ran, whole",
          f"{len(probes)} ran" + (f", {len(broken)} with errors: {[p.get('errors') for p in broken if p]}"
                                  if broken else ""), not broken if probes else None)
    numbers["probe"] = probe_summary([p for p in probes if p])

    # 1. the baseline, made by the README's recipe, and its floor
    c.exit("1-baseline", (0,))
    section = baseline.get("gpubench") or {}
    processes = section.get("processes", 1 + len(section.get("reruns") or []))
    if section.get("processes_max"):  # each benchmark measured by as few processes as its floor needs
        counts = section.get("floor_processes") or {}
        c.add("1-baseline", "the baseline's processes", f"at most {runs_asked}, each benchmark's floor settled",
              f"{processes} processes; per benchmark " + ", ".join(f"{n.rsplit('::', 1)[-1]} {k}"
                                                                for n, k in counts.items()),
              processes <= runs_asked and len(counts) == len(names) > 0 and not unsettled(baseline))
    else:
        c.add("1-baseline", "the baseline's processes", f"{runs_asked}, each measuring all {len(names)} benchmarks",
              f"{processes} processes, {len(section.get('floor_pct') or {})} benchmarks measured",
              processes == runs_asked and len(section.get("floor_pct") or {}) == len(names) > 0)
    numbers["baseline"] = {"processes": processes, "benchmarks": facts}

    # c. unchanged runs: no slower, no faster, none fails
    reruns = c.ran("c-rerun-")
    c.add("c", "unchanged runs", f"{reruns_asked} or more", f"{len(reruns)} ran", len(reruns) >= reruns_asked)
    for step in reruns:
        c.exit(step, (0,))
        got = c.verdicts(step)
        odd = [f"{n} {said(v)}" for n, v in got.items() if v.get("word") not in ("same", "unsure")]
        c.add(step, "every benchmark", f"same or unsure for all {len(names)}",
              f"{len(got)} verdicts" + (f"; {'; '.join(odd)}" if odd else ""), len(got) == len(names) and not odd)
    spread = unchanged_spread(c, reruns, names)
    words = [w for s in spread.values() for w in s["words"]]
    numbers["reruns"] = {"runs": len(reruns), **{w: words.count(w) for w in ("same", "unsure", "slower", "faster")},
                         "failed": sum(c.exits.get(s) != "0" for s in reruns)}

    # a. more work in every call
    more = {}
    for pct, least_us in SLOWER_FROM_US.items():
        step = f"a-more-work-{pct}pct"
        got = c.verdicts(step)
        c.exit(step, (1,))
        allowed = ("slower",) if pct == 5 else ("slower", "unsure")
        for name in names:
            v = got.get(name)
            if facts[name]["median_us"] >= least_us:
                c.add(step, name, " or ".join(allowed) + f" (a call of {facts[name]['median_us']:.1f} us)", said(v),
                      bool(v) and v.get("word") in allowed)
        more[pct] = {n: {"word": v.get("word"), "median": median_of(v)} for n, v in got.items()}

    # b. more work in part of the calls
    got = c.verdicts("b-part-of-calls")
    c.exit("b-part-of-calls", (1,))
    for name in PART:
        c.add("b-part-of-calls", name, "slower", said(got.get(name)), got.get(name, {}).get("word") == "slower")
    numbers["part"] = {n: {"word": v.get("word"), "why": v.get("why"), "median": median_of(v)} for n, v in got.items()}

    # e. a gate that cannot compare refuses to pass
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

    # every step on the baseline's GPU: the floor holds processes on one GPU, not another of its model
    uuids = {((c.data(s).get("gpu") or {}).get("uuid")) for s in c.exits if c.data(s).get("gpu")}
    first = ((baseline.get("machine_info") or {}).get("gpu") or {}).get("uuid")
    uuids = sorted(u for u in uuids | {first} if u)
    c.add("gpu", "the GPU of every step", "the baseline's", f"{len(uuids)} GPU{'s' * (len(uuids) != 1)}: "
          f"{', '.join(uuids)}", True if len(uuids) == 1 else None)

    numbers["benchmarks"] = table(facts, spread, more, processes)
    sessions = [c.seconds[s] for s in reruns if s in c.seconds]
    numbers["time"] = {"session_s": statistics.median(sessions) if sessions else None,
                       "steps_s": c.seconds, "total_s": sum(c.seconds.values())}
    return c, numbers


def table(facts: dict, spread: dict, more: dict, processes: int) -> dict:
    """Per benchmark: its time, its floor, how far unchanged processes moved it, the false-alarm rate a normal
    model of that spread gives at the floor (as CodSpeed states a runner's noise: a run lands beyond the floor
    from the center of `processes` processes with P(|Z| > floor / (spread sqrt(1 + 1/processes)))), and what
    more work read."""
    rows = {}
    for name, f in facts.items():
        s = spread.get(name) or {}
        raw = s.get("raw_pct") or []
        cv = statistics.stdev(raw) if len(raw) > 1 else None
        floor = f.get("floor_pct")
        off = cv * math.sqrt(1 + 1 / max(processes, 1)) if cv else None
        rows[name] = {**{k: f[k] for k in ("median_us", "timed", "floor_pct", "center_pct", "timer_step_us")},
                      "unchanged_runs": len(s.get("words") or []),
                      "spread_pct": cv, "max_abs_pct": max((abs(x) for x in s.get("pct") or []), default=None),
                      "false_alarm_at_floor": normal_tail(floor / off) if off and floor else None,
                      "words": {w: (s.get("words") or []).count(w) for w in ("same", "unsure", "slower", "faster")},
                      "late_rounds_per_run": statistics.mean(s["late"]) if s.get("late") else None,
                      "more_5": more.get(5, {}).get(name), "more_10": more.get(10, {}).get(name)}
    return rows


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
            methods[m] = {"median_us": statistics.median(firsts) if firsts else None,
                          "between_processes_pct": cv(firsts),
                          "across_placements_pct": statistics.mean(within) if within else None}
        first = [r[0] for r in rows if r]
        flush = {k: statistics.median([x[k] for x in first if k in x]) if any(k in x for x in first) else None
                 for k in ("host_us", "host_read_flush_us", "host_write_flush_again_us")}
        out["calls"][call] = {"methods": methods, "flush": flush}
    launch = [p["graph_launch"]["per_replay_us"] for p in probes if "graph_launch" in p]
    steps = [p["timer"]["step_ns"] for p in probes if "timer" in p]
    out["graph_launch_us"] = {"median": statistics.median(launch), "spread_us": statistics.pstdev(launch)} \
        if launch else None
    out["timer_step_ns"] = statistics.median(steps) if steps else None
    return out


def print_table(rows: dict) -> None:
    print(f"{'benchmark':<22}{'median us':>11}  {'timed':<18}{'floor %':>8}{'moved %':>9}{'FA@floor':>10}"
          f"  {'same/unsure/slower/faster':<26}{'+5% work':<9}{'+10% work':<9}")
    for name, r in rows.items():
        w = r["words"]
        fa = f"{r['false_alarm_at_floor']:.1e}" if r["false_alarm_at_floor"] is not None else "-"
        moved = f"{r['spread_pct']:.2f}" if r["spread_pct"] is not None else "-"
        floor = f"{r['floor_pct']:.2f}" if r["floor_pct"] is not None else "-"
        print(f"{name:<22}{r['median_us']:>11.2f}  {r['timed']:<18}{floor:>8}{moved:>9}{fa:>10}  "
              f"{w['same']}/{w['unsure']}/{w['slower']}/{w['faster']:<20}{(r['more_5'] or {}).get('word') or '-':<9}"
              f"{(r['more_10'] or {}).get('word') or '-':<9}")


def print_probe(probe: dict) -> None:
    """The experiment in a few lines: how each way of timing a small call moved between processes and between
    placements within one."""
    def num(x, fmt):
        return "-" if x is None else format(x, fmt)

    if not probe.get("processes"):
        return
    print(f"probe, {probe['processes']} processes: timer step {num(probe.get('timer_step_ns'), '.1f')} ns; a graph "
          f"replay's own launch {num((probe.get('graph_launch_us') or {}).get('median'), '.2f')} us")
    for call, row in probe.get("calls", {}).items():
        parts = [f"{m.removesuffix('_us')} {num(v['median_us'], '.3f')} us, moved "
                 f"{num(v['between_processes_pct'], '.2f')}% between processes, "
                 f"{num(v['across_placements_pct'], '.2f')}% across placements" for m, v in row["methods"].items()]
        f = row["flush"]
        print(f"  {call}: {'; '.join(parts)}; flushed by reading {num(f['host_read_flush_us'], '.3f')} us against "
              f"writing {num(f['host_us'], '.3f')} and {num(f['host_write_flush_again_us'], '.3f')} us")


def main(argv: list[str]) -> int:
    if len(argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    work, baseline_path, summary = (Path(a) for a in argv)
    c, numbers = check(work, baseline_path)
    marks = {True: "PASS", False: "FAIL", None: "N/A "}
    for r in c.rows:
        print(f"{marks[r['ok']]}  {r['step']}: {r['what']}: expected {r['expected']}; got {r['got']}")
    print_table(numbers["benchmarks"])
    print_probe(numbers["probe"])
    t = numbers["time"]
    if t["session_s"] is not None:
        print(f"an unchanged run took {t['session_s']:.0f} s (median); the steps {t['total_s']:.0f} s in all")
    failed = sum(r["ok"] is False for r in c.rows)
    na = sum(r["ok"] is None for r in c.rows)
    print(f"{failed} of {len(c.rows) - na} checks failed" + (f" ({na} N/A)" if na else ""))
    gpu = (((load(baseline_path) or {}).get("machine_info") or {}).get("gpu") or {})
    when = datetime.now(timezone.utc).isoformat(timespec="seconds")
    summary.write_text(json.dumps({"gpu": gpu.get("name"), "date": when, "failed": failed, "checks": c.rows,
                                   "numbers": numbers}, indent=2))
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
