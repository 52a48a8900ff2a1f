"""The report's first screen: one sentence per scenario or phase, what nvidia-smi said against what the
GPU did, before any table. A suite's row says its GPU-Util, its SM activity and the ground truth that judges
it (MFU, MBU, link share); a watched job's phase says its GPU-Util and MFU, then the first sentence of its
verdict."""

from __future__ import annotations

import re

from gpubench.metrics import finite, pct
from gpubench.read.summary import row_label
from gpubench.show import markdown as md
from gpubench.show.figures.common import kernel_rows, shown_rows, work_fraction

# A verdict is sentences; the first is the one the rules ranked highest.
SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z])")


def first_sentence(text) -> str:
    return SENTENCE_END.split(str(text or "").strip(), maxsplit=1)[0]


def _said(value) -> str:
    return pct(value) if finite(value) else "n/a"


def sentence(row: dict, job: bool) -> str:
    util = row.get("gpu_util_pct")
    name = f"**{md.text(row_label(row))}**"
    if job:
        numbers = f"GPU-Util {_said(util)}, MFU {_said(row.get('mfu_pct'))}"
        verdict = first_sentence(row.get("verdict"))
        return f"{name}: {numbers}. {md.text(verdict)}" if verdict else f"{name}: {numbers}."
    truth, value = work_fraction(row)
    sm = row.get("sm_active_pct")
    return (
        f"{name}: nvidia-smi said {_said(util)} busy"
        + (f", SM active {pct(sm)}" if finite(sm) else "")
        + f"; {truth} {_said(value)} of the peak."
    )


def points(summary: list[dict], job: bool) -> list[tuple]:
    """The blocks of the first screen's sentences: a list, and a line where rows were left out."""
    rows = summary if job else kernel_rows(summary)
    shown, cut = shown_rows(rows, "phases" if job else "rows")
    if not shown:
        return []
    out = [("ul", [sentence(r, job) for r in shown])]
    if cut:
        out.append(("p", f"Told here: {cut}."))
    return out
