"""Run directories, written and read in one place: manifest.json, samples.csv (streamed as recorded),
summary.csv and summary.json.

A sample row covers an interval: `t_start_s` to `t_end_s` on the monotonic clock (the interval its
GPM and DCGM values average over), `t_wall` the wall time at its end, the GPU (NVML index and UUID)
and the phase that ran for most of the interval. A run under torchrun adds the rank using the GPU.
"""

from __future__ import annotations

import csv
import json
import math
import os
import re
import time
from pathlib import Path

from gpubench.metrics import COLUMNS

SAMPLE_KEYS = ("t_start_s", "t_end_s", "t_wall", "gpu", "uuid", "phase")
# Runs under torchrun: the rank using each GPU (empty for a GPU that --all-gpus samples but no rank uses).
RANKED_SAMPLE_KEYS = SAMPLE_KEYS[:4] + ("rank",) + SAMPLE_KEYS[4:]
TIME_KEYS = frozenset({"t_start_s", "t_end_s", "t_wall", "t_start", "t_end"})
FLOAT_KEYS = frozenset(COLUMNS) | {"t_start_s", "t_end_s", "t_wall"}
INT_KEYS = frozenset({"gpu", "rank"})


class RunDirError(ValueError):
    """A run directory that cannot be read or written; the message is one sentence for the user."""


def slug(gpu_name: str) -> str:
    """'NVIDIA H100 80GB HBM3' -> 'h100-80gb-hbm3'."""
    name = re.sub(r"^nvidia\s+", "", gpu_name.strip(), flags=re.I)
    return re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-") or "gpu"


def default_run_dir(gpu_name: str, root: str | Path = "results", kind: str = "") -> Path:
    prefix = f"{kind}-" if kind else ""
    return Path(root) / f"{prefix}{slug(gpu_name)}-{time.strftime('%Y%m%d-%H%M%S')}"


def check_writable(path: Path) -> str | None:
    """None if a run directory can be made at path, else why not (one sentence)."""
    path = Path(path)
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
    if path.is_dir() and any(path.iterdir()):
        return f"{path} already holds files; choose an empty or new directory"
    if not os.access(probe, os.W_OK | os.X_OK):
        return f"{probe} is not writable"
    return None


class CsvSink:
    """Appends sample rows to samples.csv as they come, flushing each, so a crash keeps what was recorded."""

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


def _json_safe(value):
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_json_safe(v) for v in value]
    return value


def write_json(path: Path, data) -> None:
    """Write through a temporary file and rename, so a reader never sees half a file."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(_json_safe(data), indent=2, sort_keys=False) + "\n")
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


def read_samples(path: str | Path, notes: list[str] | None = None) -> list[dict]:
    """samples.csv as dicts: metric columns as floats (empty cells NaN), the rest as written.

    A torn last line (a crash mid-write) is skipped, with a note; a garbage row anywhere else is an
    error naming the file and line.
    """
    path = Path(path)
    with open(path, newline="") as f:
        text = f.read()
    torn = bool(text) and not text.endswith("\n")
    reader = csv.DictReader(text.splitlines())
    rows, lines = [], text.count("\n") + (1 if torn else 0)
    for raw in reader:
        try:
            rows.append(_sample(raw))
        except ValueError:
            if torn and reader.line_num == lines:
                if notes is not None:
                    notes.append(f"{path.name}: the last line was cut off mid-write and is skipped")
                continue
            raise RunDirError(f"{path} line {reader.line_num} is not a sample row") from None
    return rows


def read_summary(path: Path) -> list[dict]:
    with open(path, newline="") as f:
        reader = csv.DictReader(f)
        rows = []
        for raw in reader:
            if None in raw or None in raw.values():
                raise RunDirError(f"{path} line {reader.line_num} does not have the header's fields")
            rows.append({k: _value(v) for k, v in raw.items()})
    return rows


def load_run(run_dir: str | Path) -> tuple[dict, list[dict], list[dict]]:
    """(manifest, samples, summary) of a run directory, from its files alone."""
    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        raise RunDirError(f"{run_dir} is not a directory")
    missing = [n for n in ("manifest.json", "samples.csv") if not (run_dir / n).is_file()]
    if missing:
        raise RunDirError(f"{run_dir} is not a gpubench run directory: {', '.join(missing)} missing")
    try:
        manifest = json.loads((run_dir / "manifest.json").read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise RunDirError(f"{run_dir / 'manifest.json'} is not valid JSON ({err})") from None
    if not isinstance(manifest, dict):
        raise RunDirError(f"{run_dir / 'manifest.json'} does not hold a gpubench manifest")
    notes: list[str] = []
    samples = read_samples(run_dir / "samples.csv", notes)
    summary_path = run_dir / "summary.csv"
    summary = read_summary(summary_path) if summary_path.is_file() else []
    if not summary_path.is_file():
        notes.append("summary.csv is missing: the run ended before it was written")
    manifest.setdefault("read_notes", []).extend(notes)
    return manifest, samples, summary
