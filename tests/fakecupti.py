"""A stand-in for cupti-python (its bindings, pm_sampling and profiler_host) that runs on any CPU.

It keeps the parts of the real one that the CUPTI source relies on: parameter structs passed by `.ptr`,
errors carrying a CUPTI status, a Collector whose every disable tears the process-wide profiler down
(through `Collector._profiler_deinitialize`, looked up at call time as in cupti-python 13.4), configure
raising ValueError for what the chip lacks, and decode returning the samples completed since the last
decode. A World holds the machine: chips, what each offers, who holds the counters, the samples.
"""

from __future__ import annotations

import enum
import itertools
import math
from dataclasses import dataclass, field
from types import SimpleNamespace


class Result(enum.IntEnum):
    SUCCESS = 0
    ERROR_INVALID_PARAMETER = 1
    ERROR_INVALID_OPERATION = 7
    ERROR_HARDWARE_BUSY = 26
    ERROR_NOT_SUPPORTED = 27
    ERROR_INSUFFICIENT_PRIVILEGES = 35
    ERROR_UNKNOWN = 999


class cuptiError(Exception):  # noqa: N801  (the real class's name)
    def __init__(self, status):
        self.status = int(status)
        super().__init__(Result(status).name)


class TriggerMode(enum.IntEnum):
    GPU_SYSCLK_INTERVAL = 0
    GPU_TIME_INTERVAL = 1


class HardwareBufferAppendMode(enum.IntEnum):
    KEEP_OLDEST = 0
    KEEP_LATEST = 1


class ProfilerType(enum.IntEnum):
    RANGE_PROFILER = 0
    PM_SAMPLING = 1


@dataclass
class Sample:
    start_timestamp: int
    end_timestamp: int
    metric_values: list[float]


@dataclass
class World:
    chips: dict[int, str] = field(default_factory=lambda: {0: "GH100"})  # CUDA index -> chip
    offered: set[str] = field(default_factory=set)  # metric names PM sampling offers
    host_errors: set[str] = field(default_factory=set)  # metrics the host API answers with a CUPTI error
    enable_error: Exception | None = None  # what enable raises besides the cases below
    per_pass: int = 64  # metrics that fit one pass
    supported_chips: tuple[str, ...] = ("TU102", "GA100", "GA102", "GH100", "AD102", "GB202")
    busy: bool = False  # another reader holds the counters
    admin_only: bool = False
    needs_context: bool = False  # enable fails until a CUDA context exists
    context: bool = False
    time_trigger: bool = True  # GPU_TIME_INTERVAL supported (GA10x on)
    keep_latest: bool = True
    profiler_up: int = 0  # initialised and not torn down
    deinits: int = 0
    enabled: set[int] = field(default_factory=set)
    log: list[str] = field(default_factory=list)
    pending: dict[int, list[Sample]] = field(default_factory=dict)  # CUDA index -> samples not yet decoded
    configured: dict[int, dict] = field(default_factory=dict)
    clock_ns: itertools.count = field(default_factory=lambda: itertools.count(1_000_000_000, 10_000_000))

    def emit(self, index: int, n: int, values: dict[str, float]) -> None:
        """n samples of 10 ms on CUDA device `index`, each with these metric values."""
        names = self.configured[index]["metrics"]
        for _ in range(n):
            start = next(self.clock_ns)
            self.pending.setdefault(index, []).append(
                Sample(start, start + 10_000_000, [values.get(m, math.nan) for m in names])
            )

    def modules(self):
        """(bindings, pm_sampling, profiler_host) as cupti-python would give them: made once, like modules."""
        if not hasattr(self, "_modules"):
            self._modules = make_bindings(self), make_pm_sampling(self), make_profiler_host(self)
        return self._modules


_structs: dict[int, object] = {}


class Params:
    """A parameter struct: fields set by attribute, passed to a function by `.ptr`."""

    def __init__(self):
        self.struct_size = 0
        _structs[id(self)] = self

    @property
    def ptr(self) -> int:
        return id(self)


def make_bindings(world: World):
    def profiler_initialize(ptr):
        assert _structs[ptr].struct_size == 16
        world.profiler_up += 1
        world.log.append("profiler_initialize")

    def profiler_deinitialize(ptr):
        if world.enabled:  # the real teardown under a live collector: undefined, seen to crash
            raise AssertionError(f"profiler torn down while collectors {sorted(world.enabled)} are enabled")
        world.deinits += 1
        world.profiler_up = 0
        world.log.append("profiler_deinitialize")

    def device_get_chip_name(ptr):
        p = _structs[ptr]
        if not world.profiler_up or p.device_index not in world.chips:
            raise cuptiError(Result.ERROR_INVALID_PARAMETER)
        p.p_chip_name = world.chips[p.device_index]

    return SimpleNamespace(
        Result=Result,
        cuptiError=cuptiError,
        ProfilerInitializeParams=Params,
        ProfilerDeInitializeParams=Params,
        DeviceGetChipNameParams=Params,
        PROFILER_INITIALIZE_PARAMS_STRUCT_SIZE=16,
        PROFILER_DEINITIALIZE_PARAMS_STRUCT_SIZE=16,
        DEVICE_GET_CHIP_NAME_PARAMS_STRUCT_SIZE=32,
        profiler_initialize=profiler_initialize,
        profiler_deinitialize=profiler_deinitialize,
        device_get_chip_name=device_get_chip_name,
    )


def make_pm_sampling(world: World):
    class CounterData:
        def __init__(self, metrics, samples):
            self.metrics, self._samples = list(metrics), samples

        def __iter__(self):
            return iter(self._samples)

        def __len__(self):
            return len(self._samples)

    class Collector:
        def __init__(self, device_index: int = 0):
            self.index, self.on, self.started = device_index, False, False

        def enable(self):
            world.profiler_up += 1
            if world.admin_only:
                Collector._profiler_deinitialize()
                raise PermissionError("Insufficient privileges for PM sampling")
            if world.busy:
                Collector._profiler_deinitialize()
                raise cuptiError(Result.ERROR_HARDWARE_BUSY)
            if world.needs_context and not world.context:
                Collector._profiler_deinitialize()
                raise cuptiError(Result.ERROR_UNKNOWN)
            if world.enable_error is not None:
                raise world.enable_error
            if self.index in world.enabled:
                raise RuntimeError("PM sampling is already enabled on this device.")
            self.on = True
            world.enabled.add(self.index)
            world.log.append(f"enable {self.index}")

        def configure(self, *, metrics, hardware_buffer_size, sampling_interval, trigger_mode, hw_buffer_append_mode):
            if (
                trigger_mode == TriggerMode.GPU_TIME_INTERVAL
                and not world.time_trigger
                or hw_buffer_append_mode == HardwareBufferAppendMode.KEEP_LATEST
                and not world.keep_latest
            ):
                raise ValueError("Requested PM sampling configuration is not supported.")
            if any(m not in world.offered for m in metrics):
                raise ValueError("One or more metrics are invalid")
            world.configured[self.index] = {
                "metrics": list(metrics),
                "interval": sampling_interval,
                "trigger": trigger_mode,
                "append": hw_buffer_append_mode,
                "buffer": hardware_buffer_size,
            }

        def start(self):
            self.started = True

        def stop(self):
            if not self.started:
                raise RuntimeError("PM Sampling collection has already stopped")
            self.started = False

        def decode(self, max_samples: int = 10000):
            taken = world.pending.get(self.index, [])[:max_samples]
            world.pending[self.index] = world.pending.get(self.index, [])[len(taken) :]
            return CounterData(world.configured[self.index]["metrics"], taken)

        def disable(self):
            if self.on:
                self.on = False
                world.enabled.discard(self.index)
                world.log.append(f"disable {self.index}")
                Collector._profiler_deinitialize()

        @staticmethod
        def _profiler_deinitialize():
            p = Params()
            p.struct_size = 16
            make_bindings(world).profiler_deinitialize(p.ptr)

    return SimpleNamespace(
        Collector=Collector, TriggerMode=TriggerMode, HardwareBufferAppendMode=HardwareBufferAppendMode
    )


def make_profiler_host(world: World):
    class ProfilerHost:
        def __init__(self, chip_name, profiler_type):
            assert profiler_type == ProfilerType.PM_SAMPLING
            self.chip, self.ready = chip_name, False

        def initialize(self):
            self.ready = True

        def deinitialize(self):
            self.ready = False

        def create_config_image(self, metrics):
            assert self.ready
            if world.host_errors & set(metrics):
                raise cuptiError(Result.ERROR_INVALID_PARAMETER)
            bad = [m for m in metrics if m not in world.offered]
            if bad:
                raise ValueError(f"One or more metrics in {bad!r} are invalid or not supported on {self.chip}")
            return list(metrics)

    def get_num_of_passes(image):
        return max(1, math.ceil(len(image) / world.per_pass))

    return SimpleNamespace(
        ProfilerHost=ProfilerHost,
        ProfilerType=ProfilerType,
        get_supported_chips=lambda: list(world.supported_chips),
        get_num_of_passes=get_num_of_passes,
    )
