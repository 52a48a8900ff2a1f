"""Phases of a job that marks nothing, from what its GPUs did.

A job that never calls gpubench.mark() nor gpubench.step() (its steps, if any, come from its optimizer:
gpubench.inside.autohook) is cut by its GPUs' activity, a second at a time. A second is busy where the GPU
was busy in at least half its sample intervals (SM active above 0 where the run recorded it, else GPU-Util
above 0; of several GPUs, the busiest), so that a row made of busy seconds never reads a median of 0.

- start-up: from the start of the watch to the first busy second, or the first step if earlier;
- teardown: from the end of the last busy second's last busy interval, or the last step if later, to the end;
- between them: where the optimizer stepped, `warmup` (its first steps, up to the one whose FLOPs were
  counted, and what came before them on the GPU: allocation, compilation) and `train` (the rest, and any
  later run of steps); where the job's model ran forwards alone (gpubench.inside.forwards), `eval` in a job
  that trains and `inference` in one that does not (its first steps `warmup`, as training's); idle spans of
  IDLE_S or more, `idle`; and busy work without steps, `busy`, or in a job with no step at all `run`, cut
  where its SM, tensor or DRAM activity changes (gpubench.job.busykinds), its parts named `busy 1`,
  `busy 2` (`run 1`, `run 2`) by kind where the kinds differ (a kind that recurs is one row, as a phase
  that recurs is);
- a start-up or teardown whose GPU was busy a third of its time or more is no start-up or teardown: its time
  joins the phases, which its medians would otherwise misread.
"""

from __future__ import annotations

import math
import statistics

from gpubench.job.busykinds import BIN_S, BUSY, Signature, name_busy
from gpubench.job.markreader import Mark, Steps

BUSY_SHARE = 0.5  # of a second's sample intervals, busy, for the second to be busy
IDLE_S = 3.0  # idle this long between busy seconds is a phase of its own
PAUSE_S = 1.0  # the optimizer quiet this long (and five steps' time) pauses a run of steps
EDGE_SHARE = 1 / 3  # a start-up or teardown busy this share of its time is work, not waiting
TRIM_S = 0.5  # what a row's window leaves out after a span begins (gpubench.read.summary.TRIM_S)
SETTLED = 0.75  # of inference's typical rate: its warm-up lasts while its steps come slower than this ...
SETTLE_S = 1.0  # ... over the next second (a line of one step, 50 ms long, is too short to tell)
SIGNATURE = ("sm_active_pct", "tensor_active_pct", "dram_active_pct")
WARMUP, TRAIN, IDLE = "warmup", "train", "idle"
EVAL, INFERENCE = "eval", "inference"  # forwards alone (gpubench.inside.forwards): in a job that trains, or not
STEPPED = (WARMUP, TRAIN, EVAL, INFERENCE)
FORWARDS = ("forward", "forward counted")  # markline.ORIGINS of forward calls
ALONE = "run"  # the name of busy work in a job with no step at all (gpubench.job.phases.FIRST_PHASE)


def phases_of(rows, events: list, gpus: list, t0: float, t1: float, gaps=(), warmup_steps: int = 10):
    """({phase: spans}, (begun, end)) from the GPUs' activity, for a job that marked nothing and reported no
    step itself; None where the summary cuts by marks instead, or where the GPUs never worked and nothing
    stepped. rows: Samples; gpus: the GPUs the job used; gaps: the counted steps' time (provenance.holes)."""
    if t1 <= t0 or any(isinstance(e, Mark) or isinstance(e, Steps) and e.origin == "step" for e in events):
        return None
    share, sig, exact, ends = activity(rows, gpus, t0, t1)
    steps = sorted((e for e in events if isinstance(e, Steps)), key=lambda e: e.t_first)
    runs = _runs([e for e in steps if e.origin not in FORWARDS])
    fruns = [r for r in _runs([e for e in steps if e.origin in FORWARDS]) if not _overlaps(r, runs)]
    busy = _without_blips([s >= BUSY_SHARE for s in share], t0, runs + fruns)
    if not any(busy) and not steps:
        return None
    first = next((i for i, b in enumerate(busy) if b), None)
    last = max((i for i, b in enumerate(busy) if b), default=None)
    begun = min(([t0 + first * BIN_S] if first is not None else []) + ([steps[0].t_first] if steps else []))
    end = max(([ends[last]] if last is not None else []) + ([steps[-1].t_last] if steps else []))
    begun, end = max(t0, begun), min(t1, end)
    if exact([(t0, begun)]) >= EDGE_SHARE:  # over the window its row would read
        begun = t0
    if exact([(end, t1)]) >= EDGE_SHARE:
        end = t1
    counts = {e.t_first for e in steps if e.origin == "counted"}  # the optimizer's counted step ends warm-up
    segments = _segments(busy, sig, t0, begun, end, runs, [g for g in gaps if g[1] in counts], warmup_steps, fruns)
    segments = _dense(segments, share, t0, exact)
    phases: dict = {}
    for name, a, b in segments:
        if b > a:
            phases.setdefault(name, []).append((a, b))
    return phases, (begun, end)


def activity(rows, gpus: list, t0: float, t1: float):
    """Per second from t0: the busiest GPU's share of busy sample intervals, and the GPUs' SM, tensor and
    DRAM activity (Signature); a function giving the busiest GPU's share of busy intervals among those
    that lie wholly inside a window, as a summary row takes them; and per second, where its last busy
    interval of any GPU ended (the second's end where none was busy)."""
    import numpy as np

    n = max(1, math.ceil((t1 - t0) / BIN_S - 1e-9))
    share, sums, counts = np.zeros(n), np.zeros((n, len(SIGNATURE))), np.zeros((n, len(SIGNATURE)))
    ends = np.full(n, -np.inf)
    column = "sm_active_pct" if "sm_active_pct" in rows.valued(["sm_active_pct"]) else "gpu_util_pct"
    wanted = dict.fromkeys(["t_start_s", "t_end_s", column, *SIGNATURE])
    for g in gpus:
        mine = rows.of("gpu", g.nvml_index, keep=False).load(*wanted)
        mid = (mine.col("t_start_s") + mine.col("t_end_s")) / 2
        keep = (mid >= t0) & (mid < t0 + n * BIN_S)
        at = ((mid[keep] - t0) // BIN_S).astype(np.int64)
        values = mine.col(column)[keep]
        seen = np.bincount(at[np.isfinite(values)], minlength=n)
        busy = np.nan_to_num(values) > 0
        active = np.bincount(at[busy], minlength=n)
        share = np.maximum(share, np.divide(active, seen, out=np.zeros(n), where=seen > 0))
        np.maximum.at(ends, at[busy], mine.col("t_end_s")[keep][busy])
        for k, name in enumerate(SIGNATURE):
            v = mine.col(name)[keep]
            ok = np.isfinite(v)
            sums[:, k] += np.bincount(at[ok], weights=v[ok], minlength=n)
            counts[:, k] += np.bincount(at[ok], minlength=n)

    def exact(spans, trim_s: float = TRIM_S) -> float:
        """Read again, a GPU at a time (a day of samples never sits in memory whole)."""
        shares = []
        for g in gpus:
            mine = rows.of("gpu", g.nvml_index, keep=False).load("t_start_s", "t_end_s", column)
            busy = np.nan_to_num(mine.col(column)) > 0
            picked = [busy[i:j] for a, b in spans for i, j in [mine.inside(a + trim_s, b, tol=1e-9)] if j > i]
            if picked:
                shares.append(float(np.concatenate(picked).mean()))
        return max(shares, default=0.0)

    ends = np.where(np.isfinite(ends), ends, t0 + (np.arange(n) + 1) * BIN_S)
    return share.tolist(), Signature(sums, counts), exact, ends.tolist()


def _without_blips(busy: list[bool], t0: float, runs: list) -> list[bool]:
    """Busy seconds in runs shorter than IDLE_S, away from the optimizer's steps and within waiting at least
    three times as long (so that the wait stays idle more than two thirds of its time), are part of the
    wait: a copy, a print of the loss."""
    out = list(busy)
    stepping = [(r[0].t_first - BIN_S, r[-1].t_last + BIN_S) for r in runs]
    i = 0
    while i < len(out):
        if not out[i]:
            i += 1
            continue
        j = i
        while j < len(out) and out[j]:
            j += 1
        before = next((k for k in range(i - 1, -1, -1) if busy[k]), -1)
        after = next((k for k in range(j, len(busy)) if busy[k]), len(busy))
        quiet = (i - before - 1) + (after - j)
        a, b = t0 + i * BIN_S, t0 + j * BIN_S
        if (j - i) * BIN_S < IDLE_S and quiet >= 3 * (j - i) and not any(x < b and a < y for x, y in stepping):
            out[i:j] = [False] * (j - i)
        i = j
    return out


def _dense(segments: list[tuple], share: list, t0: float, exact) -> list[tuple]:
    """Busy work (not steps) whose row would find the GPU busy in less than half its sample intervals (short
    idle seconds joined it) would read medians of 0: its idle seconds are taken out of it, as `idle`."""
    spans: dict = {}
    for name, a, b in segments:
        spans.setdefault(name, []).append((a, b))
    sparse = {n for n, ss in spans.items() if n not in (*STEPPED, IDLE) and exact(ss) < BUSY_SHARE}
    if not sparse:
        return segments
    busy = [s >= BUSY_SHARE for s in share]
    out: list[list] = []
    for name, a, b in segments:
        pieces = (
            [[name, a, b]]
            if name not in sparse
            else [[n if n == IDLE else name, x, y] for n, x, y, _ in _between(busy, t0, a, b)]
        )
        for p in pieces:
            if out and out[-1][0] == p[0] and p[0] not in STEPPED and out[-1][2] >= p[1] - 1e-9:
                out[-1][2] = p[2]
            else:
                out.append(p)
    return [tuple(p) for p in out]


def _runs(steps: list) -> list[list]:
    """The optimizer's steps in runs: a pause longer than PAUSE_S and five steps' time ends a run (the wait
    is then in no step's window). One process's steps (the one that stepped most): under data parallelism
    the ranks step together."""
    if not steps:
        return []
    counts: dict = {}
    for e in steps:
        counts[e.stream] = counts.get(e.stream, 0) + e.n
    lead = min(counts, key=lambda s: (-counts[s], s.order()))
    mine = [e for e in steps if e.stream == lead]
    intervals = [(e.t_last - e.t_first) / (e.n - 1) for e in mine if e.n > 1]
    intervals += [b.t_first - a.t_last for a, b in zip(mine, mine[1:])]
    pause = max(PAUSE_S, 5 * statistics.median(intervals)) if intervals else PAUSE_S
    runs = [[mine[0]]]
    for a, b in zip(mine, mine[1:]):
        if b.t_first - a.t_last > pause:
            runs.append([])
        runs[-1].append(b)
    return runs


def _segments(busy, sig, t0, begun, end, runs, gaps, warmup_steps, fruns=()) -> list[tuple[str, float, float]]:
    """(name, start, end) from begun to end: the runs of steps (the optimizer's: train; forwards alone: eval
    in a job that trains, else inference), and between them idle and busy seconds. Warm-up is the first
    steps of the optimizer's, or of the forwards' where nothing trains (an evaluation warms up nothing)."""
    out: list[list] = []
    cursor = begun
    split = _warmup_end([e for run in runs for e in run], gaps, warmup_steps)
    if not runs and fruns:
        split = _settled(fruns[0], _warmup_end([e for run in fruns for e in run], [], warmup_steps))
    kind = EVAL if runs else INFERENCE
    named = sorted([(TRAIN, r) for r in runs] + [(kind, r) for r in fruns], key=lambda nr: nr[1][0].t_first)
    for k, (name, run) in enumerate(named):
        a, b = run[0].t_first, min(end, run[-1].t_last)
        step = (b - a) / max(1, sum(e.n for e in run) - 1)
        a = begun if k == 0 else max(cursor, a - step)  # the first step began a step before its stamp
        out += _between(busy, t0, cursor, a)
        cut = split if name != EVAL else None
        if cut is None or cut <= a:  # a run keeps its number: two runs are two spans, the pause in neither
            out.append([name, a, b, k])
        elif cut >= b:
            out.append([WARMUP, a, b, k])
        else:
            out += [[WARMUP, a, cut, k], [name, cut, b, k]]
        cursor = b
    out += _between(busy, t0, cursor, end)
    out = _merge_short_idle(out)
    return name_busy(out, sig, t0, BUSY if runs or fruns else ALONE)


def _overlaps(run: list, runs: list[list]) -> bool:
    """A run of forwards inside the time of the optimizer's (another process's evaluation beside training):
    training's time stays training's."""
    a, b = run[0].t_first, run[-1].t_last
    return any(r[0].t_first <= b and a <= r[-1].t_last for r in runs)


def _warmup_end(steps: list, gaps: list, warmup_steps: int) -> float | None:
    """Where warm-up ends: at the counted step, else at the stamp of the warmup_steps-th step where more
    follow; None where the job stepped no more than that."""
    if gaps:
        return min(g0 for g0, _ in gaps)
    seen = 0
    for k, e in enumerate(steps):
        if seen + e.n >= warmup_steps:
            more = seen + e.n > warmup_steps or k + 1 < len(steps)
            return e.t_first + (e.t_last - e.t_first) * (warmup_steps - seen - 1) / max(1, e.n - 1) if more else None
        seen += e.n
    return None


def _settled(run: list, split: float | None) -> float | None:
    """Inference's warm-up goes on, past its first steps, while its steps come at less than SETTLED of the run's
    typical rate (the median over its time of each line's rate, from the stamp before it to its own) over the
    next SETTLE_S: to the first stamp from which they come as fast as that, and no further than half the run
    (the typical rate, a median over the run's time, is the warm-up's own where the warm-up is longer). A
    decoder's first call of generate meets each length of its KV cache for the first time and runs at a third of
    its later rate, for seconds (12 s of a 30 s run at batch 1 on an H200); a rate that drifts later (a cache
    that grows) is the work's, not warm-up."""
    if split is None or len(run) < 3:
        return split
    start, end = run[0].t_first, run[-1].t_last
    lines = [(b.t_last - a.t_last, b.n) for a, b in zip(run, run[1:]) if b.t_last > a.t_last]
    if not lines:
        return split
    by_rate = sorted(lines, key=lambda dn: dn[1] / dn[0])
    half, seen = sum(d for d, _ in lines) / 2, 0.0
    for d, n in by_rate:
        seen += d
        if seen >= half:
            typical = n / d
            break
    j, steps = 0, 0  # the lines after line i up to j, and their steps: at least SETTLE_S of them
    for i, a in enumerate(run):
        if a.t_last - start > (end - start) / 2:
            return max(split, start + (end - start) / 2)
        if j <= i:
            j, steps = i, 0
        while j + 1 < len(run) and run[j].t_last - a.t_last < SETTLE_S:
            j += 1
            steps += run[j].n
        if a.t_last >= split and run[j].t_last > a.t_last and steps / (run[j].t_last - a.t_last) >= SETTLED * typical:
            return a.t_last
        steps -= run[i + 1].n if i + 1 <= j else 0
    return split


def _between(busy, t0, a, b) -> list[list]:
    """[a, b] cut at whole seconds into busy and idle segments."""
    out: list[list] = []
    t = a
    while t < b - 1e-9:
        i = int((t - t0) // BIN_S)
        i += int(t0 + (i + 1) * BIN_S <= t + 1e-9)  # t is a second's end that rounding put inside that second
        nxt = min(b, t0 + (i + 1) * BIN_S)
        name = BUSY if 0 <= i < len(busy) and busy[i] else IDLE
        if out and out[-1][0] == name:
            out[-1][2] = nxt
        else:
            out.append([name, t, nxt, None])
        t = nxt
    return out


def _merge_short_idle(segments: list[list]) -> list[list]:
    """Idle shorter than IDLE_S is part of the work around it (the one before, or after where none is); so is
    anything that short beside a run of steps: the end of its last step's second, its first step's start."""
    out: list[list] = []
    for k, seg in enumerate(segments):
        short = seg[2] - seg[1] < IDLE_S and seg[0] not in STEPPED
        after_steps = bool(out) and out[-1][0] in STEPPED
        before_steps = k + 1 < len(segments) and segments[k + 1][0] in STEPPED
        if out and out[-1][0::3] == seg[0::3] and out[-1][2] >= seg[1] - 1e-9:
            out[-1][2] = seg[2]
        elif short and out and (seg[0] == IDLE or after_steps):
            out[-1][2] = seg[2]
        elif short and before_steps and seg[0] != IDLE:
            segments[k + 1][1] = seg[1]
        else:
            out.append(list(seg))
    if len(out) > 1 and out[0][0] == IDLE and out[0][2] - out[0][1] < IDLE_S:
        out[1][1] = out[0][1]
        out.pop(0)
    merged: list[list] = []
    for seg in out:  # neighbours that became alike (the same work, the same run of steps)
        if merged and merged[-1][0::3] == seg[0::3]:
            merged[-1][2] = seg[2]
        else:
            merged.append(seg)
    return merged
