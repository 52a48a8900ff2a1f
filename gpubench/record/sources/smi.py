"""The literal `nvidia-smi` process, so a user sees that gpubench reports the very number they know."""

from __future__ import annotations

from .process import LineParser, ProcessSource, number

QUERY = ("timestamp", "index", "utilization.gpu", "utilization.memory", "power.draw", "clocks.sm")
COLUMNS = ("smi_gpu_util_pct", "smi_mem_util_pct", "smi_power_w", "smi_sm_clock_mhz")


class SmiParser(LineParser):
    """Parses `--format=csv,noheader,nounits` lines: '2026/11/21 12:00:00.123, 0, 100, 3, 251.30, 1980'."""

    def feed(self, line: str):
        parts = [p.strip() for p in line.split(",")]
        if len(parts) != len(QUERY):
            return None
        try:
            gpu = int(parts[1])
        except ValueError:
            return None
        return gpu, dict(zip(COLUMNS, (number(p) for p in parts[2:])))


class SmiSource(ProcessSource):
    name = "smi"
    executable = "nvidia-smi"
    missing_hint = "it ships with the NVIDIA driver"
    columns = COLUMNS
    resolution = {
        "smi_gpu_util_pct": "1 percentage point",
        "smi_mem_util_pct": "1 percentage point",
        "smi_power_w": "0.01 W as printed",
        "smi_sm_clock_mhz": "1 MHz",
    }

    def command(self, exe, gpus):
        # --id takes NVML's indices, the numbering `gpus` is in
        return [
            exe,
            f"--query-gpu={','.join(QUERY)}",
            "--format=csv,noheader,nounits",
            f"--loop-ms={self.interval_ms}",
            f"--id={','.join(map(str, gpus))}",
        ]

    def make_parser(self):
        return SmiParser()
