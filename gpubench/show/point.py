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
    out = [("ul", [sentence(r, job) for r in shown])]
    if job and len(rows) < len(summary):
        out.append(("p", "Start-up and teardown, outside the job's steps, are in the table below."))
    if job:  # a rank that holds the others back is the first thing a many-GPU job's reader needs
        slow = [r for r in summary if "straggler" in str(r.get("verdict_rules") or "").split(", ")]
        out[:0] = [("p", f"**{md.text(first_sentence(r.get('verdict')))}** ({md.text(row_label(r))})") for r in slow]
    if cut:
        out.append(("p", f"Told here: {cut}."))
    return out
