"""What tools/watch/auto.py measured, as tables (tools/watch/auto_runs.py reads its run directories): the
examples watched with and without their own gpubench calls, the optimizer hook's cost, and the README table of
jobs watched with no code change (tools/readme/tables.py writes the full one into docs/watch.md and a short one,
a cell per GPU, into README.md; tools/watch/auto.py prints the full one).
"""

from __future__ import annotations

import math
from pathlib import Path

from gpubench.metrics import pct
from gpubench.read.summary import windows_of
from gpubench.record.rundir import load_run
from gpubench.record.sources.gpm import ACTIVITY, stale
from tools.watch.auto_runs import (
    CEILING,
    JOBS,
    MEDIAN_STEP,
    OWN_PHASE,
    RECOUNT,
    SLOW,
    TARGET,
    _finite,
    _or0,
    compare,
    hook_cost,
    log_of,
    loop,
    median,
    own_count,
    own_mfu,
    row_of,
    runs,
)


def table(results: Path) -> str:
    """The full table (docs/watch.md): for each job, MFU from its own count, MFU with no code change (gpubench's count
    of one step at the optimizer's steps/s), the tensor ceiling, and the first over the last."""
    found = runs(results)
    if not found:
        return (
            "(no run committed yet: `python3 -m tools.watch.auto` on a GPU records them, and "
            "`python -m tools.readme.tables` writes them here)\n"
        )
    out = []
    for gpu, jobs in sorted(found.items()):
        logs = sorted(p.name for p in (results / "logs").glob(f"watch-auto*-{gpu}.log"))
        first = next(iter(next(iter(jobs.values())).values()))[0]
        device = ((load_run(first)[0].get("gpu") or {}).get("name")) or gpu
        out += [
            f"On one {device} (logs: {', '.join(f'[{n}](results/logs/{n})' for n in logs)}):",
            "",
            "| job | runs: own calls, none | MFU from its own count | MFU with no code change | tensor ceiling "
            "| own MFU ÷ ceiling |",
            "| --- | --- | --- | --- | --- | --- |",
        ]
        for job, what, phase in JOBS:
            c = cells(jobs, job, phase)
            if c:
                out.append(f"| {what} | {c['count']} | {c['own']} | {c['auto']} | {c['ceiling']} | {c['ratio']} |")
        for said in (notes(jobs), _findings(jobs)):
            out += [""] + said if said else []
        out.append("")
    return "\n".join(out)


def cells(jobs: dict, job: str, phase: str | None) -> dict:
    """One job's cells on one GPU (its runs by arm): MFU from its own count, MFU with no code change (the median
    over its runs), the tensor ceiling in the same rows, the first over the last, and its runs; {} if none."""
    arms = jobs.get(job)
    if not arms or not arms.get("auto"):
        return {}
    own = own_mfu(job, arms, phase)
    rows = [row_of(r, phase) for r in arms["auto"]]
    auto = median(r.get("mfu_pct") for r in rows)
    ceiling = median(r.get(CEILING) for r in rows)
    ratio = f"{own / ceiling:.2f}" if math.isfinite(own) and math.isfinite(ceiling) and ceiling else "–"
    count = f"{len(arms.get('own', [])) if job in OWN_PHASE else '–'}, {len(arms['auto'])}"
    return {"own": _pct(own), "auto": _pct(auto), "ceiling": _pct(ceiling), "ratio": ratio, "count": count}


def brief(results: Path, names: dict[str, str]) -> str:
    """The README's short table: each job once, a cell per GPU of `names` (slug: short name, in the columns'
    order; tools/readme/common.py's GPUS), from the runs the full table in docs/watch.md reads."""
    found = runs(results)
    gpus = [g for g in names if g in found]
    if not gpus:
        return "(no run committed yet: `python3 -m tools.watch.auto` on a GPU records them)\n"
    out = [
        "Each cell: " + " / ".join(names[g] for g in gpus) + " (– where that GPU ran no such job).",
        "",
        "| job | MFU from its own count | MFU with no code change | tensor ceiling | own MFU ÷ ceiling |",
        "| --- | --- | --- | --- | --- |",
    ]
    ratios: dict[bool, list[str]] = {True: [], False: []}  # Llama-style or not -> own MFU ÷ ceiling, each GPU's
    for job, what, phase in JOBS:
        if phase is None:  # a job that steps no optimizer: the table of forward steps beside it has its numbers
            continue
        per = [cells(found[g], job, phase) for g in gpus]
        if any(per):
            out.append(
                f"| {what} | "
                + " | ".join(" / ".join(c.get(key, "–") for c in per) for key in ("own", "auto", "ceiling", "ratio"))
                + " |"
            )
            ratios["Llama" in what] += [c["ratio"] for c in per if c.get("ratio", "–") != "–"]
    if ratios[True] and ratios[False]:

        def span(xs):
            return f"{min(xs, key=float)}–{max(xs, key=float)}"

        out += [
            "",
            "The ceiling, the highest rate per active cycle any kernel reached, is close to MFU where large "
            f"matrix products dominate (the Llama-style jobs, {span(ratios[True])}; PaLM's count takes causal "
            f"attention whole, so MFU can pass it) and sits above it for GPT-2 small and a CNN "
            f"({span(ratios[False])}).",
        ]
    return "\n".join(out) + "\n"


def notes(jobs: dict) -> list[str]:
    """Where the cells come from, for the rows that need it."""
    said = []
    for job, _, phase in JOBS:
        arms = jobs.get(job) or {}
        rows = [row_of(r, phase) for r in arms.get("auto", [])]
        if not rows:
            continue
        bound = _span(r.get(CEILING) for r in rows)
        if phase is None:
            said.append(
                f"- `{job}` has no optimizer, so no steps with no code change and no MFU: its row (`"
                f"{rows[0].get('phase')}`, the phase with the most busy seconds) says "
                + (
                    f"that at most {bound} of the bf16 peak ran on the tensor pipes."
                    if bound != "–"
                    else "nothing of its work: no tensor ceiling is known for this GPU."
                )
            )
        counts = [c for r in arms.get("auto", []) if (c := own_count(job, r))]
        if job in RECOUNT and counts:
            wrong = [c for c in counts if not math.isclose(c["printed"], c["flops"], rel_tol=1e-3)]
            said.append(
                f"- `{job}`'s own count is its matrix products, {counts[0]['flops']:.3g} FLOPs a step at the "
                f"sizes its command gave, at the rate it printed "
                f"({_span((c['rate'] for c in counts), '{:.4g}')} steps/s)"
                + (
                    f"; what {len(wrong)} of its runs printed as their count, XLA's cost "
                    f"analysis ({_span((c['printed'] for c in wrong), '{:.3g}')}), leaves "
                    "the products out on a GPU."
                    if wrong
                    else "."
                )
            )
    hfu = {
        job: median(
            r["hfu_pct"] / r[CEILING]
            for r in map(lambda run: row_of(run, phase), arms.get("auto", []))
            if _finite(r.get("hfu_pct")) and _finite(r.get(CEILING)) and r[CEILING] > 0
        )
        for job, _, phase in JOBS
        if phase and (arms := jobs.get(job))
    }
    held = [
        (r.name, len(stale_rows(r, row.get("phase"))), row.get("verdict_rules", ""))
        for job, _, phase in JOBS
        for arm, paths in (jobs.get(job) or {}).items()
        for r in paths
        if (row := row_of(r, OWN_PHASE.get(job, phase) if arm == "own" else phase))
    ]
    held = [(name, n, rules) for name, n, rules in held if n]
    if held:
        said.append(
            "- GPM rows that read every activity 0, their two samples holding no refresh (gpubench's GPM "
            "source now leaves such a row empty), lie in the compared row of "
            + ", ".join(
                f"`{name}` ({n}{', HFU over its ceiling' if 'flops-above-ceiling' in rules else ''})"
                for name, n, rules in held
            )
            + ": they lower that row's tensor ceiling."
        )
    if any(map(math.isfinite, hfu.values())):
        said.append(
            "- The ceiling bounds the FLOPs that ran (HFU), within its calibration's error; MFU by PaLM's "
            "convention counts causal attention whole where the kernels skip its masked half, and can read "
            "above it. HFU ÷ ceiling with no code change (gpubench's count): "
            + ", ".join(f"`{j}` {v:.2f}" for j, v in hfu.items() if math.isfinite(v))
            + "."
        )
    return said


def stale_rows(run: Path, phase: str | None) -> list[float]:
    """The starts of the sample rows in a phase row's window whose GPM pair held no refresh (gpm.stale)."""
    _, samples, summary = load_run(run)
    row = next((r for r in summary if r.get("phase") == phase and r.get("kind") == "phase"), {})
    out = []
    for a, b in windows_of(row.get("windows")):
        w = samples.window(a, b)
        cols = {c: w.col(c) for c in (*ACTIVITY, "dram_active_pct")}
        out += [float(w.col("t_start_s")[i]) for i in range(len(w)) if stale({c: float(v[i]) for c, v in cols.items()})]
    return out


def _findings(jobs: dict) -> list[str]:
    said = []
    for job in ("gpt", "llama"):
        arms = jobs.get(job) or {}
        if not (arms.get("own") and arms.get("auto")):
            continue
        c = compare(arms, "train")
        met = [abs(100 * (c[k]["ratio"] - 1)) <= TARGET[k] for k in ("steps_per_s", "mfu_pct")]
        said.append(
            f"- `{job}`: with no code change against its own calls, {c['pairs']} interleaved pairs: "
            f"steps/s {_ratio(c['steps_per_s'])}, MFU {_ratio(c['mfu_pct'])}, FLOPs a step "
            f"{_ratio(c['flops_per_step'])}: "
            + (
                "within the targets (steps/s within 1%, MFU within 2%)" + _loose(c)
                if all(met)
                else "**not within the targets** (steps/s within 1%, MFU within 2%)." + why(arms, c)
            )
        )
    for job, name in (("gpt", "the healthy GPT"), ("llama", "the Llama")):
        arms = jobs.get(job) or {}
        if not (arms.get("auto") and arms.get("off")):
            continue
        cost = hook_cost(arms)
        said.append(
            f"- The hook's cost on {name} (median step on the host clock, hook on against "
            f"`--no-auto`, {len(cost['auto_ms'])} and {len(cost['off_ms'])} interleaved runs): "
            f"{cost['cost_pct']:+.2f}%, {'within' if cost['cost_pct'] <= TARGET['hook'] else 'above'} the 1% "
            f"target"
            + (
                f"; the runs spread over {cost['spread_pct']:.1f}%, more than the cost, so these "
                "runs bound it no closer than that."
                if cost["spread_pct"] > abs(cost["cost_pct"])
                else "."
            )
        )
    return said


def _loose(c: dict) -> str:
    """Where the runs of an arm spread wider than the steps/s target, the medians meet it with that much noise."""
    s = c["steps_per_s"]
    widest = max(_or0(s["spread_own_pct"]), _or0(s["spread_auto_pct"]))
    if widest <= TARGET["steps_per_s"]:
        return "."
    return (
        f", though the runs of one arm spread over as much as {widest:.1f}%, wider than the 1% target: "
        f"{c['pairs']} pairs place the medians within it, not each run."
    )


def why(arms: dict, c: dict) -> str:
    """What the raw data say of a difference between the arms: whether the rows' windows, the clocks, the
    order or the steps themselves make it (each said as the numbers have it)."""
    loops = {arm: [loop(r) for r in arms.get(arm, [])] for arm in ("own", "auto")}
    rate = {arm: median(x.get("rate") for x in v) for arm, v in loops.items()}
    host = {
        arm: median(float(m[1]) for r in arms.get(arm, []) if (m := MEDIAN_STEP.search(log_of(r))))
        for arm in ("own", "auto")
    }
    clocks = [v for arm in ("own", "auto") for v in c["sm_clock_mhz"][arm] if _finite(v)]
    pairs = list(zip(c["steps_per_s"]["own"], c["steps_per_s"]["auto"]))
    faster = sum(b > a for a, b in pairs)
    began = [[load_run(r)[0].get("start_wall", "") for r in arms.get(arm, [])] for arm in ("own", "auto")]
    first = sum(a < b for a, b in zip(*began))
    rows, whole = 100 * (c["steps_per_s"]["ratio"] - 1), 100 * (rate["auto"] / rate["own"] - 1)
    typical = 100 * (host["auto"] / host["own"] - 1)
    said = [
        (
            f"{'Not' if abs(whole - rows) < 1 else 'Partly'} the rows' windows: over each whole train loop, "
            f"stamped on the GPU (the counted step left out), steps/s differ by {whole:+.2f}%."
        ),
        (
            f"{'Not' if max(clocks) - min(clocks) <= 0.01 * max(clocks) else 'Maybe'} the clocks: the SM clock's "
            f"median {_span(clocks, '{:.0f}')} MHz in the rows."
            if clocks
            else "No clock was recorded."
        ),
        (
            f"{'Not' if faster in (0, len(pairs)) and 0 < first < len(pairs) else 'Maybe'} the order: the arm "
            f"without calls was faster in {faster} of {len(pairs)} pairs, the arm with calls running first in "
            f"{first} of them."
        ),
        (
            f"The median step on the host clock is {host['own']:.2f} ms with the calls and {host['auto']:.2f} ms "
            f"without ({typical:+.2f}%)"
            + (": the typical step is the same." if abs(typical) < TARGET["steps_per_s"] else ".")
        ),
        (
            f"Steps in stretches of slower steps (marks-file lines {100 * (SLOW - 1):.0f}% or more above the "
            f"run's median step): {_join((x.get('slow_share', math.nan) * 100 for x in loops['own']), '{:.0f}%')} "
            f"of them with the calls, {_join((x.get('slow_share', math.nan) * 100 for x in loops['auto']), '{:.0f}%')}"
            " without."
        ),
        (
            f"The example calls `step()` after `loss.item()`, when the GPU has no work queued (it reached the call "
            f"{_span((x.get('lead_ms') for x in loops['own']), '{:.1f}')} ms after it was made); the hook steps "
            f"with {_span((x.get('lead_ms') for x in loops['auto']), '{:.0f}')} ms still queued. Whether the calls "
            f"or the host's noise make the slow stretches, {len(pairs)} pairs cannot tell."
        ),
    ]
    return " " + " ".join(said)


def _ratio(c: dict) -> str:
    if not math.isfinite(c["ratio"]):
        return "not measured"
    spreads = [
        f"{c[k]:.1f}% {w}"
        for k, w in (("spread_own_pct", "with its calls"), ("spread_auto_pct", "without"))
        if math.isfinite(c[k])
    ]
    return f"{100 * (c['ratio'] - 1):+.2f}%" + (f" (runs spread {', '.join(spreads)})" if spreads else "")


def _join(values, fmt: str = "{:.2g}%") -> str:
    return " and ".join(fmt.format(v) for v in values if _finite(v)) or "–"


def _span(values, fmt: str = "{:.2g}%") -> str:
    """One number where the runs agree to its digits, else the lowest and the highest."""
    shown = sorted({fmt.format(v): v for v in values if _finite(v)}.items(), key=lambda kv: kv[1])
    return "–" if not shown else shown[0][0] if len(shown) == 1 else f"{shown[0][0]}–{shown[-1][0]}"


def _pct(v) -> str:
    return pct(v) if isinstance(v, (int, float)) and math.isfinite(v) else "–"
