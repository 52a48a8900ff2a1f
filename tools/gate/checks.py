"""What tools/gate/baseline_check.py and tools/gate/effort_check.py both read of the steps their scripts leave:
the steps' exit statuses and verdicts, the checks of the steps both scripts run (unchanged runs, more work in every
call, more work in part of the calls, the refusals, one GPU), the table of every benchmark over the unchanged runs,
and the lines and summary each checker ends with.

WORK_DIR (each checker's first argument) holds exits.tsv (step, exit status or "skipped", seconds; a step run again
by --resume: its last line) and, per step, the verdicts with each run's round times (--gpu-verdict-json) and its
output.
"""

from __future__ import annotations

import json
import math
import statistics
from datetime import datetime, timezone
from pathlib import Path

SLOWER_FROM_US = {5: 100.0, 10: 10.0}  # more work in every call: the least call that must not read `same`
PART = ("test_saxpy", "test_sum_large")  # step b's benchmarks: calls timed back to back, bursts of slower calls
WORDS = ("same", "unsure", "slower", "faster")


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
        return sorted(
            (s for s in self.exits if s.startswith(prefix) and self.exits[s] != "skipped"),
            key=lambda s: int(s.rsplit("-", 1)[1]),
        )


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
        how = (
            "flushed"
            if info.get("l2_flush")
            else f"graph of {info['cuda_graph_calls']}"
            if info.get("cuda_graph_calls")
            else f"{info.get('calls_per_round')} back to back"
        )
        out[b["name"]] = {
            "median_us": b["stats"]["median"] * 1e6,
            "timed": how,
            "fullname": b["fullname"],
            "floor_pct": (floors.get(b["fullname"]) or {}).get("median"),
            "center_pct": (centers.get(b["fullname"]) or {}).get("median"),
            "timer_step_us": info.get("timer_step_us"),
            "rounds": b["stats"].get("rounds"),
        }
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


def check_unchanged(c: Checks, names: list[str], asked: int) -> tuple[list[str], dict, dict]:
    """Step c: as many unchanged runs as asked, each with no slower, no faster and none failed. Returns the runs,
    their spread per benchmark (unchanged_spread) and the count of each word."""
    reruns = c.ran("c-rerun-")
    c.add("c", "unchanged runs", f"{asked} or more", f"{len(reruns)} ran", len(reruns) >= asked)
    for step in reruns:
        c.exit(step, (0,))
        got = c.verdicts(step)
        odd = [f"{n} {said(v)}" for n, v in got.items() if v.get("word") not in ("same", "unsure")]
        c.add(
            step,
            "every benchmark",
            f"same or unsure for all {len(names)}",
            f"{len(got)} verdicts" + (f"; {'; '.join(odd)}" if odd else ""),
            len(got) == len(names) and not odd,
        )
    spread = unchanged_spread(c, reruns, names)
    words = [w for s in spread.values() for w in s["words"]]
    summary = {
        "runs": len(reruns),
        **{w: words.count(w) for w in WORDS},
        "failed": sum(c.exits.get(s) != "0" for s in reruns),
    }
    return reruns, spread, summary


def check_more_work(c: Checks, facts: dict, pct: int, least_us: float) -> dict:
    """Step a: pct% more work in every call reads `slower` (5%) or `slower` or `unsure` (10%) for every call of
    least_us or more. Returns the step's verdicts by name."""
    step = f"a-more-work-{pct}pct"
    got = c.verdicts(step)
    c.exit(step, (1,))
    allowed = ("slower",) if pct == 5 else ("slower", "unsure")
    for name, f in facts.items():
        v = got.get(name)
        if f["median_us"] >= least_us:
            c.add(
                step,
                name,
                " or ".join(allowed) + f" (a call of {f['median_us']:.1f} us)",
                said(v),
                bool(v) and v.get("word") in allowed,
            )
    return got


def check_part(c: Checks) -> dict:
    """Step b: more work in part of the calls of the two calls timed back to back reads `slower`."""
    got = c.verdicts("b-part-of-calls")
    c.exit("b-part-of-calls", (1,))
    for name in PART:
        c.add("b-part-of-calls", name, "slower", said(got.get(name)), got.get(name, {}).get("word") == "slower")
    return got


def check_refusals(c: Checks, work: Path) -> None:
    """Step e: a gate that cannot compare refuses to pass, where CUDA sees no GPU and against another model."""
    c.exit("e-no-gpu", (4,))
    out = (work / "e-no-gpu.out").read_text() if (work / "e-no-gpu.out").is_file() else ""
    c.add(
        "e-no-gpu",
        "the refusal",
        "--gpu-fail-slower, but there is no GPU here",
        next((x for x in out.splitlines() if x.startswith("ERROR:")), "no ERROR line"),
        "ERROR: --gpu-fail-slower, but there is no GPU here" in out,
    )
    c.exit("e-another-model", (4,))
    out = (work / "e-another-model.out").read_text() if (work / "e-another-model.out").is_file() else ""
    errors = [x for x in out.splitlines() if x.startswith("ERROR:")]
    c.add(
        "e-another-model",
        "the refusal",
        "one sentence: another GPU model is not comparable",
        errors[0] if errors else "no ERROR line",
        len(errors) == 1 and "not comparable" in errors[0],
    )


def check_one_gpu(c: Checks, baseline: dict) -> None:
    """Every step on the baseline's GPU: the floor holds processes on one GPU, not another of its model."""
    uuids = {((c.data(s).get("gpu") or {}).get("uuid")) for s in c.exits if c.data(s).get("gpu")}
    first = ((baseline.get("machine_info") or {}).get("gpu") or {}).get("uuid")
    uuids = sorted(u for u in uuids | {first} if u)
    c.add(
        "gpu",
        "the GPU of every step",
        "the baseline's",
        f"{len(uuids)} GPU{'s' * (len(uuids) != 1)}: {', '.join(uuids)}",
        True if len(uuids) == 1 else None,
    )


def times(c: Checks, reruns: list[str]) -> dict:
    """An unchanged run's seconds (median), each step's, and all of them."""
    sessions = [c.seconds[s] for s in reruns if s in c.seconds]
    return {
        "session_s": statistics.median(sessions) if sessions else None,
        "steps_s": c.seconds,
        "total_s": sum(c.seconds.values()),
    }


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
        rows[name] = {
            **{k: f[k] for k in ("median_us", "timed", "floor_pct", "center_pct", "timer_step_us")},
            "unchanged_runs": len(s.get("words") or []),
            "spread_pct": cv,
            "max_abs_pct": max((abs(x) for x in s.get("pct") or []), default=None),
            "false_alarm_at_floor": normal_tail(floor / off) if off and floor else None,
            "words": {w: (s.get("words") or []).count(w) for w in WORDS},
            "late_rounds_per_run": statistics.mean(s["late"]) if s.get("late") else None,
            "more_5": more.get(5, {}).get(name),
            "more_10": more.get(10, {}).get(name),
        }
    return rows


def print_checks(c: Checks) -> None:
    marks = {True: "PASS", False: "FAIL", None: "N/A "}
    for r in c.rows:
        print(f"{marks[r['ok']]}  {r['step']}: {r['what']}: expected {r['expected']}; got {r['got']}")


def print_table(rows: dict) -> None:
    print(
        f"{'benchmark':<22}{'median us':>11}  {'timed':<18}{'floor %':>8}{'moved %':>9}{'FA@floor':>10}"
        f"  {'same/unsure/slower/faster':<26}{'+5% work':<9}{'+10% work':<9}"
    )
    for name, r in rows.items():
        w = r["words"]
        fa = f"{r['false_alarm_at_floor']:.1e}" if r["false_alarm_at_floor"] is not None else "-"
        moved = f"{r['spread_pct']:.2f}" if r["spread_pct"] is not None else "-"
        floor = f"{r['floor_pct']:.2f}" if r["floor_pct"] is not None else "-"
        print(
            f"{name:<22}{r['median_us']:>11.2f}  {r['timed']:<18}{floor:>8}{moved:>9}{fa:>10}  "
            f"{w['same']}/{w['unsure']}/{w['slower']}/{w['faster']:<20}{(r['more_5'] or {}).get('word') or '-':<9}"
            f"{(r['more_10'] or {}).get('word') or '-':<9}"
        )


def finish(c: Checks, numbers: dict, baseline_path: Path, summary: Path) -> int:
    """The last lines (an unchanged run's time, how many checks failed) and the summary JSON; 1 if any failed."""
    t = numbers["time"]
    if t["session_s"] is not None:
        print(f"an unchanged run took {t['session_s']:.0f} s (median); the steps {t['total_s']:.0f} s in all")
    failed = sum(r["ok"] is False for r in c.rows)
    na = sum(r["ok"] is None for r in c.rows)
    print(f"{failed} of {len(c.rows) - na} checks failed" + (f" ({na} N/A)" if na else ""))
    gpu = ((load(baseline_path) or {}).get("machine_info") or {}).get("gpu") or {}
    when = datetime.now(timezone.utc).isoformat(timespec="seconds")
    summary.write_text(
        json.dumps(
            {"gpu": gpu.get("name"), "date": when, "failed": failed, "checks": c.rows, "numbers": numbers},
            indent=2,
            default=str,
        )
    )
    return 1 if failed else 0
