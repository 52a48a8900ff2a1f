"""What every kernel family shares: the contract (Work, Prepared), the correctness checks, CuPy loading,
and the table of launch configurations chosen per GPU."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Callable

import torch

from gpubench.install import CUPY_HINT

# the summary columns made here that their names do not tell, declared in kernels/columns.py (which loads no torch)
from .columns import COMMON as SUMMARY_COLUMNS  # noqa: F401 - the family's own name for them


@dataclass(frozen=True)
class Work:
    """What one call must do.

    `bytes` are the useful bytes: each input read once and each output written once, the least any
    implementation must move (a copy of N bytes counts 2N). `traffic` is what this implementation
    really moves through device memory where that is known (the naive softmax's five passes), else None.
    `link_bytes` cross the host link (PCIe) instead of device memory; for a collective (bound
    "interconnect") they are the message size per rank, the bytes nccl-tests' algbw divides by time.
    `tokens` are the tokens one call produces (a decode step of B sequences makes B), for tokens/s.
    """

    flops: float
    bytes: float
    traffic: float | None = None
    link_bytes: float = 0.0
    tokens: float = 0.0


# Which ground truth tells what a kernel achieved: its FLOP/s against the compute peak (MFU), its useful
# bytes/s against DRAM bandwidth (MBU), both (decode: MBU below the ridge, MFU above it; the nearer roof
# judges), its bytes/s against the host link (link_pct), a collective's bus bandwidth against the GPU's
# NVLinks (nvlink_pct), or none at all.
BOUNDS = ("compute", "dram", "both", "link", "interconnect", "none")


@dataclass
class Prepared:
    """One implementation of a family at one size, with its buffers allocated, filled and poisoned.

    run() launches one call asynchronously (None: nothing runs, the idle baseline). check() runs it once
    on poisoned outputs, compares with a float64 (or exact) reference, raises CheckFailed when wrong,
    and returns facts worth keeping (relative error, SMs used). launch says how it was launched, from
    the numbers the wrapper really used.
    """

    run: Callable[[], object] | None
    check: Callable[[], dict]
    work: Work
    unit: str | None  # the peak MFU divides by: bf16_tensor, fp16_tensor, fp32
    bound: str
    launch: str
    calls_per_timing: int | None = None  # None: the scenario loop sizes timed groups to ~20 ms
    info: dict = field(default_factory=dict)
    sizes: dict = field(default_factory=dict)  # the sizes as prepared, for the summary's text
    arrivals: list[float] | None = None  # collectives: when each call reached it (host monotonic s), appended by run()

    def __post_init__(self):
        if self.bound not in BOUNDS:
            raise ValueError(f"bound must be one of {BOUNDS}, got {self.bound!r}")

    @property
    def sizes_text(self) -> str:
        return ", ".join(f"{k}={v}" if k != "dtype" else str(v) for k, v in self.sizes.items()) or "-"


class CheckFailed(AssertionError):
    """A kernel's output disagrees with its reference."""


# Relative-error bounds by output precision (‖out − ref‖ / ‖ref‖ against a float64 reference).
TOLERANCE = {torch.float32: 1e-5, torch.float16: 5e-3, torch.bfloat16: 1e-2, torch.float64: 1e-12}
DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


def as_torch(x) -> torch.Tensor:
    """A torch view of a torch tensor or a CuPy array (through DLPack, no copy)."""
    return x if isinstance(x, torch.Tensor) else torch.from_dlpack(x)


def poison(x) -> None:
    """Fill an output with NaN (or -1 for integers) so an element the kernel never writes fails the check."""
    t = as_torch(x)
    t.fill_(math.nan if t.dtype.is_floating_point else -1)


def generator(device, seed: int) -> torch.Generator:
    return torch.Generator(device=device).manual_seed(seed)


def check_close(name: str, out, ref: torch.Tensor, tol: float | None = None) -> dict:
    """Raise CheckFailed unless out matches the float64 reference; return the relative error as a fact."""
    out = as_torch(out)
    if out.shape != ref.shape:
        raise CheckFailed(f"{name}: shape {tuple(out.shape)} != reference {tuple(ref.shape)}")
    got = out.to(torch.float64)
    if not torch.isfinite(got).all():
        raise CheckFailed(f"{name}: output has NaN or Inf (an element was not written?)")
    ref = ref.to(device=got.device, dtype=torch.float64)
    err = (torch.linalg.vector_norm(got - ref) / torch.linalg.vector_norm(ref)).item()
    bound = TOLERANCE[out.dtype] if tol is None else tol
    if not err <= bound:
        raise CheckFailed(f"{name}: relative error {err:.3g} exceeds {bound:.0e}")
    return {"check": f"rel err {err:.2g}"}


def check_equal(name: str, out, ref) -> dict:
    """Exact comparison against a reference array or a scalar, for copies and fills (NaN never matches)."""
    out = as_torch(out)
    ref = torch.full_like(out, ref) if isinstance(ref, (int, float)) else as_torch(ref).to(out.device)
    if out.shape != ref.shape:
        raise CheckFailed(f"{name}: shape {tuple(out.shape)} != reference {tuple(ref.shape)}")
    bad = int((out != ref).sum().item())
    if bad:
        raise CheckFailed(f"{name}: {bad} elements differ from the reference")
    return {"check": "exact"}


class CupyMissing(RuntimeError):
    pass


def cupy():
    """Import CuPy on first use, with one clear sentence when it is not installed."""
    try:
        import cupy as cp
    except ImportError:
        raise CupyMissing(f"CuPy is not installed: {CUPY_HINT}") from None
    return cp


_raw_kernels: dict[str, object] = {}


def raw_kernel(source: str, name: str):
    """Compile (once) and return a CuPy RawKernel."""
    key = f"{name}:{hash(source)}"
    if key not in _raw_kernels:
        _raw_kernels[key] = cupy().RawKernel(source, name)
    return _raw_kernels[key]


def sm_count(device=None) -> int:
    if not torch.cuda.is_available():
        return 4  # the Triton interpreter: a small stand-in for tests on the CPU
    return torch.cuda.get_device_properties(device or torch.cuda.current_device()).multi_processor_count


def gpu_name(device=None) -> str:
    return torch.cuda.get_device_name(device) if torch.cuda.is_available() else "cpu"


def tuned_row(table: dict, device=None):
    """The launch settings chosen for this GPU model: table[gpu name], else the fallback table["*"].

    Each row names the GPU it was measured on (tools/tune/kernels.py; results/tune-*.csv); a GPU that
    is not in the table gets the fallback row, never another GPU's numbers.
    """
    return table.get(gpu_name(device), table["*"])


def tuned(table: dict, key, device=None):
    """One setting of tuned_row(table, device), or the fallback's where this GPU's row leaves it out."""
    return tuned_row(table, device).get(key, table["*"].get(key))


def count(n: int, word: str) -> str:
    """'1 block', '132 blocks'."""
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def powers_of_two(n: int) -> str:
    """2^k for exact powers of two of 1024 or more, else the number: how sizes read in the suite."""
    return f"2^{n.bit_length() - 1}" if n >= 1024 and n & (n - 1) == 0 else str(n)
