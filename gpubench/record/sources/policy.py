"""Which metric sources a recording uses, and how often it may read them.

NVML always. The profiling metrics (SM active, occupancy, pipes, DRAM) from one of NVML GPM, DCGM or
CUPTI PM sampling, never two, since they read the same hardware counters, one reader at a time: `auto`
tries GPM (Hopper and newer: full resolution, no daemon, no CUDA context), then DCGM (through its host
engine, which may be the reader that holds the counters), then CUPTI (any GPU from Turing on, at the
cost of CUDA in this process), and keeps the first that opens; the others say why they are not used.
And the literal nvidia-smi process beside NVML. The sampling interval is never shorter than the
slowest chosen source refreshes: faster rows would only repeat values.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from . import Source, SourceUnavailable, source_class
from .gpm import UNSUPPORTED, GpmSource

DEFAULT_INTERVAL_S = 0.1  # GPM and DCGM refresh about every 100 ms
PROFILING = ("gpm", "dcgm", "cupti")  # the order `auto` tries them in
PROFILING_CHOICES = ("auto", *PROFILING, "none")
WHY_NOT = {  # a profiling source left untried, by the one that opened before it
    "gpm": (
        "NVML GPM works on this GPU and reads the same counters at full resolution, with no daemon and no CUDA "
        "context (--profiling {name} to use {name} instead)"
    ),
    "dcgm": "DCGM reads the same counters here (--profiling {name} to use {name} instead)",
}


@dataclass
class Opened:
    sources: list[Source]
    unavailable: dict[str, str]  # source name -> why it is not used, one sentence
    interval_s: float
    notes: list[str] = field(default_factory=list)


def profiling_order(profiling: str, gpus: list[int]) -> tuple[list[str], dict[str, str]]:
    """Profiling sources to try, in order, and the reason for any left out beforehand."""
    if profiling == "none":
        return [], {name: "--profiling none" for name in PROFILING}
    if profiling != "auto":
        return [profiling], {}
    if GpmSource.supported(gpus):
        return list(PROFILING), {}
    which = f"GPU {gpus[0]}" if len(gpus) == 1 else "a GPU sampled"
    return [n for n in PROFILING if n != "gpm"], {"gpm": f"{which} {UNSUPPORTED}"}


def open_sources(
    gpus: list[int], profiling: str = "auto", smi: bool = True, interval_s: float = DEFAULT_INTERVAL_S
) -> Opened:
    """Open NVML, the first profiling source that works, and nvidia-smi; say why any other is not used."""
    if profiling not in PROFILING_CHOICES:
        raise ValueError(f"profiling must be one of {PROFILING_CHOICES}")
    order, unavailable = profiling_order(profiling, gpus)
    groups = [["nvml"], order] + ([["smi"]] if smi else [])
    if not smi:
        unavailable["smi"] = "--no-smi"
    floor = max((source_class(n).min_interval_s for g in groups for n in g), default=0.0)
    notes = []
    if interval_s < floor:
        notes.append(
            f"the sampling interval was raised from {interval_s:g} s to {floor:g} s: the profiling "
            "counters refresh no faster"
        )
        interval_s = floor
    opened = []
    for group in groups:
        for name in group:
            cls = source_class(name)
            source = cls(interval_ms=int(round(interval_s * 1000))) if hasattr(cls, "executable") else cls()
            try:
                source.open(gpus)
            except SourceUnavailable as err:
                unavailable[name] = str(err)
                continue
            opened.append(source)
            unavailable.pop(name, None)
            notes.extend(getattr(source, "notes", []))
            for other in group[group.index(name) + 1 :] if name in WHY_NOT else ():
                unavailable.setdefault(other, WHY_NOT[name].format(name=other))
            break
    return Opened(opened, unavailable, interval_s, notes)


def open_given(sources: list[Source], gpus: list[int], interval_s: float) -> Opened:
    """Open sources a caller chose itself (tests, replays); same answer as open_sources."""
    opened, unavailable = [], {}
    for source in sources:
        try:
            source.open(gpus)
        except SourceUnavailable as err:
            unavailable[source.name] = str(err)
        else:
            opened.append(source)
    return Opened(opened, unavailable, interval_s)


def describe(sources: list[Source]) -> dict:
    """Each column's source and resolution, for the manifest."""
    return {c: {"source": s.name, "resolution": s.resolution.get(c, "")} for s in sources for c in s.columns}
