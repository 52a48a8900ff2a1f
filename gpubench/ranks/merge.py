"""One run from a torchrun job's ranks: every time on rank 0's clock, the rank using each GPU on every sample
row, one summary row per scenario and rank, and each rank's arrival at the collective, which names the
straggler.

Pure functions over what the ranks sent (their payloads, see gpubench.ranks.lockstep), so the merge is tested
without processes or GPUs.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass

from gpubench.metrics import finite, pct
from gpubench.read.summary import metric_stats, peak_conditions, summarize, window_text, windows_of
from gpubench.truth import ceiling
from gpubench.truth.peaks import sheet_for

# the summary columns made here that their names do not tell (gpubench.record.columns.DECLARERS names this)
SUMMARY_COLUMNS = {"node": "text", "straggler_text": "text", "wait_signature": "text", "straggler_note": "text"}

# A rank that reaches the collective at least this long after the first one, as a median over steps, is
# the straggler; below it the differences are the host's own jitter.
STRAGGLER_MIN_MS = 1.0


@dataclass
class Clock:
    """A rank's monotonic clock against rank 0's: the offsets measured at the start and, where the run got
    there, at the end (hosts' clocks drift apart by a few µs per second), linear in between."""

    t_start: float = 0.0
    offset_start: float = 0.0
    error_s: float = 0.0
    t_end: float | None = None
    offset_end: float | None = None

    def to_root(self, t: float) -> float:
        if self.t_end is None or self.offset_end is None or not self.t_end > self.t_start:
            return t + self.offset_start
        share = (t - self.t_start) / (self.t_end - self.t_start)
        return t + self.offset_start + (self.offset_end - self.offset_start) * share


def _shifted(row: dict, clock: Clock, keys) -> dict:
    return {**row, **{k: clock.to_root(row[k]) for k in keys if finite(row.get(k))}}


def merge_rows(root_rows, payloads: list[dict], rank_of: dict[str, int]):
    """Every node's samples on rank 0's clock, each with the rank using its GPU (rank_of: by UUID; None for
    a GPU no rank used), in order of time and NVML index, as Samples; the rows of each node as Samples, a
    dict of columns or row dicts."""
    import numpy as np

    from gpubench.read.samples import Samples, as_samples

    parts = [(as_samples(root_rows), None)] + [(as_samples(p.get("rows") or []), Clock(**p["clock"])) for p in payloads]
    parts = [(s, c) for s, c in parts if len(s)]
    names = list(dict.fromkeys(n for s, _ in parts for n in s.names if n != "rank"))
    columns = {}
    for name in names:
        pieces = []
        for s, clock in parts:
            col = s.col(name) if s.has(name) else np.full(len(s), "" if name in ("uuid", "phase") else np.nan)
            pieces.append(clock.to_root(col) if clock is not None and name in ("t_start_s", "t_end_s") else col)
        columns[name] = np.concatenate(pieces) if pieces else np.zeros(0)
    uuids = columns.get("uuid", np.zeros(0, dtype=object))
    rank = np.full(len(uuids), np.nan)
    for uuid in set(uuids.tolist()):
        if rank_of.get(uuid) is not None:
            rank[uuids == uuid] = rank_of[uuid]
    columns["rank"] = rank
    if not len(uuids):
        return Samples(columns, names=names + ["rank"], length=0)
    order = np.lexsort((columns["gpu"], columns["t_end_s"]))  # stable: as sorted() by (t_end_s, gpu)
    return Samples({n: c[order] for n, c in columns.items()})


def merge_results(payloads: list[dict]) -> list[dict]:
    """Every rank's results on rank 0's clock, with its rank and node, arrival statistics and NVLink facts."""
    results, stamps = [], {}
    job = job_links(payloads)
    for p in payloads:
        clock = Clock(**p["clock"])
        for res in p["results"]:
            row = {
                **_shifted(res, clock, ("t_start", "t_end")),
                "rank": p["rank"],
                "local_rank": p["local_rank"],
                "node": p["node"],
            }
            if res.get("timing_window"):  # the window its calls were timed in, on rank 0's clock too
                row["timing_window"] = window_text(
                    [(clock.to_root(a), clock.to_root(b)) for a, b in windows_of(res["timing_window"])]
                )
            if res.get("bound") == "interconnect" and job["nodes"] > 1:
                row["nvlink_note"] = CROSS_NODE.format(nodes=job["nodes"])
            elif res.get("bound") == "interconnect" and (links := usable_links(p["info"], job)):
                row.update(nvlink_gbps=sum(x["speed_mbps"] for x in links) / 1e3, nvlink_links=len(links))
            results.append(row)
        for name, times in (p.get("arrivals") or {}).items():
            stamps.setdefault(name, {})[p["rank"]] = [clock.to_root(t) for t in times]
    for name, by_rank in stamps.items():
        stats = arrival_stats(by_rank)
        for row in results:
            if row["scenario"] == name and row["rank"] in stats:
                row.update(stats[row["rank"]])
    _step_spread(results)
    return results


def arrival_stats(stamps: dict[int, list[float]]) -> dict[int, dict]:
    """Per rank, over the steps every rank recorded: how long after the first rank it reached the collective
    (arrival_delay_ms: median, p10, p90, max) and how long it then waited there for the last one (wait_ms);
    and the straggler, the rank with the largest median delay where that is STRAGGLER_MIN_MS or more."""
    n = min((len(v) for v in stamps.values()), default=0)
    if len(stamps) < 2 or n == 0:
        return {}
    first = [min(v[k] for v in stamps.values()) for k in range(n)]
    last = [max(v[k] for v in stamps.values()) for k in range(n)]
    out = {}
    for rank, times in stamps.items():
        steps = [
            {"arrival_delay_ms": 1e3 * (times[k] - first[k]), "wait_ms": 1e3 * (last[k] - times[k])} for k in range(n)
        ]
        stats = metric_stats(steps, ("arrival_delay_ms",))
        stats.update(
            arrival_delay_ms_max=max(s["arrival_delay_ms"] for s in steps),
            wait_ms=metric_stats(steps, ("wait_ms",))["wait_ms"],
            n_steps=n,
        )
        out[rank] = stats
    late = max(out, key=lambda r: out[r]["arrival_delay_ms"])
    straggler = late if out[late]["arrival_delay_ms"] >= STRAGGLER_MIN_MS else None
    text = (
        f"the arrival times name rank {straggler} as the straggler"
        if straggler is not None
        else f"no rank came a median {STRAGGLER_MIN_MS:g} ms or more after the first, so the arrival times "
        "name no straggler"
    )
    for stats in out.values():
        stats.update(straggler_rank=straggler, straggler_text=text)
    return out


def _step_spread(results: list[dict]) -> None:
    """How far apart the ranks' times per call were, per scenario: (max - min) / median, in percent."""
    by: dict[str, list[dict]] = {}
    for row in results:
        if finite(row.get("kernel_ms")):
            by.setdefault(row["scenario"], []).append(row)
    for rows in by.values():
        times = [r["kernel_ms"] for r in rows]
        if len(times) > 1:
            for r in rows:
                r["step_spread_pct"] = 100.0 * (max(times) - min(times)) / statistics.median(times)


def rank_peaks(payload: dict, rows, job: dict | None = None) -> dict:
    """A rank's peaks: its GPU's datasheet, host link and NVLinks, what it measured, and the conditions seen
    (rows: the merged Samples).

    The NVLink rate a collective is held against counts only the links it can use (job_nvlink); a job on
    several nodes gets none: its collectives cross the network."""
    info, gpu = payload["info"], payload["gpu"]
    clock = Clock(**payload["clock"])
    mine = rows.of("uuid", gpu["uuid"])
    conditions = {
        k: peak_conditions(mine, gpu["nvml_index"], clock.to_root(a), clock.to_root(b))
        for k, (a, b) in (payload.get("peak_windows") or {}).items()
    }
    sheet = dict(sheet_for(info) or {})
    sheet.pop("nvlink", None)
    rate = job_nvlink(info, job or {})
    if rate:
        sheet["nvlink"] = rate
    return {"datasheet": sheet or None, "measured": payload.get("peaks"), "conditions": conditions}


CROSS_NODE = (
    "the job spans {nodes} nodes, so its collectives cross the network, whose rate NVML does not give: "
    "no NVLink share is given"
)


def usable_links(info: dict, job: dict) -> list[dict]:
    """The active NVLinks a collective of this job can use: those that lead to an NVSwitch or to a GPU the
    job uses on this node (a link to a GPU outside the job carries none of its traffic); none where the job
    spans several nodes (its collectives cross the network)."""
    if job.get("nodes", 1) > 1:
        return []
    buses = job.get("buses")
    return [
        x
        for x in (info.get("nvlink") or {}).get("links") or []
        if x.get("active")
        and x.get("speed_mbps")
        and (buses is None or x.get("peer") == "switch" or x.get("peer_bus") is None or x["peer_bus"] in buses)
    ]


def job_nvlink(info: dict, job: dict) -> float | None:
    """The rate per direction of the usable links, as NVML reports it; None where there is none."""
    return sum(x["speed_mbps"] for x in usable_links(info, job)) * 1e6 or None


def job_links(payloads: list[dict]) -> dict:
    """What the NVLink rate needs to know of the job: how many nodes, and the PCI bus ids of its GPUs."""
    buses = {(p.get("info") or {}).get("pci_bus_id") for p in payloads}
    return {"nodes": len({p["node"] for p in payloads}), "buses": None if None in buses else buses}


def summarize_ranks(
    rows,
    results: list[dict],
    peaks: dict[int, dict],
    columns,
    order: dict[str, int],
    names: dict[int, str] | None = None,
) -> list[dict]:
    """One summary row per scenario and rank, each from the samples of that rank's GPU (rows: the merged
    Samples), in suite order, with the tensor-pipe ceiling of that GPU (names: each rank's GPU as NVML names
    it; without it, no ceiling)."""
    summary = []
    for rank in sorted({r["rank"] for r in results}):
        mine = [r for r in results if r["rank"] == rank]
        hook = ceiling.for_suite((names or {}).get(rank, ""), (peaks[rank] or {}).get("datasheet"))
        summary += summarize(rows.of("uuid", mine[0]["uuid"]), mine, peaks[rank], columns, ceiling=hook)
    summary.sort(key=lambda r: (order.get(r["scenario"], len(order)), r["rank"]))
    annotate(summary)
    return summary


# What a waiting rank's GPU looked like, as data: the first (test, sentence) that holds.
SIGNATURES = (
    (
        lambda util, sm: util >= 90 and finite(sm) and sm <= 25,
        "busy by GPU-Util, nearly idle by SM activity: what a GPU waiting on its peers looks like",
    ),
    (lambda util, sm: util >= 90 and not finite(sm), "busy by GPU-Util; this run could not record SM activity"),
    (lambda util, sm: util >= 90, "busy by GPU-Util and by SM activity alike"),
    (lambda util, sm: True, "GPU-Util did not read it as busy through the wait"),
)


def annotate(summary: list[dict]) -> None:
    """Facts the straggler's prose needs: on waiting ranks how long they waited and what their GPU looked
    like meanwhile; on the straggler how busy its GPU read against the ranks waiting for it."""
    for row in summary:
        s = row.get("straggler_rank")
        if s is None or (isinstance(s, float) and math.isnan(s)):
            continue
        if row["rank"] != s:
            util, sm = row.get("gpu_util_pct"), row.get("sm_active_pct")
            row["waited_ms"] = row.get("wait_ms")
            if finite(util):
                row["wait_signature"] = next(text for test, text in SIGNATURES if test(util, sm))
            continue
        waiting = [
            r["gpu_util_pct"]
            for r in summary
            if r["scenario"] == row["scenario"] and r["rank"] != s and finite(r.get("gpu_util_pct"))
        ]
        mine = row.get("gpu_util_pct")
        if waiting and finite(mine):
            others = statistics.median(waiting)
            looks = "less busy than" if mine < others else "as busy as" if mine == others else "busier than"
            row["straggler_note"] = (
                f"Rank {s}'s GPU idled while its host slept: it read {pct(mine)} GPU-Util against "
                f"a median {pct(others)} on the ranks waiting for it, so the rank holding the "
                f"job back looks {looks} them."
            )
