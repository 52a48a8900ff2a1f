"""One recording: the lifecycle every verb shares (`run`, `watch`, the distributed runs).

    with Recording(out_dir, gpus, RecordingConfig(interval_s=0.1), kind="run") as rec:
        with rec.phase("copy-triton") as window:
            ...                      # rows sampled meanwhile are labelled copy-triton
        rec.on_finish(write_summary)  # called with every row, read back from samples.arrows

On entry it chooses and opens the metric sources, starts the sampler, streams samples.arrows and writes
the manifest. On exit, whatever happened, it stops the sampler, closes the sources and the file, runs
the finishers, and records the status (completed, interrupted, failed) in the manifest. A second
Ctrl-C while it finishes is ignored, and SIGTERM ends a recording the way Ctrl-C does (as Terminated, a
KeyboardInterrupt of its own, so that the command exits 143 and not 130).
"""

from __future__ import annotations

import signal
import sys
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from gpubench.read.summary import TRIM_S
from gpubench.record import rundir
from gpubench.record.config import RecordingConfig
from gpubench.record.gpus import Gpu
from gpubench.record.sampler import Sampler
from gpubench.record.sources.policy import describe, open_given, open_sources
from gpubench.usage import Terminated


class Reporter:
    """What a verb tells the person watching; the console implements it with rich."""

    def start(self, scenarios, estimate_s: float) -> None: ...
    def step(self, index: int, scenario, what: str) -> None: ...
    def advance(self) -> None: ...
    def warn(self, message: str) -> None: ...
    def finish(self) -> None: ...


@dataclass
class Window:
    phase: str
    t_start: float
    t_end: float | None = None


@contextmanager
def window(name: str, clock, label=None):
    """The Window of the block, timed on `clock`; label(name) first, where a sampler labels the rows."""
    w = Window(name, clock())
    if label is not None:
        label(name)
    try:
        yield w
    finally:
        w.t_end = clock()


class Unsampled:
    """The phases of a process that samples nothing (a rank whose node another process samples): the same
    windows as a Recording's, on the same clock, with no rows to label."""

    def __init__(self, clock=time.monotonic):
        self.clock = clock

    def phase(self, name: str):
        return window(name, self.clock)

    def set_phase(self, name: str) -> None:
        pass


def _terminate(signum, frame):
    raise Terminated


def _now_wall() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S%z")


class Recording:
    def __init__(
        self,
        out_dir: Path,
        gpus: list[Gpu],
        config: RecordingConfig = RecordingConfig(),
        *,
        kind: str = "run",
        reporter: Reporter | None = None,
        clock=time.monotonic,
    ):
        self.out_dir = Path(out_dir)
        self.gpus = list(gpus)
        self.config = config
        self.kind = kind
        self.reporter = reporter or Reporter()
        self.clock = clock
        self._finishers: list[Callable] = []
        self._signals: dict = {}
        self.manifest: dict = {}

    # --- lifecycle -------------------------------------------------------------------------------

    def __enter__(self) -> "Recording":
        self.out_dir.mkdir(parents=True, exist_ok=True)
        c = self.config
        indices = [g.nvml_index for g in self.gpus]
        if c.sources is not None:
            opened = open_given(list(c.sources), indices, c.interval_s)
        else:
            opened = open_sources(indices, c.profiling, c.smi, c.interval_s)
        self.sources = opened.sources
        self.manifest = {
            "kind": self.kind,
            "command": list(c.command if c.command is not None else sys.argv),
            "gpus_sampled": [g.as_dict() for g in self.gpus],
            "options": {"interval_s": opened.interval_s, "profiling": c.profiling, "smi": c.smi, "trim_s": TRIM_S},
            "start_wall": _now_wall(),
            "end_wall": None,
            "completed": False,
            "status": "running",
            "warnings": [],
            "errors": [],
            "sources": {
                "used": [s.name for s in opened.sources],
                "unavailable": opened.unavailable,
                "columns": describe(opened.sources),
            },
        }
        for note in opened.notes:
            self.warn(note)
        for name, why in opened.unavailable.items():
            self.reporter.warn(f"source {name} not used: {why}")
        # keep_rows=0: every row goes to samples.arrows and none stays in memory, however long the
        # recording; the finishers read them back from disk, a column at a time.
        self.sampler = Sampler(
            opened.sources,
            indices,
            opened.interval_s,
            clock=self.clock,
            on_failure=lambda n, e: self.warn(f"source {n} failed mid-run: {e}"),
            keep_rows=0,
            uuids={g.nvml_index: g.uuid for g in self.gpus},
        )
        self.sink = rundir.open_sink(self.out_dir / rundir.SAMPLES_FILE, self.sampler.columns)
        self.sampler.sink = self.sink
        self.manifest["columns"] = list(self.sampler.columns)
        self.write_manifest()
        if threading.current_thread() is threading.main_thread():
            self._signals[signal.SIGTERM] = signal.signal(signal.SIGTERM, _terminate)
        self.sampler.start()
        return self

    def __exit__(self, exc_type, exc, tb) -> bool:
        if exc_type is None:
            status = "completed"
        elif issubclass(exc_type, KeyboardInterrupt):
            status = "interrupted"
        else:
            status = "failed"
            self.manifest["errors"].append(f"{exc_type.__name__}: {exc}")
        main = threading.current_thread() is threading.main_thread()
        if main:  # one Ctrl-C is enough: finish writing
            self._signals.setdefault(signal.SIGINT, signal.signal(signal.SIGINT, signal.SIG_IGN))
        try:
            self.sampler.stop()
            for s in self.sources:
                s.close()
            self.sink.close()
            rows = rundir.read_samples(self.out_dir / rundir.SAMPLES_FILE)
            for finish in self._finishers:
                finish(rows)
            self.manifest.update(
                status=status,
                completed=status == "completed",
                end_wall=_now_wall(),
                source_failures=self.sampler.failures,
            )
            self.write_manifest()
        finally:
            if main:
                for sig, handler in self._signals.items():
                    signal.signal(sig, handler)
            self._signals = {}
            self.reporter.finish()
        return False

    # --- while recording -------------------------------------------------------------------------

    def phase(self, name: str):
        """Label what runs inside the block; the window's times bound the rows it may claim."""
        return window(name, self.clock, self.sampler.set_phase)

    def set_phase(self, name: str) -> None:
        self.sampler.set_phase(name)

    def on_finish(self, fn: Callable[["Samples"], None]) -> None:  # noqa: F821
        """fn(samples) runs once the sampler has stopped, with every row of samples.arrows, held column-wise
        (gpubench.read.samples.Samples)."""
        self._finishers.append(fn)

    def warn(self, message: str) -> None:
        self.manifest.setdefault("warnings", []).append(message)
        self.reporter.warn(message)

    def write_manifest(self) -> None:
        rundir.write_json(self.out_dir / "manifest.json", self.manifest)
