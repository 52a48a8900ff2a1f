"""The profiling counters through CUPTI PM sampling (NVIDIA's cupti-python), on any GPU from Turing on.

NVML GPM needs a Hopper or newer data-centre GPU and DCGM a daemon; CUPTI's PM sampling reads the same
hardware counters on consumer GPUs too. The GPU writes one sample of the chosen counters every 10 ms
into a hardware buffer; each read() decodes the samples completed since the last one and averages them,
so a row of 100 ms holds about ten samples and lags the row's interval by up to one sample. A read with
no completed sample gives NaN, never the last value again.

Metric names differ between chips and CUPTI versions, so nothing is hard-coded to one chip: each column
has candidates, best first (DCGM's definition as Nsight Compute names it, then a ratio of raw counters),
and at open() CUPTI's profiler host API says which ones this chip offers for PM sampling; the columns
are added in order of importance while they still fit one pass, and the manifest records the metric
behind each. Costs: the driver must be initialised in this process (cuInit), the hardware buffer, and
the profiling lock that every counter reader shares (see holders.py). cupti-python is an optional
dependency, imported only when this source opens.
"""

from __future__ import annotations

import contextlib
import ctypes
import math
from dataclasses import dataclass
from importlib import metadata

from gpubench.record import nvml
from gpubench.record.gpus import CudaUnavailable, cuda_uuids

from . import Source, SourceUnavailable
from .holders import ADMIN_ONLY, CountersBusy, busy_sentence

SAMPLE_NS = 10_000_000  # one PM sample every 10 ms of GPU time
BUFFER_BYTES = 64 * 2**20  # the hardware buffer: minutes of samples at this rate
MAX_SAMPLES = 1000  # decoded per read at most; the rest waits for the next read
HINT = "pip install 'gpubench-ladder[cupti]' (cupti-python and the libcupti it needs)"
BUSY = {"ERROR_HARDWARE_BUSY"}  # CUPTI's code for counters another client holds
NO_PRIVILEGE = {"ERROR_INSUFFICIENT_PRIVILEGES", "ERROR_VIRTUALIZED_DEVICE_INSUFFICIENT_PRIVILEGES"}


@dataclass(frozen=True)
class Reading:
    """How one column is read: a percentage metric averaged over samples, or 100 x num / den summed."""

    metrics: tuple[str, ...]

    @property
    def label(self) -> str:
        return self.metrics[0] if len(self.metrics) == 1 else f"100 x {self.metrics[0]} / {self.metrics[1]}"

    def value(self, sums: dict[str, float], weight: float) -> float:
        if len(self.metrics) == 1:
            return sums[self.metrics[0]] / weight if weight else math.nan
        den = sums[self.metrics[1]]
        return 100.0 * sums[self.metrics[0]] / den if den else math.nan


def _pct(name: str) -> Reading:
    return Reading((name,))


def _ratio(num: str, den: str) -> Reading:
    return Reading((num, den))


def _elapsed(base: str) -> Reading:
    return _pct(f"{base}.avg.pct_of_peak_sustained_elapsed")


# Columns in order of importance (the ladder first), each with its candidates, best first. The
# `_realtime` counters are those Nsight Compute's own PM-sampling sections read on recent chips.
# DRAM activity is left out: beside NVML GPM on an H100 and an H200, dramc__throughput read 1/80 to 1/95 of
# GPM's DRAM active in every busy scenario (results/logs/cupti-*.log), so no CUPTI counter is shipped for
# it until one matches (dram__cycles_active over dram__cycles_elapsed is offered there, not yet compared).
NOT_SHIPPED = {"dram_active_pct": "no PM-sampling counter has matched NVML GPM's DRAM activity"}
CANDIDATES: dict[str, list[Reading]] = {
    "sm_active_pct": [_elapsed("sm__cycles_active"), _ratio("sm__cycles_active.avg", "sm__cycles_elapsed.avg")],
    "sm_occupancy_pct": [_elapsed("sm__warps_active"), _elapsed("tpc__warps_active_realtime"),
                         _elapsed("smsp__warps_active")],
    "tensor_active_pct": [_elapsed("sm__pipe_tensor_cycles_active_realtime"), _elapsed("sm__pipe_tensor_cycles_active"),
                          _elapsed("sm__pipe_tensor_op_hmma_cycles_active")],
    "fp32_active_pct": [_elapsed("sm__pipe_fma_cycles_active_realtime"), _elapsed("sm__pipe_fma_cycles_active")],
    "fp16_active_pct": [_elapsed("sm__pipe_fp16_cycles_active_realtime"), _elapsed("sm__pipe_fp16_cycles_active")],
    "fp64_active_pct": [_elapsed("sm__pipe_fp64_cycles_active_realtime"), _elapsed("sm__pipe_fp64_cycles_active")],
    "graphics_active_pct": [_elapsed("gr__cycles_active"), _ratio("gr__cycles_active.avg", "gr__cycles_elapsed.max")],
}


def _load():
    """cupti-python's modules: the bindings, the PM-sampling collector and the profiler host."""
    try:
        import cupti.cupti as bindings
        from cupti import pm_sampling, profiler_host
    except ImportError as err:
        raise SourceUnavailable(f"cupti-python is not installed ({err}): {HINT}") from None
    return bindings, pm_sampling, profiler_host


def libcupti_versions() -> dict[str, int]:
    """Every libcupti this process has loaded, with the API version it reports (130401 is 13.4 update 1)."""
    try:
        with open("/proc/self/maps") as f:
            paths = sorted({line.split()[-1] for line in f if "/libcupti.so" in line})
    except OSError:
        return {}
    found = {}
    for path in paths:
        version = ctypes.c_uint32()
        try:
            if ctypes.CDLL(path).cuptiGetVersion(ctypes.byref(version)) == 0:
                found[path] = version.value
        except (OSError, AttributeError):
            continue
    return found


def check_libcupti(versions: dict[str, int], wanted: str | None) -> None:
    """cupti-python X.Y needs libcupti X.Y or newer: an older one fails later with a bare INVALID_PARAMETER."""
    try:
        need = tuple(int(x) for x in (wanted or "").split(".")[:2])
    except ValueError:
        return
    if len(need) < 2:
        return
    for path, v in versions.items():
        have = (v // 10000, v // 100 % 100)
        if have < need:
            raise SourceUnavailable(
                f"cupti-python {wanted} needs libcupti {need[0]}.{need[1]} or newer, but this process loaded "
                f"libcupti {have[0]}.{have[1]} ({path}): pip install -U 'nvidia-cuda-cupti>={need[0]}.{need[1]}' "
                "(PyTorch's wheels pin an older one, so pip warns about the upgrade)")


class _Cuda:
    """The CUDA driver through ctypes: a primary context, only where PM sampling will not start without one."""

    def __init__(self):
        self.lib = ctypes.CDLL("libcuda.so.1")

    def retain(self, index: int) -> tuple[int, int]:
        dev, ctx = ctypes.c_int(), ctypes.c_void_p()
        if self.lib.cuDeviceGet(ctypes.byref(dev), index) or \
                self.lib.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), dev):
            raise SourceUnavailable(f"the CUDA driver could not create a context on CUDA device {index}")
        self.lib.cuCtxSetCurrent(ctx)
        return ctx.value, dev.value

    def make_current(self, ctx: int) -> None:
        self.lib.cuCtxSetCurrent(ctypes.c_void_p(ctx))

    def release(self, dev: int) -> None:
        release = getattr(self.lib, "cuDevicePrimaryCtxRelease_v2", None) or self.lib.cuDevicePrimaryCtxRelease
        release(dev)


@dataclass
class _Gpu:
    index: int  # CUDA's, in this process
    collector: object
    readings: dict[str, Reading]
    metrics: list[str]
    context: tuple[int, int] | None = None  # (ctx, dev) where this source had to create one
    last_end_ns: int = 0


class CuptiSource(Source):
    name = "cupti"
    columns = tuple(CANDIDATES)  # every column it may give; open() keeps those this chip offers
    min_interval_s = 0.1
    resolution: dict[str, str] = {}

    def __init__(self):
        self._gpus: dict[int, _Gpu] = {}
        self._mods = None
        self._profiler_up = False
        self._cuda: _Cuda | None = None
        self._choices: dict[str, dict[str, Reading]] = {}  # chip -> column -> reading
        self.notes: list[str] = []

    # --- opening ---------------------------------------------------------------------------------

    def open(self, gpus):
        self._mods = bindings, pm, ph = _load()
        try:
            uuids = cuda_uuids()  # initialises the CUDA driver, which CUPTI needs, and maps NVML to CUDA
        except CudaUnavailable as err:
            raise SourceUnavailable(f"CUPTI needs the CUDA driver: {err}") from None
        try:
            chips = ph.get_supported_chips()  # host-side only; loads libcupti
            check_libcupti(libcupti_versions(), _version("cupti-python"))
            self._initialize(bindings)
            for g in gpus:
                uuid = nvml.uuid_of(nvml.handle(g))
                if uuid not in uuids:
                    raise SourceUnavailable(f"GPU {g} is not visible to CUDA in this process (CUDA_VISIBLE_DEVICES), "
                                            "and CUPTI reads only the GPUs a process can see")
                self._gpus[g] = self._open_one(g, uuids.index(uuid), chips)
        except BaseException as err:
            self.close()
            if isinstance(err, SourceUnavailable):
                raise
            if isinstance(err, nvml.GpuUnavailable):
                raise SourceUnavailable(str(err)) from None
            if isinstance(err, Exception):
                raise self._why(err, "start", gpus[0] if gpus else 0) from None
            raise
        self.columns = tuple(c for c in CANDIDATES if any(c in st.readings for st in self._gpus.values()))
        labels = {c: sorted({st.readings[c].label for st in self._gpus.values() if c in st.readings})
                  for c in self.columns}
        self.resolution = {c: f"CUPTI PM sampling of {' / '.join(labels[c])}, one sample every "
                              f"{SAMPLE_NS / 1e6:g} ms; a row averages the samples completed since the previous row"
                           for c in self.columns}

    def _initialize(self, bindings) -> None:
        p = bindings.ProfilerInitializeParams()
        p.struct_size = bindings.PROFILER_INITIALIZE_PARAMS_STRUCT_SIZE
        bindings.profiler_initialize(p.ptr)
        self._profiler_up = True

    def _open_one(self, g: int, index: int, chips: list[str]) -> _Gpu:
        bindings, pm, ph = self._mods
        chip = _chip_name(bindings, index)
        if chip not in chips:
            raise SourceUnavailable(f"this CUPTI does not know GPU {g}'s chip ({chip}): a newer cupti-python may")
        if chip not in self._choices:
            self._choices[chip] = choose(ph, chip, (ValueError, bindings.cuptiError))
        readings = self._choices[chip]
        if "sm_active_pct" not in readings:
            raise SourceUnavailable(f"PM sampling on GPU {g} ({chip}) offers none of the metrics gpubench reads "
                                    "for SM activity")
        metrics = list(dict.fromkeys(m for r in readings.values() for m in r.metrics))
        col, context = pm.Collector(index), None
        with self._one_deinit():
            try:
                col.enable()
            except Exception as err:  # noqa: BLE001
                why = self._why(err, "start", g)
                if getattr(err, "status", None) is None or isinstance(why, CountersBusy) or ADMIN_ONLY in str(why):
                    raise why from None
                # Without a CUDA context some drivers refuse; make one (device memory) and try once more.
                self._cuda = self._cuda or _Cuda()
                context = self._cuda.retain(index)
                self.notes.append(f"GPU {g}: CUPTI needed a CUDA context in this process ({_describe(err)})")
                col = pm.Collector(index)
                try:
                    col.enable()
                except Exception as again:  # noqa: BLE001
                    raise self._why(again, "start", g) from None
        st = _Gpu(index, col, readings, metrics, context)
        self._gpus[g] = st  # closed with the others should what follows fail
        for doing, step in (("configure", lambda: _configure(pm, col, metrics)), ("start", col.start)):
            try:
                step()
            except Exception as err:  # noqa: BLE001
                raise self._why(err, doing, g) from None
        return st

    # --- reading ---------------------------------------------------------------------------------

    def read(self):
        out = {}
        for g, st in self._gpus.items():
            if st.context:  # the sampler's thread reads, not the one that opened: make the context current
                self._cuda.make_current(st.context[0])
            try:
                data = st.collector.decode(max_samples=MAX_SAMPLES)
                sums, weight = dict.fromkeys(st.metrics, 0.0), 0.0
                for s in data:
                    if s.start_timestamp < st.last_end_ns:  # decoded before: never counted twice
                        continue
                    st.last_end_ns = s.end_timestamp
                    dt = float(s.end_timestamp - s.start_timestamp)
                    weight += dt
                    for name, v in zip(data.metrics, s.metric_values):
                        # percentages average over time; raw counters of a ratio add up
                        sums[name] += v * dt if _is_pct(name) else v
            except Exception as err:  # noqa: BLE001
                raise self._why(err, "read", g) from None
            out[g] = {c: r.value(sums, weight) if weight else math.nan for c, r in st.readings.items()}
        return out

    # --- closing ---------------------------------------------------------------------------------

    def close(self):
        gpus, self._gpus = self._gpus, {}
        if self._mods is None:  # cupti-python was never loaded
            return
        with self._one_deinit():
            for st in gpus.values():
                for step in (st.collector.stop, st.collector.disable):
                    with contextlib.suppress(Exception):  # not started, or already stopped
                        step()
                if st.context:
                    with contextlib.suppress(Exception):
                        self._cuda.release(st.context[1])
        if self._profiler_up:  # once for the process, whatever the number of GPUs (see _one_deinit)
            self._profiler_up = False
            bindings = self._mods[0]
            p = bindings.ProfilerDeInitializeParams()
            p.struct_size = bindings.PROFILER_DEINITIALIZE_PARAMS_STRUCT_SIZE
            with contextlib.suppress(Exception):
                bindings.profiler_deinitialize(p.ptr)

    @contextlib.contextmanager
    def _one_deinit(self):
        """cupti-python's Collector tears CUPTI's profiler down on every disable, but that teardown is
        process-wide and not counted: with two GPUs the second collector would be left on a torn-down
        profiler. Within this block a collector's teardown leaves the profiler up; close() takes it
        down once, after the last collector."""
        pm = self._mods[1]
        saved = pm.Collector.__dict__.get("_profiler_deinitialize")  # the staticmethod itself, to put back as is
        if saved is None:
            yield
            return
        pm.Collector._profiler_deinitialize = staticmethod(lambda: None)
        try:
            yield
        finally:
            pm.Collector._profiler_deinitialize = saved

    # --- errors ----------------------------------------------------------------------------------

    def _why(self, err: Exception, doing: str, g: int) -> SourceUnavailable:
        """One sentence for a CUPTI error: counters held by another reader, no permission, or the error."""
        name = _result_name(self._mods[0], err) if self._mods else ""
        if isinstance(err, SourceUnavailable):
            return err
        if isinstance(err, PermissionError) or name in NO_PRIVILEGE:
            return SourceUnavailable(ADMIN_ONLY)
        if name in BUSY or (isinstance(err, RuntimeError) and "already enabled" in str(err)):
            return CountersBusy(busy_sentence())
        return SourceUnavailable(f"CUPTI PM sampling could not {doing} on GPU {g}: {_describe(err)}")


# --- helpers -------------------------------------------------------------------------------------

def _version(dist: str) -> str | None:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


def _is_pct(name: str) -> bool:
    return ".pct" in name


def _result_name(bindings, err) -> str:
    status = getattr(err, "status", None)
    if status is None:
        return ""
    try:
        return bindings.Result(status).name
    except ValueError:
        return str(status)


def _describe(err: Exception) -> str:
    text = str(err).strip()
    return f"{type(err).__name__}: {text}" if text else type(err).__name__


def _chip_name(bindings, index: int) -> str:
    p = bindings.DeviceGetChipNameParams()
    p.struct_size = bindings.DEVICE_GET_CHIP_NAME_PARAMS_STRUCT_SIZE
    p.device_index = index
    bindings.device_get_chip_name(p.ptr)
    return p.p_chip_name


def passes(ph, chip: str, metrics: list[str], refusals=(ValueError,)) -> int | None:
    """Passes PM sampling needs for these metrics on this chip; None where the host API refuses them
    (cupti-python raises ValueError for a metric the chip does not offer)."""
    host = ph.ProfilerHost(chip, ph.ProfilerType.PM_SAMPLING)
    try:
        host.initialize()
        return int(ph.get_num_of_passes(host.create_config_image(metrics)))
    except refusals:
        return None
    finally:
        host.deinitialize()


def choose(ph, chip: str, refusals=(ValueError,)) -> dict[str, Reading]:
    """Column -> reading: for each column in order, its first candidate this chip offers and that still
    fits one pass with the columns already chosen (PM sampling collects in one pass only)."""
    chosen: dict[str, Reading] = {}
    for column, candidates in CANDIDATES.items():
        taken = [m for r in chosen.values() for m in r.metrics]
        for reading in candidates:
            if passes(ph, chip, list(dict.fromkeys(taken + list(reading.metrics))), refusals) == 1:
                chosen[column] = reading
                break
    return chosen


def _configure(pm, col, metrics: list[str]) -> None:
    """A fixed-time trigger keeping the newest samples where the chip has them (GA10x on), else clock cycles
    (Turing, GA100: SAMPLE_NS cycles of the system clock, about as long) and the oldest."""
    modes = [(pm.TriggerMode.GPU_TIME_INTERVAL, pm.HardwareBufferAppendMode.KEEP_LATEST),
             (pm.TriggerMode.GPU_TIME_INTERVAL, pm.HardwareBufferAppendMode.KEEP_OLDEST),
             (pm.TriggerMode.GPU_SYSCLK_INTERVAL, pm.HardwareBufferAppendMode.KEEP_OLDEST)]
    for i, (trigger, append) in enumerate(modes):
        try:
            col.configure(metrics=metrics, hardware_buffer_size=BUFFER_BYTES, sampling_interval=SAMPLE_NS,
                          trigger_mode=trigger, hw_buffer_append_mode=append)
            return
        except ValueError:  # cupti-python's answer for a trigger or append mode this chip lacks
            if i == len(modes) - 1:
                raise
