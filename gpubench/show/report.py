"""report.md and a self-contained report.html for a run: what nvidia-smi said, what really happened, and why.

The point comes first: the headline figure and one sentence per scenario or phase (gpubench.show.point),
then the numbers (the summary's table, energy, decode), the other figures, each row's sentences, and last
what ran where (versions, peaks, sources). The text is built from the run's own numbers; each family's
sentences travel in the manifest (gpubench.show.story), so a report needs no kernel code and names no
scenario. Both files come from one list of blocks (gpubench.show.page); the HTML embeds the figures, so it
is one file to share.
"""

from __future__ import annotations

from pathlib import Path

from gpubench.metrics import BY_COLUMN, GPU_UTIL_MEANING, TABLE, WATCH_TABLE, finite, fmt_value, pct
from gpubench.read.summary import TRIM_S, batch_at, ridge_flop_per_byte, row_label
from gpubench.record.rundir import SUMMARY_MISSING
from gpubench.show import markdown as md
from gpubench.show import opening
from gpubench.show.figures import FIGURES, draw_all, figure_files, own_files
from gpubench.show.figures.common import length_s, shown_rows
from gpubench.show.figures.decode import decode_rows, sweep_facts
from gpubench.show.figures.energy import energy_rows, finding
from gpubench.show.page import to_html, to_markdown
from gpubench.show.point import points, stragglers
from gpubench.show.stage import commit, stale, staging
from gpubench.show.story import context, story

__all__ = ["blocks", "context", "report_files", "story", "to_html", "to_markdown", "write_report"]


# A blank cell says one of two things, never both with one mark: the column does not apply to the row (a copy's
# MFU, an idle row's time per call), or the run could not read that counter here.
# A watched job's table leads with what its reader came for: what nvidia-smi said, the work done (MFU) and the
# most the tensor pipes' activity allowed (the ceiling), then the rate and the rest of the ladder.
JOB_TABLE = WATCH_TABLE
DOES_NOT_APPLY, NOT_RECORDED = "—", "not recorded"
BLANKS = (
    f'"{DOES_NOT_APPLY}" where a column does not apply to the row, "{NOT_RECORDED}" where this run could not read it.'
)


def cell(column: str, value) -> str:
    """A table's cell: what is computed from the run's work is blank where it does not apply; what is read from
    the GPU, where it was not read."""
    return fmt_value(column, value, NOT_RECORDED if BY_COLUMN[column].sampled else DOES_NOT_APPLY)


def headroom(row: dict, manifest: dict) -> str:
    """Where a phase's verdict advises a larger batch, the memory it would grow into: " Memory: 18.5 of 140 GiB
    in use (the phase's median), 122 GiB free." Nothing where the advice names no batch or a number is missing."""
    used, total = row.get("mem_used_mib"), (manifest.get("gpu") or {}).get("memory_mib")
    if "batch" not in str(row.get("verdict") or "") or not (finite(used) and finite(total) and 0 <= used <= total):
        return ""
    return (
        f" Memory: {used / 1024:.3g} of {total / 1024:.3g} GiB in use (the phase's median), "
        f"{(total - used) / 1024:.3g} GiB free."
    )


def _kernel_ms(row) -> str:
    if not finite(row.get("kernel_ms")):
        return cell("kernel_ms", row.get("kernel_ms"))  # no call timed, or out of range
    lo, hi = (row.get(f"kernel_ms_p{q}") for q in (10, 90))
    spread = f" ({fmt_value('kernel_ms', lo)}–{fmt_value('kernel_ms', hi)})" if finite(lo) and finite(hi) else ""
    return fmt_value("kernel_ms", row["kernel_ms"]) + spread


def blocks(manifest, summary, figures_present, figures_empty: dict | None = None) -> list[tuple]:
    """The report as blocks; figures_empty names the figures that had nothing to draw, and why. A watched
    job's report speaks of its phases and of the job; a suite run's of scenarios and kernels."""
    job = opening.is_job(manifest)
    out = [("h1", opening.title(manifest)), ("p", opening.status_line(manifest))]
    if line := opening.job_line(manifest):
        out.append(("p", line))
    if job:
        out += stragglers(summary)
    figures = [f for f in FIGURES if f.name in figures_present]
    for figure in figures[:1] if figures and figures[0].name == "headline" else ():
        out.append(("img", f"figures/{figure.name}.png", (job and figure.job_caption) or figure.caption, "first"))
    out += opening.receipt_blocks(manifest, summary)  # under the headline, whose place is the first screen's top
    out += points(summary, job)
    unfinished = job and manifest.get("status") == "running"  # its first line says why it has no summary.csv
    for w in manifest.get("warnings", []) + manifest.get("errors", []) + manifest.get("read_notes", []):
        if not (unfinished and w == SUMMARY_MISSING):
            out.append(("p", f"Note: {md.text(w)}"))
    out += _summary_blocks(manifest, summary, job)
    out.append(("h2", "Figures"))
    for figure in figures:
        if figure.name != "headline":
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
        out.append(
            (
                "p",
                f"Told here: the {len(told):,} {'phases' if job else 'rows'} that lasted longest of "
                f"{len(summary):,}, in their order; the numbers of every one are in summary.csv.",
            )
        )
    for r in told:
        out.append(("h3", label(r)))
        out.append(("p", md.text(story(r, manifest)) + (headroom(r, manifest) if job else "")))
    out += _metrics_blocks()
    out += _about_blocks(manifest)
    return out


def _summary_blocks(manifest, summary, job: bool) -> list[tuple]:
    """The numbers: the summary's table (a watched job's with each phase's verdict), energy and decode."""
    trim = manifest.get("options", {}).get("trim_s", TRIM_S)
    out = [("h2", "Summary")]
    if job:
        out.append(
            (
                "p",
                f"Medians over each phase's steady window (its first {trim} s dropped); {BLANKS} "
                "TFLOP/s and MFU count the FLOPs the job reported with its steps (gpubench.step); "
                "only MFU measures work done." + _sources(manifest, summary),
            )
        )
        columns, extra = JOB_TABLE, ["verdict"]
    else:
        out.append(
            (
                "p",
                f"Medians over each scenario's steady window (its first {trim} s dropped); {BLANKS} "
                "GB/s counts useful bytes (each input read once, each output written once); "
                "the ground truth is MFU for arithmetic, MBU for memory-bound kernels and the "
                "link share for host-to-device copies.",
            )
        )
        columns, extra = TABLE, ["kernel ms (p10–p90)"]
    head = ["phase" if job else "scenario"] + [BY_COLUMN[c].header for c in columns] + extra
    tabled, cut = longest(summary, TABLE_MAX)
    rows = [
        [label(r)] + [cell(c, r.get(c)) for c in columns] + [md.text(r.get("verdict") or "") if job else _kernel_ms(r)]
        for r in tabled
    ]
    out.append(
        ("table", head, rows) if rows else ("p", f"No {'phase' if job else 'scenario'} was summarized in this run.")
    )
    if cut:
        out.append(
            (
                "p",
                f"The table holds the {len(tabled):,} rows that lasted longest of {len(summary):,}, in their "
                "order; summary.csv and summary.json hold every one.",
            )
        )
    out += _energy_blocks(tabled, job)
    if not job:
        out += _decode_blocks(summary, manifest)
    return out


def _metrics_blocks() -> list[tuple]:
    out = [
        ("h2", "The metrics, and where to find them in DCGM"),
        (
            "p",
            f"GPU-Util (DCGM field 203) is the {GPU_UTIL_MEANING}. Add SM active (1002) and SM occupancy "
            "(1003) to see how much of the chip is in use, tensor active (1004) to see matrix work, and DRAM "
            "active (1005) to see memory traffic. None of them is the work done: for that, count FLOPs and "
            "bytes and divide by the peaks (MFU, MBU).",
        ),
    ]
    metric_rows = [
        [m.column, m.label, str(m.dcgm_id), m.dcgm_name or "", m.meaning]
        for m in BY_COLUMN.values()
        if m.sampled and not m.column.startswith(("smi_", "dcgm_"))
    ]
    out.append(("table", ["column", "what", "DCGM id", "DCGM field", "meaning"], metric_rows))
    return out


def _about_blocks(manifest) -> list[tuple]:
    """Where the numbers came from, last: the GPU and the software's versions, the peaks, the sources, the ranks."""
    lines = [opening.machine_line(manifest), opening.peaks_line(manifest), opening.sources_line(manifest)]
    if manifest.get("distributed"):
        lines.append(opening.ranks_line(manifest["distributed"]))
    return [("h2", "About this run")] + [("p", line) for line in lines if line]


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
        said.append(
            "Where the job reported no steps, its optimizer's steps are its steps (a PyTorch hook, no "
            "code change), and their FLOPs were counted by gpubench from one whole step, which is left "
            "out of every rate."
        )
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
        text = (
            f"{_job_energy(rows)}. Power is the energy counter's rise over each phase's steady window divided "
            "by its length; a step's energy is that power times the time of a step. Work per joule counts the "
            "FLOPs and tokens the job reported with its steps."
        )
    else:
        text = (
            f"{md.text(finding(rows, summary))}. Power is the energy counter's rise over each steady window "
            "divided by its length; a call's energy is that power times its GPU time (the calls run back to "
            "back). Useful work per joule counts the ground truth's work: useful bytes where MBU judges, FLOPs "
            "where MFU does."
        )
    columns = JOB_ENERGY if job else ENERGY
    return [
        ("h2", "Energy"),
        ("p", text),
        (
            "table",
            ["phase" if job else "scenario"] + [BY_COLUMN[c].header for c in columns],
            [[label(r)] + [cell(c, r.get(c)) for c in columns] for r in rows],
        ),
    ]


def _job_energy(rows) -> str:
    """What each phase drew at the GPU-Util it read, and the FLOPs each kilojoule bought where the job
    reported them."""
    said = [
        f"{label(r)} drew {fmt_value('power_w_energy', r['power_w_energy'])}"
        + (f" at {fmt_value('gpu_util_pct', r['gpu_util_pct'])} GPU-Util" if finite(r.get("gpu_util_pct")) else "")
        + (
            f" and did {fmt_value('tflop_per_kj', r['tflop_per_kj'])} TFLOP per kJ"
            if finite(r.get("tflop_per_kj"))
            else ""
        )
        for r in rows
    ]
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
    text = [
        f"The {md.text(impl)} decode steps from batch {f['b0']:.0f} to {f['b1']:.0f} read the same weights "
        "once a step: "
        f"tokens/s rose {f['tokens_x']:.0f}x ({first['tokens_per_s']:,.0f} to {last['tokens_per_s']:,.0f}) "
        f"while the step time rose {f['time_x']:.1f}x ({first['kernel_ms'] * 1e3:.0f} to "
        f"{last['kernel_ms'] * 1e3:.0f} µs)"
    ]
    if finite(f["util_min"]):
        lo, hi = pct(f["util_min"]), pct(f["util_max"])
        text.append(f"GPU-Util read {lo if lo == hi else f'{lo} to {hi}'} throughout")
    text.append(
        f"at batch {f['b0']:.0f} MBU was {pct(first.get('mbu_pct'))} and MFU {pct(first.get('mfu_pct'))}; "
        f"at batch {f['b1']:.0f} MBU {pct(last.get('mbu_pct'))} and MFU {pct(last.get('mfu_pct'))}"
    )
    if f["mfu_over_mbu"] is not None:
        text.append(f"MFU first exceeded MBU at batch {f['mfu_over_mbu']:.0f}")
    ridges = [(which, ridge_flop_per_byte(peaks, which)) for which in ("measured", "datasheet")]
    said = [
        f"{r:.0f} FLOP per byte from the {which} peaks"
        + (f" (batch {batch_at(rows, r):.0f} here)" if finite(batch_at(rows, r)) else "")
        for which, r in ridges
        if r
    ]
    if said:
        text.append("the ridge, where the bf16 roof meets the DRAM roof, lies at " + " and ".join(said))
    return [("h2", "Decode"), ("p", "; ".join(text) + ".")]


def report_files(manifest: dict) -> list[str]:
    """The files write_report writes for this run, relative to its folder."""
    return ["report.md", "report.html"] + [f"figures/{name}" for name in figure_files(manifest)]


def write_report(run_dir, manifest, samples, summary, out_dir=None) -> list[Path]:
    """report.md and report.html into out_dir (default the run directory), the figures drawn anew beside them
    (an unchanged run gives the same bytes); a figure with nothing to draw is named, not shown. Everything is
    written into a stage folder first and moved into place only when all of it was written; figures of
    gpubench's own names that this run did not draw (another run's, reported there before) are removed then."""
    out = Path(out_dir) if out_dir is not None else Path(run_dir)
    with staging(out) as stage:
        notes: dict = {}
        drawn = draw_all(manifest, samples, summary, stage / "figures", notes)  # the figures shown match the data
        empty = {
            name: n["empty"] for name, n in notes.items() if isinstance(n, dict) and isinstance(n.get("empty"), str)
        }
        present = {p.stem for p in drawn} - set(empty)
        bl = blocks(manifest, summary, present, empty)
        (stage / "report.md").write_text(to_markdown(bl))
        (stage / "report.html").write_text(to_html(bl, stage / "figures"))
        moved = commit(stage, out, [f"figures/{p.name}" for p in drawn] + ["report.md", "report.html"])
        stale(out / "figures", own_files(), {p.name for p in drawn})
    return moved[-2:]
