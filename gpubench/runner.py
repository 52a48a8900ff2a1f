"""The runner: for each scenario, check once, warm up, then run it for --duration seconds while the
sampler labels the rows with its name; an idle gap between scenarios lets each one's metrics settle.

Everything that touches the GPU goes through a backend (gpubench.backend.CudaBackend), so the
runner itself is tested end to end on a CPU with a fake backend and fake sources.
"""

from __future__ import annotations

import math
import signal
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from gpubench import results as res
from gpubench.kernels.common import CheckFailed, CupyMissing
from gpubench.peaks import datasheet_for
from gpubench.sampler import Sampler, open_sources
from gpubench.suite import Scenario
from gpubench.summary import summarize


@dataclass
class RunOptions:
    scenarios: list[Scenario]
    out_dir: Path
    device: int = 0
    duration_s: float = 5.0
    gap_s: float = 1.0
    interval_s: float = 0.1
    profiling: str = "auto"  # auto | gpm | dcgm | none
    smi: bool = True
    all_gpus: bool = False
    measure_peaks: bool = True
    command: list[str] = field(default_factory=lambda: list(sys.argv))


class Reporter:
    """What the runner tells the person watching; the console implements it with rich."""

    def start(self, scenarios: list[Scenario], estimate_s: float) -> None: ...
    def step(self, index: int, scenario: Scenario, what: str) -> None: ...
    def advance(self) -> None: ...
    def warn(self, message: str) -> None: ...
    def finish(self) -> None: ...


def _check_facts(facts) -> dict:
    if isinstance(facts, float):
        return {"check": f"rel err {facts:.2g}"}
    if isinstance(facts, dict):
        return {"check": "ok", **facts}
    return {"check": "ok" if facts is None else str(facts)}


def _result(sc: Scenario, wl, facts: dict, t0: float, t1: float, timings) -> dict:
    nan = math.nan
    return {
        "scenario": sc.name, "family": sc.family, "impl": sc.impl, "launch": sc.launch, "sizes": sc.sizes,
        "t_start": t0, "t_end": t1,
        "kernel_ms": timings.median_ms if timings and timings.per_call_ms else nan,
        "kernel_ms_p10": timings.p10_ms if timings and timings.per_call_ms else nan,
        "kernel_ms_p90": timings.p90_ms if timings and timings.per_call_ms else nan,
        "n_timings": len(timings.per_call_ms) if timings else 0,
        "n_calls": timings.calls if timings else 0,
        "flops_per_call": wl.work.flops, "bytes_per_call": wl.work.bytes,
        "unit": wl.unit or "", "dram_bound": wl.dram_bound,
        **facts, **wl.info,
    }


def estimate_s(opts: RunOptions) -> float:
    return len(opts.scenarios) * (opts.duration_s + opts.gap_s + 1.0) + (3.0 if opts.measure_peaks else 0.0)


def run_suite(opts: RunOptions, backend, reporter: Reporter, clock=time.monotonic) -> tuple[Path, list[dict]]:
    """Run the scenarios and write the run directory; return it and the summary rows."""
    others = backend.other_processes(opts.device)  # before this process touches the GPU
    info = backend.device_info(opts.device)
    gpus = list(range(backend.device_count())) if opts.all_gpus else [opts.device]
    run_dir = opts.out_dir
    run_dir.mkdir(parents=True, exist_ok=True)
    manifest = {
        "gpu": info, "gpus_sampled": gpus, "versions": backend.versions(), "command": opts.command,
        "options": {"duration_s": opts.duration_s, "gap_s": opts.gap_s, "interval_s": opts.interval_s,
                    "profiling": opts.profiling, "trim_s": 0.5},
        "start_wall": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "end_wall": None,
        "completed": False, "status": "running", "warnings": [], "errors": [],
    }
    if others:
        msg = (f"other processes are using GPU {opts.device} (PIDs {', '.join(map(str, others))}): "
               "their work shows up in every metric")
        manifest["warnings"].append(msg)
        reporter.warn(msg)

    sources, reasons = backend.make_sources(opts)
    opened, unavailable = open_sources(sources, gpus)
    unavailable = {**reasons, **unavailable}
    manifest["sources"] = {"used": [s.name for s in opened], "unavailable": unavailable}
    for name, why in unavailable.items():
        reporter.warn(f"source {name} unavailable: {why}")

    sampler = Sampler(opened, gpus, opts.interval_s, clock=clock,
                      on_failure=lambda n, e: reporter.warn(f"source {n} failed mid-run: {e}"))
    sink = res.CsvSink(run_dir / "samples.csv", sampler.columns)
    sampler.sink = sink
    manifest["columns"] = list(sampler.columns)
    res.write_json(run_dir / "manifest.json", manifest)

    peaks = {"datasheet": datasheet_for(info["name"]), "measured": None}
    results: list[dict] = []
    status = "failed"
    reporter.start(opts.scenarios, estimate_s(opts))
    try:
        sampler.start()
        backend.prepare(opts.device)
        if opts.measure_peaks:
            sampler.set_phase("peaks")
            peaks["measured"] = backend.measure_peaks()
        manifest["peaks"] = peaks
        res.write_json(run_dir / "manifest.json", manifest)
        for i, sc in enumerate(opts.scenarios):
            result = _run_one(i, sc, opts, backend, sampler, reporter, manifest, clock)
            if result is not None:
                results.append(result)
            reporter.advance()
        sampler.set_phase("gap")
        time.sleep(opts.gap_s)
        status = "completed"
    except KeyboardInterrupt:
        status = "interrupted"
        raise
    except Exception as err:
        status = "failed"
        manifest["errors"].append(f"{type(err).__name__}: {err}")
        raise
    finally:
        previous = signal.signal(signal.SIGINT, signal.SIG_IGN)  # one Ctrl-C is enough: finish writing
        try:
            sampler.stop()
            for s in opened:
                s.close()
            sink.close()
            summary = summarize(sampler.rows_snapshot(), results, peaks, opts.device, sampler.columns)
            res.write_summary(run_dir, summary)
            manifest.update(peaks=peaks, status=status, completed=status == "completed",
                            end_wall=time.strftime("%Y-%m-%dT%H:%M:%S%z"),
                            source_failures=sampler.failures,
                            scenarios_done=[r["scenario"] for r in results])
            res.write_json(run_dir / "manifest.json", manifest)
        finally:
            signal.signal(signal.SIGINT, previous)
            reporter.finish()
    return run_dir, summary


def _run_one(i, sc, opts, backend, sampler, reporter, manifest, clock):
    reporter.step(i, sc, "check and warm-up")
    sampler.set_phase(f"setup:{sc.name}")
    try:
        wl = sc.build()
        facts = _check_facts(wl.check())
    except (CheckFailed, CupyMissing) as err:
        msg = f"{sc.name} skipped: {err}"
        manifest["errors" if isinstance(err, CheckFailed) else "warnings"].append(msg)
        reporter.warn(msg)
        return None
    calls = None
    if wl.run is not None:
        call_ms = backend.warmup(wl)
        calls = wl.calls_per_timing or backend.calls_for(call_ms)
    sampler.set_phase("gap")
    time.sleep(opts.gap_s)
    reporter.step(i, sc, "measuring")
    sampler.set_phase(sc.name)
    t0 = clock()
    timings = backend.time(wl, opts.duration_s, calls) if wl.run is not None else backend.idle(opts.duration_s)
    t1 = clock()
    sampler.set_phase("gap")
    result = _result(sc, wl, facts, t0, t1, timings)
    del wl
    backend.release()
    return result
