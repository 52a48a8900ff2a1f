"""A watch as it runs: the recent sample rows and steps of a running watch, and its live rows, each the
summary's own row (gpubench.job.phaserow.summarize_row) over the last WINDOW_S seconds of the current phase.

The sampler hands every row to the recording's sink and then here (`after`); the thread that tails the
marks file hands every line it reads here (`take_events`). Both only append to bounded buffers under a
lock and never raise: the recording and the job go on whatever happens here. The work is done when
someone asks (`snapshot`, from the metrics endpoint's thread or the live lines' gpubench.job.speak): the
current phase is cut as the summary cuts it, the window runs from TRIM_S after that phase began, or
WINDOW_S before now if later, to now, and each GPU the job uses gets the row the summary would give that
window: the same steps/s, TFLOP/s, MFU, MBU and verdict, from the same code. Beside the window's steps/s and MFU,
the phase's so far (gpubench.job.sofar): from TRIM_S after the phase's current span began to now, the numbers
its final row will show, where the window's move with the job from one window to the next.

The phase has the summary's name. A job that marks, or calls gpubench.step() itself, is cut by its leading
process's marks (gpubench.job.phases.cut). A job that does neither is cut by what its GPUs did
(gpubench.job.activity.phases_of), run here over the rows and steps kept; what that cut cannot see in them
is kept as it goes by: whether the job ever trained (its forwards alone are then `eval`, not `inference`)
and where its warm-up ended (at the step whose FLOPs were counted, else after its tenth step), so that
`train` is not called `warmup` again once its first steps have left the buffers. Work without steps is
`run` or `busy`: the summary may tell its kinds apart as `run 1`, `run 2` over the whole job, which a
window cannot.
"""

from __future__ import annotations

import math
import statistics
import threading
from collections import deque
from dataclasses import dataclass, field

from gpubench.job import activity, provenance
from gpubench.job.activity import ALONE, EVAL, FORWARDS, IDLE, IDLE_S, INFERENCE, TRAIN, WARMUP
from gpubench.job.busykinds import BUSY
from gpubench.job.credit import credit
from gpubench.job.markreader import Mark, Steps
from gpubench.job.phaserow import Context, judge_ranks, summarize_row
from gpubench.job.phases import START_UP, Phase, cut
from gpubench.job.sofar import SoFar
from gpubench.metrics import finite
from gpubench.read.summary import TRIM_S

WINDOW_S = 15.0  # Prometheus' default scrape interval: windows of scrapes that far apart tile the job's time
KEEP_S = WINDOW_S + 5.0  # kept beyond the window: a group of steps is written up to a second after its first
MARKS_KEPT = 64  # each process's latest changes of phase; its first mark is kept too (it can make it the leader)
ERRORS_KEPT = 5
WARMUP_STEPS = 10  # activity.phases_of's: the steps of warm-up where none was counted


@dataclass
class Snapshot:
    """What a scrape shows: each GPU's latest sample row, the live rows of the GPUs the job uses, and the
    ranks whose steps are credited to each GPU ("" where none, "0,1" where several)."""

    latest: dict[int, dict]
    rows: list[dict]
    ranks: dict[int, str]
    phase: str
    window: tuple[float, float] | None
    errors: list[str] = field(default_factory=list)


class Live:
    def __init__(
        self,
        gpus: list,
        columns,
        peaks: dict,
        dtype: str,
        clock,
        contexts=dict,
        window_s: float = WINDOW_S,
        longest_s: float = 0.0,
    ):
        self.gpus = list(gpus)
        self.columns = list(columns)
        self.peaks, self.dtype, self.clock, self.window_s = peaks, dtype, clock, window_s
        self.contexts = contexts  # () -> {NVML index: pids of the job seen on it}
        self.t_start = clock()
        self.errors: list[str] = []
        self._keep_s = max(KEEP_S, window_s + 5.0, longest_s + 5.0)  # longest_s: the longest window asked for
        self._lock = threading.Lock()
        self._rows: dict[int, deque] = {g.nvml_index: deque() for g in self.gpus}
        self._recorded: set[str] = set()
        self._first: dict = {}  # stream -> its first mark
        self._marks: dict = {}  # stream -> its latest marks that changed its phase
        self._steps: deque = deque()  # groups of steps, as they arrived
        self._last: dict = {}  # stream -> its latest group: its GPU stays credited after its steps left the window
        self._history = History()  # what the cut by activity needs of steps that left the buffers
        self._sofar = SoFar()  # each process's steps since the watch began, for the phase's rate so far

    # --- fed by the sampler and the marks' tail (their threads): append, never raise ----------------

    def after(self, sink):
        """A sink that hands a row to `sink`, then keeps it here."""

        def both(row):
            sink(row)
            self.take_row(row)

        return both

    def take_row(self, row: dict) -> None:
        try:
            with self._lock:
                kept = self._rows.get(row["gpu"])
                if kept is None:
                    return
                kept.append(row)
                while kept[0]["t_end_s"] < row["t_end_s"] - self._keep_s:
                    kept.popleft()
                self._recorded.update(c for c in self.columns if c not in self._recorded and finite(row.get(c)))
        except Exception as err:  # noqa: BLE001 -- nothing here may reach the sampler
            self._error(err)

    def take_events(self, events) -> None:
        try:
            cutoff = self.clock() - self._keep_s
            with self._lock:
                for e in events:
                    if isinstance(e, Mark):
                        self._first.setdefault(e.stream, e)
                        marks = self._marks.setdefault(e.stream, deque(maxlen=MARKS_KEPT))
                        if not marks or marks[-1].name != e.name:  # a repeated name changes no phase
                            marks.append(e)
                    elif isinstance(e, Steps):
                        self._history.take(e)
                        self._sofar.take((e.stream, e.origin), e.t_first, e.t_last, e.n)
                        self._steps.append(e)
                        if e.stream not in self._last or self._last[e.stream].t_last <= e.t_last:
                            self._last[e.stream] = e
                while self._steps and self._steps[0].t_last < cutoff:
                    self._steps.popleft()
        except Exception as err:  # noqa: BLE001 -- nor the tail of the marks
            self._error(err)

    def _error(self, err: Exception) -> None:
        if len(self.errors) < ERRORS_KEPT:
            self.errors.append(f"{type(err).__name__}: {err}")

    # --- asked for by the endpoint --------------------------------------------------------------------

    def snapshot(self, window_s: float | None = None) -> Snapshot:
        """The live rows now, over the last window_s seconds (default the endpoint's window_s) of the phase."""
        now = self.clock()
        with self._lock:
            rows = {g: list(kept) for g, kept in self._rows.items()}
            marks = list(dict.fromkeys([*self._first.values(), *(m for ms in self._marks.values() for m in ms)]))
            steps = list(dict.fromkeys([*self._steps, *self._last.values()]))
            recorded = set(self._recorded)
            history = self._history.copy()
        snap = Snapshot({g: kept[-1] for g, kept in rows.items() if kept}, [], {}, "", None)
        try:
            self._window(snap, rows, marks, steps, recorded, history, now, window_s or self.window_s)
        except Exception as err:  # noqa: BLE001 -- the ladder is shown all the same
            self._error(err)
        snap.errors = list(self.errors)
        return snap

    def _window(
        self,
        snap: Snapshot,
        rows: dict,
        marks: list,
        steps: list,
        recorded: set,
        history: "History",
        now: float,
        window_s: float,
    ) -> None:
        """The live rows of the GPUs the job uses, with the summary's code, and which ranks each GPU runs."""
        from gpubench.read.samples import as_samples  # numpy: not for `gpubench watch --help`

        events = provenance.resolve(marks + steps)
        held = {int(g): set(pids) for g, pids in dict(self.contexts()).items()}
        credited, used, _ = credit(events, self.gpus, held)
        snap.ranks = {
            g.nvml_index: ",".join(
                str(r)
                for r in sorted({s.rank for s, i in credited.items() if i == g.nvml_index and s.rank is not None})
            )
            for g in self.gpus
        }
        mine = [g for g in self.gpus if g.nvml_index in used and rows[g.nvml_index]]
        kept = as_samples([r for g in mine for r in rows[g.nvml_index]])  # made once: each GPU's are cut from it
        if marks or history.own:
            snap.phase, began, kind = self._current(marks, steps, now)
        else:  # the summary cuts such a job by what its GPUs did: so does its live window
            snap.phase, began, kind = self._by_activity(kept, events, mine, history, now)
        start = max(began + TRIM_S, now - window_s)
        if start >= now:
            return
        ctx = Context(events, mine, credited, self.peaks, self.dtype, self.columns, recorded, trim_s=0.0)
        # the counted step ran slower (gpubench counted it): in no row, as in the summary
        found = provenance.cut_out([Phase(snap.phase, [(start, now)])], provenance.holes(events))
        if not found:
            return
        snap.rows = provenance.label(
            [
                r
                for g in ctx.gpus
                if (
                    r := summarize_row(
                        snap.phase, found[0].spans, g, kept.of("gpu", g.nvml_index, keep=False), ctx, kind=kind
                    )
                )
                is not None
            ]
        )
        if kind == "phase":
            judge_ranks(snap.rows, ctx)
        snap.window = (start, now)
        self._so_far(snap.rows, events, credited, began + TRIM_S)

    def _so_far(self, rows: list[dict], events: list, credited: dict, since: float) -> None:
        """Each row's phase rate so far (gpubench.job.sofar): the median over the GPU's processes, as its rate's,
        and its MFU at that rate (the window's FLOPs a step)."""
        kinds = {(e.stream, e.origin) for e in events if isinstance(e, Steps)}
        with self._lock:
            rates = {k: self._sofar.rate(k, since) for k in kinds}
        for r in rows:
            mine = [v for (stream, _), v in rates.items() if credited.get(stream) == r.get("gpu") and finite(v)]
            if not mine or not finite(r.get("steps_per_s")) or r["steps_per_s"] <= 0:
                continue
            r["phase_steps_per_s"] = statistics.median(mine)
            if finite(r.get("mfu_pct")):
                r["phase_mfu_pct"] = r["mfu_pct"] * r["phase_steps_per_s"] / r["steps_per_s"]

    def _current(self, marks, steps, now: float) -> tuple[str, float, str]:
        """The phase now, when its current span began, and its kind: start-up until the job marks or steps."""
        if not marks and not steps:
            return START_UP, self.t_start, START_UP
        phases = cut(marks, self.t_start, now)
        if not phases:
            return START_UP, now, START_UP
        current = max(phases, key=lambda p: p.spans[-1][1])
        return current.name, current.spans[-1][0], "phase"

    def _by_activity(self, kept, events, gpus: list, history: "History", now: float) -> tuple[str, float, str]:
        """The phase now of a job that neither marks nor steps itself: activity.phases_of over what is kept (from
        a whole second after the watch began, as its seconds are counted), named as over the whole job."""
        t0 = self.t_start + max(0.0, math.ceil(now - self._keep_s + 1.0 - self.t_start))
        found = activity.phases_of(kept, events, gpus, t0, now, provenance.holes(events)) if gpus else None
        if found is None:
            return (IDLE, t0, "phase") if history.active else (START_UP, self.t_start, START_UP)
        with self._lock:
            self._history.active = True  # the GPUs worked: what follows is never start-up again
        segments = sorted((a, b, name) for name, spans in found[0].items() for a, b in spans)
        end = found[1][1]
        if now - end >= IDLE_S:  # nothing busy nor stepping since: the summary's idle, or its teardown at the end
            return IDLE, end, "phase"
        k = len(segments) - 1
        a, _, name = segments[k]
        if name.split(" ")[0] in (ALONE, BUSY):
            return name.split(" ")[0], a, "phase"
        if name not in (WARMUP, TRAIN, EVAL, INFERENCE):
            return name, a, "phase"
        stepping = (WARMUP, TRAIN) if name in (WARMUP, TRAIN) else (name,)
        while k > 0 and segments[k - 1][2] in stepping and segments[k - 1][1] >= a - 1e-9:
            k -= 1
            a = segments[k][0]  # the run of steps began here: its warm-up and the rest are one span here
        optimizer = any(isinstance(e, Steps) and e.origin not in FORWARDS for e in events)
        if name in (EVAL, INFERENCE) or (name == WARMUP and not optimizer):
            if history.trained:
                return EVAL, a, "phase"  # an evaluation warms up nothing
            after, done = INFERENCE, history.warmed(forwards=True)
        else:
            after, done = TRAIN, history.warmed(forwards=False)
        return (WARMUP, a, "phase") if done is None or done > now else (after, max(a, done), "phase")


class History:
    """What the cut by activity needs of a job's steps since the watch began, in constant memory: whether it ever
    trained or stepped itself, each process's count of steps of each kind and where its tenth was stamped (as
    activity's _warmup_end places it), and where the first counted optimizer step's time began."""

    def __init__(self):
        self.own: set = set()  # streams that called gpubench.step() themselves
        self.trained = False  # any step that is no forward: the optimizer's, a jitted step's
        self.active = False  # the GPUs worked, or the job stepped: no more start-up
        self.counts: dict = {}  # (stream, forwards?) -> steps
        self.tenth: dict = {}  # (stream, forwards?) -> where its warm-up ends by count
        self.counted: float | None = None  # start of the first counted optimizer step's time (provenance.holes)
        self._last: dict = {}  # stream -> the end of its latest group of automatic steps

    def take(self, e: Steps) -> None:
        if e.origin == provenance.OWN:
            self.own.add(e.stream)
            return
        forwards = e.origin in FORWARDS
        self.trained = self.trained or not forwards
        self.active = True
        if (
            e.origin == provenance.COUNTED
            and self.counted is None
            and e.stream in self._last
            and self._last[e.stream] < e.t_first
        ):
            self.counted = self._last[e.stream]
        self._last[e.stream] = max(e.t_last, self._last.get(e.stream, e.t_last))
        key = (e.stream, forwards)
        seen = self.counts.get(key, 0)
        if seen < WARMUP_STEPS <= seen + e.n:
            self.tenth[key] = e.t_first + (e.t_last - e.t_first) * (WARMUP_STEPS - seen - 1) / max(1, e.n - 1)
        self.counts[key] = seen + e.n

    def warmed(self, forwards: bool) -> float | None:
        """Where warm-up ended, None while it lasts: at the counted step, else at the tenth step of the process
        that stepped most, once a step follows it."""
        if not forwards and self.counted is not None:
            return self.counted
        mine = {k: n for k, n in self.counts.items() if k[1] == forwards}
        if not mine:
            return None
        lead = min(mine, key=lambda k: (-mine[k], k[0].order()))  # as activity._runs picks it
        return self.tenth.get(lead) if mine[lead] > WARMUP_STEPS else None

    def copy(self) -> "History":
        out = History()
        out.own, out.trained, out.active, out.counted = set(self.own), self.trained, self.active, self.counted
        out.counts, out.tenth, out._last = dict(self.counts), dict(self.tenth), dict(self._last)
        return out
