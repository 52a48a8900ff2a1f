"""The rules of a phase's verdict: a Rule's conditions on a summary row, and how its sentence shows the numbers
that made it hold (gpubench.read.phase_verdict holds the tables of them)."""

from __future__ import annotations

import operator
import re
from dataclasses import dataclass

from gpubench.metrics import BY_COLUMN, finite, pct

OPS = {"<": operator.lt, ">=": operator.ge, ">": operator.gt}
SHOWN = {"<": "<", ">=": "≥", ">": ">", "<|missing": "<"}
PERCENT = re.compile(r"_pct$")


def _one_of(t) -> str:
    return " or ".join(t) if isinstance(t, tuple) else str(t)


@dataclass(frozen=True)
class Rule:
    name: str
    when: tuple[tuple[str, str, float | None], ...]  # (fact, op, threshold)
    says: str  # filled from the summary row: {mfu_pct}, {dtype}, ...

    def holds(self, row: dict, recorded) -> bool:
        for column, op, threshold in self.when:
            value = row.get(column)
            if op == "missing":
                ok = not finite(value)
            elif op == "unrecorded":
                ok = column not in recorded
            elif op == "<|missing":
                ok = not finite(value) or value < threshold
            elif op == "known":
                ok = finite(value)
            elif op == "is":  # one value, or any of a tuple of them
                ok = value in threshold if isinstance(threshold, tuple) else value == threshold
            else:
                ok = finite(value) and OPS[op](value, threshold)
            if not ok:
                return False
        return True

    def condition(self) -> str:
        """The rule's conditions in words, thresholds included: 'GPU busy < 50%'."""
        words = {"missing": "not known", "unrecorded": "not recorded by the run", "known": "known"}
        return " and ".join(
            f"{_label(c)} {words[op]}"
            if op in words
            else f"{_label(c)} is {_one_of(t)}"
            if op == "is"
            else f"{_label(c)} {SHOWN[op]} {_threshold(c, t)}" + (" or not known" if op == "<|missing" else "")
            for c, op, t in self.when
        )

    def because(self, row: dict) -> str:
        """The numbers that made it hold: 'GPU busy 33% < 50%' ('' for a rule on missing values only)."""
        return ", ".join(
            f"{_label(c)} {shown(row.get(c), op, t, bool(_unit(c)))}{_unit(c)} {SHOWN[op]} {_threshold(c, t)}"
            for c, op, t in self.when
            if op in SHOWN and finite(row.get(c))
        )

    def as_shown(self, column: str, value) -> str:
        """A fact of the sentence at the precision its condition needs (9.9, not 10, beside '< 10%')."""
        for c, op, t in self.when:
            if c == column and op in SHOWN:
                return shown(value, op, t, bool(_unit(c)))
        return pct(value).rstrip("%") if PERCENT.search(column) else str(value)


LABELS = {
    "gpu_util_mean_pct": "mean GPU-Util",
    "mfu_pct": "MFU",
    "mbu_pct": "MBU",
    "steps_per_s": "steps/s",
    "sm_busy_pct": "SM active while busy",
    "flops_bad": "steps with unusable FLOPs",
    "steps_reported": "steps reported",
    "tensor_ceiling_pct": "tensor ceiling",
    "ran_over_ceiling": "HFU over the tensor ceiling's calibrated limit",
    "flops_source": "FLOPs from",
}


def _label(column: str) -> str:
    return LABELS.get(column) or BY_COLUMN[column].label


def _unit(column: str) -> str:
    return "%" if PERCENT.search(column) else ""


def _threshold(column: str, t) -> str:
    return f"{t:g}{_unit(column)}"


def shown(value: float, op: str, threshold: float, percent: bool = True) -> str:
    """value as tables write it (metrics.pct for percentages), with more digits where that would hide its
    comparison with the threshold: 9.94 against '< 10' is '9.9', never '10'; large numbers in exponent form,
    so no text grows with their size."""
    if abs(value) >= 1e4:
        return f"{value:.3g}"
    compare = OPS.get(op.split("|")[0], operator.lt)
    first = pct(value).rstrip("%") if percent else f"{value:.3g}"
    if first.startswith("<"):
        return first  # below 0.01%: every threshold here is above it
    for text in [first] + [f"{value:.{d}f}" for d in range(0, 7)]:
        if compare(float(text), threshold) == compare(value, threshold) and float(text) != threshold:
            return text
    return f"{value:.6g}"
