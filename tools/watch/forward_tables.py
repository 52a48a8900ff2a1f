"""What tools/watch/forward_jobs.sh measured, read back from its committed run directories and logs: jobs that step
no optimizer watched with no code change, each beside the count it printed of itself, and the forward hook's
cost in interleaved runs with the hook on and off.

Each table sits between `<!-- gpubench:NAME -->` and `<!-- /gpubench:NAME -->`: `forward-jobs` and
`forward-cost` in docs/watch.md, `forward-brief` in README.md (tools/readme/tables.py leaves them alone).

    python -m tools.watch.forward_tables          # rewrite them
    python -m tools.watch.forward_tables --check  # exit 1 if a file differs from what the results say

A run directory is results/forward-<job>-h200/; its log is the one tools/watch/forward_jobs.sh printed, a section
`== <job>: <command>` a job, the job's own count on a line of it beginning `own count`.
"""

from __future__ import annotations

import argparse
import math
import re
import sys
from pathlib import Path

from gpubench.metrics import pct
from tools.watch.auto_runs import median, row_of
from tools.watch.forward_runs import EVALS, GENERATE, GPU, INFER, U, compared

ROOT = Path(__file__).resolve().parents[2]

MARK = re.compile(r"(<!-- gpubench:(?P<name>[\w-]+) -->\n)(?P<body>.*?)(<!-- /gpubench:(?P=name) -->)", re.S)
COST = f"forward-jobs-{GPU}-cost-compiled.log"
BRIEF = [
    ("bert", "inference"),
    ("generate-b1", "inference"),
    ("generate-b32", "inference"),
    ("train-eval", "eval"),
    ("jax", "train"),
]
COST_HEAD = re.compile(r"== cost width (\d+) batch (\d+) round (\d+) hooks (on|off)$")
COST_RATE = re.compile(r"own count: (\S+) forwards/s")
TARGET_PCT = 1.0  # the hook's cost a job should not notice


def _p(v) -> str:
    """A percentage to three digits where it is 0.01% or more: the rows and the job's own differ in the third."""
    return "–" if not (isinstance(v, float) and math.isfinite(v)) else f"{v:#.3g}%" if v >= 0.01 else pct(v)


def _diff(r: dict) -> float:
    return 100 * (r["rate"] / r["own_rate"] - 1)


def jobs_table() -> str:
    """docs/watch.md: every job's compared row beside its own count."""
    rows = compared()
    logs = (
        f"[log of every job](results/logs/{INFER})"
        if INFER == GENERATE
        else f"[log of the inference, WGAN and JAX jobs](results/logs/{INFER}), "
        f"[of generate](results/logs/{GENERATE}), [of the training with evaluations](results/logs/{EVALS})"
    )
    out = [
        f"On one {rows[0]['device']} ({logs}); each job's run directory is `results/forward-<job>-{GPU}/`.",
        "",
        "| job | rows compared (phase) | steps/s with no code change (the job's own) | difference "
        "| MFU with no code change (own) | tensor ceiling | MBU with no code change (own) | what it is; a step |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for r in rows:
        mbu = f"{_p(r['mbu'])} ({_p(r['own_mbu'])})" if math.isfinite(r["own_mbu"]) else "–"
        out.append(
            f"| `{r['job']}` | `{r['phase']}` | {r['rate']:.4g} ({r['own_rate']:.4g}, {r['clock']}) | {_diff(r):+.1f}% "
            f"| {_p(r['mfu'])} ({_p(r['own_mfu'])}) | {_p(r['ceiling'])} | {mbu} | {r['what']}; {r['step']} |"
        )
    worst = max(rows, key=lambda r: abs(_diff(r)))
    out += [
        "",
        f"Steps/s with no code change lie within {abs(_diff(worst)):.1f}% of the jobs' own rates (the widest: "
        f"`{worst['job']}` `{worst['phase']}`, against its own rate on the {worst['clock']}). Own MFU is the job's "
        "own FLOPs at its own rate over the bf16 dense peak the run's summary used; own MBU, for `generate`, its "
        "bytes a decode step (weights and KV cache) at its decode steps/s over the datasheet bandwidth. "
        "`generate` counts no FLOPs of its own.",
    ]
    return "\n".join(out) + "\n"


def cost_rounds() -> dict:
    """{(width, batch): {"on"|"off": {round: forwards/s}, "order": the arms as they ran}} from the cost log."""
    out: dict = {}
    head = None
    for line in (ROOT / "results" / "logs" / COST).read_text(errors="replace").splitlines():
        if m := COST_HEAD.match(line):
            head = m
        elif head and (m := COST_RATE.match(line)):
            size = (int(head[1]), int(head[2]))
            arms = out.setdefault(size, {"on": {}, "off": {}, "order": []})
            arms[head[4]][int(head[3])] = float(m[1])
            arms["order"].append(head[4])
            head = None
    return out


def cost(size: tuple[int, int], arms: dict) -> dict:
    """One size's medians, the cost of the hook (median on over median off, in %) and gpubench's steps/s in the
    runs with the hook on (the median of their `inference` rows)."""
    on, off = median(arms["on"].values()), median(arms["off"].values())
    runs = [ROOT / "results" / f"forward-cost-w{size[0]}-on-{i}-{GPU}" for i in arms["on"]]
    return {
        "on": on,
        "off": off,
        "cost_pct": 100 * (on / off - 1),
        "runs": runs,
        "watched": median(row_of(r, "inference").get("steps_per_s") for r in runs),
    }


def cost_table() -> str:
    """docs/watch.md: the forward hook's cost, then the compiled training job beside its run before the hook."""
    rounds = cost_rounds()
    order = ", ".join(next(iter(rounds.values()))["order"])
    out = [
        f"`{U}/forward_heavy.py` on one H200 ([log](results/logs/{COST})), hooks on against `--no-auto`, the arms "
        f"in the order {order}; forwards/s are the job's own, on the host clock, over the last "
        "third of its run; gpubench's steps/s are its `inference` row's, the whole run after warm-up:",
        "",
        "| size | rounds | hooks on | hooks off | median on | median off | difference | steps/s with no code "
        "change (hooks on) |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    said = []
    for size, arms in sorted(rounds.items(), key=lambda kv: -kv[0][0]):
        c = cost(size, arms)
        out.append(
            f"| width {size[0]}, batch {size[1]} | {len(arms['on'])} | "
            + " | ".join(", ".join(f"{arms[a][i]:,.0f}" for i in sorted(arms[a])) for a in ("on", "off"))
            + f" | {c['on']:,.0f} | {c['off']:,.0f} | {c['cost_pct']:+.1f}% | {c['watched']:,.0f} |"
        )
        within = abs(c["cost_pct"]) <= TARGET_PCT
        said.append(
            f"{abs(c['cost_pct']):.1f}% at {c['off']:,.0f} forwards/s (width {size[0]}), "
            + (
                "within the 1% target"
                if within
                else f"**{abs(c['cost_pct']) / TARGET_PCT:.0f} times the 1% target: it misses it**"
            )
        )
    slow, fast = (cost(s, rounds[s]) for s in sorted(rounds, key=lambda s: -s[0]))
    extra = [1e6 / c["on"] - 1e6 / c["off"] for c in (fast, slow)]
    out += [
        "",
        "The hook costs the job " + "; ".join(said) + f". Each forward of the smaller model takes "
        f"{extra[0]:.1f} µs longer with the hook: its host launches every forward and the GPU waits on it, so "
        f"what the hook does at each call adds to every step. At width {max(rounds)[0]} the GPU sets the pace and "
        f"the host's extra work hides behind it ({extra[1]:.1f} µs a forward).",
    ]
    return "\n".join(out) + "\n"


def brief() -> str:
    """README.md: the inference, evaluation, decode and JAX rows, each number beside the job's own."""
    rows = {(r["job"], r["phase"]): r for r in compared()}
    out = [
        f"| job, on one {next(iter(rows.values()))['device']} | steps/s with no code change (its own count) | "
        "MFU, MBU for decode (its own) | tensor ceiling |",
        "| --- | --- | --- | --- |",
    ]
    for key in BRIEF:
        r = rows[key]
        use = ("MBU", "mbu") if math.isfinite(r["own_mbu"]) else ("MFU", "mfu")
        out.append(
            f"| {r['what']} | {r['rate']:.4g} ({r['own_rate']:.4g}) | {use[0]} {_p(r[use[1]])} "
            f"({_p(r['own_' + use[1]])}) | {_p(r['ceiling'])} |"
        )
    return "\n".join(out) + "\n"


PARTS = {
    "docs/watch.md": {"forward-jobs": jobs_table, "forward-cost": cost_table},
    "README.md": {"forward-brief": brief},
}


def render(text: str, parts: dict, up: str) -> str:
    """The text with its parts made anew; links into results/ written from the file's folder (`up`)."""

    def fill(m):
        make = parts.get(m["name"])
        body = make().replace("](results/", f"]({up}results/") if make else m["body"]
        return m[1] + body + m[4]

    return MARK.sub(fill, text)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--check", action="store_true", help="exit 1 if a file differs from the results")
    args = ap.parse_args()
    stale = []
    for name, parts in PARTS.items():
        path = ROOT / name
        old = path.read_text()
        missing = [p for p in parts if f"<!-- gpubench:{p} -->" not in old]
        new = render(old, parts, "../" * name.count("/"))
        if new != old or missing:
            stale.append(name + (f" (no {', '.join(missing)} part)" if missing else ""))
            if not args.check:
                path.write_text(new)
    if args.check and stale:
        print(f"{', '.join(stale)} disagree with results/: run python -m tools.watch.forward_tables", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
