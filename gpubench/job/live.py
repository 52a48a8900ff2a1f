"""A watch as it runs: the recent sample rows and steps of a running watch, and its live rows, each the
summary's own row (gpubench.job.phases.summarize_row) over the last WINDOW_S seconds of the current phase.

The sampler hands every row to the recording's sink and then here (`after`); the thread that tails the
marks file hands every line it reads here (`take_events`). Both only append to bounded buffers under a
lock and never raise: the recording and the job go on whatever happens here. The work is done when
someone asks (`snapshot`, from the metrics endpoint's thread): the current phase is cut from the leading
process's marks as the summary cuts it, the window runs from TRIM_S after that phase began, or WINDOW_S
before now if later, to now, and each GPU the job uses gets the row the summary would give that window:
the same steps/s, TFLOP/s, MFU, MBU and verdict, from the same code.
"""

from __future__ import annotations

import threading
from collections import deque
from dataclasses import dataclass, field

from gpubench.job import provenance
from gpubench.job.credit import credit
from gpubench.job.markreader import Mark, Steps
from gpubench.job.phases import START_UP, Context, cut, judge_ranks, summarize_row
from gpubench.metrics import finite
from gpubench.read.summary import TRIM_S

WINDOW_S = 15.0  # Prometheus' default scrape interval: windows of scrapes that far apart tile the job's time
KEEP_S = WINDOW_S + 5.0  # kept beyond the window: a group of steps is written up to a second after its first
MARKS_KEPT = 64  # each process's latest changes of phase; its first mark is kept too (it can make it the leader)
ERRORS_KEPT = 5


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
    def __init__(self, gpus: list, columns, peaks: dict, dtype: str, clock, contexts=dict,
                 window_s: float = WINDOW_S):
        self.gpus = list(gpus)
        self.columns = list(columns)
        self.peaks, self.dtype, self.clock, self.window_s = peaks, dtype, clock, window_s
        self.contexts = contexts  # () -> {NVML index: pids of the job seen on it}
        self.t_start = clock()
        self.errors: list[str] = []
        self._keep_s = max(KEEP_S, window_s + 5.0)
        self._lock = threading.Lock()
        self._rows: dict[int, deque] = {g.nvml_index: deque() for g in self.gpus}
        self._recorded: set[str] = set()
        self._first: dict = {}  # stream -> its first mark
        self._marks: dict = {}  # stream -> its latest marks that changed its phase
        self._steps: deque = deque()  # groups of steps, as they arrived
        self._last: dict = {}  # stream -> its latest group: its GPU stays credited after its steps left the window

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

    def snapshot(self) -> Snapshot:
        now = self.clock()
        with self._lock:
            rows = {g: list(kept) for g, kept in self._rows.items()}
            marks = list(dict.fromkeys([*self._first.values(), *(m for ms in self._marks.values() for m in ms)]))
            steps = list(dict.fromkeys([*self._steps, *self._last.values()]))
            recorded = set(self._recorded)
        snap = Snapshot({g: kept[-1] for g, kept in rows.items() if kept}, [], {}, "", None)
        try:
            self._window(snap, rows, marks, steps, recorded, now)
        except Exception as err:  # noqa: BLE001 -- the ladder is shown all the same
            self._error(err)
        snap.errors = list(self.errors)
        return snap

    def _window(self, snap: Snapshot, rows: dict, marks: list, steps: list, recorded: set, now: float) -> None:
        """The live rows of the GPUs the job uses, with the summary's code, and which ranks each GPU runs."""
        from gpubench.read.samples import as_samples  # numpy: not for `gpubench watch --help`

        events = provenance.resolve(marks + steps)
        held = {int(g): set(pids) for g, pids in dict(self.contexts()).items()}
        credited, used, _ = credit(events, self.gpus, held)
        snap.ranks = {g.nvml_index: ",".join(str(r) for r in sorted({s.rank for s, i in credited.items()
                                                                        if i == g.nvml_index and s.rank is not None}))
                      for g in self.gpus}
        snap.phase, began, kind = self._current(marks, steps, now)
        start = max(began + TRIM_S, now - self.window_s)
        if start >= now:
            return
        ctx = Context(events, [g for g in self.gpus if g.nvml_index in used], credited, self.peaks, self.dtype,
                      self.columns, recorded, trim_s=0.0)
        snap.rows = provenance.label([r for g in ctx.gpus if (r := summarize_row(
            snap.phase, [(start, now)], g, as_samples(rows[g.nvml_index]), ctx, kind=kind)) is not None])
        if kind == "phase":
            judge_ranks(snap.rows, ctx)
        snap.window = (start, now)

    def _current(self, marks, steps, now: float) -> tuple[str, float, str]:
        """The phase now, when its current span began, and its kind: start-up until the job marks or steps."""
        if not marks and not steps:
            return START_UP, self.t_start, START_UP
        phases = cut(marks, self.t_start, now)
        if not phases:
            return START_UP, now, START_UP
        current = max(phases, key=lambda p: p.spans[-1][1])
        return current.name, current.spans[-1][0], "phase"
