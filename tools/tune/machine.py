"""The machine beside the tuning sweeps of tools/tune/families.py, for tools/tune/kernels.py: the clock trace of a
GEMM from idle (its rows go to the sweeps' ROWS) and the machine's facts (NVML's names and links, the versions,
the host-to-device rate)."""

from __future__ import annotations

import time

import torch
import triton

from gpubench.truth.timing import time_loop
from tools.tune.families import ROWS


def clock_trace(seconds: float = 6.0):
    """torch.matmul from idle: per-group TFLOP/s beside NVML's SM clock and power, to size the peak warm-up."""
    import pynvml

    pynvml.nvmlInit()
    h = pynvml.nvmlDeviceGetHandleByIndex(0)
    n = 8192
    a = torch.randn(n, n, device="cuda").to(torch.bfloat16)
    b = torch.randn(n, n, device="cuda").to(torch.bfloat16)
    c = torch.empty_like(a)
    torch.matmul(a, b, out=c)
    torch.cuda.synchronize()
    time.sleep(3.0)
    t0 = time.monotonic()
    while time.monotonic() - t0 < seconds:
        t = time_loop(lambda: torch.matmul(a, b, out=c), calls_per_timing=10, groups=1)
        clk = pynvml.nvmlDeviceGetClockInfo(h, pynvml.NVML_CLOCK_SM)
        pw = pynvml.nvmlDeviceGetPowerUsage(h) / 1000
        ROWS.append(
            {
                "family": "clock",
                "name": f"t={time.monotonic() - t0:.3f}",
                "median_ms": t.median_ms,
                "tflops": 2 * n**3 / t.median_ms / 1e9,
                "sm_clock_mhz": clk,
                "power_w": pw,
            }
        )
    for r in ROWS[-200::10]:
        if r["family"] == "clock":
            print(f"clock {r['name']:>8} {r['tflops']:6.0f} TFLOP/s  {r['sm_clock_mhz']} MHz  {r['power_w']:.0f} W")


def facts():
    import pynvml

    pynvml.nvmlInit()
    h = pynvml.nvmlDeviceGetHandleByIndex(0)
    p = torch.cuda.get_device_properties(0)
    out = {
        "name": pynvml.nvmlDeviceGetName(h),
        "torch_uuid": str(getattr(p, "uuid", "?")),
        "nvml_uuid": pynvml.nvmlDeviceGetUUID(h),
        "torch": torch.__version__,
        "triton": triton.__version__,
    }
    for fn in (
        "nvmlDeviceGetMaxPcieLinkGeneration",
        "nvmlDeviceGetGpuMaxPcieLinkGeneration",
        "nvmlDeviceGetMaxPcieLinkWidth",
        "nvmlDeviceGetCurrPcieLinkGeneration",
        "nvmlDeviceGetCurrPcieLinkWidth",
        "nvmlDeviceGetPcieLinkMaxSpeed",
        "nvmlDeviceGetTotalEnergyConsumption",
        "nvmlDeviceGetPowerManagementLimit",
        "nvmlDeviceGetMigMode",
        "nvmlDeviceGetIndex",
    ):
        try:
            out[fn[13:]] = getattr(pynvml, fn)(h)
        except Exception as err:
            out[fn[13:]] = f"error {err}"
    try:
        out["by_uuid_index"] = pynvml.nvmlDeviceGetIndex(pynvml.nvmlDeviceGetHandleByUUID(out["nvml_uuid"]))
    except Exception as err:
        out["by_uuid_index"] = f"error {err}"
    host = torch.rand(2**26).pin_memory()
    dev = torch.empty(2**26, device="cuda")
    dev.copy_(host, non_blocking=True)
    t = time_loop(lambda: dev.copy_(host, non_blocking=True), calls_per_timing=4, groups=20)
    out["h2d_gbps_link"] = host.nbytes / t.median_ms / 1e6
    for k, v in out.items():
        print(f"fact {k}: {v}")
    return out
