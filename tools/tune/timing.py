"""The decode and read sweeps' timing and compiling: a time budget, windows of calls timed in turns
(ABC, CBA, ...) after settling at sustained clocks, rows of medians and paired speeds over torch, and
compiling every setting ahead in worker processes, into Triton's on-disk cache. With dry=True the
windows run on a host clock (Triton's interpreter, on the CPU)."""

from __future__ import annotations

import json
import statistics
import time
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait

import torch
from tools.tune import space

from gpubench.stats import quantile

ROWS: list[dict] = []


class Budget:
    def __init__(self, seconds: float):
        self.deadline = time.monotonic() + seconds

    def left(self) -> float:
        return self.deadline - time.monotonic()


# --- timing ------------------------------------------------------------------------------------------


def _window_ms(fn, calls: int, seconds: float, dry: bool) -> float:
    """GPU time per call over `seconds` of groups of `calls` calls (one group when seconds is 0)."""
    if dry:  # the interpreter: a host clock is all there is
        t0, n = time.perf_counter(), 0
        while n == 0 or time.perf_counter() - t0 < seconds:
            fn()
            n += 1
        return (time.perf_counter() - t0) * 1e3 / n
    from gpubench.truth.timing import time_loop

    if seconds <= 0:
        return time_loop(fn, calls_per_timing=calls, groups=1).median_ms
    return time_loop(fn, calls_per_timing=calls, duration_s=seconds).median_ms


def turns(fns: dict, rounds: int, window_s: float, settle_s: float, dry: bool) -> dict:
    """Window medians of each function, taken in turns (ABC, CBA, ...) after settling at sustained clocks."""
    calls = {}
    for name, fn in fns.items():
        _window_ms(fn, 3, 0.0, dry)  # warm: caches, clocks, a first launch
        calls[name] = max(1, int(10.0 / max(_window_ms(fn, 3, 0.0, dry), 1e-4)))  # ~10 ms groups
    deadline = time.monotonic() + settle_s
    while time.monotonic() < deadline:
        for name, fn in fns.items():
            _window_ms(fn, calls[name], 0.0, dry)
    med = {name: [] for name in fns}
    order = list(fns)
    for r in range(rounds):
        for name in order if r % 2 == 0 else order[::-1]:
            med[name].append(_window_ms(fns[name], calls[name], window_s, dry))
    return med


def record(family: str, stage: str, med: dict, reference: str, nbytes: float, flops: float, facts: dict) -> list:
    """One row per function: its median, spread, and its speed over the reference paired window by window."""
    rows = []
    for name, ms in med.items():
        ratios = [r / m for m, r in zip(ms, med[reference])]
        m = statistics.median(ms)
        row = {
            "family": family,
            "stage": stage,
            "name": name,
            "median_ms": m,
            "p10_ms": quantile(ms, 0.1),
            "p90_ms": quantile(ms, 0.9),
            "speed_vs_ref": statistics.median(ratios),
            "speed_vs_ref_p10": quantile(ratios, 0.1),
            "speed_vs_ref_p90": quantile(ratios, 0.9),
            "gbps": nbytes / m / 1e6,
            "tflops": flops / m / 1e9,
            "reference": reference,
            **facts.get(name, {}),
        }
        rows.append(row)
        ROWS.append(row)
    return rows


def best(rows: list[dict], prefixes: tuple, count: int) -> list[str]:
    mine = [r for r in rows if r["name"].startswith(prefixes)]
    return [r["name"] for r in sorted(mine, key=lambda r: -r["speed_vs_ref"])[:count]]


# --- compiling ahead, in parallel ----------------------------------------------------------------------


def _context_ok(dry: bool) -> bool:
    """Whether this process can still launch: a kernel that faulted leaves CUDA's context broken, and every
    later launch in the process would fail with its error."""
    if dry:
        return True
    try:
        torch.cuda.synchronize()
        return True
    except Exception:  # noqa: BLE001 (any error of the context's)
        return False


def _compile(jobs: list, sizes: dict, dry: bool) -> tuple[list, list]:
    """In a worker: run each setting once at the sweep's shapes (same specialization, so the main process
    finds the compiled kernel in Triton's cache); report each failure as one line. Returns (done, left):
    after a failure that broke the process's CUDA context, the jobs not yet run are left for a fresh one."""
    import os

    if dry:
        os.environ["TRITON_INTERPRET"] = "1"
    from gpubench.kernels import decode, read

    device = "cpu" if dry else "cuda"
    done, inputs = [], {}
    for i, (family, b, c) in enumerate(jobs):
        try:
            if family == "read":
                x = inputs.setdefault("read", read.make_input(sizes["read_n"], device))
                out = torch.empty((), device=device)
                read.triton_read(x, out, read.Workspace(read.triton_programs(device, c), device), c)
            else:
                if "w" not in inputs:
                    inputs["w"] = decode.make_inputs(1, sizes["k"], sizes["n"], device)[1]
                x = torch.randn(b, sizes["k"], device=device).to(torch.bfloat16)
                y = torch.empty(b, sizes["n"], device=device, dtype=torch.bfloat16)
                decode.triton_decode(x, inputs["w"], y, config=c)
            if not dry:
                torch.cuda.synchronize()
            done.append((family, b, _key(family, c), None))
        except Exception as err:  # reported, never fatal: the sweep leaves the setting out
            done.append((family, b, _key(family, c), f"{type(err).__name__}: {str(err).splitlines()[0][:160]}"))
            if not _context_ok(dry):
                return done, jobs[i + 1 :]
    return done, []


def _key(family: str, c: dict) -> str:
    return space.dumps(c) if family == "decode" else json.dumps(c, sort_keys=True)


def _name(family: str, b: int, key: str) -> str:
    return f"{family}-b{b}: {space.tag(json.loads(key))}" if family == "decode" else f"{family}: {key}"


def precompile(jobs: list, sizes: dict, workers: int, seconds: float, dry: bool) -> dict:
    """{(family, b, settings): error or None} for the jobs compiled and launched once within `seconds`,
    each failure printed; the workers still busy then are ended. Every batch of jobs runs in a process of
    its own, and the jobs after a kernel that broke its process's CUDA context go to a fresh one, so that
    one faulting setting does not fail the settings compiled after it. The broad sweep compiles the rest
    in the main process when first run; the second sweep leaves them out (a launch that never returned
    would stop the sweep)."""
    import multiprocessing

    if workers < 1 or not jobs:
        return {}
    t0 = time.monotonic()
    chunks = [jobs[i :: workers * 4] for i in range(workers * 4)]
    out: dict = {}
    pool = ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn"), max_tasks_per_child=1)
    try:
        pending = {pool.submit(_compile, c, sizes, dry) for c in chunks if c}
        while pending:
            finished, pending = wait(
                pending, timeout=max(seconds - (time.monotonic() - t0), 0.0), return_when=FIRST_COMPLETED
            )
            if not finished:  # past the time: a worker still busy may be stuck in a launch that never returns, and
                for proc in list(getattr(pool, "_processes", {}).values()):  # it must not hold the GPU
                    proc.terminate()
                break
            for f in finished:
                try:
                    done, left = f.result()
                except Exception as err:  # a worker that died: its settings compile later, in the main process
                    print(f"a compile worker failed: {type(err).__name__}: {err}", flush=True)
                    continue
                for fam, b, key, err in done:
                    out[(fam, b, key)] = err
                    if err:
                        print(f"{_name(fam, b, key)} failed to compile or launch: {err}", flush=True)
                if left and time.monotonic() - t0 < seconds:
                    try:
                        pending.add(pool.submit(_compile, left, sizes, dry))
                    except Exception as err:  # a pool broken by a worker that died: the main process compiles them
                        print(f"{len(left)} settings left to the main process: {type(err).__name__}", flush=True)
    finally:
        pool.shutdown(wait=False, cancel_futures=True)
    bad = sum(err is not None for err in out.values())
    print(
        f"compiled {len(out)} of {len(jobs)} settings in {time.monotonic() - t0:.0f} s with {workers} "
        f"processes; {bad} failed to compile or launch",
        flush=True,
    )
    return out


def say(family: str, rows: list[dict]) -> None:
    for r in sorted(rows, key=lambda r: -r["speed_vs_ref"]):
        print(
            f"{family:<11} {r['name']:<30} {r['median_ms']:8.4f} ms  x{r['speed_vs_ref']:.3f} vs torch "
            f"[{r['speed_vs_ref_p10']:.3f}, {r['speed_vs_ref_p90']:.3f}]  {r['gbps']:7.0f} GB/s "
            f"{r['tflops']:6.1f} TFLOP/s",
            flush=True,
        )
