"""The suite as data: each scenario is one line naming a kernel family, an implementation, the sizes that
differ from the family's defaults, and the one sentence it demonstrates. The loop iterates over them.

Everything else follows from the family's file (kernels/<family>.py, installed as gpubench.kernels):
prepare() gives the call to time, its check, its work model and the launch shape as launched, so what the
summary says about a scenario cannot disagree with what ran. Importing this module imports no GPU library.
"""

from __future__ import annotations

import fnmatch
import importlib
from dataclasses import dataclass, field

# the summary columns made here that their names do not tell (gpubench.record.columns.DECLARERS names this)
SUMMARY_COLUMNS = {"family": "text", "impl": "text", "baseline": "text"}

DURATION_S = 3.5  # each scenario's measured time
GAP_S = 0.5  # idle time between scenarios, so their metrics settle apart
SHORTEST_S = 1.0  # a scenario's own shorter duration never leaves less than this (where --duration allows)


@dataclass(frozen=True)
class Scenario:
    name: str
    family: str
    impl: str
    story: str  # the one sentence `gpubench list` prints
    sizes: dict = field(default_factory=dict, hash=False)  # overrides of the family's SIZES
    default: bool = True  # in the default suite
    baseline: str | None = None  # the scenario figures and prose compare this one against
    distributed: bool = False  # needs several processes, one GPU each, under torchrun
    duration_s: float | None = None  # its measured time where it differs from DURATION_S (a sweep's points)

    def measured_s(self, run_s: float = DURATION_S) -> float:
        """How long this scenario is measured in a run whose --duration is run_s: its own duration scaled
        as run_s is to the default, and never under SHORTEST_S unless run_s itself is."""
        if self.duration_s is None:
            return run_s
        return max(run_s * self.duration_s / DURATION_S, min(run_s, SHORTEST_S))

    def module(self):
        return importlib.import_module(f"gpubench.kernels.{self.family}")

    def prepare(self, **overrides):
        """The family's prepare() at this scenario's sizes; overrides (e.g. --slow-rank) apply where the
        family has such a size axis and a value is given."""
        module = self.module()
        given = {k: v for k, v in overrides.items() if v is not None and k in getattr(module, "SIZES", {})}
        return module.prepare(self.impl, **{**self.sizes, **given})


S = Scenario
NAIVE = "softmax-naive-torch"
# The decode sweep: batch sizes either side of the ridge (B ≈ 300 on an H100's datasheet, 200 on an H200's).
# The default suite runs four points for 2 s each; the others run by name (`gpubench run 'decode-*'`).
DECODE_B = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512)
DECODE_DEFAULT_B = (1, 16, 128, 512)
DECODE_S = 2.0
SCENARIOS: list[Scenario] = [
    S("idle", "idle", "none", "Nothing runs: the baseline every other row is read against."),
    S("copy-triton", "copy", "triton", "A pure copy keeps GPU-Util at 100% while doing zero FLOPs."),
    S("copy-cupy", "copy", "cupy", "The same copy as a CuPy RawKernel (one float4 per thread): 100% busy, no math."),
    S(
        "copy-cupy-memcpy",
        "copy",
        "cupy-memcpy",
        "cudaMemcpyAsync device-to-device: the driver's own copy.",
        default=False,
    ),
    S("copy-torch", "copy", "torch", "torch's copy_, the peer for both copies."),
    S(
        "read-triton",
        "read",
        "triton",
        "A read-only sum: the bandwidth a kernel that writes nothing reaches, decode's ceiling.",
        baseline="read-torch",
    ),
    S(
        "read-cupy",
        "read",
        "cupy",
        "The same sum as a CuPy RawKernel (16-byte streaming loads, one launch).",
        baseline="read-torch",
        default=False,
    ),
    S("read-torch", "read", "torch", "torch's sum over 1 GiB, the peer for both reads and the read peak's own work."),
    S("h2d-copy", "h2d", "torch", "Host-to-device from pinned memory: only the copy engine works, no SM runs."),
    S("spin-1thread", "spin", "cupy", "One thread spinning on one SM: GPU-Util reads 100%.", {"shape": "1thread"}),
    S(
        "spin-1block",
        "spin",
        "cupy",
        "One full block (1024 threads) on one SM: still 100% util, one SM busy.",
        {"shape": "1block"},
    ),
    S(
        "spin-1warp-per-sm",
        "spin",
        "cupy",
        "One warp on every SM: SM active reads ~100% with the SMs nearly empty.",
        {"shape": "1warp-per-sm"},
    ),
    S(
        "spin-half-sms",
        "spin",
        "cupy",
        "Full blocks on half the SMs: SM active near 50%, util still 100%.",
        {"shape": "half-sms"},
    ),
    S(
        "spin-triton",
        "spin",
        "triton",
        "The spin as a one-program Triton kernel (one warp).",
        {"shape": "1thread"},
        default=False,
    ),
    S(NAIVE, "softmax", "torch-naive", "Five eager kernels, intermediates through DRAM: 100% busy, slow."),
    S("softmax-naive-cupy", "softmax", "cupy-naive", "The same five passes in CuPy.", baseline=NAIVE),
    S(
        "softmax-fused",
        "softmax",
        "triton-fused",
        "One fused Triton kernel: the same util, several times faster.",
        baseline=NAIVE,
    ),
    S("softmax-torch", "softmax", "torch", "torch.softmax, the peer for the fused kernel.", baseline=NAIVE),
    S(
        "gemm-triton",
        "gemm",
        "triton",
        "A bf16 GEMM: high tensor activity, and MFU that means something.",
        baseline="gemm-torch",
    ),
    S("gemm-cupy", "gemm", "cupy", "CuPy matmul (cuBLAS) in fp16: the vendor library's GEMM.", {"dtype": "float16"}),
    S("gemm-torch", "gemm", "torch", "torch.matmul in bf16, the peer for the Triton GEMM."),
    *(
        S(
            f"decode-b{b}",
            "decode",
            "triton",
            f"LLM decode at batch {b}: one step reads 470 MB of bf16 weights once for {b} token{'s' if b > 1 else ''}.",
            {"b": b},
            default=b in DECODE_DEFAULT_B,
            duration_s=DECODE_S,
            baseline=f"decode-torch-b{b}" if b in (1, 512) else None,
        )
        for b in DECODE_B
    ),
    S(
        "decode-torch-b1",
        "decode",
        "torch",
        "Decode at batch 1 through F.linear (cuBLAS), the Triton kernel's peer.",
        {"b": 1},
        default=False,
        duration_s=DECODE_S,
    ),
    S(
        "decode-torch-b512",
        "decode",
        "torch",
        "Decode at batch 512 through F.linear (cuBLAS): a GEMM by now.",
        {"b": 512},
        default=False,
        duration_s=DECODE_S,
    ),
    S(
        "decode-cupy-b1",
        "decode",
        "cupy",
        "Decode at batch 1 as a CuPy RawKernel on CUDA cores, one warp per row.",
        {"b": 1},
        default=False,
        baseline="decode-torch-b1",
        duration_s=DECODE_S,
    ),
    S(
        "launch-bound",
        "launch",
        "cupy",
        "Tiny one-element kernels back to back: the host's launch rate, not the GPU, sets the pace.",
    ),
    S(
        "fill-triton",
        "fill",
        "triton",
        "A write-only kernel: 100% busy, half a copy's traffic, no math.",
        default=False,
    ),
    S(
        "allreduce-1gib",
        "allreduce",
        "nccl",
        "NCCL all-reduce of 1 GiB of bf16 over the ranks: busbw against NVLink while a few SMs move the data.",
        {"size_bytes": 2**30},
        default=False,
        distributed=True,
    ),
    S(
        "allreduce-8kib",
        "allreduce",
        "nccl",
        "An 8 KiB all-reduce: latency-bound, busbw far below the links however busy GPU-Util reads.",
        {"size_bytes": 2**13},
        default=False,
        distributed=True,
    ),
    S(
        "straggler",
        "straggler",
        "torch",
        "A bf16 GEMM step then an all-reduce; one rank sleeps 10 ms a step: who waits, and who is late.",
        default=False,
        distributed=True,
    ),
    S(
        "straggler-hang",
        "straggler",
        "torch",
        "One rank sleeps 1.5 s a step: the others wait inside the all-reduce, the signature of a hung job.",
        {"delay_ms": 1500.0, "gemms": 1},
        default=False,
        distributed=True,
    ),
]
BY_NAME = {s.name: s for s in SCENARIOS}


class UnknownScenario(ValueError):
    pass


def select(patterns: list[str] | None, distributed: bool = False) -> list[Scenario]:
    """Scenarios by name or glob (spin-*), in suite order; no patterns means the default suite, and
    under torchrun (`distributed`) the distributed scenarios too."""
    if not patterns:
        return [s for s in SCENARIOS if s.default or (distributed and s.distributed)]
    chosen = set()
    for pattern in patterns:
        hits = [s.name for s in SCENARIOS if fnmatch.fnmatchcase(s.name, pattern)]
        if not hits:
            raise UnknownScenario(f"no scenario matches {pattern!r}; valid names: {', '.join(BY_NAME)}")
        chosen.update(hits)
    return [s for s in SCENARIOS if s.name in chosen]


def torchrun_hint(scenarios: list[Scenario]) -> str:
    """One sentence: which scenarios need torchrun, and the command that launches them."""
    names = [s.name for s in scenarios]
    return (
        f"{', '.join(names)} {'needs' if len(names) == 1 else 'need'} several GPUs, one process each: "
        f"launch with `torchrun --nproc-per-node=2 -m gpubench run {' '.join(names)}`"
    )
