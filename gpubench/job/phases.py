"""A watched job's phases: where its marks cut the recording, and one summary row per phase and GPU, every
number of a row from one window.

Phases come from the marks of the job's leading process (the lowest rank that marked; without ranks, the
first process to mark): a mark starts a phase that lasts until its next mark of another name; a phase
that recurs (train, eval, train) gathers its spans into one row. Steps are credited to the GPU their
process ran on (the UUID each steps line carries).

A row's window, in each span of its phase: from the first step stamped at least TRIM_S after the span
began to the last step of the span, so that neither the phase's start (NVML's utilization and power
trail by up to a second) nor what follows its last step (the job's teardown, the next phase's set-up)
enters its numbers; a span without steps keeps its whole length after the trim. Every number of a row
covers that one window: each metric from the sample rows whose value covers only time inside it
(gpubench.read.summary.TRAIL_S: a row counts from as far into the window as its value can reach back);
each process's rate from its own stamps inside it; the work of all its processes (FLOPs, bytes, tokens)
from what each did inside the window (gpubench.job.tally), over the window's length; the energy from the
counter at the window's two ends. What comes before the job's first step or mark is the row `start-up`,
what follows its last step the row `teardown`: both without advice. A window that holds no sample row
whole for every column of the ladder says it is too short, and shows no number of another window.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from gpubench.job import activity, fleeting, provenance
from gpubench.job.credit import credit
from gpubench.job.markreader import Mark, Steps, Stream
from gpubench.job.phaserow import Context, judge_ranks, summarize_row
from gpubench.read.summary import TRIM_S

# the summary columns made here and in each row (gpubench.job.phaserow) that their names do not tell
# (gpubench.record.columns.DECLARERS names this)
SUMMARY_COLUMNS = {
    "kind": "text",
    "family": "text",
    "verdict": "text",
    "verdict_rules": "text",
    "flop_convention": "text",
}

FIRST_PHASE = "run"  # the phase before the first mark, where the job steps before it marks
START_UP, TEARDOWN = "start-up", "teardown"

# Report sentences for each phase, filled from its summary row (gpubench.show.report.story): a sentence whose
# non-metric fields this row lacks (no steps, no FLOPs) is left out.
STORY = [
    "In {phase}, the medians: nvidia-smi's GPU-Util {gpu_util_pct:.0f}%, SM active {sm_active_pct:.0f}%, SM "
    "occupancy {sm_occupancy_pct:.0f}%, tensor active {tensor_active_pct:.0f}%, DRAM active {dram_active_pct:.0f}%.",
    "{steps} steps at {steps_per_s:.3g} per second ({step_ms:.4g} ms each, p10–p90 {step_ms_p10:.4g}–"
    "{step_ms_p90:.4g} ms), stamped on the {step_clock} timeline.",
    "{flops_per_step:.3g} FLOPs per step: {tflops:.3g} TFLOP/s, MFU {mfu_pct:.2g}% of the {dtype} datasheet "
    "peak ({flop_convention}).",
    "HFU {hfu_pct:.2g}%: every FLOP that ran.",
    "No HFU: {hfu_unknown}.",
    "{tokens_per_s:.4g} tokens/s.",
    "{gbps:.4g} GB/s of the bytes the steps must move: MBU {mbu_pct:.2g}% of the datasheet DRAM bandwidth.",
    "The tensor pipes could have delivered {tensor_ceiling_tflops:.3g} TFLOP/s in the time they were active, "
    "{tensor_ceiling_pct:.2g}% of the {tensor_ceiling_dtype} peak ({tensor_ceiling_basis}).",
    "It used {energy_used_j:.4g} J at {power_w_energy:.0f} W: {j_per_step:.3g} J per step.",
    "{provenance}.",
    "Verdict: {verdict}",
]
FLOP_CONVENTION = (
    "model FLOPs as PaLM counts them: what one step of the model must do, no recomputation; "
    "HFU counts every FLOP that ran"
)


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
    by_phase: dict[str, list] = {}
    for r in out:
        if r["kind"] == "phase":
            by_phase.setdefault(r["phase"], []).append(r)
    for same in by_phase.values():
        judge_ranks(same, ctx)
    return out


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


def summarize_watch(
    rows,
    events,
    gpus: list,
    t0: float,
    t1: float,
    peaks: dict,
    dtype: str,
    columns: list,
    contexts: dict,
    all_gpus: bool = False,
    hardware: bool = True,
) -> Summary:
    """A watch's whole summary from what it recorded: its sample rows (Samples, or row dicts), its marks,
    the GPUs it sampled, the recording's window, the peaks, the --dtype, and which GPUs the command's
    processes held (NVML index -> pids). Every GPU the job used gets its rows; the others too where
    all_gpus. hardware: the marks' hardware FLOPs count what the kernels run (else no HFU: gpubench.inside.flops)."""
    from gpubench.read.samples import as_samples

    rows = as_samples(rows)
    events = provenance.resolve(events)  # steps from the job's optimizer, where it reported none itself
    phases, merged = fleeting.merge(cut(events, t0, t1), TRIM_S, Phase, apart=FIRST_PHASE)
    credited, used, notes = credit(events, gpus, {int(g): set(p) for g, p in contexts.items()})
    summarized = gpus if all_gpus else [g for g in gpus if g.nvml_index in used]
    recorded = rows.valued(columns)
    gaps = provenance.holes(events)
    found = activity.phases_of(rows, events, [g for g in gpus if g.nvml_index in used], t0, t1, gaps)
    phases, bounds = ([Phase(n, s) for n, s in found[0].items()], found[1]) if found is not None else (phases, None)
    phases = provenance.cut_out(phases, gaps)  # the counted step, slowed by counting, is in no row
    ctx = Context(
        events,
        summarized,
        credited,
        peaks,
        dtype,
        list(columns),
        recorded,
        used=frozenset(used),
        hardware=hardware,
        bounds=bounds,
    )
    summary = provenance.label(summarize(rows, ctx, phases, t0, t1))
    how = (
        "activity"
        if found is not None
        else "marks"
        if any(isinstance(e, Mark) for e in events)
        else "steps"
        if any(isinstance(e, Steps) for e in events)
        else "one phase"
    )
    return Summary(summary, phases, used, notes + (merged if found is None else []), how)
