"""The CUDA device gpu_benchmark times on: which GPU it is (CUDA device -> NVML by UUID, never "GPU 0"),
its fingerprint (with the settings that change its speed), L2 size and datasheet peaks, the L2 flush, the
blocking kernel ahead of a round, the settling of its clocks, its clocks after each round, and one
sampler that records its metrics for the whole session, from which each benchmark takes the rows of its
own window."""

from __future__ import annotations

import time

from gpubench.gate.compare import fingerprint
from gpubench.gate.plan import flush_bytes
from gpubench.read.summary import aligned_stats, steady_rows
from gpubench.record import gpus, nvml
from gpubench.record.sampler import Sampler
from gpubench.record.sources.policy import open_sources
from gpubench.suite.backend import CudaBackend
from gpubench.truth import peaks
from gpubench.truth.timing import calls_for, time_loop, warm_up

KEEP_ROWS = 6000  # ten minutes at 0.1 s: a benchmark's window is seconds long
LAUNCH_PROBE_CALLS = 20  # few enough that CUDA's launch queue never fills while the host launches them
LAUNCH_PROBE_MS = 20.0  # and no more GPU time than this: a 50 ms call is probed in 3 launches, not 20
NOT_MEDIANS = ("energy_j",)  # a counter: its median says nothing


class NoGpu(RuntimeError):
    """No GPU to benchmark on; the message is one sentence."""


def identify(cuda_index: int = 0) -> dict:
    """The fingerprint of this process's CUDA device `cuda_index`, asked of the CUDA driver and NVML (no torch)."""
    try:
        index = gpus.by_cuda_index(cuda_index).nvml_index
        return fingerprint({**nvml.device_info(index), **nvml.speed_settings(index)})
    except IndexError:
        raise NoGpu("CUDA sees no GPU in this process") from None
    except (gpus.CudaUnavailable, nvml.GpuUnavailable, nvml.NVMLError) as err:
        raise NoGpu(str(err)) from None


class CudaDevice:
    def __init__(self, cuda_index: int):
        backend = CudaBackend()
        self.gpu, _ = backend.resolve(cuda_index, all_gpus=False)
        info = backend.device_info(self.gpu)
        self.fingerprint = fingerprint({**info, **nvml.speed_settings(self.gpu.nvml_index)})
        self._nvml = nvml.handle(self.gpu.nvml_index)
        self._hold_out = None
        self._capture_stream = None
        self.l2_bytes = int(round(info["l2_cache_mib"] * 2**20))
        self.peaks = {"datasheet": peaks.sheet_for(info), "measured": None}
        self.versions = backend.versions()
        self._flush_buffer = None
        self._flush_ms = None
        index = self.gpu.nvml_index
        opened = open_sources([index], smi=False)
        self.sources = opened.sources
        self.sampler = Sampler(
            opened.sources, [index], opened.interval_s, keep_rows=KEEP_ROWS, uuids={index: self.gpu.uuid}
        ).start()

    def warm_up(self, run) -> float:
        self.hold(1.0)  # compiles the blocking kernel before anything is timed
        return warm_up(run)

    def launch_us(self, run, call_ms: float = 0.0) -> float:
        """The host's time to launch one call, in microseconds (the GPU may run it later); call_ms, one call's GPU
        time, bounds how many calls the probe launches."""
        import torch

        calls = max(3, min(LAUNCH_PROBE_CALLS, int(LAUNCH_PROBE_MS / max(call_ms, 1e-6))))
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(calls):
            run()
        host_s = time.perf_counter() - t0
        torch.cuda.synchronize()
        return host_s / calls * 1e6

    def graph(self, run, calls: int):
        """`calls` calls of run captured in one CUDA graph: (its replay, one call's GPU time in ms in it), or
        GraphRefused in one clause (gpubench.gate.capture)."""
        from gpubench.gate import capture

        if self._capture_stream is None:
            self._capture_stream = capture.CaptureStream()
        return capture.capture(run, calls, self._capture_stream)

    def hold(self, us: float) -> None:
        """Keep the GPU busy for `us` microseconds: one thread spins on the GPU's timer (kernels.spin)."""
        import torch

        from gpubench.kernels.spin import triton_spin

        if self._hold_out is None:
            self._hold_out = torch.empty(2, dtype=torch.int64, device=f"cuda:{self.gpu.cuda_index}")
        # a multiple of 16 ns: Triton compiles one variant for every such length, and once
        triton_spin(max(16, -(-int(us * 1e3) // 16) * 16), self._hold_out)

    def settle(self, run, call_ms: float, settle_s: float) -> None:
        """Calls back to back for settle_s, so the rounds start at the clock the GPU sustains."""
        if settle_s > 0:
            time_loop(run, calls_per_timing=calls_for(call_ms), duration_s=settle_s)

    def round_state(self) -> tuple[float, int | None]:
        """The SM clock (MHz) and NVML's clock-event reasons (a bitmask) now: read after each round."""
        return nvml.clock_now(self._nvml)

    def event_names(self, mask: int | None) -> list[str]:
        return nvml.clock_event_names(mask)

    def flush_l2(self) -> None:
        """Write a buffer of twice L2 (or more): whatever the next call reads comes from device memory."""
        import torch

        if self._flush_buffer is None:
            self._flush_buffer = torch.empty(
                flush_bytes(self.l2_bytes), dtype=torch.uint8, device=f"cuda:{self.gpu.cuda_index}"
            )
        self._flush_buffer.zero_()

    def flush_ms(self) -> float:
        if self._flush_ms is None:
            self._flush_ms = warm_up(self.flush_l2)
        return self._flush_ms

    def back_to_back(self, run, call_ms: float, duration_s: float) -> tuple[float, float, float]:
        """Calls back to back for duration_s (a window for the metrics): its start and end on the monotonic clock,
        and the median GPU time of one call of run in it (ms)."""
        t0 = time.monotonic()
        timings = time_loop(run, calls_per_timing=calls_for(call_ms), duration_s=duration_s)
        return t0, time.monotonic(), timings.median_ms

    def metrics(self, t_start: float, t_end: float) -> dict:
        """Medians of every sampled metric over the window's rows whose value covers only time inside it (a GPM
        value reaches 0.2 s back before its row, NVML's utilization 0.4 s, its power a second:
        gpubench.read.summary.TRAIL_S), and how many rows the window holds."""
        rows = steady_rows(self.sampler.rows_snapshot(), self.gpu.nvml_index, t_start, t_end, trim_s=0.0)
        columns = [c for c in self.sampler.columns if c not in NOT_MEDIANS]
        stats = aligned_stats(rows, t_start, columns)
        return {**{c: stats[c] for c in columns}, "n_samples": len(rows)}

    def close(self) -> None:
        self.sampler.stop()
        for source in self.sources:
            source.close()
        self._flush_buffer = None
        if self._capture_stream is not None:
            self._capture_stream.close()
            self._capture_stream = None
