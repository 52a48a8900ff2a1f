"""What every kernel family shares: the work record, the correctness check, and CuPy loading."""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class Work:
    """What one call must do: floating-point operations and bytes moved through device memory.

    Bytes count every read and every write (a copy of N bytes moves 2N).
    """

    flops: float
    bytes: float

    @property
    def intensity(self) -> float:
        """FLOP per byte; NaN when no bytes move."""
        return self.flops / self.bytes if self.bytes else math.nan


class CheckFailed(AssertionError):
    """A kernel's output disagrees with its reference."""


# Relative-error bounds by output precision (‖out − ref‖ / ‖ref‖ against a float64 reference).
TOLERANCE = {torch.float32: 1e-5, torch.float16: 5e-3, torch.bfloat16: 1e-2, torch.float64: 1e-12}


def as_torch(x) -> torch.Tensor:
    """A torch view of a torch tensor or a CuPy array (through DLPack, no copy)."""
    return x if isinstance(x, torch.Tensor) else torch.from_dlpack(x)


def poison(x) -> None:
    """Fill an output with NaN (or -1 for integers) so an element the kernel never writes fails the check."""
    t = as_torch(x)
    t.fill_(math.nan if t.dtype.is_floating_point else -1)


def check_close(name: str, out, ref: torch.Tensor, tol: float | None = None) -> float:
    """Raise CheckFailed unless out matches the float64 reference; return the relative error."""
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
    return err


def check_equal(name: str, out, ref) -> None:
    """Exact comparison, for copies."""
    out, ref = as_torch(out), as_torch(ref)
    if out.shape != ref.shape or not torch.equal(out, ref.to(out.device)):
        bad = (out != ref.to(out.device)).sum().item() if out.shape == ref.shape else "all"
        raise CheckFailed(f"{name}: {bad} elements differ from the source")


class CupyMissing(RuntimeError):
    pass


def cupy():
    """Import CuPy on first use, with one clear sentence when it is not installed."""
    try:
        import cupy as cp
    except ImportError:
        raise CupyMissing("CuPy is not installed: pip install 'gpubench[cu13]' "
                          "(or [cu12] for CUDA 12 drivers)") from None
    return cp


_raw_kernels: dict[str, object] = {}


def raw_kernel(source: str, name: str):
    """Compile (once) and return a CuPy RawKernel."""
    key = f"{name}:{hash(source)}"
    if key not in _raw_kernels:
        _raw_kernels[key] = cupy().RawKernel(source, name)
    return _raw_kernels[key]

