"""One row of a watched job's summary: the numbers of one phase (or start-up, teardown) on one GPU over its
window, and its verdict. What every row shares is a Context; gpubench.job.phases cuts the phases and makes the
summary of them."""

from __future__ import annotations

import math
from bisect import bisect_left, bisect_right
from dataclasses import dataclass

from gpubench.job import provenance, slowrank, tally
from gpubench.job.markreader import Steps, Stream
from gpubench.job.tally import Tally
from gpubench.metrics import finite
from gpubench.read.energy import energy_between
from gpubench.read.summary import TRAIL_S, TRIM_S, aligned_stats, covering, whole_rows, window_text
from gpubench.read.phase_verdict import verdict, withheld
from gpubench.truth import ceiling as tensor_ceiling
from gpubench.truth.peaks import UNITS


def _mean(rows, column: str) -> float:
    from gpubench.read.samples import finite_values, fmean

    return fmean(finite_values(rows, column))


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
    hardware: bool = True  # the marks' hardware FLOPs count what the kernels run (gpubench.inside.flops)
    bounds: tuple | None = None  # (start-up's end, teardown's start) where the GPUs' activity cut the phases

    def __post_init__(self):
        self.steps: dict[Stream, list[Steps]] = {}  # each stream's groups of steps, in time order
        for e in sorted((e for e in self.events if isinstance(e, Steps)), key=lambda e: e.t_first):
            self.steps.setdefault(e.stream, []).append(e)
        self.clocks = {
            s: " and ".join("GPU" if c == "gpu" else "host" for c in sorted({g.clock for g in groups}))
            for s, groups in self.steps.items()
        }
        self._ceilings: dict = {}
        self._pooled: dict = {}  # NVML index -> its streams, their groups of steps in time order, the starts

    def ceiling(self, gpu):
        """The tensor-pipe ceiling of a GPU (gpubench.truth.ceiling), by its name; None where none is known."""
        if gpu.name not in self._ceilings:
            self._ceilings[gpu.name] = tensor_ceiling.ceiling_for(gpu.name, (self.peaks or {}).get("datasheet"))
        return self._ceilings[gpu.name]


def summarize_row(name: str, spans, gpu, rows, ctx: Context, kind: str = "phase") -> dict | None:
    """The row of one phase (or start-up, teardown) on one GPU, from that GPU's sample rows (Samples, in
    time order); None where it holds nothing at all."""
    import numpy as np

    streams, pooled_all, starts = _pooled(ctx, gpu.nvml_index)
    seconds, energy_j, energy_s, windows = 0.0, 0.0, 0.0, []
    window_at, starts_at = [], []  # the rows of each span's window, and that window's start for each row
    tallies = {s: Tally() for s in streams}
    reported = 0  # steps in the spans, the window's and those before the trim
    begun_inside = []  # the groups that begin in a span: where the row's steps came from
    for a, b in spans:
        pooled = pooled_all[bisect_left(starts, a) : bisect_right(starts, b)]
        begun_inside.extend(pooled)
        ws, we, kept = tally.window(pooled, a, b, ctx.trim_s) if kind == "phase" else (a + ctx.trim_s, b, [])
        if kind == "phase":
            reported += sum(g.n for g in pooled if a <= g.t_first and g.t_last <= b)
        if we <= ws:
            continue
        seconds += we - ws
        windows.append((ws, we))
        i, j = rows.inside(ws, we, tol=1e-9)
        window_at.append(np.arange(i, j))
        starts_at.append(np.full(j - i, ws))
        joules, covered = energy_between(rows, ws, we)
        if covered > 0:
            energy_j, energy_s = energy_j + joules, energy_s + covered
        for s in streams:
            if kind == "phase":
                tallies[s].add([g for g in kept if g.stream == s], *tally.around(ctx.steps.get(s, []), ws, we), ws, we)
    stepped = reported > 0
    window_rows = rows.take(np.concatenate(window_at) if window_at else np.zeros(0, dtype=np.int64))
    row_starts = np.concatenate(starts_at) if starts_at else np.zeros(0)
    if not len(window_rows) and kind != "phase":
        return None  # nothing recorded in it: a start-up or teardown shorter than a row (a phase keeps its row)
    row = {
        "scenario": name if len(ctx.gpus) == 1 else f"{name} · GPU {gpu.nvml_index}",
        "phase": name,
        "family": "watch",
        "kind": kind,
        "gpu": gpu.nvml_index,
        "uuid": gpu.uuid,
        "t_start": spans[0][0],
        "t_end": spans[-1][1],
        "seconds": seconds,
        "spans": len(spans),
        "windows": window_text(windows),
        "n_samples": whole_rows(window_rows, row_starts, ctx.recorded),
        **aligned_stats(window_rows, row_starts, ctx.columns),
    }
    busy = _mean(covering(window_rows, row_starts, TRAIL_S["gpu_util_pct"]), "gpu_util_pct")
    sm = _mean(covering(window_rows, row_starts, TRAIL_S["sm_active_pct"]), "sm_active_pct")
    row["gpu_util_mean_pct"] = busy
    row["sm_busy_pct"] = min(100.0, 100.0 * sm / busy) if finite(sm) and finite(busy) and busy > 0 else math.nan
    row["energy_used_j"] = energy_j if energy_s > 0 else math.nan
    row["power_w_energy"] = energy_j / energy_s if energy_s > 0 else math.nan
    row.update(
        tally.work_columns(
            tallies, seconds, row["energy_used_j"], lambda s: _clock(s, ctx), ctx.peaks, UNITS[ctx.dtype], ctx.hardware
        ),
        steps_reported=reported,
    )
    row.update(
        tensor_ceiling.columns(
            covering(window_rows, row_starts, TRAIL_S["tensor_active_pct"]),
            ctx.ceiling(gpu),
            ctx.dtype,
            row.get("hfu_pct", math.nan),
            clocks=rows,
        )
    )
    row.update(provenance.sources(begun_inside, row["steps"] or reported > 1))
    judge(row, ctx, stepped, kind)
    return row


def _pooled(ctx: Context, index: int) -> tuple[list, list, list]:
    """The streams credited to GPU `index`, their groups of steps in time order and the groups' starts:
    sorted once a GPU, not once a phase (a job that marks every epoch has thousands)."""
    cache = ctx._pooled
    if index not in cache:
        streams = sorted((s for s, g in ctx.credit.items() if g == index), key=Stream.order)
        pooled = sorted((g for s in streams for g in ctx.steps.get(s, [])), key=lambda g: g.t_first)
        cache[index] = (streams, pooled, [g.t_first for g in pooled])
    return cache[index]


def _clock(stream: Stream, ctx: Context) -> str:
    """Whose timeline stamped a stream's steps: "GPU", "host", or "GPU and host" (CUDA began mid-phase)."""
    return ctx.clocks.get(stream, "")


def judge(row: dict, ctx: Context, stepped: bool, kind: str, where: tuple[str, str] | None = None) -> None:
    """The row's verdict: none for start-up and teardown; 'too short to measure' where the window holds
    no whole sample row."""
    if kind != "phase":
        row["verdict"], row["verdict_rules"] = f"{kind}: no advice, it is not a phase of the job's work.", kind
        return
    if not row["n_samples"]:  # first: an idle GPU's row too says nothing without a sample of its window
        # a rate beside no counters would be a row of two windows, and its MFU could not be held to the share
        # of time the GPU was busy: neither is shown
        row["verdict"], row["verdict_rules"] = (
            (
                f"Too short to measure: no whole sample interval lies inside its "
                f"window after its first {ctx.trim_s:g} s."
            ),
            "too-short",
        )
        for k in [k for k in row if k not in KEEP_WHEN_SHORT]:
            if isinstance(row[k], float):
                row[k] = math.nan
        row["stream_rates"] = ""  # a process's rate is a number too: none without the counters of its window
        return
    if ctx.used and row["gpu"] not in ctx.used:
        row["verdict"], row["verdict_rules"] = (
            ("Idle: no process of the command used this GPU, and nothing of the job's work is credited to it."),
            "idle-gpu",
        )
        return
    facts = dict(row, dtype=ctx.dtype, stepped=stepped)
    row["verdict"], names = verdict(facts, ctx.dtype, ctx.recorded, where)
    row["verdict_rules"] = ", ".join(names)
    row.update(withheld(row, names))  # an HFU of gpubench's own count over the ceiling is gpubench's error: not shown


KEEP_WHEN_SHORT = {"t_start", "t_end", "seconds", "energy_used_j", "power_w_energy"}  # the counter at its ends


def judge_ranks(rows_of: list[dict], ctx: Context) -> None:
    """The rows of one phase, one per GPU: where a straggler is found, its row and the rows of the ranks
    waiting on it get the verdict that says so."""
    found = slowrank.find(rows_of)
    late = next((rows_of[i]["rank"] for i, (rule, _) in found.items() if rule == "straggler"), None)
    for i, where in found.items():
        judge(rows_of[i], ctx, True, "phase", where)
        rows_of[i]["straggler_rank"] = late
