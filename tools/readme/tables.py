"""Write the numbers of the README and the documentation site from the committed results, so that neither
can disagree with them.

Each generated part of README.md and of the pages under docs/ sits between `<!-- gpubench:NAME -->` and
`<!-- /gpubench:NAME -->`; this script rewrites those parts from results/ (the newest reference run of each
GPU, the kernel bench CSVs, the watch runs, the regression gate's checks). A part's links into the repository
are written relative to its file (`results/...` in the README, `../results/...` in docs/). `--check` exits 1
if a file differs from what the results say (a CPU test runs it).

    python -m tools.readme.tables          # rewrite README.md and docs/*.md
    python -m tools.readme.tables --check  # compare only
"""

from __future__ import annotations

import argparse
import csv
import re
import sys
from pathlib import Path

from gpubench.metrics import BY_COLUMN, LADDER, fmt_value, pct
from gpubench.record.rundir import load_run
from gpubench.show.figures.common import work_fraction
from tools.readme.common import GPUS
from tools.readme.cupti import cupti_table
from tools.readme.gate import baselines_text, gate_rules
from tools.readme.notes import calibration_notes, decode_notes, kernels_notes, ladder_notes
from tools.readme.tuning import ideas_table, second_ideas_table
from tools.readme.ranks import dist_list, watch_ranks
from tools.readme.watch import watch_decode, watch_llama, watch_table

ROOT = Path(__file__).resolve().parents[2]

MARK = re.compile(r"(<!-- gpubench:(?P<name>[\w-]+) -->\n)(?P<body>.*?)(<!-- /gpubench:(?P=name) -->)", re.S)
REPO_LINK = re.compile(r"(\]\()(?=(?:results|examples|tools|research|tests)/)")  # a link into the repository


def reference_runs(results: Path) -> dict[str, Path]:
    """The newest suite run of each GPU: results/<slug>-<date>-<time>/ with a manifest of kind run."""
    runs: dict[str, Path] = {}
    for slug in GPUS:
        found = sorted(p.parent for p in results.glob(f"{slug}-2*/manifest.json"))
        if found:
            runs[slug] = found[-1]
    return runs


def _pct(v) -> str:
    return f"{v:.1f}%" if v == v else "n/a"


def ladder_table(results: Path) -> str:
    runs = {s: load_run(p) for s, p in reference_runs(results).items()}
    if not runs:
        return "(no reference run committed yet)\n"
    # GPU-Util beside the work done, which it is read against; the activity that tells them apart follows
    util, *cols = list(LADDER)
    head = ["scenario", BY_COLUMN[util].header, "work done (ground truth)"] + [BY_COLUMN[c].header for c in cols]
    by = {s: {r["scenario"]: r for r in summary} for s, (_, _, summary) in runs.items()}
    names = list(dict.fromkeys(n for s in by for n in by[s]))
    lines = [
        f"Each cell: {' / '.join(GPUS[s] for s in runs)}.",
        "",
        "| " + " | ".join(head) + " |",
        "|" + "---|" * len(head),
    ]
    for name in names:
        rows = [by[s].get(name) for s in runs]
        cells = [f"`{name}`"] + [" / ".join(fmt_value(c, (r or {}).get(c), "–") for r in rows) for c in [util]]
        cells.append(" / ".join(_work(r) for r in rows))
        cells += [" / ".join(fmt_value(c, (r or {}).get(c), "–") for r in rows) for c in cols]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def _work(row) -> str:
    if not row or row.get("family") == "idle":
        return "–"
    label, v = work_fraction(row)
    return f"{label} {pct(v)}"


def peaks_table(results: Path) -> str:
    """The peaks measured at the start of each reference run; the read peak's columns where runs have one."""
    runs = {slug: load_run(path) for slug, path in reference_runs(results).items()}
    reads = any(((m.get("peaks") or {}).get("measured") or {}).get("dram_read") for m, _, _ in runs.values())
    head = (
        ["GPU", "copy peak, TB/s"]
        + (["read peak, TB/s"] if reads else [])
        + ["bf16 matmul peak, TFLOP/s (SM clock, power)", "`gemm-torch` against it", "`copy-torch` against it"]
        + (["`read-torch` against it"] if reads else [])
    )
    rows = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for slug, (manifest, _, summary) in runs.items():
        by = {r["scenario"]: r for r in summary}
        meas = (manifest.get("peaks") or {}).get("measured") or {}
        cond = ((manifest.get("peaks") or {}).get("conditions") or {}).get("bf16_tensor") or {}
        nan = float("nan")
        cells = [GPUS[slug], f"{meas.get('dram', nan) / 1e12:.2f}"]
        cells += [f"{meas.get('dram_read', nan) / 1e12:.2f}"] if reads else []
        cells += [
            f"{meas.get('bf16_tensor', nan) / 1e12:.0f} ({cond.get('sm_clock_mhz', 0):.0f} MHz, "
            f"{cond.get('power_w_energy', 0):.0f} W)",
            _pct(by.get("gemm-torch", {}).get("mfu_measured_pct", nan)),
            _pct(by.get("copy-torch", {}).get("mbu_measured_pct", nan)),
        ]
        cells += [_pct(by.get("read-torch", {}).get("mbu_read_pct", nan))] if reads else []
        rows.append("| " + " | ".join(cells) + " |")
    return "\n".join(rows) + "\n"


TARGETS = [  # (group, name, reference, what, target)
    ("softmax-8192", "triton-fused", "torch", "fused softmax vs torch.softmax, 8192²", 1.6),
    ("softmax-8192", "triton-fused", "torch-naive", "fused softmax vs the naive torch sequence, 8192²", 5.0),
    ("softmax-8192", "triton-fused", "copy-same-bytes", "fused softmax vs a copy of the same bytes, 8192²", 0.95),
    ("softmax-8192", "copy-same-bytes", "torch", "(ceiling) a copy of those bytes vs torch.softmax, 8192²", None),
    ("softmax-4096", "triton-fused", "torch", "fused softmax vs torch.softmax, 4096²", 1.3),
    ("softmax-4096", "copy-same-bytes", "torch", "(ceiling) a copy of those bytes vs torch.softmax, 4096²", None),
    ("softmax-16384", "triton-fused", "torch", "fused softmax vs torch.softmax, 16384²", 1.3),
    ("softmax-16384", "copy-same-bytes", "torch", "(ceiling) a copy of those bytes vs torch.softmax, 16384²", None),
    ("gemm-bf16-8192", "triton", "torch", "Triton GEMM vs torch.matmul, bf16 8192³", 0.95),
    ("copy-1GiB", "triton", "torch", "Triton copy vs torch `copy_`, 1 GiB", 1.0),
    ("copy-1GiB", "cupy", "torch", "CuPy copy vs torch `copy_`, 1 GiB", 0.97),
    ("read-1GiB", "triton", "torch", "Triton read (a sum) vs torch.sum, 1 GiB", 0.98),
    ("read-1GiB", "cupy", "torch", "CuPy read (a sum) vs torch.sum, 1 GiB", 0.98),
    ("read-1GiB", "torch", "copy-same-bytes", "(ceilings) torch.sum vs a copy of as many bytes: read over copy", None),
    (
        "decode-b1",
        "triton",
        "read-same-bytes",
        "Triton decode vs a read of the same bytes (the read ceiling), batch 1",
        0.95,
    ),
    ("decode-b1", "triton", "copy-same-bytes", "Triton decode vs a copy of the same bytes, batch 1", 0.92),
    ("decode-b1", "torch", "read-same-bytes", "(for reference) torch F.linear vs that read, batch 1", None),
    ("decode-b1", "torch", "copy-same-bytes", "(for reference) torch F.linear vs that copy, batch 1", None),
    *(
        (f"decode-b{b}", "triton", "torch", f"Triton decode vs torch F.linear, batch {b}", 1.0)
        for b in (1, 2, 4, 8, 16)
    ),
    *((f"decode-b{b}", "triton", "torch", f"Triton decode vs torch F.linear, batch {b}", 0.97) for b in (64, 256, 512)),
    ("decode-b1", "cupy", "torch", "CuPy decode (CUDA cores) vs torch F.linear, batch 1", None),
]


def bench_rows(path: Path) -> dict:
    with open(path, newline="") as f:
        return {(r["group"], r["name"]): r for r in csv.DictReader(f)}


def _paired(row: dict) -> tuple[float, float, float] | None:
    """A row's speed over its CSV reference, paired window by window (median, p10, p90), or None."""
    try:
        got = tuple(float(row[k]) for k in ("speed_vs_reference", "speed_p10", "speed_p90"))
    except (KeyError, TypeError, ValueError):
        return None
    return got if all(v > 0 for v in got) else None


def ratio(rows: dict, group: str, name: str, reference: str) -> tuple[float, float | None, float | None] | None:
    """name's speed over reference's, with its p10 and p90, from the windows in which both ran in turn (paired,
    so the clock's drift cancels). Against the CSV's own reference, the paired ratios as measured; against
    another row of the group, the ratio of the two paired medians, and the widest p10-p90 the two allow;
    without paired columns, the ratio of medians and no interval."""
    a, b = rows.get((group, name)), rows.get((group, reference))
    if not a or not b:
        return None
    pa, pb = _paired(a), _paired(b)
    if pa and a.get("reference") == reference:
        return pa
    if pa and pb and a.get("reference") == b.get("reference"):
        return pa[0] / pb[0], pa[1] / pb[2], pa[2] / pb[1]
    return float(b["median_ms"]) / float(a["median_ms"]), None, None


def _mark(got, target) -> str:
    """Met where even p10 reaches the target, missed where even p90 falls short, within noise between."""
    if not target or not got:
        return ""
    lo, hi = (got[1], got[2]) if got[1] is not None else (got[0], got[0])
    return " ✓" if lo >= target else (" ✗" if hi < target else " ~")


def kernels_table(results: Path) -> str:
    benches = {s: sorted(results.glob(f"bench-kernels-{s}-*.csv")) for s in GPUS}
    benches = {s: bench_rows(p[-1]) for s, p in benches.items() if p}
    head = ["ratio (speed, higher is faster)", "target"] + [f"{GPUS[s]} (p10–p90)" for s in benches]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for group, name, ref, what, target in TARGETS:
        if not any(ratio(rows, group, name, ref) for rows in benches.values()):
            continue  # not measured on any GPU yet: no row rather than a row of n/a
        cells = [what, f"≥ {target:g}x" if target else "–"]
        for rows in benches.values():
            got = ratio(rows, group, name, ref)
            spread = f" ({got[1]:.3f}–{got[2]:.3f})" if got and got[1] is not None else ""
            cells.append(f"{got[0]:.3f}x{spread}{_mark(got, target)}" if got else "n/a")
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def watch_auto_brief(results: Path) -> str:
    """The README's short table of jobs watched with no code change, a cell per GPU."""
    from tools.watch import auto_tables as watch_auto_tables

    return watch_auto_tables.brief(results, GPUS)


def watch_auto(results: Path) -> str:
    """Jobs watched with no code change (tools/watch/auto.py): MFU from their own count and from gpubench's."""
    from tools.watch import auto_tables as watch_auto_tables

    return watch_auto_tables.table(results)


SECTIONS = {
    "ladder": ladder_table,
    "ladder-notes": ladder_notes,
    "peaks": peaks_table,
    "kernels": kernels_table,
    "kernels-notes": kernels_notes,
    "decode-notes": decode_notes,
    "calibration": calibration_notes,
    "watch": watch_table,
    "watch-llama": watch_llama,
    "watch-decode": watch_decode,
    "watch-ranks": watch_ranks,
    "watch-auto": watch_auto,
    "watch-auto-brief": watch_auto_brief,
    "dist": dist_list,
    "baselines": baselines_text,
    "gate-rules": gate_rules,
    "cupti": cupti_table,
    "decode-ideas": ideas_table,
    "decode-ideas-second": second_ideas_table,
}


def render(readme: str, results: Path, up: str = "") -> str:
    """The text with its generated parts made anew; `up` is the way from the file's folder to the root."""

    def fill(m):
        make = SECTIONS.get(m.group("name"))
        body = make(results) if make else m.group("body")
        if make and up:  # the generators link from the root, as the README stands
            body = REPO_LINK.sub(lambda link: link.group(1) + up, body)
        return m.group(1) + body + m.group(4)

    return MARK.sub(fill, readme)


def generated_files() -> list[Path]:
    """README.md and every page of the site: the files whose generated parts this script writes."""
    return [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--check", action="store_true", help="exit 1 if a file differs from the results")
    args = ap.parse_args()
    stale = []
    for path in generated_files():
        old = path.read_text()
        new = render(old, ROOT / "results", "../" * (len(path.relative_to(ROOT).parts) - 1))
        if new != old:
            stale.append(path.relative_to(ROOT))
            if not args.check:
                path.write_text(new)
    if args.check and stale:
        print(
            f"{', '.join(map(str, stale))} disagree with results/: run python -m tools.readme.tables", file=sys.stderr
        )
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
