"""A run against its baseline, benchmark by benchmark: the verdict with the numbers behind it, what else
differed (the clocks round by round, speed settings allowed to differ: said first), and what moved with a
`slower` or `faster` (gate.counters), as lines for the terminal and as records for --gpu-verdict-json."""

from __future__ import annotations

from dataclasses import dataclass, field

from gpubench.gate import counters, floor
from gpubench.gate.counters import SWAYING
from gpubench.gate.judgement import LEVEL, Verdict, judge
from gpubench.gate.rounds import usable
from gpubench.metrics import finite


def limited(info: dict) -> bool:
    """Whether a limit that sways the clock (a power cap, a thermal limit) held in most of a run's rounds."""
    shares = info.get("clock_events_rounds")
    return isinstance(shares, dict) and any(finite(shares.get(n)) and shares[n] >= 0.5 for n in SWAYING)


def launch_mismatch(before: dict, now: dict) -> str | None:
    """Why rounds timed from a CUDA graph and rounds of calls the host launched one by one are not compared
    (the GPU's own work per launch is in the one and not the other), or None where both were timed alike."""
    graphs = [bool(info.get("cuda_graph_calls")) for info in (before, now)]
    if graphs[0] == graphs[1]:
        return None
    how = {True: "from a CUDA graph", False: "from calls the host launched one by one"}
    return (
        f"the baseline timed it {how[graphs[0]]} and this run {how[graphs[1]]}, which time different things: "
        "save the baseline again (--gpu-save-baseline)"
    )


@dataclass
class Compared:
    """One benchmark of this run against the baseline's: a verdict, or why there is none."""

    name: str
    fullname: str
    now_median_s: float
    base_median_s: float | None = None
    verdict: Verdict | None = None
    floor_processes: int = 1
    notes: list[str] = field(default_factory=list)  # said first: speed settings and clocks that differed
    not_compared: str | None = None
    rounds_used: tuple[int, int] | None = None  # rounds of the baseline and of this run the verdict used
    floor_early: bool = False  # its floor is the bound of fewer processes than the baseline allows
    moved: str | None = None  # what moved with a slower or faster (gate.counters)
    counters: dict = field(default_factory=dict)  # the fingerprints: {"baseline": ..., "now": ...}

    def record(self, baseline_name: str) -> dict:
        out = {
            "name": self.name,
            "fullname": self.fullname,
            "baseline": baseline_name,
            "word": self.verdict.word if self.verdict else None,
            "now_median_s": self.now_median_s,
            "base_median_s": self.base_median_s,
            "floor_processes": self.floor_processes,
            "floor_early": self.floor_early,
            "rounds_used": self.rounds_used,
            "notes": self.notes,
            "moved": self.moved,
            "counters": self.counters,
            "not_compared": self.not_compared,
        }
        if self.verdict:
            out["why"] = self.verdict.why
            # pct, lo, hi: from the center of the baseline's processes; raw_pct: from its first process
            out["changes"] = {
                c.stat: {
                    "pct": c.pct,
                    "lo": c.lo,
                    "hi": c.hi,
                    "floor": c.floor,
                    "center": c.center,
                    "raw_pct": self.verdict.raw[c.stat].pct,
                    "resolution": c.resolution,
                }
                for c in self.verdict.changes
            }
        return out


def compare_run(
    baseline: dict, runs: dict[str, dict], least_floor_pct: float, always: list[str] = ()
) -> list[Compared]:
    """Each benchmark of this run ({fullname: {"name", "rounds", "extra_info"}, and "compared" where the verdict
    was already reached while it ran}) against the baseline file's; `always` is said with every verdict
    (speed settings that were allowed to differ)."""
    out = []
    for fullname, run in runs.items():
        c = run.get("compared") or compare_one(baseline, fullname, run, least_floor_pct)
        saved = next((b for b in baseline["benchmarks"] if b["fullname"] == fullname), None)
        info_before, info_now = ((saved or {}).get("extra_info") or {}), run.get("extra_info") or {}
        base, now = counters.of(info_before), counters.of(info_now)
        c.counters = {"baseline": base, "now": now}
        if c.verdict is not None:
            note = counters.clock_clause(info_before, info_now, c.verdict.word)
            c.notes = [n for n in (*always, note) if n]
            c.moved = counters.what_moved(base, now, c.verdict.word)
        out.append(c)
    return out


def compare_one(baseline: dict, fullname: str, run: dict, least_floor_pct: float) -> Compared:
    """One benchmark of this run against the baseline file's: its verdict, or why there is none."""
    saved = {b["fullname"]: b for b in baseline["benchmarks"]}
    info_before, info_now = (saved.get(fullname) or {}).get("extra_info") or {}, run.get("extra_info") or {}
    rounds = usable(run["rounds"], info_now)
    c = Compared(run["name"], fullname, _median(rounds) if rounds else float("nan"))
    bench = saved.get(fullname)
    if bench is None:
        c.not_compared = "not in the baseline (a new benchmark?)"
        return c
    c.base_median_s = bench["stats"]["median"]
    before = usable(bench["stats"].get("data") or [], info_before)
    c.rounds_used = (len(before), len(rounds))
    if len(before) < 2 or len(rounds) < 2:
        c.not_compared = (
            f"the baseline holds {len(before)} rounds of it and this run {len(rounds)}: a "
            "verdict needs two or more of each (save the baseline with --gpu-save-baseline)"
        )
        return c
    launched = launch_mismatch(info_before, info_now)
    if launched:
        c.not_compared = launched
        return c
    floors = floor.floors(baseline, fullname, least_floor_pct)
    c.floor_processes, c.floor_early = floors["median"].processes, floors["median"].early
    clocks = (
        (info_before.get("sm_clock_mhz_rounds"), info_now.get("sm_clock_mhz_rounds"))
        if limited(info_before) or limited(info_now)
        else (None, None)
    )
    calls = (_calls(info_before), _calls(info_now))
    c.verdict = judge(before, rounds, floors, clocks, calls)
    return c


def _calls(info: dict) -> int:
    calls = info.get("calls_per_round")
    return calls if isinstance(calls, int) and calls > 0 else 1


def _median(values: list[float]) -> float:
    data = sorted(values)
    mid = len(data) // 2
    return data[mid] if len(data) % 2 else (data[mid - 1] + data[mid]) / 2


def lines(compared: list[Compared], baseline_name: str, least_floor_pct: float) -> list[str]:
    """The header and one line per benchmark: medians then and now, the verdict, what differed (first), the
    numbers that decided it, and what moved with a slower or faster."""
    if not compared:
        return []
    width = max(len(c.name) for c in compared)
    out = [
        "GPU time per call against the baseline: the change of the median, quartiles and trimmed mean of the "
        f"rounds from where the baseline's processes sit, each with its {LEVEL:.0%} interval (block bootstrap over "
        "rounds, widened by the timer's step), against the floor that unchanged processes move (measured by "
        f"the baseline's runs; at least {least_floor_pct:g}%)"
    ]
    differed = [c.name for c in compared if c.verdict and c.notes]
    if differed:
        out.append(
            f"the GPU ran otherwise than for the baseline (clocks, limits) in {len(differed)} of "
            f"{len(compared)} benchmarks: {', '.join(differed)}; their lines say how, first"
        )
    for c in compared:
        if c.verdict is None:
            out.append(f"{c.name:<{width}}  not compared: {c.not_compared}")
            continue
        v = c.verdict
        median = "" if v.why.startswith("median ") else f" ({v.median.text()})"
        source = (
            f"floors from {c.floor_processes} processes"
            if c.floor_processes > 1
            else "one process: no reruns measured its floor"
        )
        first = "".join(f"{n}; " for n in c.notes)
        moved = f"; {c.moved}" if c.moved else ""
        out.append(
            f"{c.name:<{width}}  {c.base_median_s * 1e3:#.4g} -> {c.now_median_s * 1e3:#.4g} ms  "
            f"{v.word:<6}  {first}{v.why}{median}{moved}; {source}  (vs {baseline_name})"
        )
    return out
