"""The marks file from the watch's side while the job runs: the tail that sets the sampler's phase from the
leading process's marks as they are written, and what the file held, for the manifest."""

from __future__ import annotations

import threading
from pathlib import Path

from gpubench.job import markfile, markreader, provenance

TAIL_S = 0.02  # how soon a mark labels the samples: a fifth of the default sampling interval


class Tail(threading.Thread):
    """Sets the sampler's phase from the leading process's marks as they are written (the lowest rank that
    marked; without ranks, the first process to mark)."""

    def __init__(self, path: Path, set_phase, on_events=None):
        super().__init__(name="gpubench-marks", daemon=True)
        self.reader = markfile.Reader(path, once=False)  # the summary reads again(), which counts repeats once
        self.set_phase = set_phase
        self.on_events = on_events  # also given every line read (the live window of the metrics endpoint)
        self.lead: markreader.Stream | None = None
        self.current: str | None = None
        self._stop_event = threading.Event()

    def run(self) -> None:
        while not self._stop_event.wait(TAIL_S):
            self.poll()

    def poll(self) -> None:
        events = self.reader.poll()
        if self.on_events is not None:
            self.on_events(events)
        for e in events:  # steps pass by unkept: memory stays flat however long the job
            if not isinstance(e, markreader.Mark):
                continue
            if self.lead is None or (
                e.stream.rank is not None and (self.lead.rank is None or e.stream.rank < self.lead.rank)
            ):
                self.lead = e.stream
            if e.stream == self.lead and e.name != self.current:
                self.current = e.name
                self.set_phase(e.name)

    def stop(self) -> None:
        self._stop_event.set()
        if self.is_alive():
            self.join()
        self.poll()


def marks_facts(events, path: Path, given: Path | None) -> dict:
    """What the marks file held, for the manifest: the steps the summary counts (provenance.resolve)."""
    steps = [e for e in provenance.resolve(events) if isinstance(e, markreader.Steps)]
    streams = sorted({e.stream for e in events}, key=markreader.Stream.order)
    return {
        "file": path.name if given is None else str(path),
        "marks": sum(isinstance(e, markreader.Mark) for e in events),
        "lines": len(events),
        "steps": sum(e.n for e in steps),
        "clocks": sorted({e.clock for e in steps}),
        "streams": [{"rank": s.rank, "pid": s.pid} for s in streams],
    }
