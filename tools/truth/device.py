"""The GPU of tools/truth/gpu.py: CUDA device 0 and its NVML handle, GEMMs in every tensor dtype timed in groups
stamped on the GPU's timeline, and every NVML GPM pipe counter the driver answers (the ids it refuses dropped and
named). tools/truth/fake.py stands in for it on a CPU."""

from __future__ import annotations

import math
import sys
import time
from pathlib import Path


from gpubench.truth import ceiling
from tools.truth.probe import COUNTERS, ROOT, SIZE, bounded


class GpmCounters:
    """GPM counters of one GPU as consecutive intervals, each read pairing a new sample with the last. An id the
    driver does not know makes it refuse the whole request: each id is then asked alone once, those it refuses
    are dropped (they read NaN) and named in `refused`, and the rest are read on."""

    def __init__(self, h, counters: dict[str, int]):
        from gpubench.record import nvml

        self.nvml, self.h, self.counters = nvml, h, dict(counters)
        self.refused: dict[str, str] = {}  # column -> NVML's error
        self._prev, self._next = nvml.gpm_sample_alloc(), nvml.gpm_sample_alloc()
        nvml.gpm_sample_get(h, self._prev)  # the first interval starts here: no metric is asked of an empty sample

    def read(self) -> dict:
        nvml = self.nvml
        nvml.gpm_sample_get(self.h, self._next)
        try:
            got = nvml.gpm_metrics(self._prev, self._next, list(self.counters.values()))
        except nvml.NVMLError:
            refused = nvml.gpm_refused(self._prev, self._next, list(self.counters.values()))
            if len(refused) == len(self.counters):
                raise  # every id alone refused too: not an id's fault
            for column, metric_id in list(self.counters.items()):
                if metric_id in refused:
                    self.refused[column] = f"id {metric_id}: {refused[metric_id]}"
                    del self.counters[column]
            print(
                f"GPM: NVML refused {', '.join(f'{c} ({w})' for c, w in self.refused.items())}; read without them",
                file=sys.stderr,
            )
            got = nvml.gpm_metrics(self._prev, self._next, list(self.counters.values()))
        self._prev, self._next = self._next, self._prev
        return {**dict.fromkeys(COUNTERS, math.nan), **dict(zip(self.counters, got))}

    def close(self) -> None:
        for sample in (self._prev, self._next):
            self.nvml.gpm_sample_free(sample)
        self._prev = self._next = None


class Gpu:
    """CUDA device 0, its NVML handle (by UUID) and its GPM counters."""

    def __init__(self):
        import torch

        from gpubench.record import gpus, nvml
        from gpubench.record.rundir import slug
        from gpubench.truth.peaks import datasheet_for

        self.torch, self.nvml = torch, nvml
        gpu, _ = gpus.resolve(0, False)
        torch.cuda.set_device(gpu.cuda_index)
        self.h = nvml.handle(gpu.nvml_index)
        info = nvml.device_info(gpu.nvml_index)
        self.name, self.slug = info["name"], slug(info["name"])
        self.ceiling = ceiling.ceiling_for(self.name, datasheet_for(self.name, info.get("memory_mib")))
        self.gpm = GpmCounters(self.h, COUNTERS)

    @property
    def refused(self) -> dict:
        return self.gpm.refused

    def sample(self) -> dict:
        return {**self.nvml.read_basic(self.h), **self.gpm.read()}

    def close(self) -> None:
        """Lets go of the GPM samples before a watch reads the counters in another process."""
        self.gpm.close()

    def gemms(self, say):
        """(label, dtype, (run, FLOPs a call)) of each GEMM, checked first against a float64 reference."""
        torch = self.torch
        from gpubench.kernels import gemm

        for impl, dtype in (("torch", "bfloat16"), ("triton", "bfloat16"), ("torch", "float16"), ("cupy", "float16")):
            try:
                prepared = gemm.prepare(impl, dtype=dtype)
                prepared.check()
            except Exception as err:  # a missing library or a wrong kernel: said, and the others go on
                say(f"(a) gemm-{impl} {dtype} skipped: {type(err).__name__}: {err}")
                continue
            yield f"gemm-{impl} {dtype}", "bf16" if dtype == "bfloat16" else "fp16", (prepared.run, prepared.work.flops)
        for dtype, make in (("tf32", self._tf32), ("fp8", self._fp8)):
            try:
                run, check = make(SIZE)
                _, small = make(1024)
                small()
            except Exception as err:
                say(f"(a) {dtype} skipped: {type(err).__name__}: {err}")
                continue
            yield f"torch {dtype}", dtype, (run, 2.0 * SIZE**3)
        torch.backends.cuda.matmul.allow_tf32 = False

    def _inputs(self, n):
        g = self.torch.Generator(device="cuda").manual_seed(0)
        return (self.torch.randn(n, n, device="cuda", generator=g), self.torch.randn(n, n, device="cuda", generator=g))

    def _tf32(self, n):
        torch = self.torch
        torch.backends.cuda.matmul.allow_tf32 = True
        a, b = self._inputs(n)
        c = torch.full((n, n), math.nan, device="cuda")

        def check():
            torch.matmul(a, b, out=c)
            ref = a.double() @ b.double()
            err = ((c.double() - ref).abs().max() / ref.abs().max()).item()
            if not err < 5e-3:
                raise AssertionError(f"tf32 matmul off by {err:.2g} of the largest value")

        return (lambda: torch.matmul(a, b, out=c)), check

    def _fp8(self, n):
        torch = self.torch
        a, b = self._inputs(n)
        a8, b8 = a.to(torch.float8_e4m3fn), b.to(torch.float8_e4m3fn).t().contiguous().t()
        one = torch.ones((), device="cuda")

        def run():
            return torch._scaled_mm(a8, b8, scale_a=one, scale_b=one, out_dtype=torch.bfloat16)

        def check():
            ref = a8.float().double() @ b8.float().double()
            err = ((run().double() - ref).abs().max() / ref.abs().max()).item()
            if not err < 2e-2:
                raise AssertionError(f"fp8 matmul off by {err:.2g} of the largest value")

        return run, check

    def run_for(self, gemm, warm_s: float, timed_s: float, duty: float):
        """Warm up, then run for timed_s (all the time, or in 20 ms bursts at `duty`); the GPU-stamped window
        of the timed calls and their FLOPs."""
        from gpubench.truth.timing import calls_for, time_loop, warm_up

        run, flops = gemm
        calls = calls_for(warm_up(run))
        time_loop(run, calls_per_timing=calls, duration_s=warm_s)
        if duty >= 1.0:
            t = time_loop(run, calls_per_timing=calls, duration_s=timed_s, stamped=True)
            return (t.spans[0][0], t.spans[-1][1]), flops * calls * len(t.spans)
        spans = self._bursts(run, calls, timed_s, idle_s=0.02 * (1 - duty) / duty)
        return (spans[0][0], spans[-1][1]), flops * calls * len(spans)

    def _bursts(self, run, calls: int, seconds: float, idle_s: float) -> list[tuple[float, float]]:
        torch = self.torch
        torch.cuda.synchronize()
        ref = torch.cuda.Event(enable_timing=True)
        ref.record()
        ref.synchronize()
        t_ref, spans = time.monotonic(), []
        deadline = t_ref + seconds
        while True:  # one burst at least
            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            a.record()
            for _ in range(calls):
                run()
            b.record()
            b.synchronize()
            spans.append((t_ref + ref.elapsed_time(a) / 1e3, t_ref + ref.elapsed_time(b) / 1e3))
            if time.monotonic() >= deadline:
                return spans
            time.sleep(idle_s)

    def square_wave(self, on_s: float, off_s: float, cycles: int) -> list[tuple[float, float]]:
        """A bf16 GEMM on for on_s and off for off_s, cycles times; each on-span as the GPU ran it."""
        from gpubench.kernels import gemm
        from gpubench.truth.timing import warm_up

        prepared = gemm.prepare("torch", dtype="bfloat16")
        calls = max(1, int(on_s * 1e3 / warm_up(prepared.run)))
        time.sleep(off_s)
        edges = []
        for _ in range(cycles):
            edges += self._bursts(prepared.run, calls, 1e-9, 0.0)
            time.sleep(off_s)
        return edges

    def watch(self, run: Path, argv: list[str], seconds: float) -> int | None:
        """`gpubench watch --out run -- argv`: its exit code, or None where it was stopped after `seconds`."""
        import subprocess

        child = subprocess.Popen(
            [sys.executable, "-m", "gpubench", "watch", "--out", str(run), "--", *argv],
            cwd=ROOT,
            start_new_session=True,
        )
        return bounded(child, seconds)

    def release(self) -> None:
        self.torch.cuda.synchronize()
        self.torch.cuda.empty_cache()
