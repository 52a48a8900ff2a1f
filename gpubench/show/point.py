"""The report's first screen: one sentence per scenario or phase, what nvidia-smi said against what the
GPU did, before any table. A suite's row says its GPU-Util, its SM activity and the ground truth that judges
it (MFU, MBU, link share); a watched job's phase says its GPU-Util and MFU, then the first sentence of its
verdict; its start-up and teardown, outside its steps, are left to the table. A rank that holds a many-GPU job
back is named above them all."""

from __future__ import annotations

import re

from gpubench.metrics import finite, pct
from gpubench.read.receipt import EDGES
from gpubench.read.summary import row_label
from gpubench.show import markdown as md
from gpubench.show.figures.common import kernel_rows, shown_rows, work_fraction

# A verdict is sentences; the first is the one the rules ranked highest.
SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z])")


def first_sentence(text) -> str:
    return SENTENCE_END.split(str(text or "").strip(), maxsplit=1)[0]


def sentence(row: dict, job: bool) -> str:
    """No number that the row lacks is named: a missing one is left out of the sentence, never written n/a."""
    util = row.get("gpu_util_pct")
    name = f"**{md.text(row_label(row))}**"
    if job:
        pairs = (("median GPU-Util", "gpu_util_pct"), ("MFU", "mfu_pct"))
        numbers = ", ".join(f"{what} {pct(row[c])}" for what, c in pairs if finite(row.get(c)))
        verdict = md.text(first_sentence(row.get("verdict")))
        told = [f"{numbers}." if numbers else "", verdict]
        return f"{name}: " + (" ".join(t for t in told if t) or "no GPU-Util, MFU or verdict was recorded.")
    truth, value = work_fraction(row)
    sm = row.get("sm_active_pct")
    busy = f"nvidia-smi said {pct(util)} busy" if finite(util) else "nvidia-smi's GPU-Util was not recorded"
    if finite(value):
        work = f"; {truth} {pct(value)} of the peak."
    else:  # gpubench.read.summary.uncovered withholds a rate; a kernel with no work model has none
        work = f"; its {truth} is withheld (below)." if row.get("rate_withheld") else "."
    return f"{name}: {busy}" + (f", SM active {pct(sm)}" if finite(sm) else "") + work


def points(summary: list[dict], job: bool) -> list[tuple]:
    """The blocks of the first screen's sentences: a list, and a line where rows were left out."""
    # a job's start-up and teardown are outside its steps and carry no advice: the table has them
    work = [r for r in summary if r.get("kind") not in EDGES] if job else kernel_rows(summary)
    rows = work or (summary if job else [])
    shown, cut = shown_rows(rows, "phases" if job else "rows")
    if not shown:
        return []
    out = [("ul", [sentence(r, job) for r in shown] if job else [grouped(g) for g in groups(shown)])]
    if not job and (lead := overall(shown)):
        out.insert(0, ("p", lead))
    if job and len(rows) < len(summary):
        out.append(("p", "Start-up and teardown, outside the job's steps, are in the table below."))
    if cut:
        out.append(("p", f"Told here: {cut}."))
    return out


def stragglers(summary: list[dict]) -> list[tuple]:
    """A rank that holds the others back, named: the first thing a many-GPU job's reader needs, above even the
    headline figure (whose bars show every rank alike)."""
    slow = [r for r in summary if "straggler" in str(r.get("verdict_rules") or "").split(", ")]
    return [("p", f"**{md.text(first_sentence(r.get('verdict')))}** ({md.text(row_label(r))})") for r in slow]


def groups(rows: list[dict]) -> list[list[dict]]:
    """A suite's rows in runs of one family judged by one ground truth (the copies by MBU; decode by MBU, then
    by MFU at the batch where it crosses the ridge): one sentence each, not one a kernel."""
    out: list[list[dict]] = []
    for r in rows:
        if out and (r.get("family"), work_fraction(r)[0]) == (out[-1][0].get("family"), work_fraction(out[-1][0])[0]):
            out[-1].append(r)
        else:
            out.append([r])
    return out


def span(values: list) -> str:
    """The values as one share, or as their range where they differ at the precision shown."""
    shown = list(dict.fromkeys(pct(v) for v in sorted(values)))
    return shown[0] if len(shown) == 1 else f"{shown[0]}–{shown[-1]}"


def grouped(rows: list[dict]) -> str:
    """One sentence for a family's rows: their names, then each number as a range across them."""
    if len(rows) == 1:
        return sentence(rows[0], False)
    names = ", ".join(md.text(row_label(r)) for r in rows)
    name = f"**{md.text(str(rows[0].get('family') or ''))}** ({names})" if rows[0].get("family") else names
    util = [r["gpu_util_pct"] for r in rows if finite(r.get("gpu_util_pct"))]
    sm = [r["sm_active_pct"] for r in rows if finite(r.get("sm_active_pct"))]
    truth = work_fraction(rows[0])[0]
    work = [v for v in (work_fraction(r)[1] for r in rows) if finite(v)]
    busy = f"nvidia-smi said {span(util)} busy" if util else "nvidia-smi's GPU-Util was not recorded"
    said = f"{name}: {busy}" + (f", SM active {span(sm)}" if sm else "")
    return said + (f"; {truth} {span(work)} of the peak." if work else ".")


def overall(rows: list[dict]) -> str:
    """The suite in one sentence: how many kernels nvidia-smi called fully busy, against the spread of the work
    they did."""
    util = [r for r in rows if finite(r.get("gpu_util_pct"))]
    full = [r for r in util if pct(r["gpu_util_pct"]) == "100%"]
    work = [work_fraction(r)[1] for r in rows if finite(work_fraction(r)[1])]
    if len(rows) < 3 or not full or not work:
        return ""
    return (
        f"nvidia-smi said 100% busy for {len(full)} of these {len(rows)} kernels, while the work they did ranged "
        f"from {pct(min(work))} to {pct(max(work))} of the peak that judges each:"
    )
