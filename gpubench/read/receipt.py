"""The receipt of a watched job: what its GPU time bought, computed from its summary rows alone, so that a
run's summary.csv gives its receipt again.

    r = receipt(summary, price_per_gpu_hour=2.5)  # the manifest's "receipt"; None for a summary with no row
    lines(r)                                      # in words: a head line, then a few items

GPU-hours. Each summary row is one phase on one GPU, so a row counts one GPU. The job's GPU-hours are, on
each GPU, the time from its first row's start to its last row's end (start-up and teardown included: the GPU
was held), summed over the GPUs. A phase's GPU-hours are its rows' measured windows (`seconds`), summed: the
windows their MFU, tensor ceiling, GPU-Util and energy come from. The rest of the job's time lay in no
window: the first half second of each span (gpubench.read.summary.TRIM_S), the time before a phase's first
steady step (a compilation, a slow first step) and after its last. It is `unmeasured_gpu_hours`, priced in
the cost and counted in nothing else: no row's rate is stretched over time it did not measure. A row's
t_end − t_start is not its time either: a phase that recurs (train, eval, train) is one row whose start and
end reach over the phases between its spans.

Over the measured GPU-hours, each figure from the rows that have it; a row without it is not known, never
taken as 0 or 100%, and its hours are said (`*_not_known_gpu_hours`; a phase's own figure is then None):
- no tensor work (the waste): a row's GPU-hours × (1 − tensor_ceiling_pct / 100), the share of the tensor
  peak its pipes did not deliver. A row has no tensor ceiling when it is too short, its run recorded no
  tensor activity, or its GPU has no calibration.
- MFU: the rows' MFU weighted by their GPU-hours. Start-up, teardown and a GPU the command never used count
  as 0, which they are: no step of the job lies in them. A phase row with no MFU, or one above 100% (its
  verdict rates none), is not known. None where no row has an MFU.
- energy: the energy counter's rise over each row's window (energy_used_j), summed, in kWh.
- idle: GPU-Util is the share of time in which any kernel ran, so a row's idle GPU-hours are its GPU-hours ×
  (1 − gpu_util_mean_pct / 100), and the idle share is their sum over the GPU-hours of the rows whose
  GPU-Util is known. A row counts by its time, not as a whole: a phase at 60% GPU-Util is 40% idle, where
  counting idle rows would call it busy, or idle, whole.
With a price per GPU-hour: the cost of every GPU-hour, measured or not, and of those that did no tensor work
(a lower bound where some are not known).
"""

from __future__ import annotations

import math

from gpubench.metrics import finite, pct

EDGES = ("start-up", "teardown")  # rows outside the job's steps: their MFU is 0, not unknown
IDLE_GPU = "idle-gpu"  # the verdict of a GPU no process of the command used (--all-gpus): its MFU is 0 too
SHOWN_PHASES = 8  # phases named on the console's line; the manifest keeps every one


def _num(row: dict, key: str) -> float | None:
    value = row.get(key)
    return float(value) if finite(value) else None


def check_price(price) -> float | None:
    """The price per GPU-hour, or None; ValueError in one sentence where it is not a number of 0 or more."""
    if price is None:
        return None
    if isinstance(price, bool) or not finite(price) or price < 0:
        raise ValueError(f"the price per GPU-hour must be a finite number of 0 or more, got {price!r}")
    return float(price)


def _tally(acc: dict, row: dict) -> None:
    """Add one row's measured GPU-hours, and each figure of them that is known, into acc."""
    h = max(0.0, _num(row, "seconds") or 0.0) / 3600
    acc["h"] += h
    mfu = _num(row, "mfu_pct")
    if mfu is not None and mfu <= 100:
        acc["mfu_x"], acc["mfu_h"], acc["mfu_rows"] = acc["mfu_x"] + mfu * h, acc["mfu_h"] + h, acc["mfu_rows"] + 1
    elif row.get("kind") in EDGES or row.get("verdict_rules") == IDLE_GPU:
        acc["mfu_h"], acc["mfu_zero"] = acc["mfu_h"] + h, acc["mfu_zero"] + h
    else:
        acc["mfu_unknown"], acc["mfu_rows_unknown"] = acc["mfu_unknown"] + h, acc["mfu_rows_unknown"] + 1
    ceiling = _num(row, "tensor_ceiling_pct")
    if ceiling is None:
        acc["tensor_unknown"], acc["tensor_rows_unknown"] = acc["tensor_unknown"] + h, acc["tensor_rows_unknown"] + 1
    else:
        acc["waste"] += h * (1 - min(max(ceiling, 0.0), 100.0) / 100)
        acc["tensor_h"] += h
    joules = _num(row, "energy_used_j")
    if joules is None:
        acc["energy_unknown"] += h
    else:
        acc["kwh"], acc["energy_rows"] = acc["kwh"] + joules / 3.6e6, acc["energy_rows"] + 1
    util = _num(row, "gpu_util_mean_pct")
    if util is None:
        acc["idle_unknown"] += h
    else:
        acc["idle"], acc["idle_h"] = acc["idle"] + h * (1 - min(max(util, 0.0), 100.0) / 100), acc["idle_h"] + h


def _acc() -> dict:
    return dict.fromkeys(
        (
            "h",
            "mfu_x",
            "mfu_h",
            "mfu_zero",
            "mfu_rows",
            "mfu_unknown",
            "mfu_rows_unknown",
            "waste",
            "tensor_h",
            "tensor_unknown",
            "tensor_rows_unknown",
            "kwh",
            "energy_rows",
            "energy_unknown",
            "idle",
            "idle_h",
            "idle_unknown",
        ),
        0.0,
    )


def receipt(summary: list[dict], price_per_gpu_hour: float | None = None) -> dict | None:
    """The receipt of a watch from its summary rows (as the module's docstring says); None where there is none."""
    price = check_price(price_per_gpu_hour)
    if not summary:
        return None
    extent: dict = {}  # GPU -> (its first row's start, its last row's end)
    phases: dict = {}  # phase -> its rows' tally, in the summary's order
    job = _acc()
    for row in summary:
        a, b = _num(row, "t_start"), _num(row, "t_end")
        if a is not None and b is not None and b >= a:
            lo, hi = extent.get(row.get("gpu"), (a, b))
            extent[row.get("gpu")] = (min(lo, a), max(hi, b))
        name = str(row.get("phase") or row.get("scenario") or "")
        kind, gpus, acc = phases.setdefault(name, (str(row.get("kind") or "phase"), set(), _acc()))
        gpus.add(row.get("gpu"))
        _tally(acc, row)
        _tally(job, row)
    if not extent:  # no row says when it ran: no GPU time to count
        return None
    total = sum(b - a for a, b in extent.values()) / 3600
    by_phase = [
        {
            "phase": name,
            "kind": kind,
            "gpus": len(gpus),
            "gpu_hours": acc["h"],
            "mfu_pct": (
                acc["mfu_x"] / acc["mfu_h"]
                if acc["mfu_rows"] and acc["mfu_h"] > 0 and not acc["mfu_rows_unknown"]
                else None
            ),
            "no_tensor_work_gpu_hours": acc["waste"] if not acc["tensor_rows_unknown"] else None,
        }
        for name, (kind, gpus, acc) in phases.items()
    ]
    known = job["tensor_h"] > 0
    return {
        "gpus": len(extent),
        "wall_s": max((b - a for a, b in extent.values()), default=0.0),
        "gpu_hours": total,
        "measured_gpu_hours": job["h"],
        "unmeasured_gpu_hours": max(0.0, total - job["h"]),
        "phases": by_phase,
        "mfu_pct": job["mfu_x"] / job["mfu_h"] if job["mfu_rows"] and job["mfu_h"] > 0 else None,
        "mfu_zero_gpu_hours": job["mfu_zero"],
        "mfu_not_known_gpu_hours": job["mfu_unknown"],
        "no_tensor_work_gpu_hours": job["waste"] if known else None,
        "no_tensor_work_pct": 100 * job["waste"] / job["tensor_h"] if known else None,
        "tensor_not_known_gpu_hours": job["tensor_unknown"],
        "energy_kwh": job["kwh"] if job["energy_rows"] else None,
        "energy_not_known_gpu_hours": job["energy_unknown"],
        "idle_pct": 100 * job["idle"] / job["idle_h"] if job["idle_h"] > 0 else None,
        "idle_not_known_gpu_hours": job["idle_unknown"],
        "price_per_gpu_hour": price,
        "cost": total * price if price is not None else None,
        "no_tensor_work_cost": job["waste"] * price if price is not None and known else None,
    }


def sig(x: float, digits: int = 3) -> str:
    """x to `digits` significant digits, never in exponent form (GPU-hours of a short job are small)."""
    if not finite(x) or x == 0:
        return "0"
    x = float(f"{x:.{digits}g}")  # rounded first: 0.99986 is 1.00, not 1.000
    places = max(0, digits - 1 - math.floor(math.log10(abs(x))))
    return f"{x:,.{places}f}"


def _duration(seconds: float) -> str:
    return (
        f"{sig(seconds)} s"
        if seconds < 120
        else f"{sig(seconds / 60)} min"
        if seconds < 7200
        else f"{sig(seconds / 3600)} h"
    )


def _unknown(r: dict, hours: float, test, name) -> str:
    """'; not known for 0.01 GPU-h (eval)': the GPU-hours a figure leaves out, and the phases they lie in."""
    missing = [name(e["phase"]) for e in r["phases"] if test(e) and e["gpu_hours"] > 0]
    if not hours or not missing:
        return ""
    more = f" and {len(missing) - SHOWN_PHASES} more" if len(missing) > SHOWN_PHASES else ""
    return f"; not known for {sig(hours)} GPU-h ({', '.join(missing[:SHOWN_PHASES])}{more})"


def lines(r: dict | None, name=str) -> list[str]:
    """The receipt in words: a head line, then a few items (none at all where r is None): what the console
    prints at the end of a watch. name(phase) writes a phase's name for where it is shown (markdown escapes it)."""
    if not r:
        return []
    gpus = f"{r['gpus']} GPU{'s' if r['gpus'] != 1 else ''}"
    head = (
        f"Receipt: {sig(r['gpu_hours'])} GPU-hours ({gpus} for {_duration(r['wall_s'])}), "
        f"{sig(r['measured_gpu_hours'])} of them in the phases' measured windows"
    )
    measured = [e for e in r["phases"] if e["gpu_hours"] > 0]  # a phase too short for any window is in none
    by = ", ".join(
        f"{name(e['phase'])} {sig(e['gpu_hours'])}"
        + (f" (MFU {pct(e['mfu_pct'])})" if e["mfu_pct"] is not None else "")
        for e in measured[:SHOWN_PHASES]
    )
    more = f" and {len(measured) - SHOWN_PHASES} more phases" if len(measured) > SHOWN_PHASES else ""
    items = [f"by phase: {by}{more} GPU-h"]
    if r["mfu_pct"] is None:
        items.append("MFU not known: no phase has one")
    else:
        zero = " (0 in start-up, teardown and unused GPUs)" if r["mfu_zero_gpu_hours"] > 0 else ""
        items.append(
            f"MFU {pct(r['mfu_pct'])} over the measured GPU-hours{zero}"
            + _unknown(r, r["mfu_not_known_gpu_hours"], lambda e: e["mfu_pct"] is None and e["kind"] not in EDGES, name)
        )
    if r["no_tensor_work_gpu_hours"] is None:
        items.append("tensor work not known: no row has a tensor ceiling")
    else:
        items.append(
            f"did no tensor work: {sig(r['no_tensor_work_gpu_hours'])} GPU-h, "
            f"{pct(r['no_tensor_work_pct'])} of those measured"
            + _unknown(r, r["tensor_not_known_gpu_hours"], lambda e: e["no_tensor_work_gpu_hours"] is None, name)
        )
    energy = (
        "energy not known"
        if r["energy_kwh"] is None
        else f"energy {sig(r['energy_kwh'])} kWh"
        + (f" (not known for {sig(r['energy_not_known_gpu_hours'])} GPU-h)" if r["energy_not_known_gpu_hours"] else "")
    )
    idle = (
        "idle time not known"
        if r["idle_pct"] is None
        else f"idle {pct(r['idle_pct'])} of the measured time (100% − mean GPU-Util)"
    )
    items.append(f"{energy}; {idle}")
    if r["price_per_gpu_hour"] is not None:
        items.append(
            f"at {r['price_per_gpu_hour']:g} per GPU-hour: {sig(r['cost'])} in all"
            + (
                f", {sig(r['no_tensor_work_cost'])} of it for GPU-hours that did no tensor work"
                if r["no_tensor_work_cost"] is not None
                else ""
            )
        )
    return [head, *items]
