"""Whether gpu_benchmark times a call from a CUDA graph, decided on the GPU's time for it, never on the host's.

A call shorter than GRAPH_BELOW_US of GPU time is not timed from the host's launches: up to GRAPH_CALLS of
it are captured in one CUDA graph and each round is one replay, the calls back to back on the GPU with
nothing of the host between them. Launched one by one from a full queue, the GPU's own work for each launch
(about 1 us on an H100) moved a 2.8 us call by up to 6% from one run to the next; from a graph it moved
less than 0.1%. The GPU time in a first graph decides, and it moves a percent or less from run to run, so a
benchmark is timed the same way in every run; the host's pace (its launch time varied 13 to 20 us per call
between runs of one job) would not. A call that cannot be captured (it synchronizes, reads back to the host,
or launches on a stream torch does not capture) is launched one by one.
"""

from __future__ import annotations

from gpubench.truth.timing import GROUP_MS, calls_for

GRAPH_CALLS = 1000  # calls in one CUDA graph at most: a replay of calls shorter than GRAPH_BELOW_US lasts <= 50 ms
# A call shorter than this on the GPU is timed from a graph: the GPU's own work for each launch (about 1 us on
# an H100) is 2% of it or more, and moved a 2.8 us call by up to 6% from one run to the next.
GRAPH_BELOW_US = 50.0
# Calls back to back shorter than this (the host may set their pace, so their GPU time is no more) are tried
# in a graph to learn their GPU time; a longer one is not short enough to be timed from one.
GRAPH_PROBE_MS = 1.0


class GraphRefused(RuntimeError):
    """The call could not be captured in a CUDA graph; the message says why, in one clause."""


def try_graph(call_ms: float, flush: bool, want: bool | None) -> bool:
    """Whether to capture the call in a CUDA graph: wanted (True), not (False), or by default when calls back
    to back took less than GRAPH_PROBE_MS, to learn its GPU time. Never with the flush: a flushed round is
    one call."""
    if flush or want is False:
        return False
    return want is True or call_ms < GRAPH_PROBE_MS


def graph_wins(graph_call_ms: float, want: bool | None) -> bool:
    """Whether rounds are replays of the graph: wanted, or the call's GPU time in the graph is below
    GRAPH_BELOW_US. Decided on that GPU time, which moves a percent or less from run to run, so one benchmark
    is timed the same way in every run (a time from the host's launches would decide by the host's pace)."""
    return want is True or graph_call_ms * 1e3 < GRAPH_BELOW_US


def graph_or_not(dev, run, call_ms: float, flush: bool, asked: bool | None, before: bool | None = None):
    """What the rounds time and how: (the target, one call's GPU time in ms, calls per graph or 0, why a call
    short enough for a graph could not be captured or None). asked: the caller's graph=; before: how the
    baseline timed this benchmark (True: from a graph), which a run follows unless asked otherwise, so
    that a call that grew past GRAPH_BELOW_US is still compared with its baseline, and reads slower."""
    want = asked if asked is not None else before
    if not try_graph(call_ms, flush, want):
        return run, call_ms, 0, None
    calls = min(GRAPH_CALLS, calls_for(call_ms, GROUP_MS))
    try:
        replay, graph_ms = dev.graph(run, calls)
    except GraphRefused as err:
        if asked is True:
            raise ValueError(f"gpu_benchmark: graph=True, but {err}") from None
        # said where the call would have been timed from a graph: wanted, or short enough
        return run, call_ms, 0, str(err) if want or call_ms * 1e3 < GRAPH_BELOW_US else None
    if not graph_wins(graph_ms, want):
        return run, call_ms, 0, None  # the first graph is dropped with its memory
    wanted = min(GRAPH_CALLS, calls_for(graph_ms, GROUP_MS))
    if wanted >= 2 * calls:  # the host's pace hid how short the call is: a graph of about GROUP_MS
        try:
            replay, graph_ms = dev.graph(run, wanted)
            calls = wanted
        except GraphRefused:
            pass  # the first graph times the call as well, in shorter replays
    return replay, graph_ms, calls, None
