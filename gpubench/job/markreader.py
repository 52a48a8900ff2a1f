"""The lines of the marks file a watched job writes (marks.tsv), each read as a Mark, Steps or Pattern; the file
itself, whole or as it grows, is read by gpubench.job.markfile.

The lines are gpubench.inside.markline's (each written whole by one process, gpubench.inside.markwriter):

    M  t        rank pid uuid clock  name
    S  t_first  rank pid uuid clock  t_last n counted flops hw_flops bytes tokens bad lead_s

M starts a phase. S gathers n steps whose stamps ran from t_first to t_last: `counted` of them gave
usable FLOPs, summed in flops (model FLOPs) and hw_flops (every FLOP that ran), `bad` gave values that
were not numbers, bytes and tokens are sums, lead_s the mean time by which the host's step() call came
before the GPU reached it. Times are time.monotonic() seconds; `clock` says whether the GPU's timeline
("gpu") or the host's ("host") stamped them; rank is empty where the process had none; uuid names the GPU
the process ran on ("" where unknown), and SAME ("=") says it is the one of that process's previous line.
A stream of steps is one process: (rank, pid). A and C lines are S lines of steps that the job did not
report itself: its optimizer's steps, seen by gpubench's hook (gpubench.inside.autohook); a C line is the one
step whose FLOPs gpubench counted. A P line (a Pattern) says that the process's A and C steps after its first
`written` are each one pattern of several optimizers' steps, and takes back the last `back` of those first
(gpubench.inside.markline; gpubench.job.provenance.resolve applies it).

Lines of the earlier one-line-per-call format (t, rank, pid, "mark"|"step", name or FLOPs) are read too,
each step as a one-step S.

Garbage is left out and said, never averaged in: a line whose time is not a time on the monotonic clock
(negative, NaN, infinite, past LONGEST_TIME_S, a step group that ends before it starts) or that is not a
line of marks at all is skipped, and the reader counts what it skipped and why
(gpubench.job.markfile.Reader.note), for the watch to say. A name is cleaned as gpubench.mark cleans it (one
line, at most NAME_MAX characters, control characters written out), whoever wrote the file. A byte-order mark
before the first line is no part of it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from gpubench.inside.markline import MARK, MARK_LINE, ORIGINS, PATTERN, PATTERN_LINE, SAME, SEP, STEPS_LINE
from gpubench.inside.markwriter import clean_name
from gpubench.record.schema import LONGEST_TIME_S
from gpubench.usage import visible


@dataclass(frozen=True)
class Stream:
    """One process of the job: its rank (None where it had none) and its pid."""

    rank: int | None
    pid: int

    @property
    def label(self) -> str:
        return f"rank {self.rank}" if self.rank is not None else f"pid {self.pid}"

    def order(self) -> tuple:
        return (self.rank is None, self.rank if self.rank is not None else 0, self.pid)


@dataclass(frozen=True)
class Mark:
    t: float
    stream: Stream
    uuid: str
    clock: str
    name: str
    kind = "mark"


@dataclass(frozen=True)
class Steps:
    t_first: float
    stream: Stream
    uuid: str
    clock: str
    t_last: float
    n: int
    counted: int
    flops: float
    hw_flops: float
    bytes: float
    tokens: float
    bad: int
    lead_s: float
    origin: str = "step"  # who reported them: ORIGINS
    pattern: str = ""  # the optimizers' pattern each step is one of, where a P line said it (provenance.resolve)
    kind = "steps"

    @property
    def t(self) -> float:
        return self.t_first


@dataclass(frozen=True)
class Pattern:
    """A P line: the hook's steps of `stream` after its first `written` are each one `name` (a pattern of
    optimizer steps), and the last `back` of those are taken back."""

    t: float
    stream: Stream
    uuid: str
    clock: str
    written: int
    back: int
    name: str
    kind = "pattern"


def _rank(text: str) -> int | None:
    return int(text) if text else None


_streams: dict[tuple[str, str], Stream] = {}  # one Stream per (rank, pid) text: a day of lines parses fast
INF = float("inf")


def _stream(rank: str, pid: str) -> Stream:
    found = _streams.get((rank, pid))
    if found is None:
        found = _streams[(rank, pid)] = Stream(_rank(rank), int(pid))
    return found


class BadTime(ValueError):
    """A line whose time is not a time on the monotonic clock."""


def _time(text: str) -> float:
    t = float(text)
    if not (0 <= t <= LONGEST_TIME_S):  # NaN fails too
        raise BadTime(text)
    return t


def _uuid(stream: Stream, text: str, uuids: dict) -> str:
    if text == SAME:
        return uuids.get(stream, "")
    uuids[stream] = text
    return text


M, S, P = MARK_LINE.at, STEPS_LINE.at, PATTERN_LINE.at  # each field's place in its line


def _parse_new(p: list[str], uuids: dict):
    if p[0] == MARK and len(p) == MARK_LINE.width:
        t = _time(p[M.t])
        stream = _stream(p[M.rank], p[M.pid])
        return Mark(t, stream, _uuid(stream, p[M.uuid], uuids), p[M.clock], clean_name(p[M.name]))
    if p[0] in ORIGINS and len(p) == STEPS_LINE.width:
        t_first, t_last, n = _time(p[S.t_first]), _time(p[S.t_last]), int(p[S.n])
        counted, bad = int(p[S.counted]), int(p[S.bad])
        if t_last < t_first:
            raise BadTime(p[S.t_last])
        lead_s = float(p[S.lead_s])
        if not (n >= 1 and 0 <= counted <= n and 0 <= bad <= n and math.isfinite(lead_s)):
            return None
        flops, hw_flops = float(p[S.flops]), float(p[S.hw_flops])
        nbytes, tokens = float(p[S.bytes]), float(p[S.tokens])
        if not (0 <= flops < INF and 0 <= hw_flops < INF and 0 <= nbytes < INF and 0 <= tokens < INF):
            return None
        stream = _stream(p[S.rank], p[S.pid])
        return Steps(
            t_first,
            stream,
            _uuid(stream, p[S.uuid], uuids),
            p[S.clock],
            t_last,
            n,
            counted,
            flops,
            hw_flops,
            nbytes,
            tokens,
            bad,
            lead_s,
            ORIGINS[p[0]],
        )
    if p[0] == PATTERN and len(p) == PATTERN_LINE.width:
        t, written, back = _time(p[P.t]), int(p[P.written]), int(p[P.back])
        if not 0 <= back <= written:
            return None
        stream = _stream(p[P.rank], p[P.pid])
        return Pattern(t, stream, _uuid(stream, p[P.uuid], uuids), p[P.clock], written, back, clean_name(p[P.pattern]))
    return None


def _parse_old(p: list[str]):
    t, stream = _time(p[0]), Stream(int(p[1]), int(p[2]))
    if p[3] == "mark":
        return Mark(t, stream, "", "host", clean_name(p[4]))
    flops = float(p[4]) if p[4] else None
    counted = flops is not None and flops >= 0 and flops != float("inf")
    # gpubench.count_flops then gave one count, of every FLOP that ran (recomputation and the whole T x T
    # attention included): the hardware count; the model count was not written, so it is not known (NaN)
    return Steps(
        t,
        stream,
        "",
        "host",
        t,
        1,
        int(counted),
        math.nan if counted else 0.0,
        flops if counted else 0.0,
        0.0,
        0.0,
        0,
        0.0,
    )


def parse(line: str, uuids: dict | None = None, why: list | None = None):
    """One line of a marks file as a Mark or Steps; None for a line that is not one (skipped, never fatal),
    with the reason appended to why where given. uuids: each stream's last uuid, which a line's "=" refers
    to (kept by the caller from line to line)."""
    p = line.rstrip("\n").split(SEP)
    try:
        if p[0] == MARK or p[0] in ORIGINS or p[0] == PATTERN:
            found = _parse_new(p, {} if uuids is None else uuids)
        elif len(p) == 5 and p[3] in ("mark", "step"):
            found = _parse_old(p)
        else:
            found = None
    except BadTime as err:
        if why is not None:
            why.append(("time", visible(str(err)[:40])))
        return None
    except (ValueError, IndexError, OverflowError):
        found = None
    if found is None and why is not None:
        why.append(("line", ""))
    return found
