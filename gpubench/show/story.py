"""A row's sentences: its family's STORY (travelling in the manifest), filled from its summary row. A sentence
about a fact the row lacks is left out, and one whose number this row lacks ends before the clause that holds it
(no sentence says "n/a"); a percentage is written as pct() writes it everywhere."""

from __future__ import annotations

import math
import re
import string

from gpubench.metrics import BY_COLUMN, OUT_OF_RANGE, OutOfRange, finite, fmt_value, pct
from gpubench.show import opening
from gpubench.truth.peaks import UNIT_NAMES


class _Percent(float):
    """A percentage in a sentence: written as pct() writes it everywhere, whatever the sentence's format."""


class _Filler(string.Formatter):
    def get_value(self, key, args, kwargs):
        value = super().get_value(key, args, kwargs)
        return _Percent(value) if isinstance(key, str) and key.endswith("_pct") and finite(value) else value

    def format_field(self, value, spec):
        if isinstance(value, OutOfRange):
            return OUT_OF_RANGE
        if value is None or (isinstance(value, float) and not math.isfinite(value)):
            return "n/a"
        if isinstance(value, _Percent):
            return pct(value).rstrip("%")  # the sentence writes the % sign itself
        return format(value, spec)


FILLER = _Filler()


class _Facts(dict):
    def __missing__(self, key):
        return math.nan  # a metric column this run could not record at all


def _is_metric(field: str) -> bool:
    """Metrics may be missing on a machine (shown n/a); other facts decide whether a sentence applies."""
    return field in BY_COLUMN or field.endswith("_measured_pct")


def _derived(field: str) -> bool:
    """What the run computes (TFLOP/s, MBU, J per step), not what the GPU reported."""
    return field in BY_COLUMN and not BY_COLUMN[field].sampled


# where one clause of a sentence ends and the next begins
_CLAUSE = re.compile(r", and |, |: |; | and ")


def _has(value) -> bool:
    return finite(value) or isinstance(value, OutOfRange)


def _cut(sentence: str, field: str) -> str | None:
    """The sentence up to the clause that holds {field}, closed with a full stop; None where no number is left
    before it ("In warmup, the medians." says nothing)."""
    before = list(_CLAUSE.finditer(sentence, 0, sentence.find("{" + field)))
    kept = sentence[: before[-1].start()].rstrip() if before else ""
    return kept + "." if "{" in kept.replace("{phase}", "") else None


def context(row: dict, manifest: dict) -> dict:
    ctx = dict(row)
    util = row.get("gpu_util_pct")
    ctx.update(
        said=f"nvidia-smi said {fmt_value('gpu_util_pct', util)} busy"
        if not isinstance(util, OutOfRange)
        else "nvidia-smi's GPU-Util reading was out of range",
        sm_count=manifest.get("gpu", {}).get("sm_count", math.nan),
        useful_gb=(row.get("bytes_per_call") or math.nan) / 1e9,
        traffic_gb=(row.get("traffic_per_call") if finite(row.get("traffic_per_call")) else math.nan) / 1e9,
        kernel_us=(row.get("kernel_ms") or math.nan) * 1e3,
        dtype=UNIT_NAMES.get(row.get("unit"), str(row.get("unit"))),
    )
    if opening.is_job(manifest):  # a watch's FLOPs are of its --dtype, counted by the manifest's convention
        ctx.update(dtype=manifest.get("dtype") or "bf16", flop_convention=manifest.get("flop_convention"))
    return ctx


def story(row: dict, manifest: dict) -> str:
    """The family's sentences filled from the row; a sentence about a fact this row lacks is left out, and so is
    one whose every computed number (tokens/s, MBU) is missing: it would say only n/a."""
    sentences = ((manifest.get("families") or {}).get(row.get("family")) or {}).get("story") or []
    ctx = context(row, manifest)
    out = []
    for sentence in sentences:
        fields = [f for _, f, _, _ in string.Formatter().parse(sentence) if f]
        lacking = [
            f
            for f in fields
            if not _is_metric(f)
            and (ctx.get(f) in (None, "") or (isinstance(ctx.get(f), float) and math.isnan(ctx[f])))
        ]
        derived = [f for f in fields if _derived(f)]
        if lacking or (derived and not any(_has(ctx.get(f)) for f in derived)):
            continue
        missing = next((f for f in fields if _is_metric(f) and not _has(ctx.get(f))), None)
        if missing is not None:
            sentence = _cut(sentence, missing)
            if sentence is None:
                continue
        try:
            out.append(FILLER.vformat(sentence, (), _Facts(ctx)).replace(f"{OUT_OF_RANGE}%", OUT_OF_RANGE))
        except (ValueError, TypeError):  # a fact of another kind than the sentence formats (text for a number)
            continue
    if isinstance(row.get("rate_withheld"), str) and row["rate_withheld"]:  # gpubench.read.summary.uncovered
        out.append(f"No TFLOP/s, GB/s, MFU or MBU: {row['rate_withheld']}.")
    return " ".join(out) or f"{ctx['said']}."
