"""The CUPTI part: the committed comparison of CUPTI PM sampling beside NVML GPM, a verdict per column held to
one stated rule, and what sampling cost (tools/readme/tables.py puts it in place)."""

from __future__ import annotations

import json
import re
from pathlib import Path

from gpubench.metrics import BY_COLUMN, fmt_value, pct
from gpubench.record.rundir import load_run
from tools.readme.common import GPUS, finite


CUPTI_COLUMNS = ("sm_active_pct", "sm_occupancy_pct", "tensor_active_pct", "dram_active_pct", "fp32_active_pct")


def close_enough(gpm: float, cupti: float) -> bool:
    """The rule each CUPTI value is held to: within half a percentage point plus a tenth of GPM's value."""
    return abs(cupti - gpm) <= 0.5 + 0.1 * abs(gpm)


def _cupti_metric(manifest: dict, column: str) -> str:
    res = ((manifest.get("sources") or {}).get("columns") or {}).get(column, {}).get("resolution", "")
    m = re.search(r"CUPTI PM sampling of (.+?), one sample", res)
    return m.group(1) if m else ""


def cupti_table(results: Path) -> str:
    """GPM and CUPTI side by side over the same scenarios, per GPU; what matched; what CUPTI costs."""
    out = []
    for slug, gpu in GPUS.items():
        dirs = {k: results / f"profiling-{k}-{slug}" for k in ("gpm", "cupti")}
        if not all((d / "manifest.json").is_file() for d in dirs.values()):
            continue
        (_, _, gsum), (cman, _, csum) = load_run(dirs["gpm"]), load_run(dirs["cupti"])
        cby = {r["scenario"]: r for r in csum}
        head = ["scenario"] + [BY_COLUMN[c].header for c in CUPTI_COLUMNS]
        lines = [
            f"On the {gpu} ([GPM run]({dirs['gpm'].relative_to(results.parent)}), [CUPTI run]"
            f"({dirs['cupti'].relative_to(results.parent)})), each cell GPM / CUPTI; ✗ marks a CUPTI value "
            "off by more than 0.5 percentage point plus a tenth of GPM's:",
            "",
            "| " + " | ".join(head) + " |",
            "|" + "---|" * len(head),
        ]
        verdict = {c: [] for c in CUPTI_COLUMNS}
        for g in gsum:
            c = cby.get(g["scenario"])
            if c is None:
                continue
            cells = [f"`{g['scenario']}`"]
            for col in CUPTI_COLUMNS:
                a, b = g.get(col), c.get(col)
                ok = close_enough(a, b) if finite(a) and finite(b) else None
                if ok is not None:
                    verdict[col].append((ok, g["scenario"]))
                cells.append(f"{fmt_value(col, a, '–')} / {fmt_value(col, b, '–')}" + (" ✗" if ok is False else ""))
            lines.append("| " + " | ".join(cells) + " |")
        said = []
        for col in CUPTI_COLUMNS:
            name, metric = BY_COLUMN[col].label, _cupti_metric(cman, col)
            if not verdict[col]:
                said.append(f"{name}: not offered by PM sampling here, so not recorded")
            elif all(ok for ok, _ in verdict[col]):
                said.append(f"{name} matches GPM in every scenario (`{metric}`)")
            else:
                off = ", ".join(f"`{s}`" for ok, s in verdict[col] if not ok)
                said.append(f"{name} does not match GPM ({off}; `{metric}`)")
        lines += ["", "; ".join(said) + "."]
        cost = results / "logs" / f"cupti-{slug}.json"
        if cost.is_file():
            lines += ["", cupti_costs(json.loads(cost.read_text()), gpu, slug)]
        out.append("\n".join(lines))
    if not out:
        return (
            "(no comparison committed yet: `python -m research.cupti_compare --out DIR` on a GPU writes the runs "
            "and logs this table is made from)\n"
        )
    return "\n\n".join(out) + "\n"


def cupti_costs(found: dict, gpu: str, slug: str) -> str:
    """One paragraph: device memory and context, overhead on a GEMM, clocks, and what a second reader met."""
    parts = []
    ctx = found.get("selfcheck") or {}
    if finite(ctx.get("process_mib")):
        parts.append(
            f"a gpubench process without PyTorch holds {ctx['process_mib']:.0f} MiB of device memory once "
            f"CUPTI samples ({'a CUDA context' if ctx.get('in_compute_processes') else 'no CUDA context'})"
        )
    nobody = found.get("selfcheck_nobody") or {}
    if nobody.get("used") is not None:
        parts.append(
            "an ordinary user (nobody) "
            + (
                "reads them too"
                if "cupti" in nobody["used"]
                else f"is refused: {(nobody.get('unavailable') or {}).get('cupti')}"
            )
        )
    watch = ((found.get("watch") or {}).get("summary") or [{}])[0]
    if finite(watch.get("tensor_active_pct")):
        parts.append(
            f"`gpubench watch --profiling cupti` beside another process's bf16 GEMM read SM active "
            f"{pct(watch.get('sm_active_pct'))} and tensor active {pct(watch['tensor_active_pct'])}: the "
            "watched job's kernels are seen from outside it"
        )
    ovh = found.get("overhead") or {}
    if finite(ovh.get("cupti_pct")):
        parts.append(
            f"a bf16 GEMM ran {ovh['cupti_pct']:+.2f}% slower with the CUPTI source sampling ("
            f"{ovh['gpm_pct']:+.2f}% with GPM; medians of {ovh['pairs']} interleaved windows, SM clock "
            f"{ovh['clock_off_mhz']:.0f} MHz off, {ovh['clock_cupti_mhz']:.0f} MHz with CUPTI)"
        )
    readers = found.get("two_readers") or []
    if readers:
        parts.append("two readers at once: " + "; ".join(f"{r['case']}: {r['said']}" for r in readers))
    if not parts:
        return ""
    return f"Costs on the {gpu} ([log](results/logs/cupti-{slug}.log)): " + "; ".join(parts) + "."
