"""A run against its baseline, benchmark by benchmark: the verdict with the numbers behind it, and what else
differed (the clocks round by round, speed settings allowed to differ), as lines for the terminal and as
records for --gpu-verdict-json."""

from __future__ import annotations

from dataclasses import dataclass, field

from gpubench.gate import floor
from gpubench.gate.fixture import SWAYING
from gpubench.gate.rounds import usable
from gpubench.gate.judgement import CLOCK_DIFF, LEVEL, Verdict, judge
from gpubench.metrics import finite

EVENT_DIFF = 0.25  # and a clock-event reason that held in a quarter more (or fewer) of the rounds


def clock_note(before: dict, now: dict) -> str | None:
    """One clause on how the clocks of the rounds differed between the baseline and this run (extra_info of
    each), or None where they did not or were not recorded."""
    parts = []
    a, b = before.get("sm_clock_mhz_rounds"), now.get("sm_clock_mhz_rounds")
    if finite(a) and finite(b) and a > 0 and abs(b - a) >= CLOCK_DIFF * a:
        parts.append(f"median SM clock {a:.0f} -> {b:.0f} MHz")
    ea, eb = before.get("clock_events_rounds"), now.get("clock_events_rounds")
    if isinstance(ea, dict) and isinstance(eb, dict):
        for name in dict.fromkeys([*ea, *eb]):
            x, y = ea.get(name, 0.0), eb.get(name, 0.0)
            if abs(y - x) >= EVENT_DIFF:
                parts.append(f"{name} in {x:.0%} -> {y:.0%} of rounds")
    return f"clocks differ: {', '.join(parts)}" if parts else None


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
    return (f"the baseline timed it {how[graphs[0]]} and this run {how[graphs[1]]}, which time different things: "
            "save the baseline again (--gpu-save-baseline)")


@dataclass
class Compared:
    """One benchmark of this run against the baseline's: a verdict, or why there is none."""

    name: str
    fullname: str
    now_median_s: float
    base_median_s: float | None = None
    verdict: Verdict | None = None
    floor_processes: int = 1
    notes: list[str] = field(default_factory=list)
    not_compared: str | None = None
    rounds_used: tuple[int, int] | None = None  # rounds of the baseline and of this run the verdict used

    def record(self, baseline_name: str) -> dict:
        out = {"name": self.name, "fullname": self.fullname, "baseline": baseline_name,
               "word": self.verdict.word if self.verdict else None, "now_median_s": self.now_median_s,
               "base_median_s": self.base_median_s, "floor_processes": self.floor_processes,
               "rounds_used": self.rounds_used, "notes": self.notes, "not_compared": self.not_compared}
        if self.verdict:
            out["why"] = self.verdict.why
            # pct, lo, hi: from the center of the baseline's processes; raw_pct: from its first process
            out["changes"] = {c.stat: {"pct": c.pct, "lo": c.lo, "hi": c.hi, "floor": c.floor, "center": c.center,
                                       "raw_pct": self.verdict.raw[c.stat].pct, "resolution": c.resolution}
                              for c in self.verdict.changes}
        return out


def compare_run(baseline: dict, runs: dict[str, dict], least_floor_pct: float,
                always: list[str] = ()) -> list[Compared]:
    """Each benchmark of this run ({fullname: {"name", "rounds", "extra_info"}}) against the baseline file's;
    `always` is said with every verdict (speed settings that were allowed to differ)."""
    saved = {b["fullname"]: b for b in baseline["benchmarks"]}
    out = []
    for fullname, run in runs.items():
        info_before, info_now = (saved.get(fullname) or {}).get("extra_info") or {}, run.get("extra_info") or {}
        rounds = usable(run["rounds"], info_now)
        c = Compared(run["name"], fullname, _median(rounds) if rounds else float("nan"))
        out.append(c)
        bench = saved.get(fullname)
        if bench is None:
            c.not_compared = "not in the baseline (a new benchmark?)"
            continue
        c.base_median_s = bench["stats"]["median"]
        before = usable(bench["stats"].get("data") or [], info_before)
        c.rounds_used = (len(before), len(rounds))
        if len(before) < 2 or len(rounds) < 2:
            c.not_compared = (f"the baseline holds {len(before)} rounds of it and this run {len(rounds)}: a "
                              "verdict needs two or more of each (save the baseline with --gpu-save-baseline)")
            continue
        launched = launch_mismatch(info_before, info_now)
        if launched:
            c.not_compared = launched
            continue
        floors = floor.floors(baseline, fullname, least_floor_pct)
        c.floor_processes = floors["median"].processes
        clocks = (info_before.get("sm_clock_mhz_rounds"), info_now.get("sm_clock_mhz_rounds")) \
            if limited(info_before) or limited(info_now) else (None, None)
        calls = (_calls(info_before), _calls(info_now))
        c.verdict = judge(before, rounds, floors, clocks, calls)
        note = clock_note(info_before, info_now)
        c.notes = [n for n in (note, *always) if n]
    return out


def _calls(info: dict) -> int:
    calls = info.get("calls_per_round")
    return calls if isinstance(calls, int) and calls > 0 else 1


def _median(values: list[float]) -> float:
    data = sorted(values)
    mid = len(data) // 2
    return data[mid] if len(data) % 2 else (data[mid - 1] + data[mid]) / 2


def lines(compared: list[Compared], baseline_name: str, least_floor_pct: float) -> list[str]:
    """The header and one line per benchmark: medians then and now, the verdict, the numbers that decided it."""
    if not compared:
        return []
    width = max(len(c.name) for c in compared)
    out = ["GPU time per call against the baseline: the change of the median, quartiles and trimmed mean of the "
           f"rounds from where the baseline's processes sit, each with its {LEVEL:.0%} interval (block bootstrap over "
           "rounds, widened by the timer's step), against the floor that unchanged processes move (measured by "
           f"the baseline's runs; at least {least_floor_pct:g}%)"]
    for c in compared:
        if c.verdict is None:
            out.append(f"{c.name:<{width}}  not compared: {c.not_compared}")
            continue
        v = c.verdict
        median = "" if v.why.startswith("median ") else f" ({v.median.text()})"
        source = f"floors from {c.floor_processes} processes" if c.floor_processes > 1 \
            else "one process: no reruns measured its floor"
        notes = "".join(f"; {n}" for n in c.notes)
        out.append(f"{c.name:<{width}}  {c.base_median_s * 1e3:#.4g} -> {c.now_median_s * 1e3:#.4g} ms  "
                   f"{v.word:<6}  {v.why}{median}; {source}{notes}  (vs {baseline_name})")
    return out
