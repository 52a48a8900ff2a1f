"""Where a watched job's numbers came from, and the steps gpubench took for it where the job reported none.

A step comes from the job's own gpubench.step() or from its optimizer, seen by gpubench's hook
(gpubench.inside.autohook); FLOPs come from the job's step(), from the one step gpubench counted
(gpubench.inside.onestep), or from nowhere, where only the tensor pipes' activity bounds the work. Here:

- resolve(): a process that called step() itself is described by its own steps alone (the hook's steps of
  it, at most the first before its first step(), are dropped: never counted twice); the FLOPs of a
  process's counted step are given to all its optimizer's steps, those before the count too; where its
  optimizers step in a pattern (P lines), each step is one pattern and gets the count of its own pattern
  alone, and the steps a P line takes back are left out (gpubench.job.patterns);
- holes() and cut_out(): the counted step ran slower (counting dispatches every operation through
  Python), so its time, from the stamp of the step before it to its own, leaves every phase: no rate,
  median or energy of a row covers it;
- sources() and label(): each summary row says where its steps and its FLOPs came from;
- facts(): what came automatically, for the manifest.
"""

from __future__ import annotations

import math
from dataclasses import replace

from gpubench.job import patterns
from gpubench.job.markreader import Pattern, Steps

# the summary columns made here that their names do not tell (gpubench.record.columns.DECLARERS names this)
SUMMARY_COLUMNS = {"steps_source": "text", "flops_source": "text", "provenance": "text", "steps_pattern": "text"}

OWN, OPTIMIZER, COUNTED = "step", "optimizer", "counted"  # markline.ORIGINS
FORWARD, FORWARD_COUNTED, JIT = "forward", "forward counted", "jit"
COUNTS = (COUNTED, FORWARD_COUNTED)  # lines of a step whose FLOPs were counted there: slowed, in no rate
KIND = {OWN: OWN, OPTIMIZER: OPTIMIZER, COUNTED: OPTIMIZER, FORWARD: FORWARD, FORWARD_COUNTED: FORWARD, JIT: JIT}
STEPS_FROM = {OWN: "step()", OPTIMIZER: "optimizer", FORWARD: "forward", JIT: "jit"}
FLOPS_FROM = {
    OWN: "step()",
    OPTIMIZER: "one step counted",
    FORWARD: "forward counted",
    JIT: "xla cost",
    "ceiling": "counters",
}
GPUBENCH_COUNTS = (FLOPS_FROM[OPTIMIZER], FLOPS_FROM[FORWARD], FLOPS_FROM[JIT])  # FLOPs gpubench counted itself
SAID = {
    "steps": {
        "step()": "the job's own gpubench.step()",
        "optimizer": "the job's optimizer steps (no code change)",
        "forward": "the calls of the job's outermost module (no code change)",
        "jit": "the job's jitted step function (no code change)",
    },
    "flops": {
        "step()": "counted by the job's own step()",
        "one step counted": "counted by gpubench from one step",
        "forward counted": "counted by gpubench from one forward of each input shape",
        "xla cost": "from XLA's cost analysis of the compiled step",
        "counters": "not known: the counters bound them (the tensor ceiling)",
    },
}
CEILING = "tensor_ceiling_pct"  # the tensor pipes' bound, where the run has it


def _auto(e) -> bool:
    return isinstance(e, Steps) and e.origin != OWN


def resolve(events: list) -> list:
    """The events as the summary counts them (see the module's docstring)."""
    own = {e.stream for e in events if isinstance(e, Steps) and e.origin == OWN}
    told = patterns.told(events, own)
    counts = {}
    for e in events:
        if _auto(e) and e.origin == COUNTED and e.counted and e.stream not in own:
            counts[e.stream] = (e.flops / e.counted, e.hw_flops / e.counted)
    out = []
    for e in events:
        if isinstance(e, Pattern):
            continue  # applied below
        if _auto(e):
            if e.stream in own or patterns.mine(e, told):
                continue
            if not e.counted and e.stream in counts and e.origin == OPTIMIZER:  # a forward's count is its own
                model, hardware = counts[e.stream]
                e = replace(e, counted=e.n, flops=model * e.n, hw_flops=hardware * e.n)
        out.append(e)
    return out + patterns.apply(events, told)


def holes(events: list) -> list[tuple[float, float]]:
    """The time of each counted step: from the stamp of its process's step before it to its own stamp."""
    out = []
    last: dict = {}
    for e in sorted((e for e in events if _auto(e)), key=lambda e: e.t_first):
        if e.origin in COUNTS and e.stream in last and last[e.stream] < e.t_first:
            out.append((last[e.stream], e.t_first))
        last[e.stream] = e.t_last
    return out


def cut_out(phases: list, gaps: list[tuple[float, float]]) -> list:
    """The phases with the gaps taken out of their spans (a span cut in two keeps both parts)."""
    for phase in phases:
        spans = phase.spans
        for g0, g1 in gaps:
            spans = [part for a, b in spans for part in ((a, min(b, g0)), (max(a, g1), b)) if part[1] > part[0]]
        phase.spans[:] = spans
    return [p for p in phases if p.spans]


def sources(inside, stamped=True) -> dict:
    """Where a row's steps and FLOPs came from: `inside`, the groups of steps of its GPU's streams that begin
    in its spans; nothing where the row holds no step (`stamped` false: a span's first stamp ends a step
    begun before it)."""
    inside = list(inside) if stamped else []
    kinds = {KIND.get(g.origin, OPTIMIZER) for g in inside}
    counted = {KIND.get(g.origin, OPTIMIZER) for g in inside if g.counted}
    return {
        "steps_source": " and ".join(STEPS_FROM[k] for k in sorted(kinds, key=_ORDER.index)),
        "flops_source": " and ".join(FLOPS_FROM[k] for k in sorted(counted, key=_ORDER.index)),
        "steps_pattern": THEN.join(dict.fromkeys(g.pattern for g in inside if getattr(g, "pattern", ""))),
    }


THEN = " then "  # between the patterns of a row whose optimizers changed theirs


_ORDER = [OWN, OPTIMIZER, FORWARD, JIT]  # the order a row with several sources names them in


def label(rows: list[dict]) -> list[dict]:
    """Rows with no FLOPs but a tensor ceiling say that the counters bound them; each row gets a sentence."""
    for r in rows:
        if not r.get("flops_source") and _finite(r.get(CEILING)) and r.get("kind", "phase") == "phase":
            r["flops_source"] = FLOPS_FROM["ceiling"]
        r["provenance"] = sentence(r)
    return rows


def sentence(row: dict) -> str:
    """Where a row's steps and FLOPs came from, in words ("" where it has neither)."""
    parts, said = [], dict(SAID["steps"])
    if row.get("steps_pattern"):  # where several optimizers step: a step is one pattern of theirs
        said[STEPS_FROM[OPTIMIZER]] += ", one step per pattern of " + row["steps_pattern"].replace(THEN, ", then of ")
    if row.get("steps_source"):
        parts.append("steps from " + " and ".join(said.get(s, s) for s in row["steps_source"].split(" and ")))
    if row.get("flops_source"):
        parts.append("FLOPs " + " and ".join(SAID["flops"].get(s, s) for s in row["flops_source"].split(" and ")))
    return ("; ".join(parts)[:1].upper() + "; ".join(parts)[1:]) if parts else ""


def facts(events: list, summary: list[dict], auto: dict | None, phases_from: str) -> dict:
    """What came automatically, for the manifest: the hook, each process's optimizer steps, its count and the
    patterns its optimizers stepped in, how the phases were found, and which rows' steps and FLOPs came from
    the hook (and the pattern a step was one of)."""
    out = dict(auto or {"hook": "off", "why": "the hook goes into a command that gpubench watch starts"})
    own = {e.stream for e in events if isinstance(e, Steps) and e.origin == OWN}
    streams: dict = {}
    for e in events:
        if _auto(e):
            s = streams.setdefault(
                e.stream,
                {"rank": e.stream.rank, "pid": e.stream.pid, "steps": 0, "kept": e.stream not in own, "counted": None},
            )
            s["steps"] += e.n
            if e.origin == COUNTED:
                s["counted"] = (
                    {"model_flops": e.flops / e.counted, "hardware_flops": e.hw_flops / e.counted, "t": e.t_first}
                    if e.counted
                    else "failed: the counters alone bound the work"
                )
    for stream, said in patterns.told(events).items():  # its optimizers' patterns: the steps they took back
        s = streams.get(stream)
        if s is not None:
            s["steps"] -= sum(p.back for p in said)
            s["patterns"] = [{"after_steps": p.written - p.back, "pattern": p.name, "taken_back": p.back} for p in said]
    out["processes"] = list(streams.values())
    out["counted_steps_s"] = [[a, b] for a, b in holes(events)]
    out["phases_from"] = phases_from
    out["rows"] = {
        r["scenario"]: {
            "steps": r.get("steps_source", ""),
            "flops": r.get("flops_source", ""),
            **({"pattern": r["steps_pattern"]} if r.get("steps_pattern") else {}),
        }
        for r in summary
        if r.get("steps_source", "") not in ("", "step()") or r.get("flops_source", "") not in ("", "step()")
    }
    return out


def _finite(v) -> bool:
    return isinstance(v, (int, float)) and math.isfinite(v)
