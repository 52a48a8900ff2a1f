"""DCGM's fields through `dcgmi dmon`, where DCGM is installed.

`dcgmi dmon -e 203,1001,... -d MS` prints a header naming each field by its short name
("#Entity   GPUTL  GRACT ..."), a line "ID", then one row per GPU per tick ("GPU 0   45  0.913 ..."),
with "N/A" for a value it does not have, and repeats the header from time to time. It prints the
profiling fields as ratios with three decimals: a resolution of 0.1 percentage point, so one SM of
132 (0.76%) reads 0.8%.
"""

from __future__ import annotations

from gpubench.metrics import BY_COLUMN, RATIO_FIELDS

from . import SourceUnavailable
from .holders import CountersBusy, busy_sentence
from .process import LineParser, ProcessSource, number

FIELDS = (203, 1001, 1002, 1003, 1004, 1005, 1006, 1007, 1008)
# dcgmi's short header -> our column; GPUTL is kept apart from NVML's own gpu_util_pct.
SHORT_TO_COLUMN = {"GPUTL": "dcgm_gpu_util_pct"} | {
    m.dcgm_short: m.column for m in BY_COLUMN.values() if m.dcgm_short and m.dcgm_id in RATIO_FIELDS
}
SHORT_IS_RATIO = {m.dcgm_short for m in BY_COLUMN.values() if m.dcgm_id in RATIO_FIELDS}
# What dcgmi prints when its profiling module cannot take the counters because another reader holds them
# (DCGM issue 56: "Profiling and DCGM both lock the same primitive in the driver").
LOCKED_OUT = ("third-party profiling module returned an unrecoverable error",)
DCGM_ITSELF = ("nv-hostengine", "dcgm-exporter")  # the engine refused cannot be the holder


class DmonParser(LineParser):
    def __init__(self):
        self.header: list[str] = []

    def noise(self, line):
        return line.lstrip().startswith(("#", "ID"))

    def feed(self, line: str):
        parts = line.split()
        if not parts:
            return None
        if parts[0] == "#Entity":
            self.header = parts[1:]
            return None
        if parts[0] != "GPU" or len(parts) < 2 or not self.header:
            return None
        try:
            gpu = int(parts[1])
        except ValueError:
            return None
        values = {}
        for short, text in zip(self.header, parts[2:]):
            column = SHORT_TO_COLUMN.get(short)
            if column is None:
                continue
            value = number(text)
            values[column] = value * 100.0 if short in SHORT_IS_RATIO else value
        return gpu, values


class DcgmSource(ProcessSource):
    name = "dcgm"
    executable = "dcgmi"
    missing_hint = "install DCGM (datacenter-gpu-manager) and start nv-hostengine to read its profiling fields"
    columns = tuple(SHORT_TO_COLUMN.values())
    min_interval_s = 0.1  # DCGM's profiling module samples no faster than every 100 ms
    resolution = {c: "0.1 percentage point (dcgmi prints ratios to 3 decimals)" for c in columns} | {
        "dcgm_gpu_util_pct": "1 percentage point"
    }
    startup_s = 3.0  # the host engine can take a moment to start its profiling module

    def open(self, gpus):
        try:
            super().open(gpus)
        except SourceUnavailable as err:
            if any(s in str(err).lower() for s in LOCKED_OUT):
                raise CountersBusy(busy_sentence(exclude=DCGM_ITSELF)) from None
            raise

    def command(self, exe, gpus):
        return [
            exe,
            "dmon",
            "-e",
            ",".join(map(str, FIELDS)),
            "-d",
            str(self.interval_ms),
            "-i",
            ",".join(map(str, gpus)),
        ]

    def make_parser(self):
        return DmonParser()
