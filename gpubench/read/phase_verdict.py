"""The verdict on a phase: tables of rules that turn its ladder into sentences a user can act on.

Each table is read top to bottom; in each, the first rule whose every condition holds gives its sentence.
WHERE says where the time goes (from the sampled metrics), IDLE how much of it the GPU sat idle (said
whatever else is said), WORK what the job achieved (from the FLOPs, bytes and tokens it reported). Each
sentence is printed with the numbers that made it hold, at the precision that shows why (MFU 9.94% < 10%
reads "9.9% < 10%", never "10% < 10%"); the README's table is this one. Conditions:

    <, >=, >   the value exists and compares so
    <|missing  the value is below the threshold or does not exist
    missing    the row has no value (no steps, no FLOPs, no peak)
    known      the row has a value (said in the sentence, not as evidence)
    unrecorded this run's metric sources did not record the column at all
    is         the row's text is the threshold's (where its FLOPs came from, gpubench.job.provenance)
"""

from __future__ import annotations

import re

from gpubench.metrics import finite, pct
from gpubench.read.rules import PERCENT, Rule

# a row's flops_source where gpubench counted its FLOPs: of one optimizer step, of one forward of each input shape,
# from XLA's cost analysis (gpubench.job.provenance.GPUBENCH_COUNTS)
COUNTED = ("one step counted", "forward counted", "xla cost")
# Why a row whose FLOPs gpubench counted itself gives no HFU over the ceiling: said in its verdict, and in its
# hfu_unknown where the row withholds that HFU (withheld() below)
WITHHELD = (
    "the count is gpubench's own, not the job's: gpubench's count or its calibrated ceiling is wrong for "
    "this job, or --dtype names another unit than the one that ran (FP32 work runs beside the tensor "
    "pipes; TF32 and FP8 at other rates); that HFU is not rated, and the tensor ceiling alone bounds what ran"
)
# The count a flops-above-ceiling sentence doubts, by where the row's FLOPs came from
DOUBTED = {
    "step()": "the FLOP count given to gpubench.step() by the job",
    "step() and one step counted": "a FLOP count (the job's own gpubench.step(), or gpubench's count of "
    "one step for its processes that reported none)",
}


WHERE = (
    Rule(
        "host-bound",
        (("gpu_util_mean_pct", "<", 50),),
        "the GPU waits on the host more than half the time (data loading, Python, kernel launches): load "
        "data in background workers, overlap the copy with compute, launch fewer and larger kernels "
        "(torch.compile, a CUDA graph)",
    ),
    Rule(
        "memory-bound-decode",
        (("mbu_pct", ">=", 50), ("mfu_pct", "<|missing", 10)),
        "limited by memory bandwidth, as decode at a small batch is: each step reads all the weights (and "
        "the KV cache) once, so batching more sequences raises tokens/s at almost the same step time, until "
        "the arithmetic catches up with the bytes",
    ),
    Rule(
        "few-sms",
        (("sm_busy_pct", "<", 50),),
        "while the GPU is busy its kernels keep few SMs busy (small batches, small grids, tiny kernels back "
        "to back): raise the batch, fuse kernels (torch.compile), or capture the step in a CUDA graph",
    ),
    Rule(
        "memory-bound",
        (("dram_active_pct", ">=", 50), ("tensor_active_pct", "<", 10)),
        "memory-bound: the time goes to moving data, not to matrix math; fuse elementwise kernels "
        "(torch.compile) and keep activations in bf16",
    ),
    Rule(
        "no-tensor-cores",
        (("tensor_active_pct", "<", 10),),
        "the SMs are busy but the tensor cores barely run: the matrix math runs without them (fp32) or the "
        "time goes to other kernels; use bf16 autocast, or at least TF32",
    ),
    Rule(
        "tensor-busy",
        (("tensor_active_pct", ">=", 50),),
        "the tensor cores are busy most of the time: the step is limited by matrix math, as it should be",
    ),
    Rule(
        "tensor-part",
        (("tensor_active_pct", ">=", 10),),
        "the tensor cores work part of the time; the rest goes to other kernels (attention, normalisation, "
        "elementwise, optimizer) and launch gaps: fuse them (torch.compile) or raise the batch",
    ),
    Rule(
        "util-only",
        (("sm_active_pct", "unrecorded", None),),
        "GPU-Util only says that a kernel was running: SM and tensor activity (NVML GPM on Hopper, or DCGM) "
        "are needed to say how much of the GPU it used",
    ),
    Rule(
        "tensor-unknown",
        (("tensor_active_pct", "unrecorded", None),),
        "the SMs are busy; without tensor activity (NVML GPM on Hopper, or DCGM) the ladder cannot say "
        "whether the matrix math runs on the tensor cores",
    ),
)

IDLE = (Rule("idle", (("gpu_util_mean_pct", "<", 90),), "the GPU sat idle {idle_pct:.0f}% of the time"),)

WORK = (
    # HFU over the limit: a FLOP count is wrong, or the pipes that ran are not the dtype's. Whose count is
    # doubted decides the sentence: gpubench's count of one step (the hook's C line) is gpubench's error,
    # never the user's; the job's own step(flops=...) may hold the user's (gpubench.job.provenance.FLOPS_FROM)
    Rule(
        "gpubench-count-above-ceiling",
        (("ran_over_ceiling", ">", 1), ("flops_source", "is", COUNTED)),
        "HFU {hfu_pct}% by gpubench's own count of one step is more than the tensor pipes could deliver in the "
        "time they were active ({tensor_ceiling_pct}% of the {dtype} peak, {tensor_ceiling_limit_pct}% with its "
        "calibration's error at the highest clocks read): " + WITHHELD,
    ),
    Rule(
        "flops-above-ceiling",
        (("ran_over_ceiling", ">", 1),),
        "HFU {hfu_pct}% is more than the tensor pipes could deliver in the time they were active "
        "({tensor_ceiling_pct}% "
        "of the {dtype} peak, {tensor_ceiling_limit_pct}% with its calibration's error at the highest clocks read): "
        "{doubted} is too large "
        "(the global batch counted on one rank, a step counted twice) or --dtype names another unit than the one that "
        "ran (FP32 work runs beside the tensor pipes; TF32 and FP8 at other rates); no rating",
    ),
    Rule(
        "flops-unusable",
        (("flops_bad", ">", 0), ("tflops", "missing", None)),
        "the FLOPs given to gpubench.step() were not numbers of 0 or more, so no MFU: pass a number "
        "(gpubench.count_flops counts one step)",
    ),
    Rule(
        "hfu-only",
        (("mfu_pct", "missing", None), ("hfu_pct", "known", None)),
        "HFU {hfu_pct}% of the {dtype} peak: every FLOP that ran, recomputation included; these steps carry no "
        "model count (their marks were written before gpubench counted it apart), so no MFU",
    ),
    # the counters bound what ran, with no FLOP count at all (gpubench.truth.ceiling)
    Rule(
        "tensor-ceiling",
        (("tflops", "missing", None), ("mbu_pct", "missing", None), ("tensor_ceiling_pct", "known", None)),
        "{no_count}: at most {tensor_ceiling_pct}% of the {tensor_ceiling_dtype} peak ran on the tensor pipes, the "
        "FLOPs they could deliver in the time they were active (tensor active × SM clock), which bounds MFU",
    ),
    Rule(
        "no-steps",
        (("steps_reported", "<", 1),),
        "no steps were reported in this phase: call gpubench.step(flops=...) after each step for steps/s and MFU",
    ),
    Rule(
        "one-step",
        (("steps_per_s", "missing", None),),
        "steps were reported, but fewer than two in a window after its first half second, so no rate: a "
        "phase needs two steps or more to be measured",
    ),
    Rule(
        "no-flops",
        (("tflops", "missing", None), ("mbu_pct", "missing", None)),
        "steps without FLOPs or bytes, so no MFU or MBU: pass them to gpubench.step(flops=..., bytes=...) "
        "(gpubench.count_flops counts one step's FLOPs)",
    ),
    Rule(
        "no-peak",
        (("mfu_pct", "missing", None), ("mbu_pct", "missing", None)),
        "{tflops:.3g} TFLOP/s achieved; no datasheet peak is known for this GPU, so no MFU",
    ),
    Rule(
        "mfu-impossible",
        (("mfu_pct", ">", 100),),
        "an MFU above 100% of the {dtype} peak cannot be: the FLOP count is too large, or --dtype names a "
        "slower unit than the one that ran (tf32, fp8); no rating",
    ),
    Rule(
        "mbu-impossible",
        (("mbu_pct", ">", 100),),
        "an MBU above 100% of the datasheet bandwidth cannot be: the bytes given to gpubench.step() are "
        "more than the step moves; no rating",
    ),
    Rule(
        "mbu-high",
        (("mbu_pct", ">=", 50), ("mfu_pct", "<|missing", 10)),
        "MBU {mbu_pct}% of the datasheet bandwidth: the yardstick of a memory-bound step, where MFU says "
        "only that arithmetic is not the limit",
    ),
    Rule(
        "mbu-low",
        (("mbu_pct", "<", 50), ("mfu_pct", "<|missing", 10), ("gpu_util_mean_pct", "<", 90)),
        "neither memory bandwidth nor arithmetic limits this step (MBU {mbu_pct}%): the host and kernel "
        "launches do; a CUDA graph, torch.compile or a larger batch raise tokens/s",
    ),
    # busy all the time yet far from the bandwidth: the kernels, not the host, are the limit (a CUDA graph
    # at batch 1 whose attention reads the cache with one block per head)
    Rule(
        "mbu-low-kernels",
        (("mbu_pct", "<", 50), ("mfu_pct", "<|missing", 10)),
        "the GPU is busy but its kernels use little of the memory bandwidth (MBU {mbu_pct}%): kernels too "
        "small to fill the GPU, in series (attention over one query a sequence, small matrix products); a "
        "larger batch, fused kernels, or attention that splits the cache across the SMs raise tokens/s",
    ),
    Rule(
        "mfu-low", (("mfu_pct", "<", 10),), "MFU {mfu_pct}%: under a tenth of the {dtype} peak does useful arithmetic"
    ),
    Rule(
        "mfu-mid",
        (("mfu_pct", "<", 35),),
        "MFU {mfu_pct}% of the {dtype} peak: typical of an eager PyTorch loop; torch.compile, larger "
        "batches and fewer waits on the host raise it",
    ),
    Rule(
        "mfu-high",
        (("mfu_pct", ">=", 35),),
        "MFU {mfu_pct}% of the {dtype} peak: as high as well-tuned large-model training reaches",
    ),
)

TABLES = (("where the time goes", WHERE), ("how much it idled", IDLE), ("what it achieved", WORK))


def first(rules, row: dict, recorded) -> Rule | None:
    return next((r for r in rules if r.holds(row, recorded)), None)


def _fill(rule: Rule, facts: dict) -> str:
    """The sentence's fields: percentages as the rule's conditions show them, others by their own format."""

    def one(m):
        key, spec = m.group(1), m.group(2) or ""
        value = facts.get(key)
        if PERCENT.search(key) and finite(value):
            return rule.as_shown(key, value)
        return format(value, spec.lstrip(":")) if spec and finite(value) else str(value)

    return re.sub(r"\{(\w+)(:[^}]*)?\}", one, rule.says)


def verdict(row: dict, dtype: str, recorded=frozenset(), where: tuple[str, str] | None = None) -> tuple[str, list[str]]:
    """The phase's verdict, each sentence with the numbers that triggered it, and the rules' names. `where`
    (rule name, sentence) speaks for the WHERE table where more than one GPU's numbers decide (a straggler)."""
    busy = row.get("gpu_util_mean_pct")
    facts = dict(
        row,
        dtype=dtype,
        idle_pct=100 - busy if finite(busy) else None,
        no_count=_no_count(row),
        doubted=DOUBTED.get(row.get("flops_source"), "the FLOP count"),
    )
    sentences, names = [], []
    for _, rules in TABLES:
        if rules is WHERE and where is not None:
            names.append(where[0])
            sentences.append(where[1])
            continue
        rule = first(rules, facts, recorded)
        if rule is not None:
            text, because = _fill(rule, facts), rule.because(facts)
            sentences.append(f"{text[0].upper()}{text[1:]}" + (f" ({because})." if because else "."))
            names.append(rule.name)
    return " ".join(sentences), names


def withheld(row: dict, names: list[str]) -> dict:
    """The columns a row replaces once its verdict finds gpubench's own count over the ceiling: no HFU, and
    why (`names`, the verdict's rules). Empty for any other verdict: a job's own count keeps its HFU, doubted."""
    if "gpubench-count-above-ceiling" not in names:
        return {}
    return {
        "hfu_pct": float("nan"),
        "hfu_unknown": f"{WITHHELD} (HFU {pct(row.get('hfu_pct')).rstrip('%')}% over the tensor ceiling's limit "
        f"{pct(row.get('tensor_ceiling_limit_pct')).rstrip('%')}%)",
    }


def _no_count(row: dict) -> str:
    """Why a row has no MFU, in words, for the sentence that gives the tensor ceiling instead."""
    if not finite(row.get("steps_reported")) or row["steps_reported"] < 1:
        return "no steps were reported in this phase"
    if not finite(row.get("steps_per_s")):
        return "fewer than two steps lie in its window, so no rate"
    if isinstance(row.get("hfu_unknown"), str) and row["hfu_unknown"]:
        return (
            "its steps carry no model FLOP count, and a hardware count from before gpubench.count_flops "
            "counted what the kernels run"
        )
    return "its steps gave no FLOPs or bytes"


def markdown_table() -> str:
    """The rules as the README shows them."""
    lines = ["| table | rule | when | verdict |", "| --- | --- | --- | --- |"]
    for title, rules in TABLES:
        for r in rules:
            says = re.sub(r"\{(\w+)[^}]*\}", r"`\1`", r.says)
            lines.append(f"| {title} | `{r.name}` | {r.condition()} | {says} |")
    return "\n".join(lines)
