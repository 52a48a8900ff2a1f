"""The decode figure: tokens/s and step time against batch size, with MBU, MFU and GPU-Util, and the ridge
where the compute roof takes over from the memory roof."""

from __future__ import annotations

import matplotlib.pyplot as plt

from gpubench.metrics import BY_COLUMN, finite, pct
from gpubench.read.summary import batch_at, ridge_flop_per_byte, row_label
from gpubench.truth.peaks import UNIT_NAMES

from .common import VALUE_PT, C, empty, save, short

TITLE = "LLM decode: tokens/s and step time against batch size"
LINES = {"triton": ("-", "o"), "torch": ("--", "s"), "cupy": (":", "^")}
PERCENT = ("gpu_util_pct", "mbu_pct", "mbu_read_pct", "mfu_pct")  # MBU against the datasheet and the read peak


def decode_rows(summary) -> dict[str, list[dict]]:
    """The rows of decode steps with a time and a batch, by implementation, each in batch order: a step time
    of 0 (or a rate of none) is no measurement, and no point of a sweep (the ratios divide by both)."""
    rows = [
        r
        for r in summary
        if r.get("family") == "decode"
        and finite(r.get("tokens_per_call"))
        and finite(r.get("kernel_ms"))
        and r["kernel_ms"] > 0
        and finite(r.get("tokens_per_s"))
        and r["tokens_per_s"] > 0
    ]
    by: dict[str, list[dict]] = {}
    for r in sorted(rows, key=lambda r: r["tokens_per_call"]):
        by.setdefault(r.get("impl") or "?", []).append(r)
    return by


def sweep_facts(rows: list[dict], peaks: dict) -> dict:
    """What a sweep shows, for the title and the report: how tokens/s and the step time grew from its
    first point to its last, GPU-Util's range, the ridge (in FLOP per byte and as a batch), and the first
    batch at which MFU exceeded MBU."""
    first, last = rows[0], rows[-1]
    utils = [r["gpu_util_pct"] for r in rows if finite(r.get("gpu_util_pct"))]
    ridge = ridge_flop_per_byte(peaks)
    return {
        "b0": first["tokens_per_call"],
        "b1": last["tokens_per_call"],
        "tokens_x": last["tokens_per_s"] / first["tokens_per_s"],
        "time_x": last["kernel_ms"] / first["kernel_ms"],
        "util_min": min(utils, default=float("nan")),
        "util_max": max(utils, default=float("nan")),
        "ridge": ridge,
        "ridge_batch": batch_at(rows, ridge) if ridge else float("nan"),
        "mfu_over_mbu": next(
            (
                r["tokens_per_call"]
                for r in rows
                if finite(r.get("mfu_pct")) and finite(r.get("mbu_pct")) and r["mfu_pct"] > r["mbu_pct"]
            ),
            None,
        ),
    }


def peaks_said(rows: list[dict]) -> str:
    """Which peak MFU divides by where a sweep's points ran on different units (a batch of one on CUDA cores, the
    rest on the tensor cores): 'of the bf16 peak; batch 1 of the FP32 peak'; empty where they share one."""
    by: dict[str, list[str]] = {}
    for r in rows:
        by.setdefault(r.get("unit") or "bf16_tensor", []).append(f"{r['tokens_per_call']:.0f}")
    if len(by) < 2:
        return ""
    main = max(by, key=lambda u: len(by[u]))
    return "; ".join(
        [f"of the {UNIT_NAMES.get(main, main)} peak"]
        + [f"batch {', '.join(bs)} of the {UNIT_NAMES.get(u, u)} peak" for u, bs in by.items() if u != main]
    )


def least_ms(row: dict, peaks: dict) -> float:
    """The roofline's least time for a step: its bytes at the DRAM roof or its FLOPs at the bf16 roof, as
    the roofline figure draws them (measured peaks where known)."""
    pick = lambda k: (peaks.get("measured") or {}).get(k) or (peaks.get("datasheet") or {}).get(k)  # noqa: E731
    bw, flops = pick("dram"), pick(row.get("unit") or "bf16_tensor")
    return 1e3 * max(row["bytes_per_call"] / bw, row["flops_per_call"] / flops) if bw and flops else float("nan")


def draw(summary, samples, manifest, out_dir):
    by = decode_rows(summary)
    if not by:
        return empty(out_dir, "decode", TITLE, manifest)
    peaks = manifest.get("peaks") or {}
    sweep_impl = max(by, key=lambda i: len(by[i]))
    sweep = by[sweep_impl]
    facts = sweep_facts(sweep, peaks)
    fig, (ax_tok, ax_ms, ax_pct) = plt.subplots(1, 3, figsize=(13.5, 4.8))
    notes: dict = {}
    for impl, rows in by.items():
        style, marker = LINES.get(impl, ("-.", "D"))
        xs = [r["tokens_per_call"] for r in rows]
        ax_tok.plot(xs, [r["tokens_per_s"] for r in rows], style, marker=marker, color=C["decode"], label=short(impl))
        ax_ms.plot(xs, [r["kernel_ms"] * 1e3 for r in rows], style, marker=marker, color=C["decode"], label=short(impl))
        for r in rows:
            notes[row_label(r)] = {c: r.get(c) for c in ("tokens_per_call", "tokens_per_s", "kernel_ms") + PERCENT}
    first = sweep[0]
    xs = [r["tokens_per_call"] for r in sweep]
    ax_tok.plot(
        xs,
        [first["tokens_per_s"] * x / first["tokens_per_call"] for x in xs],
        color="#999",
        lw=1,
        label=f"batch {first['tokens_per_call']:.0f}'s rate per token x batch",
    )
    least = [least_ms(r, peaks) * 1e3 for r in sweep]
    mixed = peaks_said(sweep)
    if any(finite(v) for v in least):
        ax_ms.plot(
            xs,
            least,
            color="#999",
            lw=1,
            label="least time on the roofline: weights at DRAM speed,\n"
            + ("or the FLOPs at the peak of the unit each ran on" if mixed else "or the FLOPs at the bf16 peak"),
        )
    _value_labels(ax_tok, sweep, "tokens_per_s", _count)
    _value_labels(ax_ms, sweep, "kernel_ms", lambda v: f"{v:.0f}", scale=1e3)
    for col in PERCENT:
        ys = [r.get(col) for r in sweep]
        if any(finite(y) for y in ys):
            said = f": {mixed}" if col == "mfu_pct" and mixed else ""
            ax_pct.plot(xs, ys, marker="o", color=C[col], label=f"{BY_COLUMN[col].label} ({sweep_impl}){said}")
        else:
            ax_pct.plot([], [], ls=":", color=C[col], label=f"{BY_COLUMN[col].label}: unavailable in this run")
    _value_labels(ax_pct, sweep, "gpu_util_pct", pct, color=C["gpu_util_pct"])
    batches = sorted({r["tokens_per_call"] for rows in by.values() for r in rows})
    for ax, ylabel in (
        (ax_tok, "tokens per second"),
        (ax_ms, "step time, µs (GPU time per call)"),
        (ax_pct, "percent: util of the time; MBU, MFU of the peak"),
    ):
        ax.set_xscale("log")
        ax.set_xlim(batches[0] / 1.7, batches[-1] * 1.7)  # room for the labels of the first and last points
        ax.set_xticks(batches, [f"{b:.0f}" for b in batches])
        ax.minorticks_off()
        ax.set_xlabel("batch: sequences decoded together", fontsize=9)
        ax.set_ylabel(ylabel, fontsize=9)
        ax.grid(alpha=0.25)
        if finite(facts["ridge_batch"]):
            ax.axvline(
                facts["ridge_batch"],
                color="#444",
                ls=":",
                lw=1,
                label=f"ridge: batch {facts['ridge_batch']:.0f} ({facts['ridge']:.0f} FLOP per byte)",
            )
        ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.17), fontsize=8.5, frameon=False)
    ax_tok.set_yscale("log")
    ax_tok.set_ylim(top=ax_tok.get_ylim()[1] * 2.5)  # room for the labels above the last points
    ax_ms.set_ylim(0, max(r["kernel_ms"] * 1e3 for rows in by.values() for r in rows) * 1.2)
    ax_pct.set_ylim(-3, 112)
    notes["sweep"] = {k: v for k, v in facts.items() if v is not None}
    lo, hi = pct(facts["util_min"]), pct(facts["util_max"])
    util = (
        ""
        if not finite(facts["util_min"])
        else (f"GPU-Util read {lo} at every batch; " if lo == hi else f"GPU-Util read {lo} to {hi} at every batch; ")
    )
    fig.suptitle(
        f"{util}from batch {facts['b0']:.0f} to {facts['b1']:.0f} tokens/s rose {facts['tokens_x']:.0f}x "
        f"while the step time rose {facts['time_x']:.1f}x",
        fontsize=11,
        x=0.01,
        ha="left",
    )
    fig.tight_layout()
    return save(fig, manifest, out_dir, "decode"), notes


def _count(v: float) -> str:
    """12.3k, 1.07M: a rate in few digits."""
    return f"{v / 1e6:.3g}M" if v >= 1e6 else f"{v / 1e3:.3g}k" if v >= 1e3 else f"{v:.3g}"


def _value_labels(ax, rows, col, form, color="#444", scale=1.0):
    """Each point's value (times scale, as drawn) just above it, centred."""
    for r in rows:
        if finite(r.get(col)):
            v = r[col] * scale
            ax.annotate(
                form(v),
                (r["tokens_per_call"], v),
                xytext=(0, 6),
                textcoords="offset points",
                ha="center",
                fontsize=VALUE_PT,
                color=color,
            )
