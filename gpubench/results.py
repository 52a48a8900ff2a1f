"""Run directories: manifest.json, samples.csv (streamed as recorded), summary.csv and summary.json."""

from __future__ import annotations

import csv
import json
import math
import os
import re
import time
from pathlib import Path

from gpubench.sources.replay import read_samples

SAMPLE_KEYS = ("t_mono_s", "t_wall", "gpu", "phase")


def slug(gpu_name: str) -> str:
    """'NVIDIA H100 80GB HBM3' -> 'h100-80gb-hbm3'."""
    name = re.sub(r"^nvidia\s+", "", gpu_name.strip(), flags=re.I)
    return re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-") or "gpu"


def default_run_dir(gpu_name: str, root: str | Path = "results") -> Path:
    return Path(root) / f"{slug(gpu_name)}-{time.strftime('%Y%m%d-%H%M%S')}"


def check_writable(path: Path) -> str | None:
    """None if a run directory can be made at path, else why not (one sentence)."""
    probe = path
    while not probe.exists():
        if probe.parent == probe:
            break
        probe = probe.parent
    if path.exists() and not path.is_dir():
        return f"{path} exists and is not a directory"
    if path.is_dir() and any(path.iterdir()):
        return f"{path} already holds files; choose an empty or new directory"
    if not os.access(probe, os.W_OK | os.X_OK):
        return f"{probe} is not writable"
    return None


class CsvSink:
    """Appends sample rows to samples.csv as they come, flushing each, so a crash keeps what was recorded."""

    def __init__(self, path: Path, columns):
        self.path = path
        self.fields = list(SAMPLE_KEYS) + list(columns)
        self._f = open(path, "w", newline="")
        self._w = csv.DictWriter(self._f, fieldnames=self.fields, extrasaction="ignore")
        self._w.writeheader()
        self._f.flush()

    def __call__(self, row: dict) -> None:
        if self._f.closed:
            return
        self._w.writerow({k: _cell(v, k) for k, v in row.items()})
        self._f.flush()

    def close(self) -> None:
        if not self._f.closed:
            self._f.close()


TIME_KEYS = frozenset({"t_mono_s", "t_wall", "t_start", "t_end"})


def _cell(value, key: str = ""):
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
    tmp = path.with_suffix(path.suffix + ".tmp")
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
            w.writerow({k: _cell(v, k) for k, v in row.items()})
    tmp.replace(run_dir / "summary.csv")
    write_json(run_dir / "summary.json", summary)


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


class RunDirError(ValueError):
    pass


def load_run(run_dir: str | Path) -> tuple[dict, list[dict], list[dict]]:
    """(manifest, samples, summary) of a run directory, from its files alone."""
    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        raise RunDirError(f"{run_dir} is not a directory")
    missing = [n for n in ("manifest.json", "samples.csv", "summary.csv") if not (run_dir / n).is_file()]
    if missing:
        raise RunDirError(f"{run_dir} is not a gpubench run directory: {', '.join(missing)} missing")
    manifest = json.loads((run_dir / "manifest.json").read_text())
    samples = read_samples(run_dir / "samples.csv")
    with open(run_dir / "summary.csv", newline="") as f:
        summary = [{k: _value(v) for k, v in row.items()} for row in csv.DictReader(f)]
    return manifest, samples, summary
