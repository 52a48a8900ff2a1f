"""A straggler in the user's own multi-GPU job, named from what was recorded.

In a data-parallel job every rank steps at the same rate: the collectives hold them in lock-step. When one
rank's host is slow (its data loader, its Python), the others wait for it inside the collective, where a
kernel spins: their GPUs read busy, the straggler's GPU sits idle between its steps. So, in a phase whose
ranks step within RATE_SPREAD of one rate, the rank whose GPU was busy the least, by MIN_GAP_PCT points or
more below the median of the others, holds the job back. Where steps were stamped on the GPU, the host's
lead (how long before the GPU reached a step the host called step()) says it again: a waiting rank's host
is far ahead of its GPU, the straggler's barely. Nobody is named where the ranks step at different rates
(they do not wait for each other) or where their GPUs read alike.
"""

from __future__ import annotations

import statistics

from gpubench.metrics import finite, pct

RATE_SPREAD = 0.05  # ranks within 5% of one step rate are in lock-step
MIN_GAP_PCT = 10.0  # points of GPU busy below the others' median that name a straggler


def find(rows: list[dict]) -> dict[int, tuple[str, str]]:
    """For the rows of one phase (one per GPU, each of one rank): {index of a row: (rule, sentence)} for the
    straggler and the ranks waiting on it; {} where nobody can be named."""
    ranked = [
        (i, r)
        for i, r in enumerate(rows)
        if isinstance(r.get("rank"), int) and finite(r.get("steps_per_s")) and finite(r.get("gpu_util_mean_pct"))
    ]
    if len(ranked) < 2:
        return {}
    rates = [r["steps_per_s"] for _, r in ranked]
    if (max(rates) - min(rates)) / statistics.median(rates) > RATE_SPREAD:
        return {}
    i_slow, slow = min(ranked, key=lambda ir: ir[1]["gpu_util_mean_pct"])
    others = [(i, r) for i, r in ranked if i != i_slow]
    busy = statistics.median(r["gpu_util_mean_pct"] for _, r in others)
    gap = busy - slow["gpu_util_mean_pct"]
    if gap < MIN_GAP_PCT:
        return {}
    rank, rate = slow["rank"], statistics.median(rates)
    lead = _lead(slow, [r for _, r in others])
    out = {
        i_slow: (
            "straggler",
            (
                f"Rank {rank} holds the job back: its GPU was busy {pct(slow['gpu_util_mean_pct'])} of the time "
                f"(mean GPU-Util) while the ranks waiting for it read {pct(busy)}, all at {rate:.3g} steps/s{lead}; "
                "its host is the bottleneck (data loading, Python between steps), not its batch or its kernels."
            ),
        )
    }
    for i, r in others:
        out[i] = (
            "waits-on-rank",
            (
                f"Rank {r['rank']} waits on rank {rank}: this GPU read a mean GPU-Util of "
                f"{pct(r['gpu_util_mean_pct'])} at {rate:.3g} steps/s while rank {rank}'s read "
                f"{pct(slow['gpu_util_mean_pct'])}, so much of what reads busy here is waiting in the collective; "
                f"speed up rank {rank}'s host."
            ),
        )
    return out


def _lead(slow: dict, others: list[dict]) -> str:
    """Where steps were stamped on the GPU and the hosts' leads tell the ranks apart (the waiting ranks' hosts
    at least twice as far ahead of their GPUs, by a millisecond or more): that evidence too. A loop that
    waits for its GPU each step (reading the loss) keeps every lead short, and then it is not said."""
    mine, theirs = slow.get("lead_ms"), [r["lead_ms"] for r in others if finite(r.get("lead_ms"))]
    if not (finite(mine) and theirs):
        return ""
    lead = statistics.median(theirs)
    if lead < 2 * mine or lead - mine < 1.0:
        return ""
    return f"; its host called step() {mine:.3g} ms before its GPU reached the step, the others' {lead:.3g} ms"
