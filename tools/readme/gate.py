"""The regression gate's parts: each GPU model's baseline run and its checks (the summary
tools/gate/baseline.sh leaves), and the table of the verdict rules (tools/readme/tables.py puts them in place)."""

from __future__ import annotations

import json
import re
from pathlib import Path

from gpubench.gate.judgement import RULES
from tools.readme.common import GPUS


def _change(c: dict) -> str:
    return f"{c['pct']:+.1f}% [{c['lo']:+.1f}, {c['hi']:+.1f}]" if c else "n/a"


def _fixed(x, digits=2) -> str:
    return "–" if x is None else f"{x:.{digits}f}"


def _verdict(v: dict | None) -> str:
    return "–" if not v or not v.get("word") else f"`{v['word']}` {(v.get('median') or {}).get('pct', 0):+.1f}%"


def gate_table(name: str, slug: str, summary: dict) -> str:
    """What tools/gate/baseline.sh showed on one GPU since the floor of several processes (summary version 2):
    a sentence, then one row per benchmark over the unchanged runs and the slowdowns."""
    n, checks = summary["numbers"], summary["checks"]
    passed = sum(c["ok"] is True for c in checks)
    told = sum(c["ok"] is not None for c in checks)  # N/A: a probe not run, a GPU the steps do not name
    r, base = n["reruns"], n["baseline"]
    part = "; ".join(f"`{v['word']}` for `{k}` ({(v.get('why') or '').split(':')[0]})" for k, v in n["part"].items())
    took = (n.get("time") or {}).get("session_s")
    lines = [
        f"On the {name} ([log](results/logs/bench-baseline-{slug}.log), "
        f"[checks](results/logs/bench-gate-{slug}.json)), {passed} of {told} checks passed: a baseline "
        f"of {base['processes']} processes from one command; {r['runs']} unchanged runs read `same` {r['same']} "
        f"and `unsure` {r['unsure']} times (`slower` {r['slower']}, `faster` {r['faster']}) and {r['failed']} "
        f"of them failed"
        + (f"; 30% more work in 40% of the calls read {part}" if part else "")
        + (f"; an unchanged run took {took:.0f} s, most of it its process's start." if took else "."),
        "",
        "| benchmark | median (µs) | timed | processes moved it (sd, %) | floor (%) | false alarms at the floor "
        "| unchanged runs: same / unsure / slower / faster | 5% more work | 10% more work |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for bench, row in n["benchmarks"].items():
        w = row["words"]
        fa = "–" if row["false_alarm_at_floor"] is None else f"{row['false_alarm_at_floor']:.0e}"
        lines.append(
            f"| `{bench}` | {row['median_us']:.3g} | {row['timed']} | {_fixed(row['spread_pct'])} | "
            f"{_fixed(row['floor_pct'])} | {fa} | {w['same']} / {w['unsure']} / {w['slower']} / "
            f"{w['faster']} | {_verdict(row['more_5'])} | {_verdict(row['more_10'])} |"
        )
    return "\n".join(lines) + "\n"


def gate_sentence(name: str, slug: str, summary: dict) -> str:
    """What tools/gate/baseline.sh showed on one GPU, from its checks (results/logs/bench-gate-<slug>.json)."""
    if summary["numbers"].get("version") == 2:
        return gate_table(name, slug, summary)
    n, checks = summary["numbers"], summary["checks"]
    passed = sum(c["ok"] is True for c in checks)
    na = sum(c["ok"] is None for c in checks)
    floors = list(n["floor"]["median_pct"].values())
    parts = [
        f"On the {name} ([log](results/logs/bench-baseline-{slug}.log), "
        f"[checks](results/logs/bench-gate-{slug}.json)), {passed} of {len(checks)} checks passed"
        + (f" and {na} could not be told apart on this machine" if na else "")
        + ":"
    ]
    if floors:
        parts.append(
            f"{n['floor']['reruns']} unchanged reruns put the median's floor at {min(floors):.1f}–"
            f"{max(floors):.1f}% ({len(floors)} benchmarks);"
        )
    a = "; ".join(f"`{v['word']}` for `{k}` (median {_change(v['median'])})" for k, v in n["a"].items())
    b = "; ".join(
        f"`{v['word']}` for `{k}` ({v['why'].split(':')[0]}; median {_change(v['median'])})" for k, v in n["b"].items()
    )
    c = n["c"]
    parts += [
        f"(a) 5% more work in every call reads {a};" if a else "",
        f"(b) 30% more work in 40% of the calls reads {b};" if b else "",
        f"(c) three unchanged reruns read `same` {c['same']} and `unsure` {c['unsure']} times "
        f"(`slower` {c['slower']}, `faster` {c['faster']}) and {c['failed']} of them failed;",
    ]
    if n["d"]:
        d = n["d"][0]
        how = (
            f"timed from a CUDA graph of {d['cuda_graph_calls']} calls"
            if d.get("cuda_graph_calls")
            else "launched one by one behind a blocking kernel"
        )
        parts.append(
            f"(d) the 2 µs spin took {d['kernel_us']:.2f} µs a call ({how}), against {d['graph_us']:.2f} "
            f"µs in the test's own CUDA graph, while the host launched one every {d['launch_us']:.2f} µs;"
        )
    slow = n.get("e_slow_copy") or {}
    parts.append(f"(e) the slow copy reads `{slow.get('word')}` (median {_change(slow.get('median'))}).")
    return " ".join(p for p in parts if p)


def old_gate_sentence(name: str, slug: str, log: str) -> str | None:
    """The previous gate's log: medians against the wider IQR of the two runs (None for a log of today's)."""
    rows = re.findall(r"^(test_\S+)\s+(\S+) ms ->\s+(\S+) ms\s+(\S+)%\s+noise\s+(\S+)%\s+(\w+)", log, re.M)
    if len(rows) < 2:
        return None
    slow, rerun = rows[0], rows[1:]
    same = [r for r in rerun if r[5] == "same"]
    changes = [abs(float(r[3])) for r in rerun]
    noise = [float(r[4]) for r in rerun]
    return (
        f"On the {name}, with the previous gate (medians against the wider IQR of the two runs), the slow "
        f"copy read `slower` ({slow[1]} -> {slow[2]} ms, {slow[3]}%) and failed the run; an unchanged rerun "
        f"read `same` for {len(same)} of {len(rerun)} benchmarks (changes of {min(changes):.1f} to "
        f"{max(changes):.1f}% against a noise of {min(noise):.1f} to {max(noise):.1f}%; "
        f"[log](results/logs/bench-baseline-{slug}.log))."
    )


def baselines_text(results: Path) -> str:
    out = []
    for slug, name in GPUS.items():
        summary, log = results / "logs" / f"bench-gate-{slug}.json", results / "logs" / f"bench-baseline-{slug}.log"
        if summary.is_file():
            out.append(gate_sentence(name, slug, json.loads(summary.read_text())))
        elif log.is_file():
            out.append(old_gate_sentence(name, slug, log.read_text().split("== verdicts against the baseline")[-1]))
    return "\n".join(o for o in out if o) + "\n"


def gate_rules(results: Path) -> str:
    """The verdict's rules, as gpubench.gate.judgement holds them."""
    lines = ["| verdict | when |", "| --- | --- |"]
    lines += [f"| `{word}` | {when} |" for word, when, _, _ in RULES]
    return "\n".join(lines) + "\n"
