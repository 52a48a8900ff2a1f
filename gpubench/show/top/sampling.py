"""What top reads at each refresh: per GPU what nvidia-smi shows (NVML), the GPM counters where the GPU has
them, and the processes on it with their user and command.

NVML and GPM only: both are the driver's own counters, read over ioctl with no CUDA context, so a refresh
takes no GPU memory, launches nothing and cannot slow the job it looks at. GPM is opened per GPU, so a GPU
without it (older than Hopper, or not a data-centre part) shows – for SM, occupancy, tensor and DRAM while
the others still show them; each such gap is said once, as a note, never per refresh.

Processes come from NVML's lists of compute and graphics processes, their user and command from /proc. In
a container with its own process namespace NVML gives the host's process ids, which /proc here may not hold:
those read `?`.
"""

from __future__ import annotations

import math
import pwd
from dataclasses import dataclass, field
from pathlib import Path

from gpubench.record import nvml
from gpubench.record.sources import SourceUnavailable
from gpubench.record.sources.gpm import GpmSource, MetricsRefused
from gpubench.usage import visible

PROC = Path("/proc")  # tests point this at a fake process table
GPM_COLUMNS = (
    "sm_active_pct",
    "sm_occupancy_pct",
    "tensor_active_pct",
    "dram_active_pct",
    "fp16_active_pct",
    "fp32_active_pct",
    "fp64_active_pct",
)
GPM_NEEDS = "NVML GPM, which needs a Hopper or newer data-centre GPU"


@dataclass
class Device:
    index: int
    name: str
    uuid: str
    power_limit_w: float
    memory_total_mib: float
    handle: object = field(repr=False, default=None)
    gpm: GpmSource | None = field(repr=False, default=None)


@dataclass
class Process:
    pid: int
    user: str
    command: str
    mem_mib: float


@dataclass
class Reading:
    device: Device
    values: dict
    processes: list[Process]
    error: str = ""  # why this GPU has no values this refresh (NVML's own words)


class Machine:
    """Every GPU NVML sees. open() raises nvml.GpuUnavailable where there is no driver; read() never raises
    for one GPU's trouble: its reading says it, and the notes say what is missing for good."""

    def __init__(self, proc: Path | None = None):
        self.proc = proc
        self.devices: list[Device] = []
        self.notes: list[str] = []  # each said once: what is missing, on which GPUs, and why

    def open(self) -> None:
        for index in range(nvml.device_count()):
            h = nvml.handle(index)
            limit = nvml.call(nvml.pynvml.nvmlDeviceGetPowerManagementLimit, h)
            mem = nvml.call(nvml.pynvml.nvmlDeviceGetMemoryInfo, h)
            self.devices.append(
                Device(
                    index,
                    nvml.name_of(h),
                    nvml.uuid_of(h),
                    limit / 1000 if limit else math.nan,
                    mem.total / 2**20 if mem is not None else math.nan,
                    h,
                )
            )
        unsupported = []
        for d in self.devices:
            if not GpmSource.supported([d.index]):
                unsupported.append(d.index)
                continue
            source = GpmSource()
            try:
                source.open([d.index])
                d.gpm = source
            except SourceUnavailable as err:  # the counters held by another reader, or GPM failing to start
                self._note(d, str(err))
        if unsupported:
            which = ", ".join(map(str, unsupported))
            self.notes.append(
                f"GPU {which}: SM active, occupancy, tensor and DRAM show – as they come from "
                f"{GPM_NEEDS}; GPU-Util, power, clock and memory are still read"
            )

    def _note(self, d: Device, why: str) -> None:
        self.notes.append(f"GPU {d.index}: SM active, occupancy, tensor and DRAM show –: {why}")

    def read(self) -> list[Reading]:
        return [self._read(d) for d in self.devices]

    def _read(self, d: Device) -> Reading:
        try:
            values = nvml.read_basic(d.handle)
        except nvml.NVMLError as err:  # a GPU fallen off the bus, reset: said on its line, the others go on
            return Reading(d, {}, [], f"NVML cannot read it: {err}")
        values.update(dict.fromkeys(GPM_COLUMNS, math.nan))
        if d.gpm is not None:
            try:
                values.update(d.gpm.read().get(d.index, {}))
            except MetricsRefused as err:  # some ids refused: they read NaN from now on, the rest next refresh
                self.notes.append(f"GPU {d.index}: {err}")
            except (SourceUnavailable, nvml.NVMLError) as err:  # taken by another reader, or failing: stop asking
                d.gpm.close()
                d.gpm = None
                self._note(d, str(err))
        return Reading(d, values, processes(d.handle, self.proc))

    def close(self) -> None:
        for d in self.devices:
            if d.gpm is not None:
                d.gpm.close()
                d.gpm = None


def processes(h, proc: Path | None = None) -> list[Process]:
    """The compute and graphics processes on a GPU, one entry per process, the most memory first."""
    found: dict[int, float] = {}
    for name in ("nvmlDeviceGetComputeRunningProcesses", "nvmlDeviceGetGraphicsRunningProcesses"):
        for p in nvml.call(getattr(nvml.pynvml, name), h, default=[]) or []:
            used = getattr(p, "usedGpuMemory", None)  # None where the driver does not say (no permission, MIG)
            if math.isnan(found.get(int(p.pid), math.nan)):  # listed twice (compute and graphics): one entry
                found[int(p.pid)] = used / 2**20 if isinstance(used, (int, float)) else math.nan
    out = [Process(pid, *owner(pid, proc), mib) for pid, mib in found.items()]
    return sorted(out, key=lambda p: (-p.mem_mib if not math.isnan(p.mem_mib) else math.inf, p.pid))


def owner(pid: int, proc: Path | None = None) -> tuple[str, str]:
    """(user, command line) of a process from /proc; `?` for what cannot be read (gone, another namespace)."""
    d = (PROC if proc is None else proc) / str(pid)
    try:
        uid = d.stat().st_uid
    except OSError:
        return "?", "?"
    try:
        user = pwd.getpwuid(uid).pw_name
    except KeyError:  # a uid with no name here (a container's user)
        user = str(uid)
    try:
        argv = [a.decode(errors="replace") for a in (d / "cmdline").read_bytes().split(b"\0") if a]
        command = " ".join(argv) or f"[{(d / 'comm').read_text().strip()}]"
    except OSError:
        command = "?"
    return visible(user), visible(command)  # a command line is words from outside: never control characters
