"""A watched job's phases: where its marks cut the recording, and one summary row per phase and GPU, every
number of a row from one window.

Phases come from the marks of the job's leading process (the lowest rank that marked; without ranks, the
first process to mark): a mark starts a phase that lasts until its next mark of another name; a phase
that recurs (train, eval, train) gathers its spans into one row. Steps are credited to the GPU their
process ran on (the UUID each steps line carries).

A row's window, in each span of its phase: from the first step stamped at least TRIM_S after the span
began to the last step of the span, so that neither the phase's start (NVML's utilization and power
trail by up to a second) nor what follows its last step (the job's teardown, the next phase's set-up)
enters its numbers; a span without steps keeps its whole length after the trim. The metrics come from
the sample rows whose whole interval lies inside the window; the rate from the stamps inside it,
(steps - 1) over the time from the first to the last; the energy from the counter at its two ends. What
comes before the job's first step or mark is the row `start-up`, what follows its last step the row
`teardown`: both without advice. A span too short to hold a whole sample row and two steps says so.
"""

from __future__ import annotations

import math
import statistics
from bisect import bisect_left, bisect_right
from dataclasses import dataclass, field

from gpubench.job import activity, provenance, straggler
from gpubench.job.credit import credit
from gpubench.job.markfile import Mark, Steps, Stream
from gpubench.metrics import finite
from gpubench.read.summary import TRIM_S, derive, metric_stats
from gpubench.read.verdict import verdict
from gpubench.truth.peaks import UNITS

FIRST_PHASE = "run"  # the phase before the first mark, where the job steps before it marks
START_UP, TEARDOWN = "start-up", "teardown"
POWER_LAG_S = 1.0  # NVML's power is an average over the last second: its rows count from a second in
TOO_SHORT = "too short to measure"

# Report sentences for each phase, filled from its summary row (gpubench.show.report.story): a sentence whose
# non-metric fields this row lacks (no steps, no FLOPs) is left out.
STORY = [
    "In {phase}, {said}: SM active {sm_active_pct:.0f}%, SM occupancy {sm_occupancy_pct:.0f}%, tensor active "
    "{tensor_active_pct:.0f}%, DRAM active {dram_active_pct:.0f}%.",
    "{steps} steps at {steps_per_s:.3g} per second ({step_ms:.4g} ms each, p10–p90 {step_ms_p10:.4g}–"
    "{step_ms_p90:.4g} ms), stamped on the {step_clock} timeline.",
    "{flops_per_step:.3g} FLOPs per step: {tflops:.3g} TFLOP/s, MFU {mfu_pct:.2g}% of the {dtype} datasheet "
    "peak ({flop_convention}), HFU {hfu_pct:.2g}%.",
    "{tokens_per_s:.4g} tokens/s.",
    "{gbps:.4g} GB/s of the bytes the steps must move: MBU {mbu_pct:.2g}% of the datasheet DRAM bandwidth.",
    "It used {energy_used_j:.4g} J at {power_w_energy:.0f} W: {j_per_step:.3g} J per step.",
    "{provenance}.",
    "Verdict: {verdict}",
]
FLOP_CONVENTION = ("model FLOPs as PaLM counts them: what one step of the model must do, no recomputation; "
                   "HFU counts every FLOP that ran")


@dataclass
class Phase:
    name: str
    spans: list[tuple[float, float]] = field(default_factory=list)


def leader(events) -> Stream | None:
    """The process whose marks cut the phases: the lowest rank that marked, else the first to mark."""
    marks = [e for e in events if isinstance(e, Mark)]
    ranked = [e.stream for e in marks if e.stream.rank is not None]
    if ranked:
        return min(ranked, key=Stream.order)
    return min(marks, key=lambda e: e.t).stream if marks else None


def cut(events, t0: float, t1: float, first: str = FIRST_PHASE) -> list[Phase]:
    """The leading process's marks cut [t0, t1] into phases, in order of first appearance."""
    lead = leader(events)
    current, start, spans = first, t0, []
    for e in sorted((e for e in events if isinstance(e, Mark) and e.stream == lead), key=lambda e: e.t):
        if e.t >= t1:
            break
        if e.t <= t0:  # marked before the recording began (attach mode): the phase it is in
            current = e.name
        elif e.name != current:
            spans.append((current, start, e.t))
            current, start = e.name, e.t
    spans.append((current, start, t1))
    phases: dict[str, Phase] = {}
    for name, a, b in spans:
        if b > a:
            phases.setdefault(name, Phase(name)).spans.append((a, b))
    return list(phases.values())


# --- steps in a window -----------------------------------------------------------------------------

@dataclass
class Tally:
    """One stream's steps inside the windows of a row: stamps, the time between its first and last stamp,
    and what the steps after each first stamp did (the first stamp ends a step begun before the window)."""

    stamps: int = 0
    intervals: int = 0  # steps with a start and an end inside the window
    seconds: float = 0.0
    flops: float = 0.0
    hw_flops: float = 0.0
    counted: float = 0.0  # of those steps, how many gave FLOPs
    bytes: float = 0.0
    tokens: float = 0.0
    bad: int = 0
    lead_s: float = 0.0
    gaps_ms: list = field(default_factory=list)  # mean step time of each group of steps, for the spread

    def add(self, groups: list[Steps]) -> None:
        """The groups of one span's window, in time order."""
        n = sum(g.n for g in groups)
        self.stamps += n
        if n < 2:
            return
        inner = (n - 1) / n  # the first stamp's step began before the window: its share is left out
        self.intervals += n - 1
        self.seconds += groups[-1].t_last - groups[0].t_first
        for g in groups:
            self.flops += g.flops * inner
            self.hw_flops += g.hw_flops * inner
            self.counted += g.counted * inner
            self.bytes += g.bytes * inner
            self.tokens += g.tokens * inner
            self.bad += g.bad
            self.lead_s += g.lead_s * g.n
        for prev, g in zip([None] + groups, groups):
            start = prev.t_last if prev is not None else None
            steps = g.n - 1 if start is None else g.n
            span = g.t_last - (start if start is not None else g.t_first)
            if steps > 0 and span > 0:
                self.gaps_ms.append(1e3 * span / steps)

    @property
    def rate(self) -> float:
        return self.intervals / self.seconds if self.seconds > 0 else math.nan


def _window(groups: list[Steps], a: float, b: float, trim_s: float) -> tuple[float, float, list[Steps]]:
    """The window of one span on one GPU, and the groups of steps inside it: first to last step after the
    trim where two steps or more give a rate; else the whole span after the trim, for the metrics alone."""
    kept = [g for g in groups if a + trim_s <= g.t_first and g.t_last <= b]
    if sum(g.n for g in kept) < 2:
        return a + trim_s, b, kept
    return kept[0].t_first, max(g.t_last for g in kept), kept


# --- sample rows in a window -------------------------------------------------------------------------

def _energy(energy, ends, i: int, j: int) -> tuple[float, float]:
    """Joules used over rows[i:j] of one GPU and the time they cover, from the energy counter (its column
    and the rows' ends): from the end of the row before the first (its start) to the end of the last."""
    if j <= i or not math.isfinite(energy[j - 1]):
        return math.nan, 0.0
    k = i - 1 if i > 0 and math.isfinite(energy[i - 1]) else i
    start_j, start_t = float(energy[k]), float(ends[k])
    if not math.isfinite(start_j):
        return math.nan, 0.0
    seconds = float(ends[j - 1]) - start_t
    return (float(energy[j - 1]) - start_j, seconds) if seconds > 0 else (math.nan, 0.0)


def _mean(rows, column: str) -> float:
    from gpubench.read.samples import finite_values, fmean

    return fmean(finite_values(rows, column))


# --- one row -----------------------------------------------------------------------------------------

@dataclass
class Context:
    """What every row of a summary shares."""

    events: list
    gpus: list  # the GPUs to summarize (gpubench.record.gpus.Gpu)
    credit: dict  # stream -> the NVML index of the GPU its steps are credited to
    peaks: dict
    dtype: str
    columns: list
    recorded: set  # the metric columns this run's sources recorded at all
    trim_s: float = TRIM_S
    used: frozenset = frozenset()  # NVML indices of the GPUs the job used (empty: every GPU summarized)
    bounds: tuple | None = None  # (start-up's end, teardown's start) where the GPUs' activity cut the phases

    def __post_init__(self):
        self.steps: dict[Stream, list[Steps]] = {}  # each stream's groups of steps, in time order
        for e in sorted((e for e in self.events if isinstance(e, Steps)), key=lambda e: e.t_first):
            self.steps.setdefault(e.stream, []).append(e)
        self.clocks = {s: " and ".join("GPU" if c == "gpu" else "host" for c in sorted({g.clock for g in groups}))
                       for s, groups in self.steps.items()}


def summarize_row(name: str, spans, gpu, rows, ctx: Context, kind: str = "phase") -> dict | None:
    """The row of one phase (or start-up, teardown) on one GPU, from that GPU's sample rows (Samples, in
    time order); None where it holds nothing at all."""
    import numpy as np

    streams = sorted((s for s, g in ctx.credit.items() if g == gpu.nvml_index), key=Stream.order)
    pooled_all = sorted((g for s in streams for g in ctx.steps.get(s, [])), key=lambda g: g.t_first)
    seconds, energy_j, energy_s = 0.0, 0.0, 0.0
    window_at, power_at = [], []  # the rows of each span's window, and of those, the rows for sampled power
    tallies = {s: Tally() for s in streams}
    reported = 0  # steps in the spans, the window's and those before the trim
    starts = [g.t_first for g in pooled_all]
    row_starts, energy, ends = rows.col("t_start_s"), rows.col("energy_j"), rows.col("t_end_s")
    for a, b in spans:
        pooled = pooled_all[bisect_left(starts, a):bisect_right(starts, b)]
        ws, we, kept = _window(pooled, a, b, ctx.trim_s) if kind == "phase" else (a + ctx.trim_s, b, [])
        if kind == "phase":
            reported += sum(g.n for g in pooled if a <= g.t_first and g.t_last <= b)
        if we <= ws:
            continue
        seconds += we - ws
        i, j = rows.inside(ws, we, tol=1e-9)
        window_at.append(np.arange(i, j))
        power_at.append(np.arange(max(i, int(np.searchsorted(row_starts, ws + POWER_LAG_S))), j))
        joules, s = _energy(energy, ends, i, j)
        if finite(joules):
            energy_j, energy_s = energy_j + joules, energy_s + s
        for s in streams:
            tallies[s].add([g for g in kept if g.stream == s])
    stepped = reported > 0
    window_rows = rows.take(np.concatenate(window_at) if window_at else np.zeros(0, dtype=np.int64))
    power_rows = rows.take(np.concatenate(power_at) if power_at else np.zeros(0, dtype=np.int64))
    if not len(window_rows) and (kind != "phase" or not stepped):
        return None  # nothing recorded in it: a start-up or teardown shorter than a row, a phase with nothing
    row = {"scenario": name if len(ctx.gpus) == 1 else f"{name} · GPU {gpu.nvml_index}", "phase": name,
           "family": "watch", "kind": kind, "gpu": gpu.nvml_index, "uuid": gpu.uuid,
           "t_start": spans[0][0], "t_end": spans[-1][1], "seconds": seconds, "spans": len(spans),
           "n_samples": len(window_rows), **metric_stats(window_rows, ctx.columns)}
    power = metric_stats(power_rows, ["power_w"])
    row.update(power, gpu_util_mean_pct=_mean(window_rows, "gpu_util_pct"))
    busy, sm = row["gpu_util_mean_pct"], _mean(window_rows, "sm_active_pct")
    row["sm_busy_pct"] = min(100.0, 100.0 * sm / busy) if finite(sm) and finite(busy) and busy > 0 else math.nan
    row["energy_used_j"] = energy_j if energy_s > 0 else math.nan
    row["power_w_energy"] = energy_j / energy_s if energy_s > 0 else math.nan
    row.update(_steps(tallies, row, ctx), steps_reported=reported)
    row.update(provenance.sources(spans, streams, ctx.steps, row["steps"] or reported > 1))
    judge(row, ctx, stepped, kind)
    return row


def _steps(tallies: dict, row: dict, ctx: Context) -> dict:
    """Steps, rates and work of the streams on this GPU: rates per stream, work summed over them."""
    nan = math.nan
    live = {s: t for s, t in tallies.items() if t.stamps}
    rates = [t.rate for t in live.values() if finite(t.rate)]
    gaps = [g for t in live.values() for g in t.gaps_ms]
    ranks = sorted({s.rank for s in live if s.rank is not None})
    out = {"steps": sum(t.stamps for t in live.values()), "streams": len(live),
           "rank": ranks[0] if len(ranks) == 1 else None, "ranks": ",".join(map(str, ranks)),
           "stream_rates": "; ".join(f"{s.label}: {t.rate:.4g}/s" for s, t in live.items() if finite(t.rate)),
           "steps_per_s": statistics.median(rates) if rates else nan,
           "step_clock": " and ".join(sorted({_clock(s, ctx) for s in live})),
           "flops_bad": sum(t.bad for t in live.values())}
    out["step_ms"] = 1e3 / out["steps_per_s"] if finite(out["steps_per_s"]) else nan
    out["step_ms_p10"] = statistics.quantiles(gaps, n=10)[0] if len(gaps) > 1 else (gaps[0] if gaps else nan)
    out["step_ms_p90"] = statistics.quantiles(gaps, n=10)[-1] if len(gaps) > 1 else (gaps[0] if gaps else nan)
    timed = [t for t in live.values() if finite(t.rate)]
    counted = [t for t in timed if t.counted > 0]
    per_s = lambda attr: sum(getattr(t, attr) / t.seconds for t in timed) if timed else nan  # noqa: E731
    flops_s = sum(t.flops / t.seconds for t in counted) if counted else nan
    out["flops_per_step"] = (sum(t.flops / t.counted for t in counted) / len(counted)) if counted else nan
    derived = derive({"kernel_ms": 1e3, "flops_per_call": flops_s, "bytes_per_call": per_s("bytes"),
                      "unit": UNITS[ctx.dtype], "bound": "compute"}, ctx.peaks)
    dram = derive({"kernel_ms": 1e3, "flops_per_call": 0.0, "bytes_per_call": per_s("bytes"), "unit": None,
                   "bound": "dram"}, ctx.peaks)
    hw = derive({"kernel_ms": 1e3, "flops_per_call": sum(t.hw_flops / t.seconds for t in counted) if counted else nan,
                 "bytes_per_call": 0.0, "unit": UNITS[ctx.dtype], "bound": "compute"}, ctx.peaks)
    out.update(tflops=derived["tflops"], mfu_pct=derived["mfu_pct"], mfu_measured_pct=derived["mfu_measured_pct"],
               hfu_pct=hw["mfu_pct"])
    moved = any(t.bytes > 0 for t in timed)
    out.update(gbps=dram["gbps"] if moved else nan, mbu_pct=dram["mbu_pct"] if moved else nan,
               mbu_measured_pct=dram["mbu_measured_pct"] if moved else nan)
    tokens_s = per_s("tokens") if any(t.tokens > 0 for t in timed) else nan
    out["tokens_per_s"] = tokens_s
    on_gpu = [t for s, t in live.items() if _clock(s, ctx) == "GPU"]
    out["lead_ms"] = 1e3 * sum(t.lead_s for t in on_gpu) / sum(t.stamps for t in on_gpu) if on_gpu else nan
    power = row["power_w_energy"]
    out["j_per_step"] = power / sum(t.rate for t in timed) if timed and finite(power) else nan
    out["j_per_token"] = power / tokens_s if finite(tokens_s) and tokens_s > 0 and finite(power) else nan
    out["tokens_per_j"] = tokens_s / power if finite(tokens_s) and finite(power) and power > 0 else nan
    out["tflop_per_kj"] = out["tflops"] / power * 1e3 if finite(out["tflops"]) and finite(power) and power > 0 else nan
    return out


def _clock(stream: Stream, ctx: Context) -> str:
    """Whose timeline stamped a stream's steps: "GPU", "host", or "GPU and host" (CUDA began mid-phase)."""
    return ctx.clocks.get(stream, "")


def judge(row: dict, ctx: Context, stepped: bool, kind: str, where: tuple[str, str] | None = None) -> None:
    """The row's verdict: none for start-up and teardown; 'too short to measure' where the window holds
    no whole sample row."""
    if kind != "phase":
        row["verdict"], row["verdict_rules"] = f"{kind}: no advice, it is not a phase of the job's work.", kind
        return
    if ctx.used and row["gpu"] not in ctx.used:
        row["verdict"], row["verdict_rules"] = ("Idle: no process of the command used this GPU, and nothing of the "
                                                "job's work is credited to it."), "idle-gpu"
        return
    if not row["n_samples"]:
        # a rate beside no counters would be a row of two windows, and its MFU could not be held to the share
        # of time the GPU was busy: neither is shown
        row["verdict"], row["verdict_rules"] = (f"Too short to measure: no whole sample interval lies inside its "
                                                f"window after its first {ctx.trim_s:g} s."), "too-short"
        for k in [k for k in row if k not in KEEP_WHEN_SHORT]:
            if isinstance(row[k], float):
                row[k] = math.nan
        return
    facts = dict(row, dtype=ctx.dtype, stepped=stepped)
    row["verdict"], names = verdict(facts, ctx.dtype, ctx.recorded, where)
    row["verdict_rules"] = ", ".join(names)


KEEP_WHEN_SHORT = {"t_start", "t_end", "seconds"}


# --- the whole summary -------------------------------------------------------------------------------

def first_and_last_step(events) -> tuple[float | None, float | None]:
    steps = [e for e in events if isinstance(e, Steps)]
    return (min(e.t_first for e in steps), max(e.t_last for e in steps)) if steps else (None, None)


def summarize(rows, ctx: Context, phases: list[Phase], t0: float, t1: float) -> list[dict]:
    """One row per phase and GPU, and the start-up and teardown rows of each GPU, in time order; rows are
    Samples (gpubench.read.samples), each GPU's cut by binary search."""
    # one GPU's rows at a time, read in one pass and let go once its rows are made: a day on eight GPUs
    # never sits in memory whole
    by_gpu = {g.nvml_index: (lambda i=g.nvml_index: rows.of("gpu", i, keep=False).load(*ctx.columns)) for g in ctx.gpus}
    first, last = first_and_last_step(ctx.events)
    lead = leader(ctx.events)  # once: it reads every event
    first_mark = min((e.t for e in ctx.events if isinstance(e, Mark) and e.stream == lead), default=None)
    # a job that never marked nor stepped (attach mode, an unmarked job) is one phase, with no start-up
    begun = min((x for x in (first, first_mark) if x is not None), default=t0)
    # what follows the job's last step, where its last phase stepped, is teardown: no phase reaches past it
    teardown = last is not None and t1 - last > ctx.trim_s and _ends_in_steps(ctx.events, phases, last)
    end = last if teardown else t1
    if ctx.bounds is not None:  # a job that marked nothing: cut by what its GPUs did (gpubench.job.activity)
        begun, end = ctx.bounds
        teardown = t1 - end > ctx.trim_s
    out = []
    for gpu in ctx.gpus:
        mine = by_gpu[gpu.nvml_index]()
        if begun - t0 > ctx.trim_s:
            out.append(summarize_row(START_UP, [(t0, begun)], gpu, mine, ctx, kind=START_UP))
        for phase in phases:
            spans = [(max(a, begun), min(b, end)) for a, b in phase.spans if min(b, end) > max(a, begun)]
            if phase.name == FIRST_PHASE and begun > t0 and ctx.bounds is None and not _has_steps(ctx.events, spans):
                continue  # before the first mark, nothing stepped: that was the start-up
            row = summarize_row(phase.name, spans, gpu, mine, ctx) if spans else None
            if row is not None:
                out.append(row)
        if teardown:
            out.append(summarize_row(TEARDOWN, [(end, t1)], gpu, mine, ctx, kind=TEARDOWN))
    out = [r for r in out if r is not None]
    for name in dict.fromkeys(r["phase"] for r in out if r["kind"] == "phase"):
        judge_ranks([r for r in out if r["phase"] == name and r["kind"] == "phase"], ctx)
    return out


def judge_ranks(rows_of: list[dict], ctx: Context) -> None:
    """The rows of one phase, one per GPU: where a straggler is found, its row and the rows of the ranks
    waiting on it get the verdict that says so."""
    found = straggler.find(rows_of)
    late = next((rows_of[i]["rank"] for i, (rule, _) in found.items() if rule == "straggler"), None)
    for i, where in found.items():
        judge(rows_of[i], ctx, True, "phase", where)
        rows_of[i]["straggler_rank"] = late


def _has_steps(events, spans) -> bool:
    return any(isinstance(e, Steps) and a <= e.t_first <= b for e in events for a, b in spans)


def _ends_in_steps(events, phases, last: float) -> bool:
    """The job's last phase stepped: what follows its last step is teardown, not part of that phase."""
    final = max(((p, b) for p in phases for _, b in p.spans), key=lambda pb: pb[1], default=None)
    if final is None:
        return False
    a = max(a for a, b in final[0].spans if b == final[1])
    return a <= last


@dataclass
class Summary:
    summary: list[dict]
    phases: list[Phase]
    used: list[int]  # NVML indices of the GPUs the job used
    notes: list[str]
    phases_from: str = "marks"  # or "activity" (gpubench.job.activity), "steps" (own steps, no mark), "one phase"


def summarize_watch(rows, events, gpus: list, t0: float, t1: float, peaks: dict, dtype: str,
                    columns: list, contexts: dict, all_gpus: bool = False) -> Summary:
    """A watch's whole summary from what it recorded: its sample rows (Samples, or row dicts), its marks,
    the GPUs it sampled, the recording's window, the peaks, the --dtype, and which GPUs the command's
    processes held (NVML index -> pids). Every GPU the job used gets its rows; the others too where
    all_gpus."""
    from gpubench.read.samples import as_samples

    rows = as_samples(rows)
    events = provenance.resolve(events)  # steps from the job's optimizer, where it reported none itself
    phases = cut(events, t0, t1)
    credited, used, notes = credit(events, gpus, {int(g): set(p) for g, p in contexts.items()})
    summarized = gpus if all_gpus else [g for g in gpus if g.nvml_index in used]
    recorded = rows.valued(columns)
    gaps = provenance.holes(events)
    found = activity.phases_of(rows, events, [g for g in gpus if g.nvml_index in used], t0, t1, gaps)
    phases, bounds = ([Phase(n, s) for n, s in found[0].items()], found[1]) if found is not None else (phases, None)
    phases = provenance.cut_out(phases, gaps)  # the counted step, slowed by counting, is in no row
    ctx = Context(events, summarized, credited, peaks, dtype, list(columns), recorded, used=frozenset(used),
                  bounds=bounds)
    summary = provenance.label(summarize(rows, ctx, phases, t0, t1))
    how = "activity" if found is not None else "marks" if any(isinstance(e, Mark) for e in events) else \
        "steps" if any(isinstance(e, Steps) for e in events) else "one phase"
    return Summary(summary, phases, used, notes, how)
