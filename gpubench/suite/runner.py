"""The suite's loop over a Recording: for each scenario, prepare and check once, warm up, then run it for
--duration seconds inside its own phase; an idle gap between scenarios lets each one's metrics settle.

The GPU is reached only through a backend (gpubench.suite.backend.CudaBackend), so the loop is tested end to
end on a CPU with a fake backend and fake sources.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from pathlib import Path

from gpubench.kernels.common import CheckFailed, CupyMissing
from gpubench.metrics import finite
from gpubench.read.summary import TRIM_S, peak_conditions, summarize
from gpubench.record.recording import Recording, Reporter
from gpubench.record.rundir import write_summary
from gpubench.record.config import RecordingConfig
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
    return (sum(sc.measured_s(opts.duration_s) + opts.gap_s + 1.0 for sc in opts.scenarios)
            + (12.0 if opts.recording.peaks else 0.0))


def run_suite(opts: RunOptions, backend, reporter: Reporter, clock=time.monotonic) -> tuple[Path, list[dict]]:
    """Run the scenarios and write the run directory; return it and the summary rows."""
    gpu, sampled = backend.resolve(opts.recording.device or 0, opts.recording.all_gpus)
    others = backend.other_processes(gpu)  # before this process touches the GPU
    info = backend.device_info(gpu)
    peaks = {"datasheet": sheet_for(info), "measured": None, "conditions": {}}
    windows: dict[str, tuple[float, float]] = {}
    results: list[dict] = []
    summary: list[dict] = []
    rec = Recording(opts.out_dir, sampled, opts.recording, kind="run", reporter=reporter, clock=clock)

    def finish(rows):
        peaks["conditions"] = {k: peak_conditions(rows, gpu.nvml_index, *w) for k, w in windows.items()}
        summary[:] = summarize(rows, results, peaks, rec.sampler.columns,
                               ceiling=tensor_ceiling.for_suite(info.get("name", ""), peaks["datasheet"]))
        write_summary(opts.out_dir, summary)
        rec.manifest.update(peaks=peaks, scenarios_done=[r["scenario"] for r in results])

    with rec:
        rec.on_finish(finish)
        _describe(rec, opts, backend, info, peaks, others)
        reporter.start(opts.scenarios, estimate_s(opts))
        backend.prepare(gpu)
        if opts.recording.peaks:
            with rec.phase("peaks"):
                peaks["measured"] = backend.measure_peaks(lambda k, a, b: windows.__setitem__(k, (a, b)))
            rec.write_manifest()
        for i, sc in enumerate(opts.scenarios):
            results += filter(None, [_run_one(i, sc, gpu, opts, backend, rec, reporter)])
            reporter.advance()
        with rec.phase("gap"):
            time.sleep(opts.gap_s)
    return opts.out_dir, summary


def shared_gpu(nvml_index: int, pids: list[int]) -> str:
    """The warning for a GPU that other processes use while it is measured."""
    return (f"other processes are using GPU {nvml_index} (PIDs {', '.join(map(str, pids))}): "
            "their work shows up in every metric")


def _describe(rec: Recording, opts: RunOptions, backend, info: dict, peaks: dict, others: list[int]) -> None:
    """What the manifest says about the run before anything is measured."""
    rec.manifest.update(gpu=info, versions=backend.versions(), peaks=peaks,
                        families={sc.family: {"story": sc.module().STORY} for sc in opts.scenarios})
    rec.manifest["options"].update(duration_s=opts.duration_s, gap_s=opts.gap_s)
    if others:
        rec.warn(shared_gpu(info["nvml_index"], others))
    rec.write_manifest()


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


def _run_one(i, sc: Scenario, gpu, opts: RunOptions, backend, rec: Recording, reporter: Reporter):
    reporter.step(i, sc, "check and warm-up")
    with rec.phase(f"setup:{sc.name}"):
        prepared, facts, problem = checked(sc.prepare)
        if problem:
            kind, text = problem
            rec.manifest["errors" if kind == "error" else "warnings"].append(f"{sc.name} skipped: {text}")
            reporter.warn(f"{sc.name} skipped: {text}")
            return None
        calls = backend.warmup(prepared) if prepared.run is not None else None
    with rec.phase("gap"):
        time.sleep(opts.gap_s)
    reporter.step(i, sc, "measuring")
    with rec.phase(sc.name) as window:
        if prepared.run is not None:
            timings = backend.time(prepared, sc.measured_s(opts.duration_s), calls)
        else:
            timings = backend.idle(sc.measured_s(opts.duration_s))
    rec.set_phase("gap")
    timed_in = ""
    if timings is not None and timings.spans:  # timed in the window the counters cover, after the trim
        timings = timings.within(window.t_start + TRIM_S, window.t_end)
        timed_in = f"{window.t_start + TRIM_S:.6f}-{window.t_end:.6f}"
    result = scenario_result(sc, gpu, prepared, facts, window, timings)
    result["timing_window"] = timed_in
    del prepared
    backend.release()
    return result


def scenario_result(sc: Scenario, gpu, prepared, facts: dict, window, timings) -> dict:
    nan = math.nan
    timed = bool(timings and timings.per_call_ms)
    w = prepared.work
    return {
        "scenario": sc.name, "family": sc.family, "impl": sc.impl, "baseline": sc.baseline or "",
        "launch": prepared.launch, "sizes": prepared.sizes_text, "gpu": gpu.nvml_index, "uuid": gpu.uuid,
        "t_start": window.t_start, "t_end": window.t_end,
        "kernel_ms": timings.median_ms if timed else nan,
        "kernel_ms_p10": timings.p10_ms if timed else nan,
        "kernel_ms_p90": timings.p90_ms if timed else nan,
        "n_timings": len(timings.per_call_ms) if timings else 0, "n_calls": timings.calls if timings else 0,
        "flops_per_call": w.flops, "bytes_per_call": w.bytes,
        "traffic_per_call": w.traffic if finite(w.traffic) else nan, "link_bytes_per_call": w.link_bytes,
        "tokens_per_call": w.tokens or nan,
        "unit": prepared.unit or "", "bound": prepared.bound, **facts, **prepared.info,
    }
