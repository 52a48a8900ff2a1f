"""A benchmark's counter fingerprint, and what moved with a verdict.

While a benchmark runs, the session's sampler reads the ladder (NVML GPM on Hopper and newer, else DCGM or
CUPTI, as the suite does: gate.device). The fingerprint is the median of each rung over a window of calls
back to back right after the rounds (flushed rounds would describe the flush), with the time of one call in
that window; the rounds' own clocks and clock-event reasons come beside it (gate.fixture). The baseline keeps
its first process's fingerprint; a run against it reads one where its verdict may not be `same`.

A `slower` or `faster` then says, in one clause, what moved with it:

- first, where the rounds ran at another SM clock or under another limit: "SM clock 1980 → 1755 MHz, power at
  the limit: the GPU throttled" (another power limit, compared only where allowed, comes before it);
- a pipe left or a grid shrank, read off the share itself: "tensor active 80% → 3%: the call left the tensor
  cores", "SM active 50% → 25%, occupancy halved: fewer SMs busy, a smaller grid";
- else more (or less) of the work that bounds the call. A share of time says how busy a unit was, not how much
  it did: a call bound by memory that reads 10% more bytes keeps DRAM active where it was and takes 10% longer.
  So each unit's work per call is its share times the call's time, and the unit with the highest share (the
  one that bounds the call) is named where its work per call moved with the verdict: "DRAM active 61% → 74%
  (+33% a call): more bytes".

Where the counters were not read (no profiling source, a CPU fake, a run whose verdict was `same`), nothing is
said: no guess.
"""

from __future__ import annotations

from gpubench.gate.judgement import CLOCK_DIFF
from gpubench.metrics import finite

LADDER = {
    "sm_active_pct": "SM active",
    "sm_occupancy_pct": "occupancy",
    "tensor_active_pct": "tensor active",
    "dram_active_pct": "DRAM active",
    "fp32_active_pct": "FP32 active",
    "sm_clock_mhz": "SM clock",
    "power_w": "power",
}
PROFILING = ("sm_active_pct", "sm_occupancy_pct", "tensor_active_pct", "dram_active_pct", "fp32_active_pct")
# the units whose work a call can be bound by, and what more of it means
WORK = {
    "dram_active_pct": ("more bytes", "fewer bytes"),
    "tensor_active_pct": ("more tensor-core work", "less tensor-core work"),
    "fp32_active_pct": ("more FP32 work", "less FP32 work"),
}
MEANINGFUL_PCT = 5.0  # a share below this in both runs is too small to name
LEFT = 0.5  # a pipe whose share fell to half or less has been left
SHRANK = 0.6  # SM active or occupancy at 60% or less of the baseline's: fewer SMs, fewer warps
WORK_MOVED = 0.03  # a unit's work per call moved by 3% or more (GPM medians of a few rows move less)
SWAYING = ("power cap", "power brake", "thermal (software)", "thermal (hardware)", "hardware slowdown")


def fingerprint(metrics: dict, call_ms: float | None) -> dict:
    """What a run keeps: each rung's median that was read, the time of one call in the window, its rows."""
    out = {k: float(metrics[k]) for k in LADDER if finite(metrics.get(k))}
    if finite(call_ms) and call_ms > 0:
        out["call_ms"] = float(call_ms)
    if isinstance(metrics.get("n_samples"), int):
        out["samples"] = metrics["n_samples"]
    return out


def of(info: dict) -> dict | None:
    """A run's fingerprint with its rounds' clocks, reasons and the GPU's power limit (extra_info), or None."""
    counters = info.get("counters") if isinstance(info, dict) else None
    if not isinstance(counters, dict):
        return None
    keys = ("sm_clock_mhz_rounds", "clock_events_rounds", "power_limit_w")
    return {**counters, **{k: info[k] for k in keys if info.get(k) is not None}}


def pct(x: float) -> str:
    return f"{x:.0f}%" if x >= 1 else f"{x:.2g}%"


def _limit(info: dict) -> str | None:
    """The limit that held in most of a run's rounds, in words."""
    shares = info.get("clock_events_rounds")
    if not isinstance(shares, dict):
        return None
    held = [n for n in SWAYING if finite(shares.get(n)) and shares[n] >= 0.5]
    if not held:
        return None
    return "power at the limit" if held[0] in ("power cap", "power brake") else f"{held[0]} held the clock"


def clock_clause(before: dict, now: dict, word: str | None) -> str | None:
    """How the clocks of the rounds differed from the baseline's (extra_info of each), and where a verdict moved
    with them, what that means; None where they did not differ. (Another power limit is compared only where
    allowed, and then said with every verdict: gate.compare.)"""
    parts = []
    a, b = before.get("sm_clock_mhz_rounds"), now.get("sm_clock_mhz_rounds")
    moved = finite(a) and finite(b) and a > 0 and abs(b - a) >= CLOCK_DIFF * a
    if moved:
        parts.append(f"SM clock {a:.0f} → {b:.0f} MHz")
    limit = _limit(now)
    said = limit if limit and (limit != _limit(before) or (moved and b < a)) else None
    if said:
        parts.append(said)
    held = {n for n, x in (now.get("clock_events_rounds") or {}).items() if finite(x) and x >= 0.5} if said else set()
    ea, eb = before.get("clock_events_rounds"), now.get("clock_events_rounds")
    if isinstance(ea, dict) and isinstance(eb, dict):
        for name in dict.fromkeys([*ea, *eb]):
            x, y = ea.get(name, 0.0), eb.get(name, 0.0)
            if abs(y - x) >= 0.25 and name not in held:
                parts.append(f"{name} in {x:.0%} → {y:.0%} of rounds")
    if not parts:
        return None
    fell = moved and b < a
    if word == "slower" and fell:
        return f"{', '.join(parts)}: the GPU throttled" if limit else f"{', '.join(parts)}: a lower clock"
    if word == "faster" and moved and not fell:
        return f"{', '.join(parts)}: a higher clock"
    return ", ".join(parts)


def _shift(b: dict, n: dict, word: str) -> str | None:
    """A pipe left or taken up, fewer or more SMs or warps: read off the shares themselves."""
    slower = word == "slower"
    t0, t1 = b.get("tensor_active_pct"), n.get("tensor_active_pct")
    f0, f1 = b.get("fp32_active_pct"), n.get("fp32_active_pct")
    if finite(t0) and finite(t1):
        if slower and t0 >= 2 * MEANINGFUL_PCT and t1 <= LEFT * t0:
            if finite(f0) and finite(f1) and f1 >= 2 * MEANINGFUL_PCT and f1 >= f0 / LEFT:
                return (
                    f"tensor active {pct(t0)} → {pct(t1)}, FP32 active {pct(f0)} → {pct(f1)}: the call left "
                    "the tensor cores for FP32"
                )
            return f"tensor active {pct(t0)} → {pct(t1)}: the call left the tensor cores"
        if not slower and t1 >= 2 * MEANINGFUL_PCT and t0 <= LEFT * t1:
            return f"tensor active {pct(t0)} → {pct(t1)}: the call moved onto the tensor cores"
    s0, s1 = b.get("sm_active_pct"), n.get("sm_active_pct")
    o0, o1 = b.get("sm_occupancy_pct"), n.get("sm_occupancy_pct")
    occupancy = None
    if finite(o0) and finite(o1) and max(o0, o1) >= MEANINGFUL_PCT:
        ratio = o1 / o0 if o0 > 0 else float("inf")
        if (ratio <= SHRANK) if slower else (ratio >= 1 / SHRANK):
            near = 0.4 <= ratio <= 0.6 if slower else 1.7 <= ratio <= 2.5
            occupancy = (
                ("occupancy halved" if slower else "occupancy doubled") if near else f"occupancy {pct(o0)} → {pct(o1)}"
            )
    if finite(s0) and finite(s1) and max(s0, s1) >= 2 * MEANINGFUL_PCT and s0 > 0:
        ratio = s1 / s0
        if (ratio <= SHRANK) if slower else (ratio >= 1 / SHRANK):
            extra = f", {occupancy}" if occupancy else ""
            return f"SM active {pct(s0)} → {pct(s1)}{extra}: " + (
                "fewer SMs busy, a smaller grid" if slower else "more SMs busy, a larger grid"
            )
    if occupancy:
        return f"{occupancy} ({pct(o0)} → {pct(o1)}): " + ("fewer warps resident" if slower else "more warps resident")
    return None


def _work(b: dict, n: dict, word: str) -> str | None:
    """The unit that bounds the call (the highest share), where its work per call moved with the verdict."""
    ms0, ms1 = b.get("call_ms"), n.get("call_ms")
    if not (finite(ms0) and finite(ms1) and ms0 > 0 and ms1 > 0):
        return None
    present = [
        k for k in WORK if finite(b.get(k)) and finite(n.get(k)) and b[k] > 0 and max(b[k], n[k]) >= MEANINGFUL_PCT
    ]
    if not present:
        return None
    bound = max(present, key=lambda k: max(b[k], n[k]))
    time_ratio = ms1 / ms0
    per_call = n[bound] / b[bound] * time_ratio - 1
    slower = word == "slower"
    needed = max(WORK_MOVED, 0.5 * abs(time_ratio - 1))
    if (per_call >= needed) if slower else (-per_call >= needed):
        more, less = WORK[bound]
        return f"{LADDER[bound]} {pct(b[bound])} → {pct(n[bound])} ({per_call:+.0%} a call): {more if slower else less}"
    return None


def readable(counters: dict | None) -> bool:
    return isinstance(counters, dict) and any(finite(counters.get(k)) for k in PROFILING)


def what_moved(before: dict | None, now: dict | None, word: str | None) -> str | None:
    """The clause a `slower` or `faster` gets from the fingerprints (counters.of of each run); None where
    either was not read or the verdict is neither."""
    if word not in ("slower", "faster") or not (readable(before) and readable(now)):
        return None
    return _shift(before, now, word) or _work(before, now, word) or "no counter moved with it"
