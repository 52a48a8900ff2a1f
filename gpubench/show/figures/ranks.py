"""The ranks figure of a run under torchrun: per rank, GPU-Util against SM activity and power through the
distributed scenarios, and how late each rank reached the collective. Which rows are distributed comes
from the summary's own columns (a world size); no scenario name is written here."""

from __future__ import annotations

import math
import statistics

import matplotlib.pyplot as plt
import numpy as np

from gpubench.metrics import finite, fmt, pct
from gpubench.read.samples import as_samples

from .common import LEFT_OUT, PNG_DPI, empty, envelope, save

MAX_RANKS = 8  # panels; a larger job shows its first ranks and says so
TITLE = "Ranks of a torchrun job: who waits, and who is late"
POWER = "#1f77b4"
STRAGGLER = "#d62728"
WAITING = "#7f7f7f"
BINS = round(12 * 0.775 * PNG_DPI)  # one slice of time per pixel of a panel: long runs draw their envelope


def distributed_rows(summary) -> list[dict]:
    return [r for r in summary if finite(r.get("world_size")) and finite(r.get("rank"))]


def draw(summary, samples, manifest, out_dir):
    rows = distributed_rows(summary)
    if not rows:
        return empty(out_dir, "ranks", TITLE, manifest)
    ranks = sorted({int(r["rank"]) for r in rows})
    shown = ranks[:MAX_RANKS]
    late = [n for n in dict.fromkeys(r["scenario"] for r in rows if finite(r.get("arrival_delay_ms")))]
    fig = plt.figure(figsize=(12, 1.7 * len(shown) + (3.2 if late else 0.6)))
    # a spacer row keeps the time axis's label clear of the arrival panels' titles
    grid = fig.add_gridspec(
        len(shown) + (2 if late else 0),
        max(1, len(late)),
        height_ratios=[1] * len(shown) + ([0.35, 1.6] if late else []),
        hspace=0.3,
        right=0.86,
    )
    t0 = min(r["t_start"] for r in rows) - 1.0
    t1 = max(r["t_end"] for r in rows) + 1.0
    samples = as_samples(samples)
    power = samples.col("power_w")
    top = (float(np.nanmax(power)) if np.isfinite(power).any() else 1.0) * 1.1
    axes = []
    for k, rank in enumerate(shown):
        ax = fig.add_subplot(grid[k, :], sharex=axes[0] if axes else None)
        mine = samples.of("rank", rank)
        ends = mine.col("t_end_s")
        _rank_panel(ax, rank, mine.take((t0 <= ends) & (ends <= t1)), t0, top, manifest.get("left_out", set()), k == 0)
        for r in rows:
            if r["rank"] == rank:
                ax.axvspan(r["t_start"] - t0, r["t_end"] - t0, color="#000", alpha=0.06, lw=0)
                if k == 0:
                    ax.text((r["t_start"] + r["t_end"]) / 2 - t0, 112, r["scenario"], fontsize=7, ha="center")
        ax.tick_params(labelbottom=False)
        axes.append(ax)
    axes[-1].tick_params(labelbottom=True)
    axes[-1].set_xlabel("time since the first distributed scenario began, s (shaded: each scenario's window)")
    notes = {"ranks": shown, "delays": {}, "straggler": {}, "findings": _findings(rows)}
    for j, name in enumerate(late):
        _delay_panel(fig.add_subplot(grid[len(shown) + 1, j]), [r for r in rows if r["scenario"] == name], name, notes)
    lines = notes["findings"] + (
        [] if len(shown) == len(ranks) else [f"(the first {len(shown)} of {len(ranks)} ranks)"]
    )
    fig.suptitle(
        "\n".join(lines),
        fontsize=10,
        x=0.01,
        ha="left",
        va="bottom",
        y=axes[0].get_position().y1 + 0.2 / fig.get_figheight(),
    )
    return save(fig, manifest, out_dir, "ranks"), notes


def _rank_panel(ax, rank, samples, t0, top, left_out=(), legend=True):
    t = samples.col("t_end_s") - t0
    for col, color, label in (("gpu_util_pct", "#d62728", "GPU-Util"), ("sm_active_pct", "#ff7f0e", "SM active")):
        ys = samples.col(col)
        if np.isfinite(ys).any():
            said = LEFT_OUT if col in left_out else ""
            ax.plot(*envelope(t, ys, BINS), color=color, lw=1.1, label=f"{label}, %{said}")
        else:
            ax.plot([], [], color=color, ls=":", label=f"{label}: unavailable in this run")
    ax.set_ylim(-3, 108)
    ax.set_ylabel(f"rank {rank}\npercent", fontsize=8)
    power = ax.twinx()
    power.plot(
        *envelope(t, samples.col("power_w"), BINS),
        color=POWER,
        lw=1,
        ls="--",
        label="power, W" + (LEFT_OUT if "power_w" in left_out else ""),
    )
    power.set_ylim(0, top)
    power.set_ylabel("W", fontsize=8, color=POWER)
    if not legend:  # the lines are the same on every rank: one legend, beside the first
        return
    handles = ax.get_legend_handles_labels()[0] + power.get_legend_handles_labels()[0]
    # clear of the power axis's ticks and its label, which sit just right of the panel
    ax.legend(
        handles,
        [h.get_label() for h in handles],
        loc="upper left",
        bbox_to_anchor=(1.07, 1.0),
        fontsize=7,
        frameon=False,
    )


def _delay_panel(ax, rows, name, notes):
    rows = sorted(rows, key=lambda r: r["rank"])
    straggler = rows[0].get("straggler_rank")
    tops = []
    for i, r in enumerate(rows):
        v = r["arrival_delay_ms"]
        lo, hi = r.get("arrival_delay_ms_p10", v), r.get("arrival_delay_ms_p90", v)
        color = STRAGGLER if finite(straggler) and r["rank"] == straggler else WAITING
        spread = finite(lo) and finite(hi)
        ax.bar(i, v, color=color, yerr=[[max(v - lo, 0)], [max(hi - v, 0)]] if spread else None, capsize=3)
        # above the p90 bar's cap, never on it
        ax.annotate(
            _ms(v),
            (i, max(v, hi) if spread else v),
            xytext=(0, 4),
            textcoords="offset points",
            ha="center",
            va="bottom",
            fontsize=9,
        )
        tops.append(max(v, hi) if spread else v)
        notes["delays"][(name, int(r["rank"]))] = v
    ax.set_ylim(0, max([*tops, 1e-9]) * 1.22)  # room for the labels above the tallest bar
    notes["straggler"][name] = straggler if finite(straggler) else None
    ax.set_xticks(range(len(rows)), [f"rank {int(r['rank'])}" for r in rows], fontsize=7)
    ax.set_ylabel("arrival after the first rank, ms\n(median, p10-p90 bars)", fontsize=7)
    # a scenario may itself be named "straggler": the title says the word once
    who = f"rank {int(straggler)} was late (red)" if finite(straggler) else "no rank was late"
    ax.set_title(f"{name}: {who}", fontsize=8)


def _ms(v: float) -> str:
    """1500 ms, 10.1 ms, 0.25 ms: never an exponent on a figure."""
    return f"{v:.0f} ms" if v >= 100 else f"{v:.3g} ms"


def _findings(rows) -> list[str]:
    """The title, one line per distributed scenario (never a median across scenarios, which would describe a
    state no scenario was in): what the waiting ranks' GPUs read, and who was late."""
    names = dict.fromkeys(
        r["scenario"] for r in rows if finite(r.get("arrival_delay_ms")) or r.get("bound") == "interconnect"
    )
    return [_finding(name, [r for r in rows if r["scenario"] == name]) for name in names] or [TITLE]


def _finding(name: str, rows) -> str:
    waiting = [r for r in rows if finite(r.get("straggler_rank")) and r["rank"] != r["straggler_rank"]]
    late = [r for r in rows if finite(r.get("straggler_rank")) and r["rank"] == r["straggler_rank"]]
    pool = waiting or rows

    def med(col):
        vals = [r[col] for r in pool if finite(r.get(col))]
        return statistics.median(vals) if vals else math.nan

    util, sm, power = med("gpu_util_pct"), med("sm_active_pct"), med("power_w_energy")
    who = "the waiting ranks" if waiting else "the ranks"
    text = f"{name}: {who} read {pct(util)} GPU-Util with SM activity {pct(sm)} at {fmt(power, '{:.0f} W', 'n/a W')}"
    if late:
        worst = max(late, key=lambda r: r["arrival_delay_ms"])
        text += f"; rank {int(worst['rank'])} reached the all-reduce {_ms(worst['arrival_delay_ms'])} late"
    return text
