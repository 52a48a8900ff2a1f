"""The energy figure: GPU-Util beside the useful work each joule bought. At 100% util a spinning kernel
draws power and does nothing; copies and GEMMs turn it into work at very different rates."""

from __future__ import annotations

import matplotlib.pyplot as plt

from gpubench.metrics import finite, fmt_value, pct
from gpubench.read.energy import joules
from gpubench.read.summary import row_label

from .common import VALUE_PT, C, empty, kernel_rows, save, short

TITLE = "GPU-Util against the useful work each joule bought"
# (column, axis title, bar colour, format of one value): bytes for the kernels MBU judges, FLOPs for MFU's
PANELS = [
    (
        "gb_per_j",
        "useful GB per joule (memory-bound: each input read once, each output written once)",
        C["dram_active_pct"],
        "GB/J",
    ),
    (
        "tflop_per_kj",
        "useful TFLOP per kilojoule (arithmetic: MFU's FLOPs; a spinning kernel does none)",
        C["tensor_active_pct"],
        "TFLOP/kJ",
    ),
]


def energy_rows(summary) -> list[dict]:
    """The rows that ran a kernel and have a power, with their energy columns (computed for runs summarized
    before these columns existed)."""
    return [dict(r, **joules(r)) for r in kernel_rows(summary) if finite(r.get("power_w_energy"))]


def draw(summary, samples, manifest, out_dir):
    rows = energy_rows(summary)
    panels = [
        (p, [r for r in rows if finite(r.get(p[0])) and (p[0] == "gb_per_j" or r.get("bound") != "dram")])
        for p in PANELS
    ]
    panels = [(p, rs) for p, rs in panels if rs]
    if not panels:
        return empty(out_dir, "energy", TITLE, manifest)
    heights = [len(rs) + 1.2 for _, rs in panels]
    fig, axes = plt.subplots(
        len(panels), 1, figsize=(10.5, 0.36 * sum(heights) + 1.6), squeeze=False, gridspec_kw={"height_ratios": heights}
    )
    notes: dict = {}
    for ax, ((col, head, color, unit), rs) in zip(axes[:, 0], panels):
        top = max(r[col] for r in rs) or 1.0
        for i, r in enumerate(rs):
            ax.barh(i, r[col], color=color, height=0.7)
            text = (
                f"{_num(r[col])} {unit} · util {fmt_value('gpu_util_pct', r.get('gpu_util_pct'))} · "
                f"{r['power_w_energy']:.0f} W"
            )
            inside = r[col] > 0.55 * top
            ax.text(
                r[col] - 0.01 * top if inside else r[col] + 0.01 * top,
                i,
                text,
                va="center",
                ha="right" if inside else "left",
                fontsize=VALUE_PT,
                color="white" if inside else "#222",
            )
            notes.setdefault(row_label(r), {}).update(
                {col: r[col], "gpu_util_pct": r.get("gpu_util_pct"), "power_w_energy": r["power_w_energy"]}
            )
        ax.set_yticks(range(len(rs)), [short(row_label(r)) for r in rs], fontsize=9)
        ax.invert_yaxis()
        ax.set_xlim(0, top * 1.02)
        ax.set_title(head, fontsize=9.5, loc="left")
        ax.grid(axis="x", alpha=0.3)
    fig.suptitle(finding(rows, summary), fontsize=10.5, x=0.01, ha="left")
    fig.tight_layout()
    return save(fig, manifest, out_dir, "energy"), notes


def _num(v: float) -> str:
    return f"{v:,.0f}" if v >= 1000 else f"{v:.3g}"


def finding(rows, summary) -> str:
    """The title: what the kernels that read busy bought with their power, from the run's own rows."""
    busy = [r for r in rows if finite(r.get("gpu_util_pct")) and r["gpu_util_pct"] >= 90]
    nothing = [r for r in busy if not r.get("flops_per_call") and not r.get("bytes_per_call")]
    best_gb = max((r for r in busy if finite(r.get("gb_per_j"))), key=lambda r: r["gb_per_j"], default=None)
    best_tf = max(
        (r for r in busy if finite(r.get("tflop_per_kj")) and r.get("bound") != "dram"),
        key=lambda r: r["tflop_per_kj"],
        default=None,
    )
    hot = max(nothing, key=lambda r: r["power_w_energy"], default=None)
    named = [
        (hot, f"drew {hot['power_w_energy']:.0f} W for no work" if hot else ""),
        (best_gb, f"moved {_num(best_gb['gb_per_j'])} GB per joule" if best_gb else ""),
        (best_tf, f"did {_num(best_tf['tflop_per_kj'])} TFLOP per kJ" if best_tf else ""),
    ]
    named = [(r, said) for r, said in named if r]
    if not named:
        return TITLE
    lows = {pct(r["gpu_util_pct"]) for r, _ in named}
    lead = f"At {lows.pop()} GPU-Util, " if len(lows) == 1 else "At 90% GPU-Util or more, "
    idle = [r["power_w_energy"] for r in summary if r.get("family") == "idle" and finite(r.get("power_w_energy"))]
    return (
        lead + "; ".join(f"{row_label(r)} {said}" for r, said in named) + (f" (idle: {idle[0]:.0f} W)" if idle else "")
    )
