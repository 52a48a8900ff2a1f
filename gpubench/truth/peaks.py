"""Peaks: the vendor's datasheet numbers for known GPUs, and the ones measured on this GPU, sustained.

MFU (PaLM's model FLOPs utilization) divides achieved FLOP/s by the dense peak of the unit and precision
the kernel uses; MBU divides useful bytes/s by the DRAM bandwidth. Two bandwidths are measured: a copy's
(bytes read plus written, "dram") and a read's ("dram_read"), the ceiling of kernels that write little. A
peak that is not known stays missing: a GPU is matched by its exact NVML name (and memory size where one
name covers several parts), never by a neighbour's name.

Measured peaks are sustained figures: a GPU at its power limit lowers its clock within a tenth of a
second, so each peak is the median over SUSTAIN_S seconds after WARM_S seconds of the same work.
"""

from __future__ import annotations

import time

T = 1e12
# The compute peaks MFU divides by, under the short names users give them (--dtype bf16), and the unit a
# matrix product runs on by its input dtype.
UNITS = {"bf16": "bf16_tensor", "fp16": "fp16_tensor", "tf32": "tf32_tensor", "fp8": "fp8_tensor", "fp32": "fp32"}
UNIT_NAMES = {unit: "FP32" if name == "fp32" else name for name, unit in UNITS.items()}
MATMUL_UNITS = {"bfloat16": "bf16_tensor", "float16": "fp16_tensor"}


def dense(bf16: float, tf32: float, fp8: float | None, fp32: float) -> dict:
    """A GPU's dense (no sparsity) tensor and FP32 peaks in TFLOP/s, as FLOP/s; fp16 runs at bf16's rate."""
    peaks = {"bf16_tensor": bf16 * T, "fp16_tensor": bf16 * T, "tf32_tensor": tf32 * T, "fp32": fp32 * T}
    return peaks | ({"fp8_tensor": fp8 * T} if fp8 else {})


# Datasheets quote tensor rates with 2:4 sparsity; these are half of them, the dense rates.
DENSE_HOPPER_SXM = dense(989.4, 494.7, 1978.9, 66.9)
DENSE_HOPPER_NVL = dense(835.5, 417.5, 1670.5, 60.0)
DENSE_A100 = dense(312, 156, None, 19.5)  # Ampere has no FP8

# (exact NVML name, (least, most) memory in GiB or None, peaks). Dense (no sparsity) figures from the
# vendors' datasheets in FLOP/s (plain FP32: no tensor cores), dram in bytes/s.
DATASHEET: list[tuple[str, tuple[float, float] | None, dict]] = [
    ("NVIDIA H100 80GB HBM3", None, {**DENSE_HOPPER_SXM, "dram": 3.35e12}),
    ("NVIDIA H100 PCIe", None, {**dense(756.5, 378, 1513, 51.2), "dram": 2.0e12}),
    ("NVIDIA H100 NVL", None, {**DENSE_HOPPER_NVL, "dram": 3.9e12}),
    ("NVIDIA H200", None, {**DENSE_HOPPER_SXM, "dram": 4.8e12}),
    ("NVIDIA H200 NVL", None, {**DENSE_HOPPER_NVL, "dram": 4.8e12}),
    ("NVIDIA GH200 480GB", (90, 100), {**DENSE_HOPPER_SXM, "dram": 4.0e12}),  # 96 GB HBM3
    ("NVIDIA GH200 480GB", (135, 150), {**DENSE_HOPPER_SXM, "dram": 4.9e12}),  # 144 GB HBM3e
    ("NVIDIA GH200 144G HBM3e", None, {**DENSE_HOPPER_SXM, "dram": 4.9e12}),
    ("NVIDIA A100-SXM4-80GB", None, {**DENSE_A100, "dram": 2.039e12}),
    ("NVIDIA A100-SXM4-40GB", None, {**DENSE_A100, "dram": 1.555e12}),
    ("NVIDIA A100 80GB PCIe", None, {**DENSE_A100, "dram": 1.935e12}),
    ("NVIDIA A100-PCIE-40GB", None, {**DENSE_A100, "dram": 1.555e12}),
    ("NVIDIA L40S", None, {**dense(362.05, 183, 733, 91.6), "dram": 0.864e12}),
    ("NVIDIA L40", None, {**dense(181.05, 90.5, 362, 90.5), "dram": 0.864e12}),
    ("NVIDIA L4", None, {**dense(121, 60, 242, 30.3), "dram": 0.3e12}),
    ("NVIDIA A10", None, {**dense(125, 62.5, None, 31.2), "dram": 0.6e12}),
]


def datasheet_for(name: str, memory_mib: float | None = None) -> dict | None:
    """The datasheet peaks of the GPU NVML calls `name`; None for a GPU not in the table."""
    gib = memory_mib / 1024 if memory_mib else None
    for entry, mem_range, peaks in DATASHEET:
        if entry != name.strip():
            continue
        if mem_range is None or (gib is not None and mem_range[0] <= gib <= mem_range[1]):
            return dict(peaks)
    return None


COPY_BYTES = 2**30  # 1 GiB each way, as copy-torch: far beyond any L2
MATMUL_SIZE = 8192
WARM_S = 1.0
SUSTAIN_S = 2.0


def _sustained(run, nbytes_or_flops: float, on_window=None, key: str = "") -> float:
    """Units per second of `run`, median over SUSTAIN_S after WARM_S of the same work."""
    from gpubench.truth.timing import calls_for, time_loop, warm_up

    calls = calls_for(warm_up(run))
    time_loop(run, calls_per_timing=calls, duration_s=WARM_S)
    t0 = time.monotonic()
    t = time_loop(run, calls_per_timing=calls, duration_s=SUSTAIN_S)
    if on_window:
        on_window(key, t0, time.monotonic())
    return nbytes_or_flops / (t.median_ms / 1e3)


def measure_copy(nbytes: int = COPY_BYTES, on_window=None) -> float:
    """Device-to-device copy bandwidth in bytes/s, counting bytes read plus bytes written."""
    import torch

    src = torch.rand(nbytes // 4, device="cuda")
    dst = torch.empty_like(src)
    return _sustained(lambda: dst.copy_(src), 2.0 * nbytes, on_window, "dram")  # freed on return


def measure_read(nbytes: int = COPY_BYTES, on_window=None) -> float:
    """Device read bandwidth in bytes/s: torch's sum over nbytes of float32, the work read-torch times. A
    read is what a kernel that writes little (decode) can reach; a copy's bus also carries its writes."""
    import torch

    x = torch.rand(nbytes // 4, device="cuda")
    out = torch.empty((), device="cuda")
    return _sustained(lambda: torch.sum(x, 0, out=out), float(nbytes), on_window, "dram_read")  # freed on return


def measure_matmul(dtype, n: int = MATMUL_SIZE, on_window=None, key: str = "") -> float:
    """Dense matmul FLOP/s at n x n x n on random (never zero) data."""
    import torch

    g = torch.Generator(device="cuda").manual_seed(0)
    a = torch.randn(n, n, device="cuda", generator=g).to(dtype)
    b = torch.randn(n, n, device="cuda", generator=g).to(dtype)
    c = torch.empty(n, n, device="cuda", dtype=dtype)
    return _sustained(lambda: torch.matmul(a, b, out=c), 2.0 * n**3, on_window, key)  # freed on return


def measure(on_window=None) -> dict:
    """Sustained peaks: the operations gemm-torch, copy-torch and read-torch run, at their sizes.

    on_window(key, t_start, t_end) is told when each peak's measured window ran, so the clock and
    power seen meanwhile can be recorded beside it.
    """
    import torch

    return {
        "dram": measure_copy(on_window=on_window),
        "dram_read": measure_read(on_window=on_window),
        "bf16_tensor": measure_matmul(torch.bfloat16, on_window=on_window, key="bf16_tensor"),
        "fp16_tensor": measure_matmul(torch.float16, on_window=on_window, key="fp16_tensor"),
    }


def link_peak(pcie: dict | None) -> dict:
    """The host link's theoretical bandwidth per direction, where NVML reports the link."""
    bw = (pcie or {}).get("bytes_per_s")
    return {"link": bw} if bw else {}


def nvlink_peak(nvlink: dict | None) -> dict:
    """The NVLinks' summed rate per direction as NVML reports it (see nvml.nvlink), where it reports one."""
    bw = (nvlink or {}).get("bytes_per_s")
    return {"nvlink": bw} if bw else {}


def sheet_for(info: dict) -> dict | None:
    """Every spec peak of a GPU described by nvml.device_info: its datasheet (if known), host link, NVLinks."""
    sheet = {
        **(datasheet_for(info.get("name", ""), info.get("memory_mib")) or {}),
        **link_peak(info.get("pcie")),
        **nvlink_peak(info.get("nvlink")),
    }
    return sheet or None


def main(argv: list[str] | None = None) -> int:
    """`python -m gpubench.truth.peaks OUT.json`: measure the peaks of this process's GPU and write them, with
    the windows each was measured in, to OUT.json; exit 130 on Ctrl-C, leaving no file. A watch runs this as
    a child process, so that the watcher holds no CUDA context (and no GPU memory) while the job runs."""
    import json
    import sys

    out = (sys.argv[1:] if argv is None else argv)[0]
    windows: dict = {}
    try:
        measured = measure(lambda key, a, b: windows.__setitem__(key, (a, b)))
    except KeyboardInterrupt:
        return 130
    with open(out, "w") as f:
        json.dump({"measured": measured, "windows": windows}, f)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
