"""The decode and read sweeps of tools/tune/kernels.py: compile every setting first (in parallel worker
processes, into Triton's on-disk cache; tools/tune/timing.py), then per batch check each against the
float64 reference, screen them all against torch in short interleaved windows, and time the best few
again, longer, in turns with torch (and at B = 1 with a read and a copy of the same bytes: the two ceilings).

Three decode modes: the broad space (tools/tune/space.py's decode_space), one step around a first sweep's best few
(--around), and the second sweep (--second): only the batches still short of torch, the persistent TMA
kernel's settings (tools/tune/space.py's second_space) beside the first sweep's best few and the setting CONFIG
applies now, timed longer.

A time budget is checked before each step: a sweep that runs out stops cleanly with what it measured.
With dry=True everything runs on the CPU (Triton's interpreter, tiny sizes, a host clock): the check that
the script works before it meets a GPU.
"""

from __future__ import annotations

import json

import torch
from tools.tune import space
from tools.tune.timing import ROWS, Budget, best, precompile, record, say, turns  # noqa: F401 (ROWS: the rows so far)

SCREEN = {"rounds": 2, "window_s": 0.03}
FINAL = {"rounds": 6, "window_s": 0.08}
FINAL_SECOND = {"rounds": 10, "window_s": 0.1}  # the second sweep's few finalists, timed longer
FINALISTS = 6
SEEDS = 4  # the first sweep's best settings a batch that the second sweep times again


# --- the sweeps ----------------------------------------------------------------------------------------


def _key_b(b: int) -> int:
    """Triton compiles apart for B = 1, multiples of 16, and the rest: one compile serves each class."""
    return 1 if b == 1 else 16 if b % 16 == 0 else 2


def _top(rows: list[dict], b: int, count: int) -> list[dict]:
    """The settings of a sweep's fastest `count` Triton rows at batch b (of its final round, if it had one)."""
    mine = [r for r in rows if r.get("family") == f"decode-b{b}" and r.get("cfg")]
    if any(r.get("stage") == "final" for r in mine):
        mine = [r for r in mine if r.get("stage") == "final"]
    return [json.loads(r["cfg"]) for r in sorted(mine, key=lambda r: -float(r["speed_vs_ref"]))[:count]]


def decode_settings(
    batches, rows=None, sms: int = 132, n: int = 28672, k: int = 8192, second: bool = False, applied=None
) -> dict:
    """Per batch, the settings to try: the broad space; or one step around the best few of a first sweep's
    rows; or (second) the first sweep's best few, the setting applied now (applied(b)) and the new kernel's."""
    if second:
        return {
            b: space.dedup(
                ([applied(b)] if applied else []) + _top(rows or [], b, SEEDS) + space.second_space(b, sms=sms)
            )
            for b in batches
        }
    if not rows:
        return {b: space.decode_space(b, n, k, sms) for b in batches}
    out = {}
    for b in batches:
        seeds = _top(rows, b, 4)
        out[b] = space.dedup(seeds + [c for s in seeds for c in space.around(s, b, n, k, sms)])[:48]
    return out


def sweep_decode(
    batches, budget: Budget, save, rows=None, workers: int = 8, dry: bool = False, second: bool = False
) -> None:
    """Tune decode at each batch (see the module's note); rows: a first sweep's, for --around or --second."""
    from gpubench.kernels import copy, decode, decode_sk, decode_tiles, read
    from gpubench.kernels.common import CheckFailed, check_close, sm_count

    device = "cpu" if dry else "cuda"
    k, n = (2048, 96) if dry else (decode.SIZES["k"], decode.SIZES["n"])
    sms = sm_count()
    applied = lambda b: decode.settings_for(b, device)  # noqa: E731 (what tools/tune/bench.py runs now)
    # the second sweep's settings are a fixed list, sized for the real shape even in a dry run
    settings = (
        decode_settings(batches, rows, second=True, applied=applied)
        if second
        else decode_settings(batches, rows, sms, n, k)
    )
    if dry:  # one setting of each kind: the kernels and knobs, each through the whole path
        kinds = ("ptr-", "tma-", "fma-", "-k", "-p", "-ef", "-sk1", "-sk2", "-sw", "-ws")
        settings = {
            b: space.dedup(
                next(c for c in s if kind in space.tag(c)) for kind in kinds if any(kind in space.tag(c) for c in s)
            )
            for b, s in settings.items()
        }
    jobs, seen = [], set()
    for b, configs in settings.items():
        for c in configs:
            if (_key_b(b), space.dumps(c)) not in seen:
                seen.add((_key_b(b), space.dumps(c)))
                jobs.append(("decode", b, c))
    compiled = precompile(jobs, {"k": k, "n": n}, workers, 0.4 * budget.left(), dry)
    failed = {(_key_b(b), c) for (_, b, c), err in compiled.items() if err}
    ahead = {(_key_b(b), c) for (_, b, c) in compiled}
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
            if second and workers > 0 and (_key_b(b), space.dumps(c)) not in ahead:
                print(
                    f"decode-b{b}: {name} did not compile and return from its first launch in time: left out",
                    flush=True,
                )
                continue
            fn = lambda c=c, x=x, w=w, y=y: decode.triton_decode(x, w, y, config=c)  # noqa: E731
            try:
                y.fill_(float("nan"))
                launch = fn()
                facts[name] = {
                    "b": b,
                    "cfg": space.dumps(c),
                    "launch": launch,
                    **check_close(name, y, ref),
                    "programs": space.programs(c, b, n, k, sms),
                    "wave_efficiency": round(space.wave_efficiency(c, b, n, k, sms), 3),
                }
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
        screen = record(
            family, "screen", turns(fns, settle_s=0.5, dry=dry, **SCREEN), "torch", work.bytes, work.flops, facts
        )
        final = {
            name: fns[name]
            for name in ["torch"] + best(screen, ("ptr-", "tma-", "fma-"), FINALISTS) + best(screen, ("cupy-",), 1)
        }
        if second and space.tag(applied(b)) in fns:  # the setting in force, timed in the same turns
            final[space.tag(applied(b))] = fns[space.tag(applied(b))]
        if b == 1:  # the two ceilings: a read and a copy of as many bytes
            ceil_read = read.prepare("torch", n=int(work.bytes // 4), device=device)
            ceil_copy = copy.prepare("torch", n=int(work.bytes // 8), device=device)
            final.update({"read-same-bytes": ceil_read.run, "copy-same-bytes": ceil_copy.run})
            facts.update({"read-same-bytes": {"b": b}, "copy-same-bytes": {"b": b}})
        timing = FINAL_SECOND if second else FINAL
        out = record(
            family, "final", turns(final, settle_s=0.5, dry=dry, **timing), "torch", work.bytes, work.flops, facts
        )
        say(family, out)
        save()
        del x, w, y, ref, fns, final
        decode_tiles._workspaces.clear()
        decode_sk._workspaces.clear()
        if not dry:
            torch.cuda.empty_cache()


def sweep_read(budget: Budget, save, workers: int = 8, dry: bool = False) -> None:
    from gpubench.kernels import copy, read
    from gpubench.kernels.common import CheckFailed, check_close, cupy, sm_count

    device = "cpu" if dry else "cuda"
    n = 3 * 4096 + 5 if dry else read.SIZES["n"]
    options = space.read_space(triton_only=dry)[: 4 if dry else None]
    precompile(
        [("read", 0, c) for impl, c in options if impl == "triton"], {"read_n": n}, workers, 0.15 * budget.left(), dry
    )
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
            facts[name] = {
                "cfg": json.dumps(c, separators=(",", ":")),
                "launch": launch,
                **check_close(name, out, ref, tol=read.TOLERANCE),
            }
        except CheckFailed as err:
            print(f"read: {err}", flush=True)
            continue
        except Exception as err:  # reported, not fatal
            print(f"read: {name} failed: {type(err).__name__}: {str(err)[:160]}", flush=True)
            continue
        fns[name] = fn
    work = read.work(n)
    screen = record(
        "read", "screen", turns(fns, settle_s=0.5, dry=dry, **SCREEN), "torch", work.bytes, work.flops, facts
    )
    final = {name: fns[name] for name in ["torch"] + best(screen, ("triton-",), 4) + best(screen, ("cupy-",), 3)}
    final["copy-same-bytes"] = copy.prepare("torch", n=n // 2, device=device).run
    rows = record("read", "final", turns(final, settle_s=0.5, dry=dry, **FINAL), "torch", work.bytes, work.flops, facts)
    say("read", rows)
    save()
