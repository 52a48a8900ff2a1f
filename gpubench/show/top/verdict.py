"""One word per GPU for what it is doing now, from one refresh's readings, and the numbers that decided it.

The rules are read top to bottom; the first that holds gives the word. Where a phase's verdict
(gpubench.read.phase_verdict) already draws a line, the threshold is read from its rule, so the live word and
the sentence under a watched job's phase never disagree. The rest are set here, each from the committed runs
(results/: the suite's ladder on an H100 and an H200, watched training jobs, the distributed scenarios):

IDLE_UTIL_PCT, 5: GPU-Util under it means no kernel ran for all but a sliver of NVML's window. An idle GPU
    reads 0; the lightest real work recorded, a tiny batch waiting on its host, still reads 14%.
HOST_BOUND_UTIL_PCT, 50 (phase rule host-bound): GPU-Util is the share of time any kernel ran, so under half
    the GPU waits on the host (data loading, Python, kernel launches) more than it works.
FAKE_BUSY_SM_PCT, 5: GPU-Util high while fewer than one SM in twenty holds a warp is a spin, a hang or a
    tiny collective waiting. A kernel spinning on one thread or one block keeps one SM of 132 busy (0.76%)
    and reads 100%; a copy from the host reads 100% with SM active 0; the least SM active of any job that
    did work at GPU-Util 50% or more is 27% (decode at batch 1 in a CUDA graph).
FAKE_BUSY_POWER_PCT, 30, with FAKE_BUSY_DRAM_PCT, 5, and FAKE_BUSY_TENSOR_PCT, 5: power under 30% of the limit
    while DRAM and the tensor pipes each stay under 5% of their cycles says the GPU mostly waits, whatever SM
    active reads. A collective waiting on a hung rank keeps 18% of the SMs spinning at 19% of a 700 W limit
    with no DRAM traffic; a rank whose all-reduce waits on a slow peer most of each step reads SM active 23%,
    25% of the limit, DRAM 3.1% and tensor 1.9% (its own few milliseconds of work a step); one warp spinning
    on every SM reads SM active 100% at 19-27%; an idle GPU draws 11-25%. The lightest real work recorded
    draws more (decode at batch 1 in a CUDA graph 37% of the limit with DRAM active 25%, a 1 GiB all-reduce
    45%). Without GPM (no DRAM or tensor reading) power alone decides, so a light job can read fake-busy there.
FEW_SMS_PCT, 50 (phase rule few-sms): SM active over GPU-Util, the share of the SMs busy while a kernel
    runs; under half, the kernels are too small to fill the GPU (small batches, small grids).
MEMORY_BOUND_DRAM_PCT, 50, and MEMORY_BOUND_TENSOR_PCT, 10 (phase rule memory-bound): the memory interface
    busy half the cycles or more while the tensor pipes barely run: the time goes to moving data.
COMPUTE_BOUND_PIPE_PCT, 50 (phase rule tensor-busy): a math pipe (tensor, or FP16, FP32, FP64 for math
    that runs without tensor cores) busy half the cycles or more: the arithmetic is the limit.

What none of them names reads `busy`: a training step splits its time between matrix math, memory traffic
and the rest (tensor and DRAM both under half), or GPM is missing and only GPU-Util and power are known.
"""

from __future__ import annotations

import math

from gpubench.metrics import finite, pct
from gpubench.read.phase_verdict import WHERE
from gpubench.read.rules import SHOWN, shown


def _phase(rule: str, column: str) -> float:
    """The threshold that a phase's verdict rule sets on a column."""
    return next(t for c, _, t in next(r for r in WHERE if r.name == rule).when if c == column)


IDLE_UTIL_PCT = 5.0
HOST_BOUND_UTIL_PCT = _phase("host-bound", "gpu_util_mean_pct")
FAKE_BUSY_SM_PCT = 5.0
FAKE_BUSY_POWER_PCT = 30.0
FAKE_BUSY_DRAM_PCT = 5.0
FAKE_BUSY_TENSOR_PCT = 5.0
FEW_SMS_PCT = _phase("few-sms", "sm_busy_pct")
MEMORY_BOUND_DRAM_PCT = _phase("memory-bound", "dram_active_pct")
MEMORY_BOUND_TENSOR_PCT = _phase("memory-bound", "tensor_active_pct")
COMPUTE_BOUND_PIPE_PCT = _phase("tensor-busy", "tensor_active_pct")

LABELS = {
    "gpu_util_pct": "GPU-Util",
    "sm_active_pct": "SM active",
    "power_pct": "power/limit",
    "dram_active_pct": "DRAM active",
    "tensor_active_pct": "tensor active",
    "sm_busy_pct": "SM active/GPU-Util",
    "fp16_active_pct": "FP16 active",
    "fp32_active_pct": "FP32 active",
    "fp64_active_pct": "FP64 active",
}
PIPES = ("tensor_active_pct", "fp16_active_pct", "fp32_active_pct", "fp64_active_pct")

# word -> (what it means, in a line for the help and the frame's legend; alternatives, each a tuple of
# (fact, op, threshold) that must all hold). ops: <, >=, and <|missing (below, or not read at all).
RULES: tuple[tuple[str, str, tuple], ...] = (
    ("idle", f"GPU-Util under {IDLE_UTIL_PCT:g}%: no kernel ran", ((("gpu_util_pct", "<", IDLE_UTIL_PCT),),)),
    (
        "host-bound",
        f"GPU-Util under {HOST_BOUND_UTIL_PCT:g}%: the GPU waits on the host (data loading, Python, "
        "kernel launches) more than it works",
        ((("gpu_util_pct", "<", HOST_BOUND_UTIL_PCT),),),
    ),
    (
        "fake-busy",
        f"GPU-Util high, yet SM active under {FAKE_BUSY_SM_PCT:g}%, or power under "
        f"{FAKE_BUSY_POWER_PCT:g}% of the limit with DRAM active under {FAKE_BUSY_DRAM_PCT:g}% and tensor active "
        f"under {FAKE_BUSY_TENSOR_PCT:g}%: "
        "next to nothing useful runs (a spin of one block, a hang, a collective waiting on another rank, "
        "a copy from the host)",
        (
            (("gpu_util_pct", ">=", HOST_BOUND_UTIL_PCT), ("sm_active_pct", "<", FAKE_BUSY_SM_PCT)),
            (
                ("gpu_util_pct", ">=", HOST_BOUND_UTIL_PCT),
                ("power_pct", "<", FAKE_BUSY_POWER_PCT),
                ("dram_active_pct", "<|missing", FAKE_BUSY_DRAM_PCT),
                ("tensor_active_pct", "<|missing", FAKE_BUSY_TENSOR_PCT),
            ),
        ),
    ),
    (
        "few-sms",
        f"busy, but its kernels keep under {FEW_SMS_PCT:g}% of the SMs working (small batches, small "
        "grids, tiny kernels back to back)",
        ((("sm_busy_pct", "<", FEW_SMS_PCT),),),
    ),
    (
        "memory-bound",
        f"DRAM active {MEMORY_BOUND_DRAM_PCT:g}% or more with tensor active under "
        f"{MEMORY_BOUND_TENSOR_PCT:g}%: the time goes to moving data",
        ((("dram_active_pct", ">=", MEMORY_BOUND_DRAM_PCT), ("tensor_active_pct", "<", MEMORY_BOUND_TENSOR_PCT)),),
    ),
    (
        "compute-bound",
        f"a math pipe (tensor, FP16, FP32 or FP64) busy {COMPUTE_BOUND_PIPE_PCT:g}% of the cycles "
        "or more: the arithmetic is the limit",
        tuple(((p, ">=", COMPUTE_BOUND_PIPE_PCT),) for p in PIPES),
    ),
    (
        "busy",
        "working, with no single limit (tensor and DRAM both under half), or without GPM to say on what",
        ((("gpu_util_pct", ">=", HOST_BOUND_UTIL_PCT),),),
    ),
)
UNKNOWN = ("unknown", "NVML gave no GPU-Util for this GPU")
MEANING = dict([(w, m) for w, m, _ in RULES] + [UNKNOWN])


def facts(values: dict, power_limit_w: float | None) -> dict:
    """The readings and what the rules compute from them: power as a share of the limit, SM active over GPU-Util."""
    out = dict(values)
    power, util, sm = values.get("power_w"), values.get("gpu_util_pct"), values.get("sm_active_pct")
    out["power_pct"] = (
        100 * power / power_limit_w if finite(power) and finite(power_limit_w) and power_limit_w > 0 else math.nan
    )
    out["sm_busy_pct"] = min(100.0, 100 * sm / util) if finite(sm) and finite(util) and util > 0 else math.nan
    return out


def _holds(value, op: str, threshold: float) -> bool:
    if op == "<|missing":
        return not finite(value) or value < threshold
    return finite(value) and (value < threshold if op == "<" else value >= threshold)


def _said(fact: str, value, op: str, threshold: float) -> str:
    """'SM active 0.76% < 5%', at the precision that shows the comparison (gpubench.read.rules.shown)."""
    if not finite(value):
        return f"{LABELS[fact]} not read"
    return f"{LABELS[fact]} {shown(value, op.split('|')[0], threshold)}% {SHOWN[op]} {threshold:g}%"


def verdict(values: dict, power_limit_w: float | None = None) -> tuple[str, str]:
    """(word, because): the first rule that holds for one GPU's readings, and its numbers in words."""
    f = facts(values, power_limit_w)
    if not finite(f.get("gpu_util_pct")):
        return UNKNOWN[0], "GPU-Util not read"
    for word, _, alternatives in RULES:
        for conditions in alternatives:
            if all(_holds(f.get(c), op, t) for c, op, t in conditions):
                if word == "busy":
                    return word, _busy(f)
                return word, ", ".join(_said(c, f.get(c), op, t) for c, op, t in conditions)
    return UNKNOWN  # unreachable: busy holds wherever GPU-Util is read and no rule before it does


def _busy(f: dict) -> str:
    if not finite(f.get("sm_active_pct")):
        return f"GPU-Util {pct(f['gpu_util_pct'])}; SM, tensor and DRAM activity not read (no GPM)"
    parts = [f"{LABELS[c]} {pct(f.get(c), '–')}" for c in ("tensor_active_pct", "dram_active_pct")]
    return f"{', '.join(parts)}: no single limit"


def thresholds() -> dict:
    """Every threshold by name, for the JSON document and the tests."""
    return {k: v for k, v in globals().items() if k.endswith("_PCT") and isinstance(v, (int, float))}
