"""What tools/watch/auto.py left, read back from its committed run directories: the runs of each job and arm,
each run's compared row, the jobs' own counts of their FLOPs and steps, the examples with their own calls beside
without, the optimizer hook's cost and the slow stretches of a job's steps (tools/watch/auto_tables.py makes the
tables of them).

A run directory is results/watch-auto-<job>-<arm>-<i>-<gpu>/: arm `own` is an example making its own
gpubench calls, `auto` a job with none (an example under --no-gpubench, or a job of examples/unmodified/),
`off` the same watched with --no-auto; <i> tells runs of one job and arm apart. job.log beside the run holds
what the job printed: the examples' median step time on the host clock, and the unmodified jobs' own count
("own count: F FLOPs a step ...; R steps/s ..."). Logs of the invocations: results/logs/watch-auto*-<gpu>.log.
"""

from __future__ import annotations

import importlib.util
import math
import re
import statistics
from pathlib import Path

from gpubench.job.markfile import read_all
from gpubench.job.markreader import Mark, Steps
from gpubench.record.rundir import load_run

ROOT = Path(__file__).resolve().parents[2]
NAME = re.compile(r"watch-auto-(?P<job>[a-z0-9]+)-(?P<arm>own|auto|off)-(?P<i>\d+)-(?P<gpu>.+)")
# job, what it is, the phase whose row is compared (None: no optimizer step, its busiest phase)
JOBS = [
    ("gpt", "GPT-2 small, eager (`examples/train_gpt.py`)", "train"),
    ("llama", "Llama-style, eager (`examples/train_llama.py`)", "train"),
    ("hftrainer", "Hugging Face `Trainer`, Llama-style (`examples/unmodified/hf_trainer.py`)", "train"),
    ("lightning", "Lightning, GPT-2 small (`examples/unmodified/lightning_gpt.py`)", "train"),
    ("resnet50", "ResNet-50, torchvision (`examples/unmodified/resnet50.py`)", "train"),
    ("jax", "JAX, a bf16 MLP (`examples/unmodified/jax_mlp.py`)", None),
    ("decode", "decode, batch 1, eager (`examples/decode_llm.py`)", None),
]
OWN_PHASE = {"gpt": "train", "llama": "train", "decode": "decode"}  # the examples' own marks
OWN_COUNT = re.compile(r"own count: (\S+) FLOPs a step (.*?); (\S+) steps/s")
MEDIAN_STEP = re.compile(r"median step (\S+) ms")
CEILING = "tensor_ceiling_pct"
TARGET = {"steps_per_s": 1.0, "mfu_pct": 2.0, "hook": 1.0}  # with no code change against the job's own calls
SLOW = 1.05  # a line of steps this much slower than the run's median step is a slow stretch


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
    """The summary row a comparison reads: the phase's, or where none is named the busiest (the most seconds
    of its GPU busy: a job's work, not its compilation nor an idle wait)."""
    _, _, summary = load_run(run)
    phases = [r for r in summary if r.get("kind") == "phase"]
    if phase is not None:
        return next((r for r in phases if r.get("phase") == phase), {})
    return max(phases, key=lambda r: (r.get("seconds") or 0.0) * _or0(r.get("gpu_util_mean_pct")), default={})


def log_of(run: Path) -> str:
    path = run / "job.log"
    return path.read_text(errors="replace") if path.is_file() else ""


def median(values) -> float:
    return statistics.median(kept) if (kept := [v for v in values if _finite(v)]) else math.nan


def spread(values) -> float:
    """max - min over the median, in %."""
    values = [v for v in values if _finite(v)]
    return 100 * (max(values) - min(values)) / statistics.median(values) if len(values) > 1 else math.nan


def _script(path: Path):
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _jax_flops(argv: list[str]) -> float:
    """The JAX job's matrix products a step at the sizes it ran with (its command, in the manifest)."""
    job = _script(ROOT / "examples" / "unmodified" / "jax_mlp.py")
    at = next(k for k, a in enumerate(argv) if a.endswith("jax_mlp.py"))
    return job.step_flops(job.parse(argv[at + 1 :]))


# A job whose printed count is known wrong is counted here from its command instead: XLA's cost analysis,
# which the JAX job printed in the runs recorded before it counted its products, leaves them out on a GPU.
RECOUNT = {"jax": _jax_flops}


def own_count(job: str, run: Path) -> dict | None:
    """What an unmodified job printed of its own count: FLOPs a step, its steady rate, and how it counted;
    the FLOPs recounted where RECOUNT knows the printed count is wrong."""
    m = OWN_COUNT.search(log_of(run))
    if not m:
        return None
    out = {"flops": float(m[1]), "printed": float(m[1]), "how": m[2], "rate": float(m[3])}
    if job in RECOUNT:
        manifest, _, _ = load_run(run)
        out["flops"] = RECOUNT[job]([str(a) for a in manifest.get("command") or []])
    return out


def own_mfu(job: str, arms: dict, phase: str | None) -> float:
    """MFU from the job's own count: an example's own gpubench.step() (its `own` runs), else what the job
    printed (its FLOPs a step at its steady rate) over the datasheet peak."""
    if job in OWN_PHASE:
        return median(row_of(r, OWN_PHASE[job]).get("mfu_pct") for r in arms.get("own", []))
    found = []
    for run in arms.get("auto", []):
        count = own_count(job, run)
        manifest, _, _ = load_run(run)
        peak = ((manifest.get("peaks") or {}).get("datasheet") or {}).get("bf16_tensor")
        if count and peak:
            found.append(100 * count["flops"] * count["rate"] / peak)
    return median(found)


def compare(arms: dict, phase: str) -> dict:
    """The examples' `own` and `auto` runs side by side: steps/s and MFU of the phase, each run, and the
    ratio of the medians; the FLOPs of a step each way."""
    own = [row_of(r, phase) for r in arms.get("own", [])]
    auto = [row_of(r, phase) for r in arms.get("auto", [])]
    out = {"pairs": min(len(own), len(auto))}
    for key in ("steps_per_s", "mfu_pct", "flops_per_step", "sm_clock_mhz"):
        a, b = [r.get(key, math.nan) for r in own], [r.get(key, math.nan) for r in auto]
        out[key] = {
            "own": a,
            "auto": b,
            "ratio": median(b) / median(a) if median(a) else math.nan,
            "spread_own_pct": spread(a),
            "spread_auto_pct": spread(b),
        }
    return out


def hook_cost(arms: dict) -> dict:
    """The median step on the host clock with the hook (auto) and with --no-auto (off): the counted step, one
    of hundreds, moves a median little. Only the rounds that ran both: an `auto` run of a round without `off`
    was interleaved with other runs."""
    rounds = {NAME.fullmatch(r.name)["i"] for r in arms.get("off", [])}
    step = {
        arm: [
            float(m[1])
            for r in arms.get(arm, [])
            if NAME.fullmatch(r.name)["i"] in rounds and (m := MEDIAN_STEP.search(log_of(r)))
        ]
        for arm in ("auto", "off")
    }
    on, off = median(step["auto"]), median(step["off"])
    return {
        "auto_ms": step["auto"],
        "off_ms": step["off"],
        "cost_pct": 100 * (on / off - 1) if off else math.nan,
        "spread_pct": spread(step["auto"] + step["off"]),
    }


def loop(run: Path) -> dict:
    """A train loop as the GPU stamped it, whatever window a row takes (after the `train` mark to the next mark,
    or after the counted step): its rate, median step, share of steps in marks-file lines SLOW times slower
    than that, and the mean time by which the host's step came before the GPU reached it."""
    events = read_all(run / "marks.tsv") if (run / "marks.tsv").is_file() else []
    steps = sorted((e for e in events if isinstance(e, Steps)), key=lambda e: e.t_first)
    marks = sorted((e.t, e.name) for e in events if isinstance(e, Mark))
    start = next((t for t, name in marks if name == "train"), None)
    if start is not None:
        end = next((t for t, _ in marks if t > start), math.inf)
        steps = [e for e in steps if start <= e.t_first and e.t_last <= end]
    else:
        counted = [k for k, e in enumerate(steps) if e.origin == "counted"]
        steps = steps[counted[0] + 1 :] if counted else steps
    gaps = [(b.t_first - a.t_last, 1) for a, b in zip(steps, steps[1:])]
    gaps += [((e.t_last - e.t_first) / (e.n - 1), e.n - 1) for e in steps if e.n > 1]
    if len(gaps) < 2:
        return {}
    step = statistics.median(g for g, n in gaps for _ in range(n))
    n = sum(e.n for e in steps)
    return {
        "rate": (n - 1) / (steps[-1].t_last - steps[0].t_first),
        "step_ms": 1e3 * step,
        "slow_share": sum(k for g, k in gaps if g > SLOW * step) / sum(k for _, k in gaps),
        "lead_ms": 1e3 * sum(e.lead_s * e.n for e in steps) / n,
    }


def _finite(v) -> bool:
    return isinstance(v, (int, float)) and math.isfinite(v)


def _or0(v) -> float:
    return v if _finite(v) else 0.0
