"""Run directories: their paths, the files a run writes (manifest.json, the samples streamed as recorded,
summary.csv and summary.json) and a run read back whole (load_run). Each file's format is its own module's:
the samples file gpubench.record.samplesfile (samples.csv gpubench.record.csvfile, samples.arrows
gpubench.record.arrowfile), summary.csv gpubench.record.summaryfile, the summary's columns
gpubench.record.columns; import their names from there.

A sample row covers an interval: `t_start_s` to `t_end_s` on the monotonic clock (the interval its
GPM and DCGM values average over), `t_wall` the wall time at its end, the GPU (NVML index and UUID)
and the phase that ran for most of the interval. A run under torchrun adds the rank using the GPU.
Samples are written to samples.arrows (Arrow's IPC stream, gpubench.record.arrowfile); runs recorded
before it hold samples.csv, read by the same read_samples. numpy and pyarrow load only where samples
are read or written, so that `gpubench list` stays light.
"""

from __future__ import annotations

import csv
import json
import math
import os
import re
import time
from pathlib import Path

from gpubench.record import columns, schema
from gpubench.record.csvfile import SAMPLE_KEYS
from gpubench.record.samplesfile import (
    CSV_SAMPLES,
    SAMPLES_FILE,
    RunDirError,
    not_a_file,
    read_samples,
)

# Runs under torchrun: the rank using each GPU (empty for a GPU that --all-gpus samples but no rank uses).
RANKED_SAMPLE_KEYS = SAMPLE_KEYS[:4] + ("rank",) + SAMPLE_KEYS[4:]


def keys_of(samples) -> tuple[str, ...]:
    """The leading columns a samples table is written with: the ranked ones where it has a rank column."""
    return RANKED_SAMPLE_KEYS if samples.has("rank") else SAMPLE_KEYS


SUMMARY_MISSING = "summary.csv is missing: the run ended before it was written"
SUMMARY_EMPTY = "summary.csv is empty (no byte in it): it was emptied, or lost while it was written"


def slug(gpu_name: str) -> str:
    """'NVIDIA H100 80GB HBM3' -> 'h100-80gb-hbm3'."""
    name = re.sub(r"^nvidia\s+", "", gpu_name.strip(), flags=re.I)
    return re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-") or "gpu"


def default_run_dir(gpu_name: str, root: str | Path = "results", kind: str = "") -> Path:
    prefix = f"{kind}-" if kind else ""
    return Path(root) / f"{prefix}{slug(gpu_name)}-{time.strftime('%Y%m%d-%H%M%S')}"


def check_writable(path: Path, may_hold=()) -> str | None:
    """None if a directory can be made (or written) at path, else why not (one sentence).

    An existing directory must be empty or hold only entries named in may_hold (None: anything),
    so that writing there never mixes with files that are not gpubench's. A path the file system cannot
    even look up (a name too long, a loop of symbolic links) is said so.
    """
    try:
        return _check_writable(Path(path), may_hold)
    except RuntimeError:  # pathlib's word for a loop of symbolic links
        return f"{path} leads into a loop of symbolic links"
    except OSError as err:
        return f"{path} cannot be used: {(err.strerror or str(err)).lower()}"


def _check_writable(path: Path, may_hold) -> str | None:
    resolved = path.resolve()
    if resolved.parts[1:2] in (("proc",), ("sys",), ("dev",)):
        return f"{path} lies under /{resolved.parts[1]}, a kernel file system, not a place for files"
    probe = path
    while not probe.exists():
        if probe.parent == probe:
            break
        probe = probe.parent
    if path.exists() and not path.is_dir():
        return f"{path} exists and is not a directory"
    if probe != path and not probe.is_dir():
        return f"{probe} is a file, so {path} cannot be made under it"
    if path.is_dir() and may_hold is not None:
        foreign = sorted(p.name for p in path.iterdir() if p.name not in may_hold)
        if foreign:
            return (
                f"{path} already holds files ({', '.join(foreign[:3])}{', ...' if len(foreign) > 3 else ''}); "
                "choose an empty or new directory"
            )
    if not os.access(probe, os.W_OK | os.X_OK):
        return f"{probe} is not writable"
    return None


def partial(manifest: dict) -> str | None:
    """None for a completed run, else what happened to it, to follow "the run" or "it"."""
    if manifest.get("completed") is True:
        lacking = manifest.get("summary_lacking")
        return f"completed, but {lacking}" if lacking else None
    status = manifest.get("status")
    return {
        "interrupted": "was interrupted before it finished",
        "failed": "failed before it finished",
        "running": "did not finish (its manifest still says running: the process was killed, or still runs)",
    }.get(status, f"did not complete (status {status!r})")


def samples_path(run_dir: Path) -> Path | None:
    """The run's samples file: samples.arrows (whatever it is: a folder in its place is refused, never passed
    over), or samples.csv in a run recorded before it; None if neither."""
    for name in (SAMPLES_FILE, CSV_SAMPLES):
        if os.path.lexists(Path(run_dir) / name):
            return Path(run_dir) / name
    return None


def open_sink(path: Path, columns, keys=SAMPLE_KEYS):
    """A sink for the sampler's rows: samples.arrows, written a batch at a time."""
    from gpubench.record import arrowfile

    return arrowfile.Sink(Path(path), list(keys) + list(columns))


def write_samples(path: Path, samples, columns, keys=SAMPLE_KEYS) -> None:
    """A whole table of samples (rows or Samples) into samples.arrows, in the batches a recording writes."""
    from gpubench.read.samples import as_samples
    from gpubench.record import arrowfile

    arrowfile.write(Path(path), as_samples(samples), list(keys) + list(columns))


def json_safe(value):
    """NaN and infinities become None, all the way down: JSON has no NaN, and a missing value must not read as
    a number."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(v) for v in value]
    return value


def write_json(path: Path, data) -> None:
    """Write through a temporary file and rename, so a reader never sees half a file."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(json_safe(data), indent=2, sort_keys=False) + "\n")
    tmp.replace(path)


def write_summary(run_dir: Path, summary: list[dict]) -> None:
    """summary.csv (each cell as gpubench.record.columns writes its kind) and summary.json, each whole."""
    fields: list[str] = []
    for row in summary:
        fields += [k for k in row if k not in fields]
    tmp = run_dir / "summary.csv.tmp"
    with open(tmp, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=fields)
        w.writeheader()
        for row in summary:
            w.writerow({k: columns.cell(v, k) for k, v in row.items()})
    tmp.replace(run_dir / "summary.csv")
    write_json(run_dir / "summary.json", summary)


# --- reading ---------------------------------------------------------------------------------------


def read_summary(path: Path, notes: list[str] | None = None) -> list[dict]:
    """summary.csv as dicts, checked (gpubench.record.summaryfile)."""
    from gpubench.record.summaryfile import BadSummary
    from gpubench.record.summaryfile import read_summary as read

    try:
        return read(Path(path), notes)
    except BadSummary as err:
        raise RunDirError(str(err)) from None


MANIFEST_MAX_BYTES = 64 << 20  # a day-long watch's manifest, its phases listed, is a few megabytes


def read_manifest(path: Path) -> dict:
    """manifest.json, its fields checked where plot and report read them (schema.MANIFEST)."""
    with open(path, "rb") as f:
        data = f.read(MANIFEST_MAX_BYTES + 1)
    if len(data) > MANIFEST_MAX_BYTES:
        raise RunDirError(f"{path} is larger than {MANIFEST_MAX_BYTES >> 20} MiB: it is not a manifest gpubench wrote")
    try:
        manifest = json.loads(data.decode("utf-8-sig"))  # a byte-order mark, as an editor may save one, is no part
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise RunDirError(f"{path} is not valid JSON ({err})") from None
    except ValueError as err:  # an integer past Python's 4300 digits
        raise RunDirError(
            f"{path} holds a number too long to be one gpubench writes ({str(err).split(';')[0]})"
        ) from None
    except RecursionError:
        raise RunDirError(f"{path} is nested too deeply to be a manifest gpubench wrote") from None
    try:
        return schema.manifest(manifest)
    except schema.Bad as err:
        raise RunDirError(f"{path} is damaged: {err}") from None


def load_run(run_dir: str | Path) -> tuple[dict, "Samples", list[dict]]:  # noqa: F821
    """(manifest, samples, summary) of a run directory, from its files alone; the samples are read a column
    at a time as they are asked for (gpubench.read.samples.Samples). A completed run whose summary is gone
    or emptied says so (manifest "summary_lacking", which partial() reads), never "completed" alone."""
    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        raise RunDirError(f"{run_dir} is not a directory")
    for name in ("manifest.json", SAMPLES_FILE, CSV_SAMPLES, "summary.csv"):
        if os.path.lexists(run_dir / name) and (what := not_a_file(run_dir / name)):
            raise RunDirError(f"{run_dir / name} is {what}, not a file gpubench writes")
    missing = [n for n in ("manifest.json",) if not (run_dir / n).is_file()]
    missing += [] if samples_path(run_dir) else [f"{SAMPLES_FILE} (or {CSV_SAMPLES})"]
    if missing:
        raise RunDirError(f"{run_dir} is not a gpubench run directory: {', '.join(missing)} missing")
    manifest = read_manifest(run_dir / "manifest.json")
    notes: list[str] = []
    left_out: set = set()
    samples = read_samples(samples_path(run_dir), notes, left_out)
    summary_path = run_dir / "summary.csv"
    summary = read_summary(summary_path, notes) if summary_path.is_file() else []
    if not summary_path.is_file():
        notes.append(SUMMARY_MISSING)
        lacking = "its summary.csv is missing"
    elif summary_path.stat().st_size == 0:  # gpubench writes a summary whole, through a rename: never empty
        notes.append(SUMMARY_EMPTY)
        lacking = "its summary.csv is empty"
    else:
        lacking = _rows_lacking(manifest, summary)
    if lacking and manifest.get("completed") is True:
        manifest["summary_lacking"] = lacking
    # both filled further as the samples' columns are read (a day's, as the figures ask for them)
    manifest.update(read_notes=notes, left_out=left_out)
    return manifest, samples, summary


def _rows_lacking(manifest: dict, summary: list[dict]) -> str | None:
    """Why a summary without rows is not what the run left, where its manifest says so: a suite writes a
    row for every scenario done, a watch one for every phase on every GPU the job used."""
    if summary:
        return None

    def listed(key):
        return manifest.get(key) if isinstance(manifest.get(key), list) else []

    done, phases = listed("scenarios_done"), listed("phases")
    if done:
        return f"its summary.csv holds no row, though its manifest lists {len(done)} scenarios done"
    if phases and listed("gpus_used"):
        return f"its summary.csv holds no row, though its manifest lists {len(phases)} phases"
    return None
