"""A watch: one Recording while the user's own job runs, and one summary row per phase with a verdict.

A watch is a Recording of kind "watch": the run directory of `gpubench run` (manifest, samples.arrows,
summary.csv/json), so `plot` and `report` work on it. The job's gpubench.mark() and step() calls append
to marks.tsv in the run directory (named to the child in GPUBENCH_MARKS). Samples are labelled live:
a thread reads the new lines of that file every TAIL_S seconds and sets the sampler's phase, so an
interrupted watch keeps its labels; the summary does not rely on those labels but assigns rows to
phases by the marks' own timestamps (gpubench.job.phases). Another thread notes which GPUs the command's
processes hold a context on (gpubench.job.contexts), so that only those are summarized.
"""

from __future__ import annotations

import json
import os
import platform
import sys
import tempfile
import threading
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from gpubench.install import DIST, version
from gpubench.job import child, markreader as markfile, provenance
from gpubench.job.contexts import Contexts
from gpubench.job.phases import FIRST_PHASE, FLOP_CONVENTION, STORY, UNITS, Summary, summarize_watch
from gpubench.read.summary import peak_conditions
from gpubench.record.gpus import Gpu
from gpubench.record.recording import Recording, Reporter
from gpubench.record.rundir import write_summary
from gpubench.record.sources.policy import DEFAULT_INTERVAL_S
from gpubench.truth.flops import FLOP_COUNT_VERSION, hardware_known
from gpubench.truth.peaks import sheet_for

MARKS_FILE = "marks.tsv"
TAIL_S = 0.02  # how soon a mark labels the samples: a fifth of the default sampling interval

# Peaks are measured in a child process, so the watcher holds no CUDA context (and no GPU memory)
# while the job runs; it reports the windows it measured in, to record the clock and power meanwhile.
PEAKS_CODE = """\
import json, sys
from gpubench.truth import peaks
windows = {}
try:
    measured = peaks.measure(lambda key, a, b: windows.__setitem__(key, (a, b)))
except KeyboardInterrupt:
    sys.exit(130)
with open(sys.argv[1], "w") as f:
    json.dump({"measured": measured, "windows": windows}, f)
"""


@dataclass
class WatchOptions:
    out_dir: Path
    gpus: list[Gpu]
    info: dict  # the first sampled GPU's facts (nvml.device_info), the manifest's "gpu"
    dtype: str = "bf16"  # the precision whose datasheet peak MFU divides by
    interval_s: float = DEFAULT_INTERVAL_S
    profiling: str = "auto"
    smi: bool = True
    measure_peaks: bool = False
    command: list[str] = field(default_factory=lambda: list(sys.argv))
    sources: list | None = None  # None: the source policy chooses
    marks_path: Path | None = None  # attach mode: a marks file the job already writes
    all_gpus: bool = False  # keep a row for every sampled GPU, the idle ones too
    root_pid: object = None  # the command's process (or a callable giving it once started): its tree is the job
    metrics: object = None  # an open gpubench.job.exporter.Endpoint: serves the live window; closed at the end
    auto: bool = True  # steps and FLOPs from the command's optimizer (gpubench.job.autohook); False: --no-auto


@dataclass
class Watch:
    """A watch in progress, and what it left once finished: the manifest and one summary row per phase."""

    out_dir: Path
    marks_path: Path
    rec: Recording
    summary: list[dict] = field(default_factory=list)
    t_start: float = 0.0
    t_end: float = 0.0
    interrupted: bool = False  # a Ctrl-C or SIGTERM came while the peaks were measured
    child_pid: int | None = None  # the watched command's process, once started

    @property
    def manifest(self) -> dict:
        return self.rec.manifest


class Tail(threading.Thread):
    """Sets the sampler's phase from the leading process's marks as they are written (the lowest rank that
    marked; without ranks, the first process to mark)."""

    def __init__(self, path: Path, set_phase, on_events=None):
        super().__init__(name="gpubench-marks", daemon=True)
        self.reader = markfile.Reader(path)
        self.set_phase = set_phase
        self.on_events = on_events  # also given every line read (the live window of the metrics endpoint)
        self.lead: markfile.Stream | None = None
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
            if not isinstance(e, markfile.Mark):
                continue
            if self.lead is None or (e.stream.rank is not None and (self.lead.rank is None or e.stream.rank < self.lead.rank)):
                self.lead = e.stream
            if e.stream == self.lead and e.name != self.current:
                self.current = e.name
                self.set_phase(e.name)

    def stop(self) -> None:
        self._stop_event.set()
        if self.is_alive():
            self.join()
        self.poll()


def _measure_peaks(gpu: Gpu, rec: Recording) -> tuple[dict | None, dict, bool]:
    """Sustained peaks of `gpu` measured in a child process, the windows they were measured in, and
    whether a signal interrupted them; (None, {}, ...) with a warning where the measuring failed."""
    with tempfile.TemporaryDirectory(prefix="gpubench-peaks-") as tmp:
        result, errors = Path(tmp) / "peaks.json", Path(tmp) / "stderr"
        env = dict(os.environ, CUDA_VISIBLE_DEVICES=gpu.uuid)
        pid = child.spawn([sys.executable, "-c", PEAKS_CODE, str(result)], env, stderr_path=str(errors))
        outcome = child.wait(pid)
        if outcome.interrupted:
            return None, {}, True
        if outcome.exit_code != 0 or not result.is_file():
            lines = errors.read_text(errors="replace").strip().splitlines() if errors.is_file() else []
            rec.warn(f"the peaks could not be measured ({lines[-1] if lines else f'exit code {outcome.exit_code}'}); "
                     "MFU uses the datasheet only")
            return None, {}, False
        data = json.loads(result.read_text())
    return data["measured"], {k: tuple(v) for k, v in data["windows"].items()}, False


@contextmanager
def watching(opts: WatchOptions, reporter: Reporter | None = None):
    """Record while the block runs; on exit, summarize its phases into the run directory."""
    if opts.dtype not in UNITS:
        raise ValueError(f"dtype must be one of {', '.join(UNITS)}")
    rec = Recording(opts.out_dir, opts.gpus, kind="watch", command=opts.command, interval_s=opts.interval_s,
                    profiling=opts.profiling, smi=opts.smi, sources=opts.sources, reporter=reporter)
    watch = Watch(opts.out_dir, opts.marks_path or opts.out_dir / MARKS_FILE, rec)
    peaks = {"datasheet": sheet_for(opts.info), "measured": None, "conditions": {}}
    windows: dict = {}

    def finish(rows):
        reader = markfile.Reader(watch.marks_path)
        events = reader.poll()
        if note := reader.note():
            rec.warn(note)
        peaks["conditions"] = {k: peak_conditions(rows, opts.gpus[0].nvml_index, a, b) for k, (a, b) in windows.items()}
        held = contexts.used if contexts is not None else {}
        result = summarize_watch(rows, events, opts.gpus, watch.t_start, watch.t_end, peaks, opts.dtype,
                                 list(rec.sampler.columns), held, opts.all_gpus)
        watch.summary[:] = result.summary
        write_summary(opts.out_dir, watch.summary)
        for note in result.notes:
            rec.warn(note)
        idle = [g.as_dict() for g in opts.gpus if g.nvml_index not in result.used]
        rec.manifest.update(peaks=peaks, phases=[{"name": p.name, "spans": p.spans} for p in result.phases],
                            window={"t_start": watch.t_start, "t_end": watch.t_end}, all_gpus=opts.all_gpus,
                            flop_convention=FLOP_CONVENTION, flop_count_version=FLOP_COUNT_VERSION,
                            gpus_used=result.used, gpus_idle=idle,
                            contexts=contexts.facts() if contexts is not None else None,
                            marks=marks_facts(events, watch.marks_path, opts.marks_path),
                            auto=provenance.facts(events, watch.summary, rec.manifest.get("auto"), result.phases_from))
        if opts.metrics is not None:
            rec.manifest["metrics"] = facts = opts.metrics.facts()
            for error in facts["errors"]:
                rec.warn(f"the metrics endpoint failed: {error}")

    contexts = None
    live = None
    with rec:
        rec.manifest.update(gpu=opts.info, peaks=peaks, dtype=opts.dtype, families={"watch": {"story": STORY}},
                            versions={"gpubench": version(DIST), "python": platform.python_version(),
                                      "torch": version("torch"), "nvidia-ml-py": version("nvidia-ml-py")})
        rec.on_finish(finish)
        if opts.marks_path is None:
            watch.marks_path.touch()
        if opts.measure_peaks:
            with rec.phase("peaks"):
                peaks["measured"], measured_in, watch.interrupted = _measure_peaks(opts.gpus[0], rec)
                windows.update(measured_in)
            rec.write_manifest()
        rec.set_phase(FIRST_PHASE)
        if opts.metrics is not None:
            from gpubench.job.live import Live

            live = Live(opts.gpus, rec.sampler.columns, peaks, opts.dtype, rec.clock,
                        lambda: contexts.used if contexts is not None else {})
            rec.sampler.sink = live.after(rec.sampler.sink)  # each row to samples.csv first, then here
        tail = Tail(watch.marks_path, rec.set_phase, live.take_events if live is not None else None)
        tail.start()
        if opts.root_pid is not None:
            root = opts.root_pid if not callable(opts.root_pid) else (lambda: opts.root_pid(watch))
            contexts = Contexts(opts.gpus, root)
            contexts.start()
        watch.t_start = rec.clock()
        if live is not None:
            live.t_start = watch.t_start
            opts.metrics.serve(live, opts.gpus)
            rec.manifest["metrics"] = opts.metrics.facts()  # the port, for whom asked for any free one
        try:
            yield watch
        finally:
            watch.t_end = rec.clock()
            if opts.metrics is not None:
                opts.metrics.close()
            tail.stop()
            if contexts is not None:
                contexts.stop()


def marks_facts(events, path: Path, given: Path | None) -> dict:
    """What the marks file held, for the manifest: the steps the summary counts (provenance.resolve)."""
    steps = [e for e in provenance.resolve(events) if isinstance(e, markfile.Steps)]
    streams = sorted({e.stream for e in events}, key=markfile.Stream.order)
    return {"file": path.name if given is None else str(path),
            "marks": sum(isinstance(e, markfile.Mark) for e in events), "lines": len(events),
            "steps": sum(e.n for e in steps), "clocks": sorted({e.clock for e in steps}),
            "streams": [{"rank": s.rank, "pid": s.pid} for s in streams]}




def resummarize(run_dir: Path) -> Summary:
    """A watch run's summary computed anew by this code from its files alone (samples, marks.tsv,
    manifest.json): what the numbers of any recorded watch would be today. Marks whose manifest does not say
    that their hardware FLOPs count what the kernels run (flop_count_version) give no HFU."""
    from gpubench.record.rundir import load_run

    manifest, samples, _ = load_run(run_dir)
    gpus = [Gpu(**g) for g in manifest["gpus_sampled"]]
    spans = [s for p in manifest.get("phases") or [] for s in p["spans"]]
    window = manifest.get("window") or {"t_start": min(a for a, _ in spans), "t_end": max(b for _, b in spans)}
    marks_file = Path((manifest.get("marks") or {}).get("file") or MARKS_FILE)
    events = markfile.read_all(marks_file if marks_file.is_absolute() else Path(run_dir) / marks_file)
    contexts = (manifest.get("contexts") or {}).get("used") or {}
    return summarize_watch(samples, events, gpus, window["t_start"], window["t_end"], manifest["peaks"],
                           manifest.get("dtype", "bf16"), manifest["columns"], contexts,
                           manifest.get("all_gpus", False), hardware=hardware_known(manifest))
