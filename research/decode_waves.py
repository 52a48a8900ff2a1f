"""Where the decode kernel loses to cuBLAS at B = 256 and 512: in its tiles, or in the last wave's?

    python -m research.decode_waves --out decode-waves.csv [--batches 256,512] [--budget-s 200]

(On an H100 it found the tiles at 0.98 of cuBLAS over whole waves at B = 512, and the split launch the
best of the rest; kernels/decode.py's "tail" setting is that split.)

At B = 512 with 128x256 tiles there are 448 tiles for 132 SMs (3.39 waves). Two questions, one run:
- Tiles. Each setting and torch at an N cut to whole waves (the same tiles, no partial last wave): the
  tile's own speed against cuBLAS's. If it is under 0.97 there, no scheduling of the last wave reaches 0.97.
- The last wave. At the full N, the settings in use (kernels/decode.py's CONFIG), stream-K, one launch of
  each tile, and split launches (a "tail" setting): the rows that fill whole waves with the big tiles, then
  the rest of the rows in a second launch with smaller tiles or split K.
Every setting is checked against a float64 reference first; timing is in turns with torch after settling
at sustained clocks (tools/tune/timing.py). Prints one line a setting and writes the rows to --out.
"""

from __future__ import annotations

import argparse
import functools
import re
import sys
import time
from pathlib import Path

import torch

from gpubench.kernels import decode
from gpubench.kernels.common import check_close, sm_count
from tools.tune import output as tune_io
from tools.tune import space
from tools.tune import timing

ROOT = Path(__file__).resolve().parents[1]

K, N = decode.SIZES["k"], decode.SIZES["n"]


c = functools.partial(space.cfg, tma=True)  # c(BLOCK_N, BLOCK_B, BLOCK_K, num_warps, num_stages, **more)


def settings(b: int) -> dict:
    """name -> (head settings, tail settings or None): a tail splits the launch at decode.whole_wave_rows."""
    big = c(128, 256, 64, 8, 3) if b >= 256 else c(128, 128, 64, 8, 4)
    out = {
        "in-use": (decode.settings_for(b), None),
        "sk1-128x256x64-s3": (c(128, 256, 64, 8, 3, per_sm=1, sk=1), None),
        "sk1-128x256x64-s4": (c(128, 256, 64, 8, 4, per_sm=1, sk=1), None),
        "sk1-256x128x64-s4": (c(256, 128, 64, 8, 4, per_sm=1, sk=1), None),
        "sk2-256x128x64-s4": (c(256, 128, 64, 8, 4, per_sm=1, sk=2), None),
        "gluon-256x128x64-s3": (c(256, 128, 64, 8, 3, gluon=True), None),
        "gluon-256x128x32-s6": (c(256, 128, 32, 8, 6, gluon=True), None),
        "gluon-128x128x64-s4": (c(128, 128, 64, 8, 4, gluon=True), None),
        "128x128x64-s4": (c(128, 128, 64, 8, 4), None),
        "split+128x128-p1": ({**big, "per_sm": 1}, c(128, 128, 64, 8, 4)),
        "split256x128+128x128": (c(256, 128, 64, 8, 4), c(128, 128, 64, 8, 4)),
        "split256x128+128x64": (c(256, 128, 64, 8, 4), c(128, 64, 64, 4, 4)),
        "128x256x64-s3": (c(128, 256, 64, 8, 3), None),
        "128x256x64-s4": (c(128, 256, 64, 8, 4), None),
        "128x256x64-s4-p1": (c(128, 256, 64, 8, 4, per_sm=1), None),
        "128x256x64-s4-p1f": (c(128, 256, 64, 8, 4, per_sm=1, flatten=True), None),
        "256x128x64-s4-p1": (c(256, 128, 64, 8, 4, per_sm=1), None),
        "128x256x32-s8-p1f": (c(128, 256, 32, 8, 8, per_sm=1, flatten=True), None),
        "256x128x32-s8-p1f": (c(256, 128, 32, 8, 8, per_sm=1, flatten=True), None),
        "before": (c(256, 128, 64, 8, 4), None),  # the H100's B = 256 setting before 128x256x64-s4-p1f
        "256x128x64-s4-p1f": (c(256, 128, 64, 8, 4, per_sm=1, flatten=True), None),
        "256x128x64-s4": (c(256, 128, 64, 8, 4), None),
        "split+128x128": (big, c(128, 128, 64, 8, 4)),
        "split4+128x128": (c(128, 256, 64, 8, 4), c(128, 128, 64, 8, 4)),
        "split4+128x128-p1": (c(128, 256, 64, 8, 4, per_sm=1), c(128, 128, 64, 8, 4)),
        "split4+128x128-p1f": (c(128, 256, 64, 8, 4, per_sm=1, flatten=True), c(128, 128, 64, 8, 4)),
        "split+64x256": (big, c(64, 256, 64, 4, 4)),
        "split+k2": (big, c(128, 256, 64, 8, 3, split_k=2)),
        "split+k4": (big, c(128, 256, 64, 8, 3, split_k=4)),
    }
    return out


def runner(x, w, y, head: dict, tail: dict | None, sms: int):
    """The launch of a setting, or None for a split that would not split (no whole wave, or no rest)."""
    if tail is not None and not 0 < decode.whole_wave_rows(x.shape[0], w.shape[0], head, sms) < w.shape[0]:
        return None
    cfg = head if tail is None else {**head, "tail": tail}
    return lambda: decode.triton_decode(x, w, y, config=cfg)


def held(fn, seconds: float = 1.5) -> dict:
    """Run fn back to back for `seconds` and read NVML's power and SM clock every 20 ms over the last two
    thirds: the watts, the clock and the joules a call at this kernel's steady state."""
    import threading

    from gpubench.record import nvml

    h = nvml.handle(torch.cuda.current_device())
    samples, stop = [], threading.Event()

    def sample():
        while not stop.wait(0.02):
            r = nvml.read_basic(h)
            samples.append((time.monotonic(), r["power_w"], r["sm_clock_mhz"]))

    t = threading.Thread(target=sample, daemon=True)
    t.start()
    t0, calls, t_from = time.monotonic(), 0, None
    while time.monotonic() - t0 < seconds:
        for _ in range(20):
            fn()
        torch.cuda.synchronize()
        if t_from is None and time.monotonic() - t0 > seconds / 3:
            t_from, calls = time.monotonic(), 0
        elif t_from is not None:
            calls += 20
    t_to = time.monotonic()
    stop.set()
    t.join()
    kept = [(w, mhz) for ts, w, mhz in samples if t_from <= ts <= t_to]
    watts = sum(w for w, _ in kept) / len(kept)
    return {
        "power_w": watts,
        "sm_mhz": sorted(m for _, m in kept)[len(kept) // 2],
        "ms_held": (t_to - t_from) * 1e3 / calls,
        "mj_per_call": watts * (t_to - t_from) / calls * 1e3,
    }


def measure(
    b: int, n: int, named: dict, sms: int, rounds: int, window_s: float, label: str, rows: list, power: bool = False
) -> None:
    x, w = decode.make_inputs(b, K, n)
    ref = decode.reference(x, w)
    y = torch.empty(b, n, device="cuda", dtype=torch.bfloat16)
    fns = {"torch": lambda: decode.torch_decode(x, w, y)}
    for name, (head, tail) in named.items():
        run = runner(x, w, y, head, tail, sms)
        if run is None:
            continue
        try:
            y.fill_(float("nan"))
            run()
            torch.cuda.synchronize()
            check_close(f"{label} {name}", y, ref)
            fns[name] = run
        except Exception as err:  # reported, never fatal
            print(f"{label} {name}: {type(err).__name__}: {str(err).splitlines()[0][:150]}", flush=True)
    med = timing.turns(fns, rounds, window_s, 2.0, False)
    work = decode.work(b, K, n)
    got = timing.record(label, "turns", med, "torch", work.bytes, work.flops, {})
    for r in got:
        r.update(b=b, n=n)
        if power:
            r.update(held(fns[r["name"]]))
            print(
                f"{label} {r['name']:<30} {r['power_w']:.0f} W at {r['sm_mhz']:.0f} MHz: "
                f"{r['mj_per_call']:.1f} mJ a call ({r['ms_held']:.4f} ms a call held)",
                flush=True,
            )
    timing.say(label, got)
    rows += got


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default="decode-waves.csv")
    ap.add_argument("--batches", default="512,256")
    ap.add_argument("--rounds", type=int, default=8)
    ap.add_argument("--window-s", type=float, default=0.2)
    ap.add_argument("--budget-s", type=float, default=240.0)
    ap.add_argument("--skip-whole", action="store_true", help="time the full N only, not the tiles over whole waves")
    ap.add_argument("--power", action="store_true", help="also hold each setting 1.5 s and read its watts and clock")
    ap.add_argument("--match", default="", help="only the settings whose names match this regular expression")
    args = ap.parse_args(argv)
    if not torch.cuda.is_available():
        print("decode_waves.py needs a CUDA GPU", file=sys.stderr)
        return 2
    t0, sms, rows = time.monotonic(), sm_count(), []
    for b in [int(v) for v in args.batches.split(",")]:
        if time.monotonic() - t0 > args.budget_s:
            print(f"stopped before B={b}: the budget is spent", flush=True)
            break
        every = settings(b)
        named = {k: v for k, v in every.items() if re.search(args.match, k) or k == "in-use"}
        for name in () if args.skip_whole else ("128x256x64-s3", "256x128x64-s4"):  # tiles alone: N cut to whole waves
            head = every[name][0]
            nw = decode.whole_wave_rows(b, N, head, sms)
            measure(
                b,
                nw,
                {name: (head, None), name + "-p1": ({**head, "per_sm": 1}, None)},
                sms,
                args.rounds,
                args.window_s,
                f"b{b}-whole-{name}",
                rows,
            )
            tune_io.write(args.out, rows)  # after each measurement: a run stopped at its limit keeps them
        measure(b, N, named, sms, args.rounds, args.window_s, f"b{b}-full", rows, args.power)
        tune_io.write(args.out, rows)
    print(f"wrote {args.out}: {len(rows)} rows in {time.monotonic() - t0:.0f} s on {torch.cuda.get_device_name()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
