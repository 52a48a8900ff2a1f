"""The two-GPU parts of the README and of the site: the watched torchrun runs (the straggler named in the
user's own job, the GPUs a job used) and the distributed scenarios, each from its newest committed run
directory (tools/readme/tables.py puts them in place)."""

from __future__ import annotations

import json
from pathlib import Path

from gpubench.metrics import fmt_value, pct
from gpubench.record.rundir import load_run
from tools.readme.watch import _newest


def watch_ranks(results: Path) -> str:
    """The watched two-GPU runs: the straggler named in the user's own job, and the GPUs a job used."""

    def train(name):
        run = _newest(results, name)
        if run is None:
            return None, []
        manifest, _, summary = load_run(run)
        return run, [r for r in summary if r.get("phase") == "train"]

    out = []
    run, rows = train("ddp-slow-rank")
    if rows:
        slow = next(r for r in rows if "straggler" in r["verdict_rules"])
        wait = next(r for r in rows if "waits-on-rank" in r["verdict_rules"])
        out.append(
            f"- A data-parallel job with one rank's loader slowed ([run]({run.relative_to(results.parent)})): "
            f"both ranks stepped at {wait['steps_per_s']:.2f} steps/s; GPU {wait['gpu']} read "
            f"{pct(wait['gpu_util_mean_pct'])} busy and its verdict says it waits on rank "
            f"{slow['rank']} (`{wait['verdict_rules']}`), GPU {slow['gpu']} read "
            f"{pct(slow['gpu_util_mean_pct'])} and is named the straggler (`{slow['verdict_rules']}`)."
        )
    run, rows = train("ddp-even")
    if rows:
        out.append(
            f"- The same job with even ranks ([run]({run.relative_to(results.parent)})): "
            + ", ".join(f"GPU {r['gpu']} {pct(r['gpu_util_mean_pct'])} busy (`{r['verdict_rules']}`)" for r in rows)
            + "; nobody is named."
        )
    run, rows = train("one-gpu")
    run_all, rows_all = train("one-gpu-all-gpus")
    if rows and rows_all:
        manifest = json.loads((run / "manifest.json").read_text())
        idle = [g["nvml_index"] for g in manifest.get("gpus_idle") or []]
        out.append(
            f"- A one-GPU job on the two-GPU machine, no `CUDA_VISIBLE_DEVICES` "
            f"([run]({run.relative_to(results.parent)})): one row, GPU {rows[0]['gpu']}, and GPU "
            f"{', '.join(map(str, idle))} listed as idle; with `--all-gpus` "
            f"([run]({run_all.relative_to(results.parent)})) the idle GPU keeps its row with nothing "
            f"credited to it (`{next(r['verdict_rules'] for r in rows_all if r['gpu'] in idle)}`)."
        )
    run, rows = train("visible1")
    if rows:
        out.append(
            f"- `CUDA_VISIBLE_DEVICES=1 gpubench watch -- ...` ([run]({run.relative_to(results.parent)})): "
            f"the job's row is NVML GPU {rows[0]['gpu']}."
        )
    return ("\n".join(out) + "\n") if out else "(no watched multi-GPU run committed yet)\n"


def dist_list(results: Path) -> str:
    runs = sorted(results.glob("h200-x2-*/manifest.json"))
    if not runs:
        return "(no two-GPU run committed yet)\n"
    run = runs[-1].parent
    _, _, summary = load_run(run)
    by = {(r["scenario"], r["rank"]): r for r in summary}
    a, b, s0, s1 = (by[k] for k in [("allreduce-1gib", 0), ("allreduce-8kib", 0), ("straggler", 0), ("straggler", 1)])
    h0, h1 = by[("straggler-hang", 0)], by[("straggler-hang", 1)]
    u = lambda r, c="gpu_util_pct": fmt_value(c, r.get(c))  # noqa: E731
    w = lambda r: f"{r['power_w_energy']:.0f} W"  # noqa: E731
    return "\n".join(
        [
            f"On two H200s ([`{run.relative_to(results.parent)}`]({run.relative_to(results.parent)}), NVML: "
            f"{a['nvlink_links']:.0f} active NVLinks, {a['nvlink_gbps']:.0f} GB/s per direction in all):",
            "",
            f"- `allreduce-1gib`: {a['kernel_ms'] * 1e3:.0f} µs a call, busbw {a['busbw_gbps']:.0f} GB/s, "
            f"{pct(a['nvlink_pct'])} of the NVLinks' rate; GPU-Util {u(a)} while SM active read "
            f"{u(a, 'sm_active_pct')}.",
            f"- `allreduce-8kib`: {b['kernel_ms'] * 1e3:.1f} µs a call, busbw {b['busbw_gbps']:.2f} GB/s; GPU-Util "
            f"{u(b)} on rank 0 and {u(by[('allreduce-8kib', 1)])} on rank 1.",
            f"- `straggler`: rank 1 reached the all-reduce {s1['arrival_delay_ms']:.1f} ms after rank 0 (median), "
            f"and was named; rank 0 waited {s0['wait_ms']:.1f} ms a step and read {u(s0)} GPU-Util, "
            f"{u(s0, 'sm_active_pct')} SM active and {w(s0)}, while the straggler's own GPU read {u(s1)}. Both "
            f"ranks' steps took {s0['kernel_ms']:.2f} and {s1['kernel_ms']:.2f} ms: the step time cannot name it.",
            f"- `straggler-hang`: the waiting GPU read {u(h0)} GPU-Util at {w(h0)}, against {w(h1)} on the "
            f"sleeping rank's idle GPU: the hang signature.",
            "",
        ]
    )
