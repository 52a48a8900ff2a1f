"""`gpubench compare RUN_A RUN_B [RUN ...]`: two or more runs of one kind side by side, phase by phase for
watched jobs and scenario by scenario for suite runs: what nvidia-smi said, the work done (MFU, or MBU where the
row is bound by memory), the tensor ceiling and the rate, each later run's change against the first, and whether
that change lies beyond the runs' own spread (their p10–p90 ranges of the time a step or a call took do not
overlap). In the console, and with one figure as report.md and report.html in --out DIR."""

from __future__ import annotations

import math
from pathlib import Path

from gpubench.metrics import finite, fmt_value, pct
from gpubench.show.figures.common import work_fraction
from gpubench.usage import UsageError

FIGURE = "change"
OWN_FILES = ("report.md", "report.html", f"figures/{FIGURE}.png", f"figures/{FIGURE}.svg")


def work(row: dict) -> tuple[str, float]:
    """The share of a peak that judges the row: the suite's by its bound; a job's, which has none, as a row bound
    by both roofs is judged (a decode step reads its weights at a batch too small for its FLOPs to count)."""
    return work_fraction(row if row.get("bound") else {**row, "bound": "both"})


def rate(row: dict, job: bool, per_token: bool = False) -> tuple[float, float, float]:
    """The time a unit of the row's work took, in ms: median, p10 and p90. The unit is a step (a job), a token
    where per_token (decode at two batch sizes: a step of 64 sequences is not one of 1), or a call (a suite)."""
    key = "step_ms" if job else "kernel_ms"
    times = [row.get(k) if finite(row.get(k)) else math.nan for k in (key, f"{key}_p10", f"{key}_p90")]
    if per_token:  # a step's tokens, constant over the row: tokens/s × the median step's time
        tokens = row.get("tokens_per_s", math.nan) * times[0] / 1e3 if finite(row.get("tokens_per_s")) else math.nan
        times = [t / tokens if finite(tokens) and tokens > 0 else math.nan for t in times]
    return tuple(times)


def tokens_count(rows: list[dict]) -> bool:
    """Whether the rows' rate is in tokens: every one of them reported tokens (and steps of different sizes are
    then compared by what they produced)."""
    return all(finite(r.get("tokens_per_s")) and r["tokens_per_s"] > 0 for r in rows)


def keyed(summary: list[dict], job: bool) -> dict[str, dict]:
    """The run's rows by name: the phase or scenario, with its GPU where the run has rows of several."""
    gpus = {r.get("uuid") or r.get("gpu") for r in summary}
    out = {}
    for r in summary:
        name = str(r.get("scenario", ""))
        if len(gpus) > 1:
            name += f" · GPU {r.get('gpu')}" + (f" · rank {r['rank']}" if isinstance(r.get("rank"), int) else "")
        out.setdefault(name, r)
    return out


def change(base: dict, other: dict, job: bool, per_token: bool = False) -> dict:
    """The other row against the base: the change of its rate in % (faster is +), and whether the two rows'
    p10–p90 ranges lie apart (True), overlap (False) or are not known (None)."""
    (a, a10, a90), (b, b10, b90) = rate(base, job, per_token), rate(other, job, per_token)
    pct_change = (a / b - 1) * 100 if finite(a) and finite(b) and b > 0 else math.nan
    known = all(finite(v) for v in (a10, a90, b10, b90))
    return {"pct": pct_change, "beyond": (b90 < a10 or a90 < b10) if known else None}


def amount(change_pct: float) -> str:
    """A change of the rate as a reader takes it in: +57.3%, or 20.6× where the rate doubled or halved."""
    ratio = 1 + change_pct / 100
    return f"{ratio:.3g}×" if ratio >= 2 or ratio <= 0.5 else f"{change_pct:+.1f}%"


def said(c: dict) -> str:
    if not finite(c["pct"]):
        return "—"
    spread = {True: "beyond the runs' spread", False: "within the runs' spread", None: "spread not recorded"}
    return f"{amount(c['pct'])} ({spread[c['beyond']]})"


def compared(runs: list[tuple[str, dict, list[dict]]]) -> dict:
    """The comparison of runs [(name, manifest, summary)], the first the base: the names the runs share, in the
    base's order, and for each its rows and the others' changes; the names only some runs have."""
    job = runs[0][1].get("kind") == "watch"
    rows = [keyed(summary, job) for _, _, summary in runs]
    shared = [n for n in rows[0] if all(n in r for r in rows[1:])]
    only = sorted({n for r in rows for n in r} - set(shared))
    per_token = {n: job and tokens_count([r[n] for r in rows]) for n in shared}
    return {
        "job": job,
        "names": [name for name, _, _ in runs],
        "rows": {n: [r[n] for r in rows] for n in shared},
        "per_token": per_token,
        "changes": {n: [change(rows[0][n], r[n], job, per_token[n]) for r in rows[1:]] for n in shared},
        "only": only,
    }


def table(c: dict) -> tuple[list[str], list[list[str]]]:
    """The comparison as a table: each cell the runs' values in order, A / B / ..., then each change."""
    rate_head = "rate" if c["job"] else "kernel ms"
    head = [
        "phase" if c["job"] else "scenario",
        "GPU-Util",
        "work done",
        "tensor ceiling",
        rate_head,
        "change of the rate" if len(c["names"]) == 2 else "changes of the rate",
    ]
    body = []
    for name, rows in c["rows"].items():

        def each(f):
            return " / ".join(f(r) for r in rows)

        def rated(r, per_token=c["per_token"][name]):
            if per_token:
                v = r["tokens_per_s"]
                return f"{v:,.0f} tokens/s" if v >= 1000 else f"{v:.4g} tokens/s"
            if c["job"]:
                return f"{r['steps_per_s']:.3g} steps/s" if finite(r.get("steps_per_s")) else "—"
            return f"{r['kernel_ms']:.4g}" if finite(r.get("kernel_ms")) else "—"

        def worked(r):
            label, v = work(r)
            return f"{label} {pct(v)}" if finite(v) else "—"

        body.append(
            [
                name,
                each(lambda r: fmt_value("gpu_util_pct", r.get("gpu_util_pct"), "not recorded")),
                each(worked),
                each(lambda r: pct(r["tensor_ceiling_pct"]) if finite(r.get("tensor_ceiling_pct")) else "—"),
                each(rated),
                "; ".join(said(x) for x in c["changes"][name]),
            ]
        )
    return head, body


def blocks(c: dict, runs: list[tuple[str, dict, list[dict]]], figure: bool) -> list[tuple]:
    """The comparison's report, in gpubench.show.page's blocks."""
    letters = [chr(ord("A") + k) for k in range(len(runs))]
    named = "; ".join(f"{x}: `{name}` ({_gpu(m)})" for x, (name, m, _) in zip(letters, runs))
    out = [("h1", f"gpubench compare: {' against '.join(letters[1:])} against A"), ("p", named + ".")]
    if figure:
        out.append(("img", f"figures/{FIGURE}.png", "GPU-Util, the work done and the rate of each run", "first"))
    out.append(("p", f"**{headline(c)}**"))
    head, body = table(c)
    out += [
        ("h2", "Side by side"),
        (
            "p",
            "Each cell gives the runs in order, " + " / ".join(letters) + ": medians over each row's steady "
            "window. A change is of the rate (+ is faster), against A; it lies beyond the runs' spread where the "
            "two rows' p10–p90 ranges of the time a " + ("step" if c["job"] else "call") + " took do not overlap.",
        ),
        ("table", head, body),
    ]
    if c["only"]:
        out.append(("p", "In only some of the runs, so not compared: " + ", ".join(f"`{n}`" for n in c["only"]) + "."))
    return out


def headline(c: dict) -> str:
    """The one sentence a reader came for: the largest change beyond the spread, and what GPU-Util said of it."""
    moves = [(n, k, x) for n, xs in c["changes"].items() for k, x in enumerate(xs) if x["beyond"] and finite(x["pct"])]
    if not moves:
        return "No rate moved beyond the runs' own spread" + (
            "." if c["rows"] else ": they share no phase or scenario."
        )
    name, k, x = max(moves, key=lambda m: abs(m[2]["pct"]))
    base, other = c["rows"][name][0], c["rows"][name][k + 1]
    letter = chr(ord("B") + k)
    util = [fmt_value("gpu_util_pct", r.get("gpu_util_pct"), "not recorded") for r in (base, other)]
    (label, w0), (_, w1) = work(base), work(other)
    told = f", and {label} from {pct(w0)} to {pct(w1)}" if finite(w0) and finite(w1) else ""
    moved = amount(x["pct"])
    how = (
        f"ran at {moved.rstrip('×')} times A's rate"
        if moved.endswith("×")
        else f"is {abs(x['pct']):.1f}% {'faster' if x['pct'] > 0 else 'slower'} than A"
    )
    unit = " in tokens/s" if c["per_token"][name] else ""
    return f"{name}: {letter} {how}{unit}, beyond the runs' spread, while GPU-Util read {util[0]} and {util[1]}{told}."


def _gpu(manifest: dict) -> str:
    return (manifest.get("gpu") or {}).get("name") or "GPU not recorded"


def check_kinds(runs: list[tuple[str, dict, list[dict]]]) -> None:
    kinds = {("a watched job" if m.get("kind") == "watch" else "a suite run") for _, m, _ in runs}
    if len(kinds) > 1:
        raise UsageError(
            "compare compares runs of one kind, phases with phases or scenarios with scenarios, and these are "
            + " and ".join(sorted(kinds))
        )
    empty = [name for name, _, summary in runs if not summary]
    if empty:
        raise UsageError(f"{empty[0]} has no summary rows to compare (gpubench report {empty[0]} says why)")


def default_out(paths: list[Path]) -> Path:
    return Path("compare-" + "-vs-".join(p.resolve().name for p in paths[:3]))
