"""Which GPU each process's steps are credited to, and which GPUs the job used.

A process's steps carry the UUID of the GPU it ran on (where it ran CUDA through torch): they are
credited to that GPU only. A process without one is credited to the one GPU it held a context on, or to
the job's only GPU; else to none, and the summary says so. The job used the GPUs its processes held a
context on (gpubench.job.contexts) and those its steps were credited to; the others were idle.
"""

from __future__ import annotations

from gpubench.job.markreader import Steps, Stream


def credit(events, gpus: list, contexts: dict[int, set[int]]) -> tuple[dict[Stream, int], list[int], list[str]]:
    """(stream -> NVML index, the NVML indices the job used, notes)."""
    by_uuid = {g.uuid: g.nvml_index for g in gpus}
    streams: dict[Stream, set[str]] = {}
    for e in events:
        if isinstance(e, Steps):
            streams.setdefault(e.stream, set()).add(e.uuid)
    out, notes, unknown = {}, [], []
    for stream, uuids in streams.items():
        known = [by_uuid[u] for u in uuids if u in by_uuid]
        if known:
            out[stream] = known[0]
            if len(set(known)) > 1:
                notes.append(f"{stream.label} stepped on several GPUs; its steps are credited to GPU {known[0]}")
            continue
        held = [g for g, pids in contexts.items() if stream.pid in pids]
        if len(held) == 1:
            out[stream] = held[0]
        else:
            unknown.append(stream)
    used = set(out.values()) | set(contexts)
    only = sorted(used) if len(used) == 1 else [gpus[0].nvml_index] if len(gpus) == 1 else []
    for stream in unknown:
        if only:
            out[stream] = only[0]
        else:
            notes.append(
                f"the steps of {stream.label} are credited to no GPU: it told no GPU UUID (no CUDA through "
                "torch) and held a context on none, or on several, of the sampled GPUs"
            )
    used |= set(out.values())
    if not used:
        used = {g.nvml_index for g in gpus}
        if len(gpus) > 1:
            notes.append(
                "which GPUs the job used could not be told (no process of it was seen holding a GPU, and no "
                "step named one): every sampled GPU is summarized"
            )
    ranks: dict[int | None, set[int]] = {}
    for stream in streams:
        ranks.setdefault(stream.rank, set()).add(stream.pid)
    for rank, pids in ranks.items():
        if rank is not None and len(pids) > 1:
            notes.append(
                f"rank {rank} is claimed by {len(pids)} processes ({', '.join(map(str, sorted(pids)))}): "
                "each is a stream of its own"
            )
    return out, sorted(used), notes
