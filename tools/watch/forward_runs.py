"""The runs of tools/watch/forward_jobs.sh read back for tools/watch/forward_tables.py: each job that steps no
optimizer, its committed run directory (results/forward-<job>-h200/) and the count it printed of itself in
its log, its compared row beside that count."""

from __future__ import annotations

import math
import re
from pathlib import Path

from gpubench.record.rundir import load_run
from tools.watch.auto_runs import row_of

ROOT = Path(__file__).resolve().parents[2]

GPU = "h200"
INFER = f"forward-jobs-{GPU}-infer-evals-wgan-jax.log"
# generate for 60 s: in 30 s its first call (12 s at batch 1, warm-up) left few calls to compare
GENERATE = f"forward-jobs-{GPU}-generate-60s.log"
# train_eval again once it printed its GPU-clock training rate as steps over their time (a mean, as a row's is)
EVALS = f"forward-jobs-{GPU}-evals.log"
U = "examples/unmodified"
# (name, what it is, the phase compared, the own rate in its own-count line and the clock it was timed on, log,
# the share of its printed FLOPs a step the compared rows' step does)
JOBS = [
    (
        "bert",
        f"BERT-base encoder, `torch.no_grad` (`{U}/bert_inference.py`)",
        "inference",
        r"; (\S+) forwards/s on the GPU clock",
        "GPU clock",
        INFER,
        1.0,
    ),
    (
        "vision",
        f"ResNet-50, `torch.inference_mode` (`{U}/vision_inference.py`)",
        "inference",
        r"; (\S+) forwards/s on the GPU clock",
        "GPU clock",
        INFER,
        1.0,
    ),
    (
        "generate-b1",
        f"`generate` with a KV cache, batch 1 (`{U}/generate_kv.py`)",
        "inference",
        r": (\S+) forwards/s",
        "GPU clock",
        GENERATE,
        1.0,
    ),
    (
        "generate-b32",
        f"`generate` with a KV cache, batch 32 (`{U}/generate_kv.py`)",
        "inference",
        r": (\S+) forwards/s",
        "GPU clock",
        GENERATE,
        1.0,
    ),
    # PaLM's forward is a third of its training step (2 of 6 per parameter, 4 of 12 for attention), and the
    # evaluation's batches are the training's: its own FLOPs a forward are the printed step's third
    (
        "train-eval",
        f"BERT-base training, its evaluation (`{U}/train_eval.py`)",
        "eval",
        r", (\S+) forwards/s on the GPU clock",
        "GPU clock",
        EVALS,
        1 / 3,
    ),
    (
        "train-eval",
        f"BERT-base training, its training (`{U}/train_eval.py`)",
        "train",
        r", (\S+) training steps/s on the GPU clock",
        "GPU clock",
        EVALS,
        1.0,
    ),
    (
        "wgan",
        f"WGAN, 5 critic steps a generator step (`{U}/wgan_critic.py`)",
        "train",
        r"; (\S+) steps/s on the GPU clock",
        "GPU clock",
        INFER,
        1.0,
    ),
    (
        "jax",
        f"JAX, a bf16 MLP (`{U}/jax_mlp.py`)",
        "train",
        r"; (\S+) steps/s on the host clock between waits",
        "host clock between waits",
        INFER,
        1.0,
    ),
]
OWN_FLOPS = re.compile(r"own count[^:]*: (\S+) FLOPs a")
OWN_BYTES = re.compile(r"; (\S+) decode steps/s; .*?; (\S+) bytes a decode step")


def run_dir(job: str) -> Path:
    return ROOT / "results" / f"forward-{job}-{GPU}"


def sections(log: Path) -> dict[str, str]:
    """The text under each `== NAME: command` line of a log, by NAME (the last section of a name)."""
    parts = re.split(r"^== ", log.read_text(errors="replace"), flags=re.M)[1:]
    return {head.split(":")[0]: body for head, _, body in (p.partition("\n") for p in parts)}


def own_count(job: str, rate: str, log: str, share: float) -> dict:
    """The job's own count from its log: its rate, FLOPs a step of the compared rows, bytes and decode steps."""
    text = next(
        line for line in sections(ROOT / "results" / "logs" / log)[job].splitlines() if line.startswith("own count")
    )
    out = {"rate": float(re.search(rate, text)[1]), "flops": math.nan, "bytes": math.nan, "decode": math.nan}
    if m := OWN_FLOPS.search(text):
        out["flops"] = share * float(m[1])
    if m := OWN_BYTES.search(text):
        out["decode"], out["bytes"] = float(m[1]), float(m[2])
    return out


def compare(job: str, phase: str, rate: str, clock: str, log: str, share: float) -> dict:
    """A job's compared row beside its own count: steps/s, MFU and MBU each way (the job's own over the peaks
    the run used, its manifest's), the tensor ceiling, and what a step was."""
    run = run_dir(job)
    manifest = load_run(run)[0]
    peaks = (manifest.get("peaks") or {}).get("datasheet") or {}
    row, own = row_of(run, phase), own_count(job, rate, log, share)
    source, pattern = row.get("steps_source"), row.get("steps_pattern")
    step = {"forward": "a forward call of the model", "jit": "a call of the jitted step function"}.get(
        source, f"one pattern of its optimizers ({pattern})" if isinstance(pattern, str) else "an optimizer step"
    )
    return {
        "job": job,
        "phase": phase,
        "clock": clock,
        "step": step,
        "rate": row.get("steps_per_s", math.nan),
        "own_rate": own["rate"],
        "mfu": row.get("mfu_pct", math.nan),
        "mbu": row.get("mbu_pct", math.nan),
        "own_mfu": 100 * own["flops"] * own["rate"] / peaks.get("bf16_tensor", math.nan),
        "own_mbu": 100 * own["bytes"] * own["decode"] / peaks.get("dram", math.nan),
        "ceiling": row.get("tensor_ceiling_pct", math.nan),
        "device": (manifest.get("gpu") or {}).get("name"),
    }


def compared() -> list[dict]:
    return [
        dict(compare(job, phase, rate, clock, log, share), what=what)
        for job, what, phase, rate, clock, log, share in JOBS
    ]
