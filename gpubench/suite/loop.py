"""The scenario loop, one for a run on one GPU and for every rank under torchrun: for each scenario,
prepare and check once, warm up, then run it for --duration seconds inside its own phase; an idle gap
between scenarios lets each one's metrics settle.

Where several processes run it, a strategy keeps them in step (gpubench.ranks.lockstep.LockStep): they
agree that a scenario's check passed everywhere (else every rank skips it), plan the same calls, and
measure for as long as rank 0 does. On one GPU the strategy is Alone: nothing to agree on, the warm-up
alone plans. The GPU is reached only through a backend (gpubench.suite.backend.CudaBackend), so the loop is
tested end to end on a CPU with a fake backend and fake sources.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from pathlib import Path

from gpubench.kernels.common import CheckFailed, CupyMissing
from gpubench.metrics import finite
from gpubench.read.summary import TRIM_S, peak_conditions, summarize
from gpubench.record.config import RecordingConfig
from gpubench.record.gpus import Gpu
from gpubench.record.recording import Recording, Reporter
from gpubench.record.rundir import write_summary
from gpubench.suite.scenarios import DURATION_S, GAP_S, Scenario
from gpubench.truth import ceiling as tensor_ceiling
from gpubench.truth.peaks import sheet_for


@dataclass
class RunOptions:
    """One run of the suite: the scenarios, how each is run, and how the run is recorded."""

    scenarios: list[Scenario]
    out_dir: Path  # the run directory, chosen (the recording's `out` is what the user asked for, if anything)
    recording: RecordingConfig = field(default_factory=lambda: RecordingConfig(peaks=True))
    duration_s: float = DURATION_S
    gap_s: float = GAP_S
    slow_rank: int | None = None  # straggler scenarios under torchrun: the rank that sleeps (None: the last)


def estimate_s(opts: RunOptions) -> float:
    return sum(sc.measured_s(opts.duration_s) + opts.gap_s + 1.0 for sc in opts.scenarios) + (
        12.0 if opts.recording.peaks else 0.0
    )


class Alone:
    """The strategy of a run on one GPU: nothing to agree on, the warm-up alone plans, and this process's
    notes are the run's."""

    speaks = True

    def agree(self, problem: tuple[str, str] | None) -> list[tuple[str, tuple[str, str]]]:
        """Every process's problem with a scenario, each with the label it is said with: here only this one's."""
        return [("", problem)] if problem else []

    def plan(self, prepared, backend) -> int:
        """Calls per timed group."""
        return backend.warmup(prepared)

    def measure(self, prepared, backend, duration_s: float, plan: int, clock):
        return backend.time(prepared, duration_s, plan)

    def together(self) -> None:
        """Where the processes wait for each other (after the peaks, which each GPU measures in its own time)."""


@dataclass
class Progress:
    """What this process has run so far: the results, the notes and the peaks it measured."""

    gpu: Gpu
    reporter: Reporter
    results: list = field(default_factory=list)
    arrivals: dict = field(default_factory=dict)  # scenario -> this rank's arrival times at its collectives
    warnings: list = field(default_factory=list)
    errors: list = field(default_factory=list)
    peaks: dict | None = None  # measured
    peak_windows: dict = field(default_factory=dict)

    def warn(self, message: str) -> None:
        self.warnings.append(message)
        self.reporter.warn(message)


def run_scenarios(
    opts: RunOptions, backend, phases, progress: Progress, strategy=Alone(), on_peaks=lambda measured: None
) -> None:
    """Every scenario of opts, after the peaks where asked for. `phases` labels the samples (a Recording, or
    gpubench.record.recording.Unsampled where another process samples this GPU)."""
    progress.reporter.start(opts.scenarios, estimate_s(opts))
    backend.prepare(progress.gpu)
    if opts.recording.peaks:
        with phases.phase("peaks"):
            progress.peaks = backend.measure_peaks(lambda k, a, b: progress.peak_windows.__setitem__(k, (a, b)))
        strategy.together()
        on_peaks(progress.peaks)
    for i, sc in enumerate(opts.scenarios):
        run_one(i, sc, opts, backend, phases, progress, strategy)
        progress.reporter.advance()
    with phases.phase("gap"):
        time.sleep(opts.gap_s)


def run_one(i, sc: Scenario, opts: RunOptions, backend, phases, progress: Progress, strategy=Alone()) -> None:
    """One scenario; a problem on any process skips it on all."""
    reporter = progress.reporter
    reporter.step(i, sc, "check and warm-up")
    with phases.phase(f"setup:{sc.name}"):
        prepared, facts, problem = checked(lambda: sc.prepare(slow_rank=opts.slow_rank))
        problems = strategy.agree(problem)
        if problems:
            note = f"{sc.name} skipped: " + "; ".join(label + text for label, (_, text) in problems)
            if strategy.speaks:  # one note for the run
                (progress.errors if any(kind == "error" for _, (kind, _) in problems) else progress.warnings).append(
                    note
                )
            reporter.warn(note)
            return
        plan = strategy.plan(prepared, backend) if prepared.run is not None else None
    with phases.phase("gap"):
        time.sleep(opts.gap_s)
    reporter.step(i, sc, "measuring")
    with phases.phase(sc.name) as window:
        if prepared.arrivals is not None:
            prepared.arrivals.clear()  # only the timed calls' arrivals count
        if plan is not None:
            timings = strategy.measure(prepared, backend, sc.measured_s(opts.duration_s), plan, phases.clock)
        else:
            timings = backend.idle(sc.measured_s(opts.duration_s))
    phases.set_phase("gap")
    timed_in = ""
    if timings is not None and timings.spans:  # timed in the window the counters cover, after the trim
        timings = timings.within(window.t_start + TRIM_S, window.t_end)
        timed_in = f"{window.t_start + TRIM_S:.6f}-{window.t_end:.6f}"
    progress.results.append(
        {**scenario_result(sc, progress.gpu, prepared, facts, window, timings), "timing_window": timed_in}
    )
    if prepared.arrivals is not None:
        progress.arrivals[sc.name] = list(prepared.arrivals)
    del prepared
    backend.release()


def checked(prepare) -> tuple:
    """(prepared, facts, problem) of a scenario's prepare and check; problem is (kind, sentence) where it
    cannot run: an "error" for a wrong kernel (never timed), a "warning" for a missing library."""
    try:
        prepared = prepare()
        return prepared, prepared.check() or {}, None
    except CheckFailed as err:
        return None, {}, ("error", str(err))
    except CupyMissing as err:
        return None, {}, ("warning", str(err))


def run_suite(opts: RunOptions, backend, reporter: Reporter, clock=time.monotonic) -> tuple[Path, list[dict]]:
    """Run the scenarios on one GPU and write the run directory; return it and the summary rows."""
    gpu, sampled = backend.resolve(opts.recording.device or 0, opts.recording.all_gpus)
    others = backend.other_processes(gpu)  # before this process touches the GPU
    info = backend.device_info(gpu)
    peaks = {"datasheet": sheet_for(info), "measured": None, "conditions": {}}
    summary: list[dict] = []
    progress = Progress(gpu, reporter)
    rec = Recording(opts.out_dir, sampled, opts.recording, kind="run", reporter=reporter, clock=clock)

    def finish(rows):
        peaks["conditions"] = {k: peak_conditions(rows, gpu.nvml_index, *w) for k, w in progress.peak_windows.items()}
        summary[:] = summarize(
            rows,
            progress.results,
            peaks,
            rec.sampler.columns,
            ceiling=tensor_ceiling.for_suite(info.get("name", ""), peaks["datasheet"]),
        )
        write_summary(opts.out_dir, summary)
        rec.manifest.update(peaks=peaks, scenarios_done=[r["scenario"] for r in progress.results])

    def measured(values):
        peaks["measured"] = values
        rec.write_manifest()

    with rec:
        progress.warnings, progress.errors = rec.manifest["warnings"], rec.manifest["errors"]  # the run's own notes
        rec.on_finish(finish)
        _describe(rec, opts, backend, info, peaks, others)
        run_scenarios(opts, backend, rec, progress, on_peaks=measured)
    return opts.out_dir, summary


def shared_gpu(nvml_index: int, pids: list[int]) -> str:
    """The warning for a GPU that other processes use while it is measured."""
    return (
        f"other processes are using GPU {nvml_index} (PIDs {', '.join(map(str, pids))}): "
        "their work shows up in every metric"
    )


def _describe(rec: Recording, opts: RunOptions, backend, info: dict, peaks: dict, others: list[int]) -> None:
    """What the manifest says about the run before anything is measured."""
    rec.manifest.update(
        gpu=info,
        versions=backend.versions(),
        peaks=peaks,
        families={sc.family: {"story": sc.module().STORY} for sc in opts.scenarios},
    )
    rec.manifest["options"].update(duration_s=opts.duration_s, gap_s=opts.gap_s)
    if others:
        rec.warn(shared_gpu(info["nvml_index"], others))
    rec.write_manifest()


def scenario_result(sc: Scenario, gpu, prepared, facts: dict, window, timings) -> dict:
    nan = math.nan
    timed = bool(timings and timings.per_call_ms)
    w = prepared.work
    return {
        "scenario": sc.name,
        "family": sc.family,
        "impl": sc.impl,
        "baseline": sc.baseline or "",
        "launch": prepared.launch,
        "sizes": prepared.sizes_text,
        "gpu": gpu.nvml_index,
        "uuid": gpu.uuid,
        "t_start": window.t_start,
        "t_end": window.t_end,
        "kernel_ms": timings.median_ms if timed else nan,
        "kernel_ms_p10": timings.p10_ms if timed else nan,
        "kernel_ms_p90": timings.p90_ms if timed else nan,
        "n_timings": len(timings.per_call_ms) if timings else 0,
        "n_calls": timings.calls if timings else 0,
        "timed_s": timings.timed_s if timed else nan,
        "flops_per_call": w.flops,
        "bytes_per_call": w.bytes,
        "traffic_per_call": w.traffic if finite(w.traffic) else nan,
        "link_bytes_per_call": w.link_bytes,
        "tokens_per_call": w.tokens or nan,
        "unit": prepared.unit or "",
        "bound": prepared.bound,
        **facts,
        **prepared.info,
    }
