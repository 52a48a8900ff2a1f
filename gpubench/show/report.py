"""report.md and a self-contained report.html for a run: what nvidia-smi said, what really happened, and why.

The text is built from the run's own numbers. Each family's sentences travel in the manifest (the
family's STORY, filled from its summary row), so a report needs no kernel code and names no scenario.
Both files come from one list of blocks; the HTML embeds the figures, so it is one file to share.
"""

from __future__ import annotations

import base64
import html
import math
import re
import string
from pathlib import Path

from gpubench.metrics import (
    BY_COLUMN,
    GPU_UTIL_MEANING,
    OUT_OF_RANGE,
    TABLE,
    WATCH_TABLE,
    OutOfRange,
    finite,
    fmt_value,
    pct,
)
from gpubench.read.summary import TRIM_S, batch_at, ridge_flop_per_byte, row_label
from gpubench.show import markdown as md
from gpubench.show import opening
from gpubench.show.figures import FIGURES, draw_all, figure_files
from gpubench.show.figures.common import length_s, shown_rows
from gpubench.show.figures.decode import decode_rows, sweep_facts
from gpubench.show.figures.energy import energy_rows, finding
from gpubench.show.stage import commit, staging
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


def context(row: dict, manifest: dict) -> dict:
    ctx = dict(row)
    util = row.get("gpu_util_pct")
    ctx.update(said=f"nvidia-smi said {fmt_value('gpu_util_pct', util)} busy" if not isinstance(util, OutOfRange) else
               "nvidia-smi's GPU-Util reading was out of range",
               sm_count=manifest.get("gpu", {}).get("sm_count", math.nan),
               useful_gb=(row.get("bytes_per_call") or math.nan) / 1e9,
               traffic_gb=(row.get("traffic_per_call") if finite(row.get("traffic_per_call")) else math.nan) / 1e9,
               kernel_us=(row.get("kernel_ms") or math.nan) * 1e3,
               dtype=UNIT_NAMES.get(row.get("unit"), str(row.get("unit"))))
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
        lacking = [f for f in fields if not _is_metric(f) and (ctx.get(f) in (None, "") or
                                                               (isinstance(ctx.get(f), float) and math.isnan(ctx[f])))]
        derived = [f for f in fields if _derived(f)]
        if lacking or (derived and not any(finite(ctx.get(f)) or isinstance(ctx.get(f), OutOfRange) for f in derived)):
            continue
        try:
            out.append(FILLER.vformat(sentence, (), _Facts(ctx)).replace(f"{OUT_OF_RANGE}%", OUT_OF_RANGE))
        except (ValueError, TypeError):  # a fact of another kind than the sentence formats (text for a number)
            continue
    return " ".join(out) or f"{ctx['said']}."


def _kernel_ms(row) -> str:
    if not finite(row.get("kernel_ms")):
        return fmt_value("kernel_ms", row.get("kernel_ms"))  # n/a, or out of range
    lo, hi = (row.get(f"kernel_ms_p{q}") for q in (10, 90))
    spread = f" ({fmt_value('kernel_ms', lo)}–{fmt_value('kernel_ms', hi)})" if finite(lo) and finite(hi) else ""
    return fmt_value("kernel_ms", row["kernel_ms"]) + spread


def blocks(manifest, summary, figures_present, figures_empty: dict | None = None) -> list[tuple]:
    """The report as blocks; figures_empty names the figures that had nothing to draw, and why. A watched
    job's report speaks of its phases and of the job; a suite run's of scenarios and kernels."""
    job = opening.is_job(manifest)
    out = [("h1", opening.title(manifest)), ("p", opening.run_line(manifest))]
    out += [("p", line) for line in (opening.job_line(manifest), opening.peaks_line(manifest)) if line]
    out.append(("p", opening.sources_line(manifest)))
    if manifest.get("distributed"):
        out.append(("p", opening.ranks_line(manifest["distributed"])))
    for w in manifest.get("warnings", []) + manifest.get("errors", []) + manifest.get("read_notes", []):
        out.append(("p", f"Note: {md.text(w)}"))
    trim = manifest.get("options", {}).get("trim_s", TRIM_S)
    out.append(("h2", "Summary"))
    if job:
        out.append(("p", f"Medians over each phase's steady window (its first {trim} s dropped); n/a where this run "
                         "could not record the metric. TFLOP/s and MFU count the FLOPs the job reported with its "
                         "steps (gpubench.step); only MFU measures work done." + _sources(manifest, summary)))
        columns, extra = WATCH_TABLE, []
    else:
        out.append(("p", f"Medians over each scenario's steady window (its first {trim} s dropped); n/a where this "
                         "run could not record the metric. GB/s counts useful bytes (each input read once, each output "
                         "written once); the ground truth is MFU for arithmetic, MBU for memory-bound kernels and the "
                         "link share for host-to-device copies."))
        columns, extra = TABLE, ["kernel ms (p10–p90)"]
    head = ["phase" if job else "scenario"] + [BY_COLUMN[c].header for c in columns] + extra
    tabled, cut = longest(summary, TABLE_MAX)
    rows = [[label(r)] + [fmt_value(c, r.get(c)) for c in columns] + ([] if job else [_kernel_ms(r)]) for r in tabled]
    out.append(("table", head, rows) if rows else ("p", f"No {'phase' if job else 'scenario'} was summarized in this run."))
    if cut:
        out.append(("p", f"The table holds the {len(tabled):,} rows that lasted longest of {len(summary):,}, in their "
                         "order; summary.csv and summary.json hold every one."))
    out += _energy_blocks(tabled, job)
    if not job:
        out += _decode_blocks(summary, manifest)
    out.append(("h2", "Figures"))
    for figure in FIGURES:
        if figure.name in figures_present:
            out.append(("img", f"figures/{figure.name}.png", (job and figure.job_caption) or figure.caption))
    _, drawn_cut = shown_rows(summary, "phases" if job else "rows")
    if drawn_cut and figures_present & {"headline", "ladder"}:
        out.append(("p", f"The headline and ladder figures draw {drawn_cut}."))
    for why in sorted(set((figures_empty or {}).values())):
        names = ", ".join(n for n, w in figures_empty.items() if w == why)
        out.append(("p", f"Not drawn for this run ({why}): {names}."))
    out.append(("h2", "Phase by phase" if job else "Scenario by scenario"))
    told, cut = longest(summary, STORIES_MAX)
    if cut:
        out.append(("p", f"Told here: the {len(told):,} {'phases' if job else 'rows'} that lasted longest of "
                         f"{len(summary):,}, in their order; the numbers of every one are in summary.csv."))
    for r in told:
        out.append(("h3", label(r)))
        out.append(("p", md.text(story(r, manifest))))
    out.append(("h2", "The metrics, and where to find them in DCGM"))
    out.append(("p", f"GPU-Util (DCGM field 203) is the {GPU_UTIL_MEANING}. Add SM active (1002) and SM occupancy "
                     "(1003) to see how much of the chip is in use, tensor active (1004) to see matrix work, and DRAM "
                     "active (1005) to see memory traffic. None of them is the work done: for that, count FLOPs and "
                     "bytes and divide by the peaks (MFU, MBU)."))
    metric_rows = [[m.column, m.label, str(m.dcgm_id), m.dcgm_name or "", m.meaning] for m in BY_COLUMN.values()
                   if m.sampled and not m.column.startswith(("smi_", "dcgm_"))]
    out.append(("table", ["column", "what", "DCGM id", "DCGM field", "meaning"], metric_rows))
    return out


TABLE_MAX = 1000  # rows of the summary's table in a report: a job that marks every request has more
STORIES_MAX = 100  # rows told in sentences


def longest(summary: list[dict], most: int) -> tuple[list[dict], bool]:
    """The rows, or the `most` that lasted longest, in their order; and whether any was left out."""
    if len(summary) <= most:
        return summary, False
    keep = set(sorted(range(len(summary)), key=lambda i: (-length_s(summary[i]), i))[:most])
    return [r for i, r in enumerate(summary) if i in keep], True


def _sources(manifest: dict, summary: list[dict]) -> str:
    """Where a watched job's steps, FLOPs and phases came from, where gpubench found them itself."""
    said = []
    if any("optimizer" in str(r.get("steps_source") or "") for r in summary):
        said.append("Where the job reported no steps, its optimizer's steps are its steps (a PyTorch hook, no "
                    "code change), and their FLOPs were counted by gpubench from one whole step, which is left "
                    "out of every rate.")
    if any(r.get("flops_source") == "counters" for r in summary):
        said.append("Where no FLOPs are known, the tensor pipes' activity bounds them (the tensor ceiling).")
    if (manifest.get("auto") or {}).get("phases_from") == "activity":
        said.append("The job marked no phases: they were cut where its GPU's work began, changed and ended.")
    return (" " + " ".join(said) + " Each phase below says where its numbers came from.") if said else ""


def label(row: dict) -> str:
    """A summary row's name (its scenario or phase, and rank), escaped for report.md."""
    return md.text(row_label(row))


ENERGY = ("gpu_util_pct", "power_w_energy", "j_per_call", "gb_per_j", "tflop_per_kj", "tokens_per_j")
JOB_ENERGY = ("gpu_util_pct", "power_w_energy", "j_per_step", "tflop_per_kj", "tokens_per_j")


def _energy_blocks(summary, job: bool = False) -> list[tuple]:
    """Power in the ladder: what each kernel (or phase of the job) drew, and the useful work each joule bought."""
    rows = energy_rows(summary)
    if not rows:
        return []
    if job:
        text = (f"{_job_energy(rows)}. Power is the energy counter's rise over each phase's steady window divided "
                "by its length; a step's energy is that power times the time of a step. Work per joule counts the "
                "FLOPs and tokens the job reported with its steps.")
    else:
        text = (f"{md.text(finding(rows, summary))}. Power is the energy counter's rise over each steady window "
                "divided by its length; a call's energy is that power times its GPU time (the calls run back to "
                "back). Useful work per joule counts the ground truth's work: useful bytes where MBU judges, FLOPs "
                "where MFU does.")
    columns = JOB_ENERGY if job else ENERGY
    return [("h2", "Energy"), ("p", text),
            ("table", ["phase" if job else "scenario"] + [BY_COLUMN[c].header for c in columns],
             [[label(r)] + [fmt_value(c, r.get(c)) for c in columns] for r in rows])]


def _job_energy(rows) -> str:
    """What each phase drew at the GPU-Util it read, and the FLOPs each kilojoule bought where the job
    reported them."""
    said = [f"{label(r)} drew {fmt_value('power_w_energy', r['power_w_energy'])} at "
            f"{fmt_value('gpu_util_pct', r.get('gpu_util_pct'))} GPU-Util" +
            (f" and did {fmt_value('tflop_per_kj', r['tflop_per_kj'])} TFLOP per kJ" if finite(r.get("tflop_per_kj"))
             else "") for r in rows]
    return "; ".join(said)[:1].upper() + "; ".join(said)[1:]


def _decode_blocks(summary, manifest) -> list[tuple]:
    """The decode sweep in sentences: tokens/s against step time, MBU against MFU, and where the ridge lies."""
    by = decode_rows(summary)
    if not by:
        return []
    impl = max(by, key=lambda i: len(by[i]))
    rows, peaks = by[impl], manifest.get("peaks") or {}
    f = sweep_facts(rows, peaks)
    first, last = rows[0], rows[-1]
    text = [f"The {md.text(impl)} decode steps from batch {f['b0']:.0f} to {f['b1']:.0f} read the same weights once a step: "
            f"tokens/s rose {f['tokens_x']:.0f}x ({first['tokens_per_s']:,.0f} to {last['tokens_per_s']:,.0f}) "
            f"while the step time rose {f['time_x']:.1f}x ({first['kernel_ms'] * 1e3:.0f} to "
            f"{last['kernel_ms'] * 1e3:.0f} µs)"]
    if finite(f["util_min"]):
        lo, hi = pct(f["util_min"]), pct(f["util_max"])
        text.append(f"GPU-Util read {lo if lo == hi else f'{lo} to {hi}'} throughout")
    text.append(f"at batch {f['b0']:.0f} MBU was {pct(first.get('mbu_pct'))} and MFU {pct(first.get('mfu_pct'))}; "
                f"at batch {f['b1']:.0f} MBU {pct(last.get('mbu_pct'))} and MFU {pct(last.get('mfu_pct'))}")
    if f["mfu_over_mbu"] is not None:
        text.append(f"MFU first exceeded MBU at batch {f['mfu_over_mbu']:.0f}")
    ridges = [(which, ridge_flop_per_byte(peaks, which)) for which in ("measured", "datasheet")]
    said = [f"{r:.0f} FLOP per byte from the {which} peaks" + (f" (batch {batch_at(rows, r):.0f} here)"
                                                              if finite(batch_at(rows, r)) else "")
            for which, r in ridges if r]
    if said:
        text.append("the ridge, where the bf16 roof meets the DRAM roof, lies at " + " and ".join(said))
    return [("h2", "Decode"), ("p", "; ".join(text) + ".")]


def to_markdown(bl) -> str:
    lines = []
    for b in bl:
        kind = b[0]
        if kind in ("h1", "h2", "h3"):
            lines += ["#" * int(kind[1]) + " " + b[1], ""]
        elif kind == "p":
            lines += [b[1], ""]
        elif kind == "img":
            lines += [f"![{b[2]}]({b[1]})", ""]
        elif kind == "table":
            lines.append("| " + " | ".join(b[1]) + " |")
            lines.append("|" + "---|" * len(b[1]))
            lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in b[2]]
            lines.append("")
    return "\n".join(lines)


NUMBER = re.compile(r"n/a|[<\d][\d.,e+\-–()% ]*")


def _table(head, rows) -> str:
    """Columns of numbers right-aligned so their digits line up; columns of words left-aligned."""
    numeric = [bool(rows) and all(NUMBER.fullmatch(str(r[i])) for r in rows) for i in range(len(head))]

    def cell(tag, i, text):
        return f"<{tag}{' class=num' if numeric[i] else ''}>{md.inline(str(text))}</{tag}>"

    body = "".join("<tr>" + "".join(cell("td", i, c) for i, c in enumerate(row)) + "</tr>" for row in rows)
    return "<table><tr>" + "".join(cell("th", i, h) for i, h in enumerate(head)) + f"</tr>{body}</table>"


def to_html(bl, figures_dir: Path) -> str:
    parts = ["<!doctype html><html><head><meta charset='utf-8'><title>gpubench report</title><style>"
             "body{font-family:system-ui,sans-serif;max-width:1100px;margin:2em auto;line-height:1.45;color:#222}"
             "table{border-collapse:collapse;font-size:13px}td,th{border:1px solid #ccc;padding:3px 6px;text-align:left}"
             ".num{text-align:right}"
             "td:first-child{white-space:nowrap}"
             "img{max-width:100%}code{background:#f3f3f3}</style>"
             "</head><body>"]
    for b in bl:
        kind = b[0]
        if kind in ("h1", "h2", "h3"):
            parts.append(f"<{kind}>{md.inline(b[1])}</{kind}>")
        elif kind == "p":
            parts.append(f"<p>{md.inline(b[1])}</p>")
        elif kind == "img":
            data = base64.b64encode((figures_dir / Path(b[1]).name).read_bytes()).decode()
            parts.append(f"<figure><img alt='{html.escape(b[2])}' src='data:image/png;base64,{data}'>"
                         f"<figcaption>{html.escape(b[2])}</figcaption></figure>")
        elif kind == "table":
            parts.append(_table(b[1], b[2]))
    parts.append("</body></html>")
    return "\n".join(parts)


def report_files(manifest: dict) -> list[str]:
    """The files write_report writes for this run, relative to its folder."""
    return ["report.md", "report.html"] + [f"figures/{name}" for name in figure_files(manifest)]


def write_report(run_dir, manifest, samples, summary, out_dir=None) -> list[Path]:
    """report.md and report.html into out_dir (default the run directory), the figures drawn anew beside them
    (an unchanged run gives the same bytes); a figure with nothing to draw is named, not shown. Everything is
    written into a stage folder first and moved into place only when all of it was written."""
    out = Path(out_dir) if out_dir is not None else Path(run_dir)
    with staging(out) as stage:
        notes: dict = {}
        drawn = draw_all(manifest, samples, summary, stage / "figures", notes)  # the figures shown match the data
        empty = {name: n["empty"] for name, n in notes.items() if isinstance(n, dict) and isinstance(n.get("empty"), str)}
        present = {p.stem for p in drawn} - set(empty)
        bl = blocks(manifest, summary, present, empty)
        (stage / "report.md").write_text(to_markdown(bl))
        (stage / "report.html").write_text(to_html(bl, stage / "figures"))
        moved = commit(stage, out, [f"figures/{p.name}" for p in drawn] + ["report.md", "report.html"])
    return moved[-2:]
