"""A watch: one Recording while the user's own job runs, and one summary row per phase with a verdict.

A watch is a Recording of kind "watch": the run directory of `gpubench run` (manifest, samples.arrows,
summary.csv/json), so `plot` and `report` work on it. The job's gpubench.mark() and step() calls append
to marks.tsv in the run directory (named to the child in GPUBENCH_MARKS). Samples are labelled live:
a thread reads the new lines of that file every TAIL_S seconds and sets the sampler's phase
(gpubench.job.marktail), so an interrupted watch keeps its labels; the summary does not rely on those labels
but assigns rows to phases by the marks' own timestamps (gpubench.job.phases). Another thread notes which
GPUs the command's processes hold a context on (gpubench.job.contexts), so that only those are summarized.
"""

from __future__ import annotations

import json
import os
import platform
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from gpubench.install import DIST, version
from gpubench.job import blind, child, markfile, markreader, provenance
from gpubench.job.contexts import Contexts
from gpubench.job.marktail import Tail, marks_facts
from gpubench.job.phases import FIRST_PHASE, FLOP_CONVENTION, STORY, Summary, summarize_watch
from gpubench.job.timelimit import bounded
from gpubench.read.receipt import receipt
from gpubench.read.summary import peak_conditions
from gpubench.record.config import RecordingConfig
from gpubench.record.gpus import Gpu
from gpubench.record.liveness import watcher_facts
from gpubench.record.recording import Recording, Reporter
from gpubench.record.rundir import write_summary
from gpubench.inside.flops import FLOP_COUNT_VERSION, hardware_known
from gpubench.truth.peaks import UNITS, sheet_for

MARKS_FILE = "marks.tsv"
# The summary's time, at most: a watch that never ends would hold the job's exit code from whoever waits on it
SUMMARY_S, SUMMARY_ROW_S = 120.0, 0.002  # plus this per sample row (a day at 0.1 s on one GPU: about 29 min)


@dataclass
class WatchOptions:
    out_dir: Path  # the run directory, chosen
    gpus: list[Gpu]
    info: dict  # the first sampled GPU's facts (nvml.device_info), the manifest's "gpu"
    recording: RecordingConfig = field(default_factory=RecordingConfig)
    dtype: str = "bf16"  # the precision whose datasheet peak MFU divides by
    marks_path: Path | None = None  # attach mode: a marks file the job already writes
    root_pid: int | None = None  # a process already running whose tree is the job (recording(): this one); a
    # watched command's is followed from when it starts (Watcher.track); None and no command: every GPU is the job's
    metrics: object = None  # an open gpubench.job.exporter.Endpoint: serves the live window; closed at the end
    auto: bool = True  # steps and FLOPs from the command's optimizer (gpubench.inside.autohook); False: --no-auto
    speak: str | None = None  # the live rows while the job runs (gpubench.job.speak): "area", "lines", None
    every_s: float = 60.0  # a live line's interval, where speak is "lines"


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
    samples: int = 0  # the sample rows recorded: none, and plot and report have nothing to draw

    @property
    def manifest(self) -> dict:
        return self.rec.manifest


def _measure_peaks(gpu: Gpu, rec: Recording) -> tuple[dict | None, dict, bool]:
    """Sustained peaks of `gpu` measured in a child process, the windows they were measured in, and
    whether a signal interrupted them; (None, {}, ...) with a warning where the measuring failed."""
    with tempfile.TemporaryDirectory(prefix="gpubench-peaks-") as tmp:
        result, errors = Path(tmp) / "peaks.json", Path(tmp) / "stderr"
        env = dict(os.environ, CUDA_VISIBLE_DEVICES=gpu.uuid)  # in a child: the watcher holds no CUDA context
        pid = child.spawn([sys.executable, "-m", "gpubench.truth.peaks", str(result)], env, stderr_path=str(errors))
        outcome = child.wait(pid)
        if outcome.interrupted:
            return None, {}, True
        if outcome.exit_code != 0 or not result.is_file():
            lines = errors.read_text(errors="replace").strip().splitlines() if errors.is_file() else []
            rec.warn(
                f"the peaks could not be measured ({lines[-1] if lines else f'exit code {outcome.exit_code}'}); "
                "MFU uses the datasheet only"
            )
            return None, {}, False
        data = json.loads(result.read_text())
    return data["measured"], {k: tuple(v) for k, v in data["windows"].items()}, False


class Watcher:
    """A watch of the user's job: start() opens the Recording and starts what runs beside the job (the marks'
    tail, the process tree's contexts, the live metrics); finish() stops them and writes one summary row per
    phase, whatever ended the job. Used as a context manager, the block is the job."""

    def __init__(self, opts: WatchOptions, reporter: Reporter | None = None):
        if opts.dtype not in UNITS:
            raise ValueError(f"dtype must be one of {', '.join(UNITS)}")
        self.opts = opts
        self.rec = Recording(opts.out_dir, opts.gpus, opts.recording, kind="watch", reporter=reporter)
        self.watch = Watch(opts.out_dir, opts.marks_path or opts.out_dir / MARKS_FILE, self.rec)
        self.peaks = {"datasheet": sheet_for(opts.info), "measured": None, "conditions": {}}
        self.windows: dict = {}  # where the peaks were measured
        self.contexts: Contexts | None = None
        self.live = None
        self.voice = None
        self.tail: Tail | None = None

    def __enter__(self) -> "Watcher":
        self.start()
        return self

    def __exit__(self, exc_type, exc, tb) -> bool:
        return self.finish(exc_type, exc, tb)

    def start(self) -> Watch:
        opts, rec, watch = self.opts, self.rec, self.watch
        rec.__enter__()
        try:
            rec.manifest.update(
                gpu=opts.info,
                peaks=self.peaks,
                dtype=opts.dtype,
                families={"watch": {"story": STORY}},
                versions={
                    "gpubench": version(DIST),
                    "python": platform.python_version(),
                    "torch": version("torch"),
                    "nvidia-ml-py": version("nvidia-ml-py"),
                },
            )
            rec.on_finish(self._summarize)
            if opts.marks_path is None:
                watch.marks_path.touch()
            if opts.recording.peaks:
                with rec.phase("peaks"):
                    self.peaks["measured"], measured_in, watch.interrupted = _measure_peaks(opts.gpus[0], rec)
                    self.windows.update(measured_in)
                rec.write_manifest()
            rec.set_phase(FIRST_PHASE)
            if opts.metrics is not None or opts.speak is not None:
                from gpubench.job import speak
                from gpubench.job.live import Live

                self.live = Live(
                    opts.gpus,
                    rec.sampler.columns,
                    self.peaks,
                    opts.dtype,
                    rec.clock,
                    self._held,
                    longest_s=speak.window_for(opts.every_s) if opts.speak == "lines" else 0.0,
                )
                rec.sampler.sink = self.live.after(rec.sampler.sink)  # each row to samples.arrows first, then here
            self.tail = Tail(watch.marks_path, rec.set_phase, self.live.take_events if self.live is not None else None)
            self.tail.start()
            if opts.root_pid is not None:
                self.track(opts.root_pid)
            watch.t_start = rec.clock()
            if self.live is not None:
                self.live.t_start = watch.t_start
            if opts.metrics is not None:
                opts.metrics.serve(self.live, opts.gpus)
                rec.manifest["metrics"] = opts.metrics.facts()  # the port, for whom asked for any free one
            if opts.speak is not None:
                self.voice = speak.Voice(self.live, len(opts.gpus), opts.every_s, opts.speak, watch.t_start, rec.clock)
                self.voice.start()
            rec.manifest["watcher"] = watcher_facts(
                watch.t_start, str(watch.marks_path) if opts.marks_path else watch.marks_path.name
            )
            rec.write_manifest()  # what report reads of a watch still running: its GPU, peaks, dtype, watcher
        except BaseException:
            self.finish(*sys.exc_info())
            raise
        return watch

    def track(self, pid: int) -> None:
        """Follow the process tree under pid (the command, once started): the GPUs its processes hold a context
        on are the job's."""
        if self.contexts is None:
            self.contexts = Contexts(self.opts.gpus, pid)
            self.contexts.start()
        self.rec.write_manifest()  # the command's pid, for a report of the watch while it runs

    def finish(self, exc_type=None, exc=None, tb=None) -> bool:
        """Stop what ran beside the job and the Recording, which summarizes (an exception is recorded as the
        way the job ended, and is not swallowed)."""
        try:
            self.watch.t_end = self.rec.clock()
            if self.voice is not None:  # first: the terminal is the user's again before anything more is said
                self.voice.stop()
                self.rec.manifest["live"] = said = self.voice.facts()
                for error in said["errors"]:
                    self.rec.warn(f"the live lines stopped: {error}")
            if self.opts.metrics is not None:
                self.opts.metrics.close()
            if self.tail is not None:
                self.tail.stop()
            if self.contexts is not None:
                self.contexts.stop()
        except BaseException:
            self.rec.__exit__(*sys.exc_info())
            raise
        return self.rec.__exit__(exc_type, exc, tb)

    def _held(self) -> dict:
        return self.contexts.used if self.contexts is not None else {}

    def _summarize(self, rows) -> None:
        opts, rec, watch, peaks = self.opts, self.rec, self.watch, self.peaks
        watch.samples = len(rows)
        # the tail's files: a marks file the job removed is still held there
        reader = self.tail.reader.again() if self.tail is not None else markfile.Reader(watch.marks_path)
        events = reader.poll()
        reader.close()
        if self.tail is not None:
            self.tail.reader.close()
        if note := reader.note():
            rec.warn(note)
        peaks["conditions"] = {
            k: peak_conditions(rows, opts.gpus[0].nvml_index, a, b) for k, (a, b) in self.windows.items()
        }
        limit = SUMMARY_S + SUMMARY_ROW_S * len(rows)
        result = bounded(
            lambda: summarize_watch(
                rows,
                events,
                opts.gpus,
                watch.t_start,
                watch.t_end,
                peaks,
                opts.dtype,
                list(rec.sampler.columns),
                self._held(),
                opts.recording.all_gpus,
            ),
            limit,
        )
        if result is None:
            rec.warn(
                f"the summary did not finish within {limit:.0f} s, a fault of gpubench (please report it); the "
                f"samples and marks in {opts.out_dir} are whole, and the command's exit code is kept"
            )
            rec.manifest["summary_unfinished"] = True
            result = Summary([], [], [g.nvml_index for g in opts.gpus], [], "none")
        watch.summary[:] = result.summary
        write_summary(opts.out_dir, watch.summary)
        # from the rows alone, so that summary.json gives the same receipt again
        rec.manifest["receipt"] = receipt(watch.summary, opts.recording.price_per_gpu_hour)
        for note in result.notes:
            rec.warn(note)
        if not watch.summary and not rec.manifest.get("summary_unfinished"):  # an empty table is never unsaid
            rec.warn(
                f"no row: in the {watch.t_end - watch.t_start:.2g} s watched, "
                + (
                    "no sample was recorded"
                    if not len(rows)
                    else "the command used none of the GPUs sampled"
                    if not result.used
                    else "no phase was left once start-up and teardown were cut off"
                )
            )
        idle = [g.as_dict() for g in opts.gpus if g.nvml_index not in result.used]
        rec.manifest.update(
            peaks=peaks,
            phases=[{"name": p.name, "spans": p.spans} for p in result.phases],
            window={"t_start": watch.t_start, "t_end": watch.t_end},
            all_gpus=opts.recording.all_gpus,
            flop_convention=FLOP_CONVENTION,
            flop_count_version=FLOP_COUNT_VERSION,
            gpus_used=result.used,
            gpus_idle=idle,
            contexts=self.contexts.facts() if self.contexts is not None else None,
            marks=marks_facts(events, watch.marks_path, opts.marks_path),
            auto=provenance.facts(events, watch.summary, rec.manifest.get("auto"), result.phases_from),
        )
        self._say_blind(events)
        if opts.metrics is not None:
            rec.manifest["metrics"] = facts = opts.metrics.facts()
            for error in facts["errors"]:
                rec.warn(f"the metrics endpoint failed: {error}")

    def _say_blind(self, events) -> None:
        """Never "hook on" with nothing recorded unsaid: the processes it missed, and why; or that it saw no step."""
        auto = self.rec.manifest.get("auto") or {}
        if auto.get("hook") != "on" or self.contexts is None:
            return
        found = blind.blind(self.contexts.seen, {e.stream.pid for e in events}, auto.get("bootstrap", ""))
        auto["missed"] = found
        if found:
            self.rec.warn(blind.sentence(found))
        elif self.contexts.used and not any(isinstance(e, markreader.Steps) for e in events):
            self.rec.warn(blind.NO_STEP)


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
    return summarize_watch(
        samples,
        events,
        gpus,
        window["t_start"],
        window["t_end"],
        manifest["peaks"],
        manifest.get("dtype", "bf16"),
        manifest["columns"],
        contexts,
        manifest.get("all_gpus", False),
        hardware=hardware_known(manifest),
    )
