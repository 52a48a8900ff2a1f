"""The decode and read sweeps of scripts/tune_kernels.py: compile every setting first (in parallel worker
processes, into Triton's on-disk cache), then per batch check each against the float64 reference, screen
them all against torch in short interleaved windows, and time the best few again, longer, in turns with
torch (and at B = 1 with a read and a copy of the same bytes: the two ceilings).

A time budget is checked before each step: a sweep that runs out stops cleanly with what it measured.
With dry=True everything runs on the CPU (Triton's interpreter, tiny sizes, a host clock): the check that
the script works before it meets a GPU.
"""

from __future__ import annotations

import json
import re
import statistics
import time
from concurrent.futures import ProcessPoolExecutor, wait
from pathlib import Path

import torch
import tune_space as space

from gpubench.stats import quantile

ROWS: list[dict] = []
ROOT = Path(__file__).resolve().parents[1]
SCREEN = {"rounds": 2, "window_s": 0.03}
FINAL = {"rounds": 6, "window_s": 0.08}
FINALISTS = 6


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
        row = {"family": family, "stage": stage, "name": name, "median_ms": m, "p10_ms": quantile(ms, 0.1),
               "p90_ms": quantile(ms, 0.9), "speed_vs_ref": statistics.median(ratios),
               "speed_vs_ref_p10": quantile(ratios, 0.1), "speed_vs_ref_p90": quantile(ratios, 0.9),
               "gbps": nbytes / m / 1e6, "tflops": flops / m / 1e9, "reference": reference, **facts.get(name, {})}
        rows.append(row)
        ROWS.append(row)
    return rows


def best(rows: list[dict], prefixes: tuple, count: int) -> list[str]:
    mine = [r for r in rows if r["name"].startswith(prefixes)]
    return [r["name"] for r in sorted(mine, key=lambda r: -r["speed_vs_ref"])[:count]]


# --- compiling ahead, in parallel ----------------------------------------------------------------------

def _compile(jobs: list, sizes: dict, dry: bool) -> list:
    """In a worker: run each setting once at the sweep's shapes (same specialization, so the main process
    finds the compiled kernel in Triton's cache); report each failure as one line."""
    import os

    if dry:
        os.environ["TRITON_INTERPRET"] = "1"
    from gpubench.kernels import decode, read

    device = "cpu" if dry else "cuda"
    done, inputs = [], {}
    for family, b, c in jobs:
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
    return done


def _key(family: str, c: dict) -> str:
    return space.dumps(c) if family == "decode" else json.dumps(c, sort_keys=True)


def precompile(jobs: list, sizes: dict, workers: int, seconds: float, dry: bool) -> dict:
    """{(family, b, settings): error or None} for the jobs compiled within `seconds`; the rest compile
    in the main process when first run."""
    import multiprocessing

    if workers < 1 or not jobs:
        return {}
    t0 = time.monotonic()
    chunks = [jobs[i::workers * 4] for i in range(workers * 4)]
    out: dict = {}
    pool = ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn"))
    try:
        futures = [pool.submit(_compile, c, sizes, dry) for c in chunks if c]
        finished, _ = wait(futures, timeout=max(seconds, 1.0))
        for f in finished:
            try:
                out.update({(fam, b, c): err for fam, b, c, err in f.result()})
            except Exception as err:  # a worker that died: its settings compile later, in the main process
                print(f"a compile worker failed: {type(err).__name__}: {err}", flush=True)
    finally:
        pool.shutdown(wait=False, cancel_futures=True)
    bad = sum(err is not None for err in out.values())
    print(f"compiled {len(out)} of {len(jobs)} settings in {time.monotonic() - t0:.0f} s with {workers} "
          f"processes; {bad} failed to compile or launch", flush=True)
    return out


# --- the sweeps ----------------------------------------------------------------------------------------

def _key_b(b: int) -> int:
    """Triton compiles apart for B = 1, multiples of 16, and the rest: one compile serves each class."""
    return 1 if b == 1 else 16 if b % 16 == 0 else 2


def decode_settings(batches, around_rows=None, sms: int = 132, n: int = 28672, k: int = 8192) -> dict:
    """Per batch, the settings to try: the broad space, or one step around the first sweep's best few."""
    if not around_rows:
        return {b: space.decode_space(b, n, k, sms) for b in batches}
    out = {}
    for b in batches:
        mine = [r for r in around_rows if r.get("family") == f"decode-b{b}" and r.get("cfg")]
        top = sorted(mine, key=lambda r: -float(r["speed_vs_ref"]))[:4]
        seeds = [json.loads(r["cfg"]) for r in top]
        out[b] = space.dedup(seeds + [c for s in seeds for c in space.around(s, b, n, k, sms)])[:48]
    return out


def sweep_decode(batches, budget: Budget, save, around_rows=None, workers: int = 8, dry: bool = False) -> None:
    from gpubench.kernels import copy, decode, decode_tiles, read
    from gpubench.kernels.common import CheckFailed, check_close, sm_count

    device = "cpu" if dry else "cuda"
    k, n = (2048, 96) if dry else (decode.SIZES["k"], decode.SIZES["n"])
    sms = sm_count()
    settings = decode_settings(batches, around_rows, sms, n, k)
    if dry:  # one setting of each kind: the kernels and knobs, each through the whole path
        kinds = ("ptr-", "tma-", "fma-", "-k", "-p", "-ef")
        settings = {b: space.dedup(next(c for c in s if kind in space.tag(c)) for kind in kinds
                                   if any(kind in space.tag(c) for c in s)) for b, s in settings.items()}
    jobs, seen = [], set()
    for b, configs in settings.items():
        for c in configs:
            if (_key_b(b), space.dumps(c)) not in seen:
                seen.add((_key_b(b), space.dumps(c)))
                jobs.append(("decode", b, c))
    compiled = precompile(jobs, {"k": k, "n": n}, workers, 0.4 * budget.left(), dry)
    failed = {(_key_b(b), c) for (_, b, c), err in compiled.items() if err}
    for b in batches:
        if budget.left() < 12:
            print(f"decode: the time budget is spent; batches from {b} on are not tuned", flush=True)
            break
        x, w = decode.make_inputs(b, k, n, device)
        y = torch.empty(b, n, device=device, dtype=torch.bfloat16)
        ref = decode.reference(x, w)
        work = decode.work(b, k, n)
        fns = {"torch": lambda x=x, w=w, y=y: decode.torch_decode(x, w, y)}
        facts = {}
        for c in settings[b]:
            name = space.tag(c)
            if (_key_b(b), space.dumps(c)) in failed:
                continue
            fn = lambda c=c, x=x, w=w, y=y: decode.triton_decode(x, w, y, config=c)  # noqa: E731
            try:
                y.fill_(float("nan"))
                launch = fn()
                facts[name] = {"b": b, "cfg": space.dumps(c), "launch": launch, **check_close(name, y, ref),
                               "programs": space.programs(c, b, n, k, sms),
                               "wave_efficiency": round(space.wave_efficiency(c, b, n, k, sms), 3)}
            except CheckFailed as err:
                print(f"decode-b{b}: {err}", flush=True)
                continue
            except Exception as err:  # a setting that does not compile or launch is reported, not fatal
                print(f"decode-b{b}: {name} failed: {type(err).__name__}: {str(err)[:160]}", flush=True)
                continue
            fns[name] = fn
        if b <= decode.CUPY_MAX_B and not dry:
            from gpubench.kernels.common import cupy

            cp = cupy()
            xc, wc, yc = (cp.from_dlpack(t.view(torch.int16)) for t in (x, w, y))
            for threads in (128, 256, 512):
                fns[f"cupy-t{threads}"] = lambda t=threads, xc=xc, wc=wc, yc=yc: decode.cupy_decode(xc, wc, yc, t)
        family = f"decode-b{b}"
        facts.update({name: {"b": b} for name in fns if name not in facts})
        screen = record(family, "screen", turns(fns, settle_s=0.5, dry=dry, **SCREEN), "torch", work.bytes,
                        work.flops, facts)
        final = {name: fns[name] for name in ["torch"] + best(screen, ("ptr-", "tma-", "fma-"), FINALISTS)
                 + best(screen, ("cupy-",), 1)}
        if b == 1:  # the two ceilings: a read and a copy of as many bytes
            ceil_read = read.prepare("torch", n=int(work.bytes // 4), device=device)
            ceil_copy = copy.prepare("torch", n=int(work.bytes // 8), device=device)
            final.update({"read-same-bytes": ceil_read.run, "copy-same-bytes": ceil_copy.run})
            facts.update({"read-same-bytes": {"b": b}, "copy-same-bytes": {"b": b}})
        rows = record(family, "final", turns(final, settle_s=0.5, dry=dry, **FINAL), "torch", work.bytes, work.flops,
                      facts)
        say(family, rows)
        save()
        del x, w, y, ref, fns, final
        decode_tiles._workspaces.clear()
        if not dry:
            torch.cuda.empty_cache()


def say(family: str, rows: list[dict]) -> None:
    for r in sorted(rows, key=lambda r: -r["speed_vs_ref"]):
        print(f"{family:<11} {r['name']:<30} {r['median_ms']:8.4f} ms  x{r['speed_vs_ref']:.3f} vs torch "
              f"[{r['speed_vs_ref_p10']:.3f}, {r['speed_vs_ref_p90']:.3f}]  {r['gbps']:7.0f} GB/s "
              f"{r['tflops']:6.1f} TFLOP/s", flush=True)


def sweep_read(budget: Budget, save, workers: int = 8, dry: bool = False) -> None:
    from gpubench.kernels import copy, read
    from gpubench.kernels.common import CheckFailed, check_close, cupy, sm_count

    device = "cpu" if dry else "cuda"
    n = 3 * 4096 + 5 if dry else read.SIZES["n"]
    options = space.read_space(triton_only=dry)[: 4 if dry else None]
    precompile([("read", 0, c) for impl, c in options if impl == "triton"], {"read_n": n}, workers,
               0.15 * budget.left(), dry)
    x = read.make_input(n, device)
    out = torch.empty((), device=device)
    ref = read.reference(x)
    fns, facts = {"torch": lambda: read.torch_read(x, out)}, {}
    for impl, c in options:
        name = space.read_tag(impl, c)
        try:
            if impl == "triton":
                ws = read.Workspace(read.triton_programs(device, c), device)
                fn = lambda c=c, ws=ws: read.triton_read(x, out, ws, c)  # noqa: E731
            else:
                cp = cupy()
                ws = read.Workspace(sm_count() * c["per_sm"], device)
                xc, oc = cp.from_dlpack(x), cp.from_dlpack(out)
                fn = lambda c=c, ws=ws, xc=xc, oc=oc: read.cupy_read(xc, oc, ws, c)  # noqa: E731
            out.fill_(float("nan"))
            launch = fn()
            facts[name] = {"cfg": json.dumps(c, separators=(",", ":")), "launch": launch,
                           **check_close(name, out, ref, tol=read.TOLERANCE)}
        except CheckFailed as err:
            print(f"read: {err}", flush=True)
            continue
        except Exception as err:  # reported, not fatal
            print(f"read: {name} failed: {type(err).__name__}: {str(err)[:160]}", flush=True)
            continue
        fns[name] = fn
    work = read.work(n)
    screen = record("read", "screen", turns(fns, settle_s=0.5, dry=dry, **SCREEN), "torch", work.bytes, work.flops,
                    facts)
    final = {name: fns[name] for name in ["torch"] + best(screen, ("triton-",), 4) + best(screen, ("cupy-",), 3)}
    final["copy-same-bytes"] = copy.prepare("torch", n=n // 2, device=device).run
    rows = record("read", "final", turns(final, settle_s=0.5, dry=dry, **FINAL), "torch", work.bytes, work.flops, facts)
    say("read", rows)
    save()


# --- choosing and writing the winners ------------------------------------------------------------------

LEGACY = re.compile(r"(ptr|tma)-(\d+)x(\d+)x(\d+)-w(\d+)-s(\d+)")


def _settings(row: dict) -> dict:
    if row.get("cfg"):
        return json.loads(row["cfg"])
    m = LEGACY.fullmatch(row["name"])  # a sweep's CSV from before the settings were written out
    c = {"BLOCK_N": int(m[2]), "BLOCK_B": int(m[3]), "BLOCK_K": int(m[4]), "num_warps": int(m[5]),
         "num_stages": int(m[6])}
    return {**c, "tma": True} if m[1] == "tma" else c


def _score(row: dict) -> float:
    """Faster is higher: the paired speed over torch where the row has it, else 1 / median."""
    v = row.get("speed_vs_ref")
    return float(v) if v not in (None, "") else 1.0 / float(row["median_ms"])


def decode_choice(rows: list[dict]) -> dict:
    """This GPU's CONFIG entry for kernels/decode.py: at each tuned batch, the fastest checked Triton
    setting of the final round (of every row, in a CSV without rounds), serving the batches from the
    tuned batch before it (exclusive) up to it, the largest every batch above; the CuPy block size
    fastest at batch 1."""
    final = [r for r in rows if str(r.get("family", "")).startswith("decode-b")]
    if any(r.get("stage") == "final" for r in final):
        final = [r for r in final if r.get("stage") == "final"]
    top: dict = {}
    for r in final:
        impl = "cupy" if r["name"].startswith("cupy-") else "triton" if r["name"][:4] in ("ptr-", "tma-", "fma-") else None
        key = (int(r["b"]), impl)
        if impl and (key not in top or _score(r) > _score(top[key])):
            top[key] = r
    batches = sorted(b for b, impl in top if impl == "triton")
    entry = {"triton": tuple((b if b != batches[-1] else None, _settings(top[(b, "triton")])) for b in batches)}
    if (1, "cupy") in top:
        entry["cupy_threads"] = int(top[(1, "cupy")]["name"].removeprefix("cupy-t"))
    return entry


def read_choice(rows: list[dict]) -> dict:
    """This GPU's CONFIG entry for kernels/read.py: the fastest Triton and CuPy settings of the final round."""
    final = [r for r in rows if r.get("family") == "read" and r.get("stage") == "final" and r.get("cfg")]
    entry = {}
    for impl in ("triton", "cupy"):
        mine = [r for r in final if r["name"].startswith(impl + "-")]
        if mine:
            entry[impl] = json.loads(max(mine, key=_score)["cfg"])
    return entry


def apply_line(entry: dict, gpu: str, path: Path, fallback: str) -> None:
    """Write this GPU's line into CONFIG in `path` (replacing an older one), just above the fallback's."""
    lines = path.read_text().splitlines(keepends=True)
    line = f"    {gpu!r}: {entry!r},\n".replace("'", '"')
    lines = [x for x in lines if not x.startswith(f'    "{gpu}": ')]
    lines.insert(next(i for i, x in enumerate(lines) if x.startswith(fallback)), line)
    path.write_text("".join(lines))
    print(f"settings for {gpu} written to {path}: {entry}")


def apply_decode(entry: dict, gpu: str, path: Path = ROOT / "kernels" / "decode.py") -> None:
    apply_line(entry, gpu, path, '    "*": {"triton": FALLBACK')


def apply_read(entry: dict, gpu: str, path: Path = ROOT / "kernels" / "read.py") -> None:
    apply_line(entry, gpu, path, '    "*": {"triton": {"BLOCK"')
