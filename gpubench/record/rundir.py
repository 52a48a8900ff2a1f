"""Run directories, written and read in one place: manifest.json, the samples (streamed as recorded),
summary.csv and summary.json.

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

from gpubench.metrics import BY_COLUMN, COLUMNS
from gpubench.record import schema

SAMPLE_KEYS = ("t_start_s", "t_end_s", "t_wall", "gpu", "uuid", "phase")
# Runs under torchrun: the rank using each GPU (empty for a GPU that --all-gpus samples but no rank uses).
RANKED_SAMPLE_KEYS = SAMPLE_KEYS[:4] + ("rank",) + SAMPLE_KEYS[4:]


def keys_of(samples) -> tuple[str, ...]:
    """The leading columns a samples table is written with: the ranked ones where it has a rank column."""
    return RANKED_SAMPLE_KEYS if samples.has("rank") else SAMPLE_KEYS


TIME_KEYS = frozenset({"t_start_s", "t_end_s", "t_wall", "t_start", "t_end"})
FLOAT_KEYS = frozenset(COLUMNS) | {"t_start_s", "t_end_s", "t_wall"}
INT_KEYS = frozenset({"gpu", "rank"})
# Summary columns that hold words: kept as written, never read as numbers.
TEXT_SUMMARY_KEYS = frozenset({"scenario", "phase", "family", "impl", "baseline", "launch", "sizes", "unit", "bound",
                               "check", "uuid", "kind", "verdict", "verdict_rules", "node", "stream_rates",
                               "step_clock", "msg_text", "regime_text", "straggler_text", "wait_signature",
                               "straggler_note", "flop_convention", "steps_source", "flops_source", "provenance"})
NUMERIC_SUMMARY_KEYS = frozenset({"t_start", "t_end", "gpu", "n_samples", "n_timings", "n_calls",
                                  "speedup_vs_baseline", "link_gbps"})


SUMMARY_MISSING = "summary.csv is missing: the run ended before it was written"
SAMPLES_FILE, CSV_SAMPLES = "samples.arrows", "samples.csv"


class RunDirError(ValueError):
    """A run directory that cannot be read or written; the message is one sentence for the user."""


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
            return f"{path} already holds files ({', '.join(foreign[:3])}{', ...' if len(foreign) > 3 else ''}); " \
                   "choose an empty or new directory"
    if not os.access(probe, os.W_OK | os.X_OK):
        return f"{probe} is not writable"
    return None


def partial(manifest: dict) -> str | None:
    """None for a completed run, else what happened to it, to follow "the run" or "it"."""
    if manifest.get("completed") is True:
        return None
    status = manifest.get("status")
    return {"interrupted": "was interrupted before it finished",
            "failed": "failed before it finished",
            "running": "did not finish (its manifest still says running: the process was killed, or still runs)",
            }.get(status, f"did not complete (status {status!r})")


def samples_path(run_dir: Path) -> Path | None:
    """The run's samples file: samples.arrows, or samples.csv in a run recorded before it; None if neither."""
    for name in (SAMPLES_FILE, CSV_SAMPLES):
        if (Path(run_dir) / name).is_file():
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


class CsvSink:
    """Appends sample rows to samples.csv as they come, flushing each, so a crash keeps what was recorded
    (the format of runs recorded before samples.arrows; tests write it to check both are read alike)."""

    def __init__(self, path: Path, columns, keys=SAMPLE_KEYS):
        self.path = path
        self.fields = list(keys) + list(columns)
        self._f = open(path, "w", newline="")
        self._w = csv.DictWriter(self._f, fieldnames=self.fields, extrasaction="ignore")
        self._w.writeheader()
        self._f.flush()

    def __call__(self, row: dict) -> None:
        if self._f.closed:
            return
        self._w.writerow({k: cell(v, k) for k, v in row.items()})
        self._f.flush()

    def close(self) -> None:
        if not self._f.closed:
            self._f.close()


def cell(value, key: str = ""):
    if isinstance(value, float):
        if math.isnan(value):
            return ""
        return f"{value:.4f}" if key in TIME_KEYS else f"{value:.10g}"
    return value


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
    fields: list[str] = []
    for row in summary:
        fields += [k for k in row if k not in fields]
    tmp = run_dir / "summary.csv.tmp"
    with open(tmp, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=fields)
        w.writeheader()
        for row in summary:
            w.writerow({k: cell(v, k) for k, v in row.items()})
    tmp.replace(run_dir / "summary.csv")
    write_json(run_dir / "summary.json", summary)


# --- reading ---------------------------------------------------------------------------------------

def _value(text: str):
    if text == "":
        return math.nan
    for cast in (int, float):
        try:
            return cast(text)
        except ValueError:
            pass
    if text in ("True", "False"):
        return text == "True"
    return text


def _sample(raw: dict) -> dict:
    row = {}
    for key, text in raw.items():
        if text is None or key is None:
            raise ValueError("the row has too few or too many fields")
        if key in FLOAT_KEYS:
            row[key] = float(text) if text != "" else math.nan
        elif key == "rank" and text == "":
            row[key] = None  # a GPU that --all-gpus sampled and no rank used
        elif key in INT_KEYS:
            row[key] = int(text)
        else:
            row[key] = text
    return row


def read_samples(path: str | Path, notes: list[str] | None = None, left_out: set | None = None):
    """A samples file, samples.arrows or samples.csv, as Samples (gpubench.read.samples): metric columns as
    float64 (missing values NaN), text as written. A torn last batch or line (a kill mid-write) is skipped
    with a note; damage anywhere else is an error naming the file and where. Values out of their column's
    range become NaN, said in notes, their columns named in left_out (as each column is read)."""
    path = Path(path)
    left_out = set() if left_out is None else left_out
    if path.suffix == ".arrows":
        from gpubench.record import arrowfile

        check = _checker(path, notes, left_out, lambda i: f"row {i + 1}", texts=False)

        def guard(fetch):
            def checked(wanted, rows):
                try:
                    columns = fetch(wanted, rows)
                except arrowfile.DamagedSamples as err:
                    raise RunDirError(f"{path} is damaged: {err}") from None
                return check(columns, rows)
            return checked

        try:
            samples = arrowfile.read(path, notes, guard)
        except arrowfile.DamagedSamples as err:
            raise RunDirError(f"{path} is damaged: {err}") from None
    else:
        samples = _read_csv(path, notes, left_out)
    try:
        if samples.names or len(samples):  # no header at all: killed before it was written, no rows
            schema.sample_names(samples.names)
    except schema.Bad as err:
        raise RunDirError(f"{path} is damaged: {err}") from None
    return samples


def _checker(path: Path, notes, flagged: set, where, texts: bool = True):
    """check(columns, rows) for the columns of some rows of a samples file, as they are read (schema's)."""
    said: list = []

    def check(columns: dict, rows=None) -> dict:
        line = where if rows is None else (lambda i: where(int(rows[i])))
        try:
            return schema.sample_columns(columns, line, said, flagged, texts)
        except schema.Bad as err:
            raise RunDirError(f"{path} is damaged: {err}") from None
        finally:
            if notes is not None:
                notes.extend(f"{path.name}: {n}" for n in said)
            said.clear()

    return check


def _read_csv(path: Path, notes: list[str] | None, left_out: set):
    """samples.csv, column-wise: pyarrow's parser where the file is well formed (the same numbers as
    Python's float(), correctly rounded), else row by row, to name the line that is not a sample row."""
    from gpubench.read.samples import Samples, as_samples

    data = path.read_bytes()
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        raise RunDirError(f"{path} is not text: it is not a samples file gpubench wrote") from None
    lines = data.count(b"\n") + (not data.endswith(b"\n"))
    if data and not data.endswith(b"\n") and lines > 1:
        data = data[:data.rindex(b"\n") + 1]
        if notes is not None:
            notes.append(f"{path.name}: its last line was cut off mid-write (the run was killed) and is skipped")
    columns = _fast_csv(data)
    samples = Samples(columns) if columns is not None else as_samples(_slow_csv(path, data.decode("utf-8")))
    check = _checker(path, notes, left_out, lambda i: f"line {i + 2}")  # line 1 is the header
    return Samples(check(samples.columns()), names=samples.names, length=len(samples))


def _fast_csv(data: bytes) -> dict | None:
    import numpy as np
    import pyarrow as pa
    import pyarrow.csv as pacsv

    from gpubench.record.arrowfile import DamagedSamples, _numpy

    header = next(csv.reader([data.split(b"\n", 1)[0].decode()]), [])
    if not header or len(set(header)) != len(header):
        return None
    types = {k: pa.float64() if k in FLOAT_KEYS else pa.int64() if k in INT_KEYS else pa.string() for k in header}
    try:
        table = pacsv.read_csv(pa.BufferReader(data), convert_options=pacsv.ConvertOptions(
            column_types=types, null_values=[""], strings_can_be_null=False, quoted_strings_can_be_null=False))
    except (pa.ArrowInvalid, OSError):
        return None
    if table.column("gpu").null_count if "gpu" in header else False:
        return None
    try:
        return {k: np.asarray(_numpy(table.column(k).combine_chunks(), None)) if table.num_rows else
                np.array([], dtype=object if types[k] == pa.string() else np.float64) for k in header}
    except DamagedSamples:  # a name too long: read row by row, to say on which line
        return None


def _slow_csv(path: Path, text: str) -> list[dict]:
    reader = csv.DictReader(text.splitlines())
    rows = []
    for raw in reader:
        try:
            rows.append(_sample(raw))
        except ValueError:
            raise RunDirError(f"{path} line {reader.line_num} is not a sample row") from None
    return rows


def _numeric(key: str) -> bool:
    """Summary columns that hold numbers (or nothing): metrics, their spread, times, work, counts."""
    base = re.sub(r"_p(10|90)$", "", key)
    return base in BY_COLUMN or base in NUMERIC_SUMMARY_KEYS or base.endswith(("_per_call", "_measured_pct"))


def read_summary(path: Path, notes: list[str] | None = None) -> list[dict]:
    """summary.csv as dicts; a row with the wrong number of fields, or text where a number belongs, is an
    error naming the file and line. Text columns stay text (a scenario named 42 is named "42"); a number out
    of its column's range is flagged (schema.summary_value), said in notes."""
    said: list[str] = []
    try:
        with open(path, newline="", encoding="utf-8") as f:
            reader = csv.DictReader(f)
            rows = []
            for raw in reader:
                if None in raw or None in raw.values():
                    raise RunDirError(f"{path} line {reader.line_num} does not have the header's fields")
                row = {k: (v or math.nan) if k in TEXT_SUMMARY_KEYS else _value(v) for k, v in raw.items()}
                bad = [k for k, v in row.items() if _numeric(k) and not isinstance(v, (int, float))]
                if bad or not row.get("scenario") or not isinstance(row["scenario"], str):
                    raise RunDirError(f"{path} line {reader.line_num} is not a summary row "
                                      f"({bad[0] + ' is not a number' if bad else 'it names no scenario'})")
                if len(row["scenario"]) > schema.LONGEST_TEXT:
                    raise RunDirError(f"{path} line {reader.line_num} is not a summary row (its scenario is longer "
                                      f"than {schema.LONGEST_TEXT} characters)")
                rows.append({k: schema.summary_value(k, v, row["scenario"], said) for k, v in row.items()})
    except UnicodeDecodeError:
        raise RunDirError(f"{path} is not text: it is not a summary gpubench wrote") from None
    except csv.Error as err:  # a NUL byte, a field past csv's limit
        raise RunDirError(f"{path} line {reader.line_num} is not a summary row ({err})") from None
    if notes is not None:
        notes += [f"{path.name}: {n}" for n in said]
    return rows


MANIFEST_MAX_BYTES = 64 << 20  # a day-long watch's manifest, its phases listed, is a few megabytes


def read_manifest(path: Path) -> dict:
    """manifest.json, its fields checked where plot and report read them (schema.MANIFEST)."""
    with open(path, "rb") as f:
        data = f.read(MANIFEST_MAX_BYTES + 1)
    if len(data) > MANIFEST_MAX_BYTES:
        raise RunDirError(f"{path} is larger than {MANIFEST_MAX_BYTES >> 20} MiB: it is not a manifest gpubench wrote")
    try:
        manifest = json.loads(data.decode("utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise RunDirError(f"{path} is not valid JSON ({err})") from None
    except RecursionError:
        raise RunDirError(f"{path} is nested too deeply to be a manifest gpubench wrote") from None
    try:
        return schema.manifest(manifest)
    except schema.Bad as err:
        raise RunDirError(f"{path} is damaged: {err}") from None


def load_run(run_dir: str | Path) -> tuple[dict, "Samples", list[dict]]:  # noqa: F821
    """(manifest, samples, summary) of a run directory, from its files alone; the samples are read a column
    at a time as they are asked for (gpubench.read.samples.Samples)."""
    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        raise RunDirError(f"{run_dir} is not a directory")
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
    # both filled further as the samples' columns are read (a day's, as the figures ask for them)
    manifest.update(read_notes=notes, left_out=left_out)
    return manifest, samples, summary
