"""The verdict on a phase: one table of rules that turns its ladder into a sentence a user can act on.

Two tables, each read top to bottom; in each, the first rule whose every condition holds gives its
sentence. WHERE says where the time goes (from the sampled metrics), WORK what it achieved (from the
FLOPs the job reported). A condition on a metric this run could not record is false, except `missing`.
Each sentence is printed with the numbers that triggered it, so every threshold is in plain view; the
README's table is this one.
"""

from __future__ import annotations

import operator
import re
from dataclasses import dataclass

from gpubench.metrics import BY_COLUMN, finite, fmt_value

OPS = {"<": operator.lt, ">=": operator.ge}
SHOWN = {"<": "<", ">=": "≥"}


@dataclass(frozen=True)
class Rule:
    name: str
    when: tuple[tuple[str, str, float | None], ...]  # (column, "<" | ">=" | "missing", threshold)
    says: str  # filled from the summary row: {mfu_pct}, {dtype}, ...

    def holds(self, row: dict) -> bool:
        for column, op, threshold in self.when:
            value = row.get(column)
            if op == "missing":
                if finite(value):
                    return False
            elif not (finite(value) and OPS[op](value, threshold)):
                return False
        return True

    def condition(self) -> str:
        """The rule's conditions in words, thresholds included: 'GPU-Util < 50%'."""
        return " and ".join(f"{_label(c)} not recorded" if op == "missing" else f"{_label(c)} {SHOWN[op]} {t:g}%"
                            for c, op, t in self.when)

    def because(self, row: dict) -> str:
        """The numbers that made it hold: 'GPU-Util 33% < 50%' ('' for a rule on missing values only)."""
        return ", ".join(f"{_label(c)} {fmt_value(c, row.get(c))} {SHOWN[op]} {t:g}%"
                         for c, op, t in self.when if op != "missing")


def _label(column: str) -> str:
    named = {"gpu_util_pct": "GPU-Util", "mfu_pct": "MFU", "steps_per_s": "steps/s"}
    return named.get(column) or BY_COLUMN[column].label


WHERE = (
    Rule("host-bound", (("gpu_util_pct", "<", 50),),
         "the GPU waits on the host more than half the time (data loading, Python, kernel launches): "
         "load data in background workers, overlap the copy with compute, launch fewer and larger kernels"),
    Rule("few-sms", (("sm_active_pct", "<", 50),),
         "the kernels keep few SMs busy (small batches, small grids, tiny kernels back to back): raise the "
         "batch, fuse kernels (torch.compile), or capture the step in a CUDA graph"),
    Rule("memory-bound", (("dram_active_pct", ">=", 50), ("tensor_active_pct", "<", 10)),
         "memory-bound: the time goes to moving data, not to matrix math; fuse elementwise kernels "
         "(torch.compile) and keep activations in bf16"),
    Rule("no-tensor-cores", (("tensor_active_pct", "<", 10),),
         "the SMs are busy but the tensor cores barely run: the matrix math runs without them (fp32) or the "
         "time goes to other kernels; use bf16 autocast, or at least TF32"),
    Rule("tensor-busy", (("tensor_active_pct", ">=", 50),),
         "the tensor cores are busy most of the time: the step is limited by matrix math, as it should be"),
    Rule("tensor-part", (("tensor_active_pct", ">=", 10),),
         "the tensor cores work part of the time; the rest goes to other kernels (attention, normalisation, "
         "elementwise, optimizer) and launch gaps: fuse them (torch.compile) or raise the batch"),
    Rule("util-only", (("sm_active_pct", "missing", None),),
         "GPU-Util only says that a kernel was running: SM and tensor activity (NVML GPM on Hopper, or DCGM) "
         "are needed to say how much of the GPU it used"),
    Rule("tensor-unknown", (("tensor_active_pct", "missing", None),),
         "the SMs are busy; without tensor activity (NVML GPM on Hopper, or DCGM) the ladder cannot say "
         "whether the matrix math runs on the tensor cores"),
)

WORK = (
    Rule("no-steps", (("steps_per_s", "missing", None),),
         "no steps were reported in this phase: call gpubench.step(flops=...) after each step for steps/s "
         "and MFU"),
    Rule("no-flops", (("tflops", "missing", None),),
         "steps without FLOPs, so no MFU: pass them to gpubench.step(flops=...) (gpubench.count_flops "
         "counts one step)"),
    Rule("no-peak", (("mfu_pct", "missing", None),),
         "{tflops:.3g} TFLOP/s achieved; no datasheet peak is known for this GPU, so no MFU"),
    Rule("mfu-low", (("mfu_pct", "<", 10),),
         "MFU {mfu_pct:.2g}%: under a tenth of the {dtype} peak does useful arithmetic"),
    Rule("mfu-mid", (("mfu_pct", "<", 35),),
         "MFU {mfu_pct:.2g}% of the {dtype} peak: typical of an eager PyTorch loop; torch.compile, larger "
         "batches and fewer waits on the host raise it"),
    Rule("mfu-high", (("mfu_pct", ">=", 35),),
         "MFU {mfu_pct:.2g}% of the {dtype} peak: as high as well-tuned large-model training reaches"),
)

TABLES = (("where the time goes", WHERE), ("what it achieved", WORK))


def first(rules, row: dict) -> Rule | None:
    return next((r for r in rules if r.holds(row)), None)


def verdict(row: dict, dtype: str) -> tuple[str, list[str]]:
    """The phase's verdict, each sentence with the numbers that triggered it, and the rules' names."""
    facts = dict(row, dtype=dtype)
    sentences, names = [], []
    for _, rules in TABLES:
        rule = first(rules, row)
        if rule is not None:
            text, because = rule.says.format(**facts), rule.because(row)
            sentences.append(f"{text[0].upper()}{text[1:]}" + (f" ({because})." if because else "."))
            names.append(rule.name)
    return " ".join(sentences), names


def markdown_table() -> str:
    """The rules as the README shows them."""
    lines = ["| table | rule | when | verdict |", "| --- | --- | --- | --- |"]
    for title, rules in TABLES:
        for r in rules:
            says = re.sub(r"\{(\w+)[^}]*\}", r"`\1`", r.says)
            lines.append(f"| {title} | `{r.name}` | {r.condition()} | {says} |")
    return "\n".join(lines)
