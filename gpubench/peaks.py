"""Peaks: the vendor's datasheet numbers for known GPUs, and the ones measured on this GPU at run time.

MFU (PaLM's model FLOPs utilization) divides achieved FLOP/s by the dense peak of the unit and
precision the kernel uses; MBU divides achieved bytes/s by the DRAM bandwidth. A peak that is not
known stays missing: it is never guessed.
"""

from __future__ import annotations

import torch

from gpubench.timing import time_loop

T = 1e12
# Dense (no sparsity) datasheet peaks. Keys: bf16_tensor / fp16_tensor / fp32 in FLOP/s (fp32 is the
# plain, non-tensor FP32 rate), dram in bytes/s. Matched against NVML's name in this order.
DATASHEET: list[tuple[str, dict]] = [
    ("H200 NVL", {"bf16_tensor": 835.5 * T, "fp16_tensor": 835.5 * T, "fp32": 60.0 * T, "dram": 4.8e12}),
    ("H200", {"bf16_tensor": 989.4 * T, "fp16_tensor": 989.4 * T, "fp32": 66.9 * T, "dram": 4.8e12}),
    ("H100 NVL", {"bf16_tensor": 835.5 * T, "fp16_tensor": 835.5 * T, "fp32": 60.0 * T, "dram": 3.9e12}),
    ("H100 PCIe", {"bf16_tensor": 756.5 * T, "fp16_tensor": 756.5 * T, "fp32": 51.2 * T, "dram": 2.0e12}),
    ("H100 80GB HBM3", {"bf16_tensor": 989.4 * T, "fp16_tensor": 989.4 * T, "fp32": 66.9 * T, "dram": 3.35e12}),
    ("A100-SXM4-80GB", {"bf16_tensor": 312 * T, "fp16_tensor": 312 * T, "fp32": 19.5 * T, "dram": 2.039e12}),
    ("A100-SXM4-40GB", {"bf16_tensor": 312 * T, "fp16_tensor": 312 * T, "fp32": 19.5 * T, "dram": 1.555e12}),
    ("A100 80GB PCIe", {"bf16_tensor": 312 * T, "fp16_tensor": 312 * T, "fp32": 19.5 * T, "dram": 1.935e12}),
    ("A100-PCIE-40GB", {"bf16_tensor": 312 * T, "fp16_tensor": 312 * T, "fp32": 19.5 * T, "dram": 1.555e12}),
    ("L40S", {"bf16_tensor": 362.05 * T, "fp16_tensor": 362.05 * T, "fp32": 91.6 * T, "dram": 0.864e12}),
    ("L4", {"bf16_tensor": 121 * T, "fp16_tensor": 121 * T, "fp32": 30.3 * T, "dram": 0.3e12}),
]


def datasheet_for(gpu_name: str) -> dict | None:
    for pattern, peaks in DATASHEET:
        if pattern in gpu_name:
            return dict(peaks)
    return None


COPY_BYTES = 2 * 2**30
MATMUL_SHAPES = [(8192, 8192, 8192), (8192, 8192, 16384), (16384, 8192, 8192)]


def measure_copy(nbytes: int = COPY_BYTES, groups: int = 10) -> float:
    """Device-to-device copy bandwidth in bytes/s, counting bytes read plus bytes written."""
    src = torch.rand(nbytes // 4, device="cuda")
    dst = torch.empty_like(src)
    dst.copy_(src)
    torch.cuda.synchronize()
    t = time_loop(lambda: dst.copy_(src), calls_per_timing=5, groups=groups)
    return 2 * nbytes / (t.median_ms / 1e3)


def measure_matmul(dtype=torch.bfloat16, shapes=MATMUL_SHAPES, groups: int = 5) -> float:
    """Best dense matmul FLOP/s over a few large shapes, on random (never zero) data."""
    best = 0.0
    g = torch.Generator(device="cuda").manual_seed(0)
    for m, n, k in shapes:
        a = torch.randn(m, k, device="cuda", generator=g).to(dtype)
        b = torch.randn(k, n, device="cuda", generator=g).to(dtype)
        c = torch.empty(m, n, device="cuda", dtype=dtype)
        torch.matmul(a, b, out=c)
        torch.cuda.synchronize()
        t = time_loop(lambda: torch.matmul(a, b, out=c), calls_per_timing=5, groups=groups)
        best = max(best, 2 * m * n * k / (t.median_ms / 1e3))
        del a, b, c
    return best


def measure() -> dict:
    return {
        "dram": measure_copy(),
        "bf16_tensor": measure_matmul(torch.bfloat16),
        "fp16_tensor": measure_matmul(torch.float16, shapes=MATMUL_SHAPES[:1]),
    }
