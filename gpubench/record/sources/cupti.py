"""The profiling counters through CUPTI PM sampling (NVIDIA's cupti-python), on any GPU from Turing on.

NVML GPM needs a Hopper or newer data-centre GPU and DCGM a daemon; CUPTI's PM sampling reads the same
hardware counters on consumer GPUs too. The GPU writes one sample of the chosen counters every 10 ms
into a hardware buffer; each read() decodes the samples completed since the last one and averages them,
so a row of 100 ms holds about ten samples and lags the row's interval by up to one sample. A read with
no completed sample gives NaN, never the last value again.

Metric names differ between chips and CUPTI versions: at open() each chip gets the counters it offers
(gpubench.record.sources.cupti_metrics), and the manifest records the metric behind each column; what the
source stands on (cupti-python, libcupti's version, a CUDA context) is gpubench.record.sources.cupti_library.
Costs: the driver must be initialised in this process (cuInit), the hardware buffer, and
the profiling lock that every counter reader shares (see holders.py). cupti-python is an optional
dependency, imported only when this source opens.
"""

from __future__ import annotations

import contextlib
import math
from dataclasses import dataclass

from gpubench.record import nvml
from gpubench.record.gpus import CudaUnavailable, cuda_uuids

from . import Source, SourceUnavailable
from .cupti_library import Cuda, check_libcupti, chip_name, describe, libcupti_versions, load, result_name, version
from .cupti_metrics import CANDIDATES, Reading, choose, is_pct
from .holders import ADMIN_ONLY, CountersBusy, busy_sentence

SAMPLE_NS = 10_000_000  # one PM sample every 10 ms of GPU time
BUFFER_BYTES = 64 * 2**20  # the hardware buffer: minutes of samples at this rate
MAX_SAMPLES = 1000  # decoded per read at most; the rest waits for the next read
BUSY = {"ERROR_HARDWARE_BUSY"}  # CUPTI's code for counters another client holds
NO_PRIVILEGE = {"ERROR_INSUFFICIENT_PRIVILEGES", "ERROR_VIRTUALIZED_DEVICE_INSUFFICIENT_PRIVILEGES"}


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
        self._cuda: Cuda | None = None
        self._choices: dict[str, dict[str, Reading]] = {}  # chip -> column -> reading
        self.notes: list[str] = []

    # --- opening ---------------------------------------------------------------------------------

    def open(self, gpus):
        self._mods = bindings, pm, ph = load()
        try:
            uuids = cuda_uuids()  # initialises the CUDA driver, which CUPTI needs, and maps NVML to CUDA
        except CudaUnavailable as err:
            raise SourceUnavailable(f"CUPTI needs the CUDA driver: {err}") from None
        try:
            chips = ph.get_supported_chips()  # host-side only; loads libcupti
            check_libcupti(libcupti_versions(), version("cupti-python"))
            self._initialize(bindings)
            for g in gpus:
                uuid = nvml.uuid_of(nvml.handle(g))
                if uuid not in uuids:
                    raise SourceUnavailable(
                        f"GPU {g} is not visible to CUDA in this process (CUDA_VISIBLE_DEVICES), "
                        "and CUPTI reads only the GPUs a process can see"
                    )
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
        labels = {
            c: sorted({st.readings[c].label for st in self._gpus.values() if c in st.readings}) for c in self.columns
        }
        self.resolution = {
            c: f"CUPTI PM sampling of {' / '.join(labels[c])}, one sample every "
            f"{SAMPLE_NS / 1e6:g} ms; a row averages the samples completed since the previous row"
            for c in self.columns
        }

    def _initialize(self, bindings) -> None:
        p = bindings.ProfilerInitializeParams()
        p.struct_size = bindings.PROFILER_INITIALIZE_PARAMS_STRUCT_SIZE
        bindings.profiler_initialize(p.ptr)
        self._profiler_up = True

    def _open_one(self, g: int, index: int, chips: list[str]) -> _Gpu:
        bindings, pm, ph = self._mods
        chip = chip_name(bindings, index)
        if chip not in chips:
            raise SourceUnavailable(f"this CUPTI does not know GPU {g}'s chip ({chip}): a newer cupti-python may")
        if chip not in self._choices:
            self._choices[chip] = choose(ph, chip, (ValueError, bindings.cuptiError))
        readings = self._choices[chip]
        if "sm_active_pct" not in readings:
            raise SourceUnavailable(
                f"PM sampling on GPU {g} ({chip}) offers none of the metrics gpubench reads for SM activity"
            )
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
                self._cuda = self._cuda or Cuda()
                context = self._cuda.retain(index)
                self.notes.append(f"GPU {g}: CUPTI needed a CUDA context in this process ({describe(err)})")
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
                        sums[name] += v * dt if is_pct(name) else v
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
        name = result_name(self._mods[0], err) if self._mods else ""
        if isinstance(err, SourceUnavailable):
            return err
        if isinstance(err, PermissionError) or name in NO_PRIVILEGE:
            return SourceUnavailable(ADMIN_ONLY)
        if name in BUSY or (isinstance(err, RuntimeError) and "already enabled" in str(err)):
            return CountersBusy(busy_sentence())
        return SourceUnavailable(f"CUPTI PM sampling could not {doing} on GPU {g}: {describe(err)}")


def _configure(pm, col, metrics: list[str]) -> None:
    """A fixed-time trigger keeping the newest samples where the chip has them (GA10x on), else clock cycles
    (Turing, GA100: SAMPLE_NS cycles of the system clock, about as long) and the oldest."""
    modes = [
        (pm.TriggerMode.GPU_TIME_INTERVAL, pm.HardwareBufferAppendMode.KEEP_LATEST),
        (pm.TriggerMode.GPU_TIME_INTERVAL, pm.HardwareBufferAppendMode.KEEP_OLDEST),
        (pm.TriggerMode.GPU_SYSCLK_INTERVAL, pm.HardwareBufferAppendMode.KEEP_OLDEST),
    ]
    for i, (trigger, append) in enumerate(modes):
        try:
            col.configure(
                metrics=metrics,
                hardware_buffer_size=BUFFER_BYTES,
                sampling_interval=SAMPLE_NS,
                trigger_mode=trigger,
                hw_buffer_append_mode=append,
            )
            return
        except ValueError:  # cupti-python's answer for a trigger or append mode this chip lacks
            if i == len(modes) - 1:
                raise
