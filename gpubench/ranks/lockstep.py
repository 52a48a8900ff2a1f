"""The suite under torchrun: every rank runs the suite's loop (gpubench.suite.loop) on its own GPU (CUDA
device LOCAL_RANK), one process per node (local rank 0) samples that node's GPUs through a Recording, and
rank 0 writes one run directory.

The ranks move in lock-step (LockStep, the loop's strategy here) so that every rank issues the same
collectives: before each scenario they agree that its check passed everywhere (else it is skipped on every
rank) and on how many calls to time (the slowest rank's warm-up sets it). Single-GPU scenarios run on
every rank's GPU at once. At the end each rank sends rank 0 its results, its arrival times at the
collectives and its clock offsets, and each node's sampling process sends that node's samples: nothing goes
through a shared file system. Rank 0 merges them (gpubench.ranks.merge) into samples.arrows, summary.csv and
the manifest.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from contextlib import nullcontext
from dataclasses import dataclass, field
from pathlib import Path

from gpubench.metrics import COLUMNS
from gpubench.ranks import merge
from gpubench.ranks.launch import Comm, Launch, RankProblem
from gpubench.record import gpus
from gpubench.record.recording import Recording, Reporter, Unsampled
from gpubench.record.rundir import RANKED_SAMPLE_KEYS, SAMPLES_FILE, write_samples, write_summary
from gpubench.suite.backend import CudaBackend
from gpubench.suite.loop import Progress, RunOptions, run_scenarios, shared_gpu
from gpubench.truth.timing import Timings, calls_for, time_loop, warm_up

CHUNK_S = 0.5  # timed calls between two checks of rank 0's clock: the ranks stop together after --duration
CLOCK_NOTE = (
    "times are on rank 0's monotonic clock: ranks on its host share that clock; another host's "
    "offset to it was measured at the start and the end of the run by ping-pong over the gloo group "
    "(error at most half the best round trip, see distributed.ranks[].clock.error_s)"
)


class DistBackend(CudaBackend):
    """CudaBackend, plus what a rank needs to time in step with the others."""

    def node_gpus(self, uuids: list[str], all_gpus: bool) -> list[gpus.Gpu]:
        """The node's GPUs the job uses (or all of them), as the sampling process sees them."""
        mine = gpus.cuda_uuids()
        if all_gpus:
            return gpus.every_gpu(mine)
        return [gpus.from_uuid(u, cuda_index=mine.index(u) if u in mine else None) for u in uuids]

    def warmup_ms(self, prepared) -> float:
        return warm_up(prepared.run)

    def host_ms(self, prepared, calls: int) -> float:
        """Wall time per call of one group of `calls`, the GPU's queue drained: what a timed group costs."""
        t0 = time.perf_counter()
        time_loop(prepared.run, calls_per_timing=calls, groups=1)
        return (time.perf_counter() - t0) * 1e3 / calls

    def time_groups(self, prepared, calls: int, groups: int):
        """Timed groups, each stamped with when it ran on the GPU: the summary keeps those in its window."""
        return time_loop(prepared.run, calls_per_timing=calls, groups=groups, stamped=True)


class LockStep:
    """The loop's strategy under torchrun: the ranks agree on each scenario, plan the same calls, and measure
    for as long as rank 0 does; rank 0's notes speak for the job."""

    def __init__(self, comm: Comm):
        self.comm = comm
        self.speaks = comm.launch.is_root

    def agree(self, problem):
        return [(f"rank {r}: ", p) for r, p in enumerate(self.comm.all_gather(problem)) if p]

    def plan(self, prepared, backend) -> tuple[int, int]:
        """Calls per timed group, and timed groups per chunk of about CHUNK_S, the same on every rank: the
        slowest rank's warm-up decides."""
        calls = prepared.calls_per_timing or calls_for(max(self.comm.all_gather(backend.warmup_ms(prepared))))
        per_call_ms = max(self.comm.all_gather(backend.host_ms(prepared, calls)))
        return calls, max(1, round(CHUNK_S * 1e3 / (calls * max(per_call_ms, 1e-6))))

    def measure(self, prepared, backend, duration_s: float, plan: tuple[int, int], clock) -> Timings:
        """Timed groups, chunk by chunk, until rank 0 has measured for duration_s: every rank runs as many
        calls as the others (a collective left unmatched would hang), whatever a warm-up mispredicted."""
        calls, chunk = plan
        per_call, n, spans, t0 = [], 0, [], clock()
        while True:
            t = backend.time_groups(prepared, calls, chunk)
            per_call += t.per_call_ms
            n += t.calls
            spans += t.spans
            if not self.comm.broadcast(clock() - t0 < duration_s if self.comm.launch.is_root else None):
                return Timings(per_call, n, spans if len(spans) == len(per_call) else [])

    def together(self) -> None:
        self.comm.all_gather(None)


@dataclass
class RankState(Progress):
    """What one rank knows and, at the end, sends rank 0."""

    launch: Launch | None = None
    info: dict = field(default_factory=dict)
    versions: dict = field(default_factory=dict)
    clock: dict = field(default_factory=dict)
    table: list = field(default_factory=list)  # every rank's GPU and node, as the ranks told each other

    def payload(self, **extra) -> dict:
        return {
            "rank": self.launch.rank,
            "local_rank": self.launch.local_rank,
            "node": self.launch.node,
            "gpu": self.gpu.as_dict(),
            "info": self.info,
            "versions": self.versions,
            "results": self.results,
            "arrivals": self.arrivals,
            "warnings": self.warnings,
            "errors": self.errors,
            "peaks": self.peaks,
            "peak_windows": self.peak_windows,
            "clock": self.clock,
            **extra,
        }


def run_distributed(
    opts: RunOptions, launch: Launch, comm: Comm, backend, reporter: Reporter | None = None, clock=time.monotonic
) -> tuple[Path | None, list[dict]]:
    """Run the scenarios on this rank; rank 0 returns the run directory and summary, the others (None, [])."""
    me, table = _introduce(launch, comm, backend, reporter or Reporter())
    node = [h for h in table if h["node"] == launch.node]
    sampled = backend.node_gpus([h["uuid"] for h in node], opts.recording.all_gpus) if launch.samples else []
    start = _clock_reading(comm, launch, table[0]["node"], clock)
    out = Path(opts.out_dir)
    rec = None
    if launch.samples:  # rank 0 is local rank 0 of its node, so it samples; other nodes record to a scratch folder
        out = out if launch.is_root else Path(tempfile.mkdtemp(prefix="gpubench-node-"))
        rec = Recording(out, sampled, opts.recording, kind="run", reporter=me.reporter, clock=clock)
    box: dict = {}
    if rec is not None:
        rec.on_finish(lambda rows: box.update(rows=rows.columns()))  # plain arrays: they travel by pickle
        if launch.is_root:
            rec.on_finish(lambda rows: _write_run(rows, rec, opts, me, box))
    me.clock = {"t_start": start[0], "offset_start": start[1], "error_s": start[2]}
    try:
        with rec if rec is not None else nullcontext():
            if rec is not None and launch.is_root:
                _describe(rec, opts, me)
            comm.all_gather(None)  # every node samples before anything runs
            run_scenarios(opts, backend, rec if rec is not None else Unsampled(clock), me, LockStep(comm))
            end = _clock_reading(comm, launch, table[0]["node"], clock)
            me.clock.update(t_end=end[0], offset_end=end[1], error_s=max(start[2], end[2]))
            if launch.is_root:
                box["payloads"] = comm.gather(me.payload())
        if not launch.is_root:
            comm.gather(me.payload(**_node_report(rec, box)))
    finally:
        if rec is not None and not launch.is_root:
            shutil.rmtree(out, ignore_errors=True)
    return (out, box.get("summary", [])) if launch.is_root else (None, [])


def _introduce(launch: Launch, comm: Comm, backend, reporter: Reporter) -> tuple[RankState, list[dict]]:
    """Resolve this rank's GPU, and tell every rank which GPU each rank uses, on which node."""
    problem = None
    try:
        gpu, _ = backend.resolve(launch.local_rank, False)
    except IndexError as err:
        problem = f"LOCAL_RANK {launch.local_rank} names no GPU: {err}"
    comm.agree(problem)
    others = backend.other_processes(gpu)  # before this process touches the GPU
    me = RankState(gpu, reporter, launch=launch, info=backend.device_info(gpu), versions=backend.versions())
    table = comm.all_gather(
        {
            "rank": launch.rank,
            "local_rank": launch.local_rank,
            "node": launch.node,
            "uuid": gpu.uuid,
            "nvml_index": gpu.nvml_index,
            "pid": os.getpid(),
        }
    )
    seen: dict[tuple[str, str], int] = {}
    for h in table:
        first = seen.setdefault((h["node"], h["uuid"]), h["rank"])
        if first != h["rank"]:
            raise RankProblem(
                f"ranks {first} and {h['rank']} share GPU {h['uuid']}: start at most one rank per GPU "
                "(--nproc-per-node no more than the GPUs each node has)"
            )
    me.table = table
    others = [p for p in others if p not in {h["pid"] for h in table}]
    if others:
        me.warn(shared_gpu(gpu.nvml_index, others))
    return me, table


def _clock_reading(comm: Comm, launch: Launch, root_node: str, clock) -> tuple[float, float, float]:
    """(this rank's time, its offset to rank 0's clock, the offset's error bound)."""
    offset, error = comm.clock_offset(clock)  # every rank takes part, even where the answer is not needed
    if launch.node == root_node:
        offset, error = 0.0, 0.0  # one host, one monotonic clock
    return clock(), offset, error


def _describe(rec: Recording, opts: RunOptions, me: RankState) -> None:
    rec.manifest.update(
        gpu=me.info, versions=me.versions, families={sc.family: {"story": sc.module().STORY} for sc in opts.scenarios}
    )
    rec.manifest["options"].update(duration_s=opts.duration_s, gap_s=opts.gap_s, slow_rank=opts.slow_rank)
    rec.write_manifest()


def _node_report(rec: Recording | None, box: dict) -> dict:
    """What a node's sampling process adds to its payload: the node's samples and how they were taken."""
    if rec is None:
        return {}
    return {
        "rows": box.get("rows", []),
        "columns": list(rec.sampler.columns),
        "sampled": [g.as_dict() for g in rec.gpus],
        "sources": rec.manifest.get("sources"),
        "node_warnings": rec.manifest.get("warnings", []),
    }


def _write_run(rows, rec: Recording, opts: RunOptions, me: RankState, box: dict) -> None:
    """Rank 0, once its sampler has stopped: merge every rank's payload (or only its own, if the run ended
    before they were gathered) and write samples.arrows, summary.csv and the manifest."""
    payloads = box.get("payloads") or [me.payload()]
    reports = {p["node"]: p for p in payloads if p.get("rows") is not None}
    reports[me.launch.node] = {**me.payload(), **_node_report(rec, {"rows": []})}
    merged = merge.merge_rows(rows, payloads, {h["uuid"]: h["rank"] for h in me.table})
    present = set(rec.sampler.columns).union(*(p.get("columns") or () for p in reports.values()))
    columns = [c for c in COLUMNS if c in present]
    job = merge.job_links(payloads)
    peaks = {p["rank"]: merge.rank_peaks(p, merged, job) for p in payloads}
    order = {sc.name: i for i, sc in enumerate(opts.scenarios)}
    names = {p["rank"]: (p.get("info") or {}).get("name") or "" for p in payloads}
    summary = merge.summarize_ranks(merged, merge.merge_results(payloads), peaks, columns, order, names)
    tmp = opts.out_dir / f"{SAMPLES_FILE}.tmp"
    write_samples(tmp, merged, columns, keys=RANKED_SAMPLE_KEYS)
    tmp.replace(opts.out_dir / SAMPLES_FILE)
    write_summary(opts.out_dir, summary)
    box["summary"] = summary
    _record(rec, me, payloads, reports, peaks)


def _record(rec: Recording, me: RankState, payloads: list[dict], reports: dict, peaks: dict) -> None:
    m = rec.manifest
    for p in payloads:  # rank 0's own notes speak for the job (a scenario skipped on every rank)
        label = "" if p["rank"] == me.launch.rank else f"rank {p['rank']}: "
        m["warnings"] += [label + w for w in p["warnings"]]
        m["errors"] += [label + e for e in p["errors"]]
    for name, report in reports.items():
        if name != me.launch.node:
            m["warnings"] += [f"{name}: {w}" for w in report.get("node_warnings", [])]
    if len(payloads) < me.launch.world_size:
        m["warnings"].append(
            f"the run ended before the other ranks reported: only rank {me.launch.rank}'s "
            "results and its node's samples are here"
        )
    m.update(peaks=peaks.get(me.launch.rank), scenarios_done=[r["scenario"] for r in me.results])
    m["distributed"] = {
        "world_size": me.launch.world_size,
        "ranks_reported": len(payloads),
        "clock": CLOCK_NOTE,
        "ranks": [
            {
                "rank": p["rank"],
                "local_rank": p["local_rank"],
                "node": p["node"],
                "gpu": p["gpu"],
                "clock": p["clock"],
                "peaks": peaks[p["rank"]],
            }
            for p in payloads
        ],
        "nodes": {name: {"sampled": r.get("sampled"), "sources": r.get("sources")} for name, r in reports.items()},
    }
