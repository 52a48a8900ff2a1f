"""What scripts/watch_auto.py measured, read back from its committed run directories: the examples watched
with and without their own gpubench calls, the optimizer hook's cost, and the README table of jobs watched
with no code change (scripts/readme_tables.py writes it into README.md; scripts/watch_auto.py prints it).

A run directory is results/watch-auto-<job>-<arm>-<i>-<gpu>/: arm `own` is an example making its own
gpubench calls, `auto` a job with none (an example under --no-gpubench, or a job of examples/unmodified/),
`off` the same watched with --no-auto. job.log beside the run holds what the job printed: the examples'
median step time on the host clock, and the unmodified jobs' own count ("own count: F FLOPs a step ...;
R steps/s ...").
"""

from __future__ import annotations

import math
import re
import statistics
from pathlib import Path

from gpubench.metrics import pct
from gpubench.record.rundir import load_run

NAME = re.compile(r"watch-auto-(?P<job>[a-z0-9]+)-(?P<arm>own|auto|off)-(?P<i>\d+)-(?P<gpu>.+)")
# job, what it is, the phase whose row is compared (None: no optimizer step, its busiest phase)
JOBS = [("gpt", "GPT-2 small, eager (`examples/train_gpt.py`)", "train"),
        ("llama", "Llama-style, eager (`examples/train_llama.py`)", "train"),
        ("hftrainer", "Hugging Face `Trainer`, Llama-style (`examples/unmodified/hf_trainer.py`)", "train"),
        ("lightning", "Lightning, GPT-2 small (`examples/unmodified/lightning_gpt.py`)", "train"),
        ("resnet50", "ResNet-50, torchvision (`examples/unmodified/resnet50.py`)", "train"),
        ("jax", "JAX, a bf16 MLP (`examples/unmodified/jax_mlp.py`)", None),
        ("decode", "decode, batch 1, eager (`examples/decode_llm.py`)", None)]
OWN_PHASE = {"gpt": "train", "llama": "train", "decode": "decode"}  # the examples' own marks
OWN_COUNT = re.compile(r"own count: (\S+) FLOPs a step .*?; (\S+) steps/s")
MEDIAN_STEP = re.compile(r"median step (\S+) ms")
CEILING = "tensor_ceiling_pct"
GPUS = {"h100-80gb-hbm3": "an H100", "h200": "an H200"}


def runs(results: Path) -> dict:
    """{gpu: {job: {arm: [run directories, in order]}}}."""
    out: dict = {}
    for path in sorted(results.glob("watch-auto-*")):
        m = NAME.fullmatch(path.name)
        if m and (path / "manifest.json").is_file():
            out.setdefault(m["gpu"], {}).setdefault(m["job"], {}).setdefault(m["arm"], []).append(path)
    for jobs in out.values():
        for arms in jobs.values():
            for arm, paths in arms.items():
                arms[arm] = sorted(paths, key=lambda p: int(NAME.fullmatch(p.name)["i"]))
    return out


def row_of(run: Path, phase: str | None) -> dict:
    """The summary row a comparison reads: the phase's, or the longest phase where none is named."""
    _, _, summary = load_run(run)
    phases = [r for r in summary if r.get("kind") == "phase"]
    if phase is not None:
        return next((r for r in phases if r.get("phase") == phase), {})
    return max(phases, key=lambda r: r.get("seconds") or 0.0, default={})


def log_of(run: Path) -> str:
    path = run / "job.log"
    return path.read_text(errors="replace") if path.is_file() else ""


def median(values) -> float:
    values = [v for v in values if isinstance(v, (int, float)) and math.isfinite(v)]
    return statistics.median(values) if values else math.nan


def spread(values) -> float:
    """max - min over the median, in %."""
    values = [v for v in values if isinstance(v, (int, float)) and math.isfinite(v)]
    return 100 * (max(values) - min(values)) / statistics.median(values) if len(values) > 1 else math.nan


def own_mfu(job: str, arms: dict, phase: str | None) -> float:
    """MFU from the job's own count: an example's own gpubench.step() (its `own` runs), else what the job
    printed (its FLOPs a step at its steady rate) over the datasheet peak."""
    if job in OWN_PHASE:
        return median(row_of(r, OWN_PHASE[job]).get("mfu_pct") for r in arms.get("own", []))
    found = []
    for run in arms.get("auto", []):
        m = OWN_COUNT.search(log_of(run))
        manifest, _, _ = load_run(run)
        peak = ((manifest.get("peaks") or {}).get("datasheet") or {}).get("bf16_tensor")
        if m and peak:
            found.append(100 * float(m[1]) * float(m[2]) / peak)
    return median(found)


def compare(arms: dict, phase: str) -> dict:
    """The examples' `own` and `auto` runs side by side: steps/s and MFU of the phase, each run, and the
    ratio of the medians; the FLOPs of a step each way."""
    own = [row_of(r, phase) for r in arms.get("own", [])]
    auto = [row_of(r, phase) for r in arms.get("auto", [])]
    out = {"pairs": min(len(own), len(auto))}
    for key in ("steps_per_s", "mfu_pct", "flops_per_step"):
        a, b = [r.get(key, math.nan) for r in own], [r.get(key, math.nan) for r in auto]
        out[key] = {"own": a, "auto": b, "ratio": median(b) / median(a) if median(a) else math.nan,
                    "spread_own_pct": spread(a), "spread_auto_pct": spread(b)}
    return out


def hook_cost(arms: dict) -> dict:
    """The median step on the host clock with the hook (auto) and with --no-auto (off): the counted step, one
    of hundreds, moves a median little."""
    step = {arm: [float(m[1]) for r in arms.get(arm, []) if (m := MEDIAN_STEP.search(log_of(r)))]
            for arm in ("auto", "off")}
    on, off = median(step["auto"]), median(step["off"])
    return {"auto_ms": step["auto"], "off_ms": step["off"], "cost_pct": 100 * (on / off - 1) if off else math.nan,
            "spread_pct": spread(step["auto"] + step["off"])}


def table(results: Path) -> str:
    """The README's table: for each job, MFU from its own count, MFU with no code change (gpubench's count
    of one step at the optimizer's steps/s), the tensor ceiling, and the first over the last."""
    found = runs(results)
    if not found:
        return ("(no run committed yet: `python3 scripts/watch_auto.py` on a GPU records them, and "
                "`python scripts/readme_tables.py` writes them here)\n")
    out = []
    for gpu, jobs in sorted(found.items()):
        out += [f"On {GPUS.get(gpu, gpu)} ([log](results/logs/watch-auto-{gpu}.log)):", "",
                "| job | MFU from its own count | MFU with no code change | tensor ceiling | own MFU ÷ ceiling |",
                "| --- | --- | --- | --- | --- |"]
        for job, what, phase in JOBS:
            arms = jobs.get(job)
            if not arms or not arms.get("auto"):
                continue
            own = own_mfu(job, arms, phase)
            rows = [row_of(r, phase) for r in arms["auto"]]
            auto = median(r.get("mfu_pct") for r in rows)
            ceiling = median(r.get(CEILING) for r in rows)
            ratio = f"{own / ceiling:.2f}" if math.isfinite(own) and math.isfinite(ceiling) and ceiling else "–"
            out.append(f"| {what} | {_pct(own)} | {_pct(auto)} | {_pct(ceiling)} | {ratio} |")
        lines = _findings(jobs)
        if lines:
            out += [""] + lines
        out.append("")
    return "\n".join(out)


def _findings(jobs: dict) -> list[str]:
    said = []
    for job in ("gpt", "llama"):
        arms = jobs.get(job) or {}
        if arms.get("own") and arms.get("auto"):
            c = compare(arms, "train")
            said.append(f"- `{job}`: with no code change against its own calls, {c['pairs']} interleaved pairs: "
                        f"steps/s {_ratio(c['steps_per_s'])}, MFU {_ratio(c['mfu_pct'])}, FLOPs a step "
                        f"{_ratio(c['flops_per_step'])}.")
    gpt = jobs.get("gpt") or {}
    if gpt.get("auto") and gpt.get("off"):
        cost = hook_cost(gpt)
        said.append(f"- The hook's cost on the healthy GPT (median step on the host clock, hook on against "
                    f"`--no-auto`, {len(cost['auto_ms'])} and {len(cost['off_ms'])} interleaved runs): "
                    f"{cost['cost_pct']:+.2f}%" + (f" (the runs spread over {cost['spread_pct']:.1f}%)."
                                                   if math.isfinite(cost["spread_pct"]) else "."))
    return said


def _ratio(c: dict) -> str:
    if not math.isfinite(c["ratio"]):
        return "not measured"
    spreads = [f"{c[k]:.1f}% {w}" for k, w in (("spread_own_pct", "with its calls"), ("spread_auto_pct", "without"))
               if math.isfinite(c[k])]
    return f"{100 * (c['ratio'] - 1):+.2f}%" + (f" (runs spread {', '.join(spreads)})" if spreads else "")


def _pct(v) -> str:
    return pct(v) if isinstance(v, (int, float)) and math.isfinite(v) else "–"
