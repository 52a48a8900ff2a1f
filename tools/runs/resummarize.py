"""Summarize recorded runs again from their own files, with this code: after a change to how windows, phases
or ceilings are summarized, the committed summaries follow the code and the samples stay as recorded.

    python -m tools.runs.resummarize results/*/

A watch run (kind "watch") is summarized anew from its samples, marks and manifest, and the manifest's
account of the GPUs used and the sentences its report tells each row with are rewritten. A suite run (kind
"run") keeps what only the GPU could know (each scenario's timing and work model, its window; its unit as its
family reads it from the launch, kernels/decode.py's unit_of) and gets every number the samples give anew:
metrics over the window, energy, achievements, the tensor-pipe ceiling. What a run's files cannot give stays
as recorded or is not given: a watch whose manifest has no flop_count_version gets no HFU (its marks' hardware
count took causal attention's whole T x T); a suite row whose timed calls cover too little of its window to rate
it by the counters' seconds gives their time and no rate (gpubench.read.summary.uncovered).
Plot and report them afterwards. Anything else (no manifest, another kind) is left alone, said on one line.
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path

from gpubench.job.phases import STORY
from gpubench.job.watcher import resummarize
from gpubench.metrics import COLUMNS
from gpubench.read.energy import per_joule
from gpubench.read.summary import derive, summarize
from gpubench.record.rundir import load_run, write_json, write_summary
from gpubench.truth import ceiling

ROOT = Path(__file__).resolve().parents[2]

# the columns a suite run's summary computes from its samples; every other column is a fact of the run
COMPUTED = {
    "n_samples",
    "power_w_energy",
    "energy_used_j",
    "windows",
    "speedup_vs_baseline",
    "tflops",
    "gbps",
    "traffic_gbps",
    "link_gbps",
    "mfu_pct",
    "mfu_measured_pct",
    "mbu_pct",
    "mbu_measured_pct",
    "tokens_per_s",
    "link_pct",
    "algbw_gbps",
    "busbw_gbps",
    "nvlink_pct",
    "j_per_call",
    "gb_per_j",
    "tflop_per_kj",
    "tokens_per_j",
    "j_per_token",
    "rate_withheld",
    *ceiling.COLUMNS,
    *derive({}, {}),
    *per_joule({}),
}  # whatever today's summary derives, never carried over as a fact


# columns an earlier summary computed and today's does not: dropped, never carried as facts
OBSOLETE = {"flops_over_ceiling_pct"}  # the FLOPs over the tensor ceiling, now ran_over_ceiling


def _computed(key: str) -> bool:
    return key in COMPUTED or key in OBSOLETE or any(key in (c, f"{c}_p10", f"{c}_p90") for c in COLUMNS)


def facts_of(summary: list[dict]) -> list[dict]:
    """A suite summary's rows as the scenario loop handed them to the summary: the facts only, each row's unit the one
    its launch ran on where its family tells it from the launch (a decode's FMA tiles: CUDA cores, fp32)."""
    rows = [{k: (math.nan if v is None else v) for k, v in r.items() if not _computed(k)} for r in summary]
    for r in rows:
        unit_of = _unit_rule(r.get("family") or "")
        if unit_of is not None and r.get("unit"):
            r["unit"] = unit_of(r.get("impl") or "", r.get("launch") or "")
    return rows


def _unit_rule(family: str):
    """A kernel family's unit_of(impl, launch), where it has one: the unit a recorded launch ran on."""
    import importlib

    try:
        return getattr(importlib.import_module(f"gpubench.kernels.{family}"), "unit_of", None)
    except ImportError:
        return None


def suite(run: Path) -> list[dict]:
    manifest, samples, summary = load_run(run)
    if (run / "summary.json").is_file():  # every digit of the times and texts, where summary.csv rounds them
        summary = json.loads((run / "summary.json").read_text())
    facts = facts_of(summary)
    columns = manifest["columns"]
    if not manifest.get("distributed"):
        name = (manifest.get("gpu") or {}).get("name", "")
        hook = ceiling.for_suite(name, (manifest.get("peaks") or {}).get("datasheet"))
        return summarize(samples, facts, manifest["peaks"], columns, ceiling=hook)
    again = {}
    for entry in manifest["distributed"]["ranks"]:
        mine = [r for r in facts if r.get("rank") == entry["rank"]]
        if not mine:
            continue
        hook = ceiling.for_suite(entry["gpu"].get("name", ""), (entry.get("peaks") or {}).get("datasheet"))
        for r in summarize(samples.of("uuid", mine[0]["uuid"]), mine, entry["peaks"], columns, ceiling=hook):
            again[(r["scenario"], r["rank"])] = r
    return [again[(r["scenario"], r.get("rank"))] for r in facts]


def main(runs: list[str]) -> int:
    for run in map(Path, runs):
        path = run / "manifest.json"
        if not path.is_file():
            print(f"{run}: no manifest.json, left alone")
            continue
        manifest = json.loads(path.read_text())  # as written: rewritten with every field
        kind = manifest.get("kind")
        if kind == "watch":
            result = resummarize(run)
            write_summary(run, result.summary)
            sampled = manifest.get("gpus_sampled") or []
            manifest.update(
                gpus_used=result.used,  # and the phases, as the summary cut them now
                gpus_idle=[g for g in sampled if g["nvml_index"] not in result.used],
                phases=[{"name": p.name, "spans": p.spans} for p in result.phases],
            )
            manifest.setdefault("families", {})["watch"] = {"story": STORY}  # the report tells each row this way
            write_json(path, manifest)
            print(f"{run}: {len(result.summary)} rows")
        elif kind == "run":
            rows = suite(run)
            write_summary(run, rows)
            print(f"{run}: {len(rows)} rows")
        else:
            print(f"{run}: a run of kind {kind!r}, left alone")
    return 0


if __name__ == "__main__":
    parser = argparse.ArgumentParser(
        prog="python -m tools.runs.resummarize",
        description=__doc__.split("\n\n")[0],
        epilog="It rewrites each run's summary.csv and summary.json (and a watch's manifest.json) in place.",
    )
    parser.add_argument("runs", nargs="+", metavar="RUN", help="a run's folder, such as results/watch-llama-eager-h200")
    raise SystemExit(main(parser.parse_args().runs))
