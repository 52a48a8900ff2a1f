"""Write the README's numbers from the committed results, so the README cannot disagree with them.

Each generated part of README.md sits between `<!-- gpubench:NAME -->` and `<!-- /gpubench:NAME -->`;
this script rewrites those parts from results/ (the newest reference run of each GPU, the kernel bench
CSVs, the watch runs). `--check` exits 1 if the README differs from what the results say (a CPU test
runs it).

    python scripts/readme_tables.py          # rewrite README.md
    python scripts/readme_tables.py --check  # compare only
"""

from __future__ import annotations

import argparse
import csv
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from gpubench.metrics import BY_COLUMN, fmt_value  # noqa: E402
from gpubench.metrics import pct  # noqa: E402
from gpubench.plots import work_fraction  # noqa: E402
from gpubench.rundir import load_run  # noqa: E402

MARK = re.compile(r"(<!-- gpubench:(?P<name>[\w-]+) -->\n)(?P<body>.*?)(<!-- /gpubench:(?P=name) -->)", re.S)
GPUS = {"h100-80gb-hbm3": "H100", "h200": "H200"}


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
    cols = ["gpu_util_pct", "sm_active_pct", "sm_occupancy_pct", "tensor_active_pct", "dram_active_pct"]
    head = ["scenario"] + [BY_COLUMN[c].header for c in cols] + ["work done (ground truth)"]
    by = {s: {r["scenario"]: r for r in summary} for s, (_, _, summary) in runs.items()}
    names = list(dict.fromkeys(n for s in by for n in by[s]))
    lines = [f"Each cell: {' / '.join(GPUS[s] for s in runs)}.", "",
             "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for name in names:
        rows = [by[s].get(name) for s in runs]
        cells = [f"`{name}`"] + [" / ".join(fmt_value(c, (r or {}).get(c), "–") for r in rows) for c in cols]
        cells.append(" / ".join(_work(r) for r in rows))
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def _work(row) -> str:
    if not row or row.get("family") == "idle":
        return "–"
    label, v = work_fraction(row)
    return f"{label} {pct(v)}"


def peaks_table(results: Path) -> str:
    rows = ["| GPU | copy peak, TB/s | bf16 matmul peak, TFLOP/s (SM clock, power) | `gemm-torch` against it | "
            "`copy-torch` against it |", "|---|---|---|---|---|"]
    for slug, path in reference_runs(results).items():
        manifest, _, summary = load_run(path)
        by = {r["scenario"]: r for r in summary}
        meas = (manifest.get("peaks") or {}).get("measured") or {}
        cond = ((manifest.get("peaks") or {}).get("conditions") or {}).get("bf16_tensor") or {}
        rows.append(f"| {GPUS[slug]} | {meas.get('dram', float('nan')) / 1e12:.2f} | "
                    f"{meas.get('bf16_tensor', float('nan')) / 1e12:.0f} ({cond.get('sm_clock_mhz', 0):.0f} MHz, "
                    f"{cond.get('power_w_energy', 0):.0f} W) | "
                    f"{_pct(by.get('gemm-torch', {}).get('mfu_measured_pct', float('nan')))} | "
                    f"{_pct(by.get('copy-torch', {}).get('mbu_measured_pct', float('nan')))} |")
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
]


def bench_rows(path: Path) -> dict:
    with open(path, newline="") as f:
        return {(r["group"], r["name"]): r for r in csv.DictReader(f)}


def ratio(rows: dict, group: str, name: str, reference: str) -> tuple[float, float, float] | None:
    """name's speed over reference's, from their medians (both timed interleaved in one run)."""
    a, b = rows.get((group, name)), rows.get((group, reference))
    if not a or not b:
        return None
    return float(b["median_ms"]) / float(a["median_ms"]), float(a["speed_p10"]), float(a["speed_p90"])


def kernels_table(results: Path) -> str:
    benches = {s: sorted(results.glob(f"bench-kernels-{s}-*.csv")) for s in GPUS}
    benches = {s: bench_rows(p[-1]) for s, p in benches.items() if p}
    head = ["ratio (speed, higher is faster)", "target"] + [GPUS[s] for s in benches]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for group, name, ref, what, target in TARGETS:
        cells = [what, f"≥ {target:g}x" if target else "–"]
        for rows in benches.values():
            got = ratio(rows, group, name, ref)
            mark = "" if not target or not got else (" ✓" if got[0] >= target else " ✗")
            cells.append(f"{got[0]:.3f}x{mark}" if got else "n/a")
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


SECTIONS = {"ladder": ladder_table, "peaks": peaks_table, "kernels": kernels_table}


def render(readme: str, results: Path) -> str:
    def fill(m):
        make = SECTIONS.get(m.group("name"))
        return m.group(1) + (make(results) if make else m.group("body")) + m.group(4)
    return MARK.sub(fill, readme)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--check", action="store_true", help="exit 1 if README.md differs from the results")
    args = ap.parse_args()
    path = ROOT / "README.md"
    old = path.read_text()
    new = render(old, ROOT / "results")
    if args.check:
        if new != old:
            print("README.md disagrees with results/: run python scripts/readme_tables.py", file=sys.stderr)
            return 1
        return 0
    path.write_text(new)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
