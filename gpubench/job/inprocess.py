"""`gpubench.recording()`: a watch around a block of Python in this process (a notebook cell, a loop inside a
script), with the run directory and options of `gpubench watch` (gpubench.job.watchcmd)."""

from __future__ import annotations

import os
import sys
from contextlib import contextmanager
from pathlib import Path

from gpubench import inside
from gpubench.inside import markwriter
from gpubench.job.watchcmd import resolve_gpus, serve_metrics
from gpubench.job.watcher import MARKS_FILE, Watcher, WatchOptions
from gpubench.job.watchshow import show
from gpubench.record import nvml
from gpubench.record.config import RecordingConfig


@contextmanager
def recording(
    out=None,
    *,
    dtype: str = "bf16",
    quiet: bool = False,
    gpus=None,
    info: dict | None = None,
    metrics_port: int | None = None,
    **config,
):
    """Record the GPUs while a block of Python runs: a notebook cell, a loop inside a script.

        with gpubench.recording() as rec:
            gpubench.mark("train")
            for batch in data:
                train_step(batch)
                gpubench.step(flops=step_flops)
        rec.summary  # one row per phase: the metric ladder, steps/s, TFLOP/s, MFU, verdict

    The same run directory as `gpubench watch` (default results/watch-<gpu>-<time>), and the same
    options: the keywords of gpubench.record.config.RecordingConfig (device, all_gpus, interval_s,
    profiling, smi, peaks; sources replaces the metric sources, for replays and tests). Marks from this
    process, and from processes it starts, go to it. The table and the verdicts are printed at the end
    unless quiet. `metrics_port` serves the ladder and the job's live numbers to Prometheus while the
    block runs, as `gpubench watch --metrics-port` does (0: a free port, `rec.manifest["metrics"]["port"]`).
    `gpus` and `info` replace the GPUs and their facts (tests, replays).
    """
    from gpubench.record.rundir import check_writable, default_run_dir

    settings = RecordingConfig(
        out=Path(out) if out is not None else None,
        command=[sys.executable, *sys.argv],
        **{k: v for k, v in config.items() if v is not None},
    )
    if gpus is None:
        gpus, _ = resolve_gpus(settings.device, settings.all_gpus, dict(os.environ))
    info = info if info is not None else nvml.device_info(gpus[0].nvml_index)
    out_dir = settings.out or default_run_dir(info["name"], kind="watch")
    if problem := check_writable(out_dir):
        raise ValueError(f"cannot write the run to {out_dir}: {problem}")
    endpoint = serve_metrics(metrics_port)
    opts = WatchOptions(out_dir, gpus, info, settings, dtype=dtype, root_pid=os.getpid(), metrics=endpoint)
    path = str((out_dir / MARKS_FILE).resolve())
    writer = inside.writer()  # the one gpubench.step() writes through in this process
    previous, previous_env = writer.target(path), os.environ.get(markwriter.ENV)
    os.environ[markwriter.ENV] = path
    try:
        with Watcher(opts) as watcher:
            watch = watcher.watch
            if watch.interrupted:
                raise KeyboardInterrupt
            try:
                yield watch
            finally:
                writer.flush()  # this process's gathered steps, before the summary reads them
    finally:
        if endpoint is not None:
            endpoint.close()
        writer.target(previous)
        if previous_env is None:
            os.environ.pop(markwriter.ENV, None)
        else:
            os.environ[markwriter.ENV] = previous_env
    if not quiet:
        show(watch)
