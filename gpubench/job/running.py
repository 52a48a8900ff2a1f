"""The phases so far of a watch that has not finished (it runs, or was killed before it wrote its summary), from
its run directory: the summary's own code over the samples on disk and the marks written so far. The manifest a
watch writes as it starts holds what that needs (gpubench.record.liveness.watcher_facts: the watch's start, its
marks file; the GPUs, peaks, dtype and columns)."""

from __future__ import annotations

from pathlib import Path


def so_far(run_dir: Path, manifest: dict, samples) -> list[dict]:
    """The summary rows of an unfinished watch, up to the end of its last sample row on disk. The GPUs its processes
    held are known only at its end: steps name their GPU, else every GPU sampled is summarized."""
    from gpubench.job.markfile import read_all
    from gpubench.job.phases import summarize_watch
    from gpubench.job.watcher import MARKS_FILE
    from gpubench.record.gpus import Gpu

    if not len(samples) or not manifest.get("peaks"):
        return []
    gpus = [
        Gpu(**{k: g.get(k) for k in ("nvml_index", "uuid", "name", "cuda_index")})
        for g in manifest.get("gpus_sampled") or []
    ]
    samples.load("t_start_s", "t_end_s")
    facts = manifest.get("watcher") or {}
    t0 = facts.get("t_start")
    t0 = t0 if isinstance(t0, (int, float)) and not isinstance(t0, bool) else float(samples.col("t_start_s").min())
    t1 = float(samples.col("t_end_s").max())
    named = facts.get("marks")
    marks = Path(run_dir) / (named if isinstance(named, str) and named else MARKS_FILE)
    events = read_all(marks) if marks.is_file() else []
    columns = [c for c in manifest.get("columns") or [] if samples.has(c)]
    return summarize_watch(
        samples, events, gpus, t0, t1, manifest["peaks"], manifest.get("dtype", "bf16"), columns, {}
    ).summary
