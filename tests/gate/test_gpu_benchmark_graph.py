"""Which calls gpu_benchmark times from a CUDA graph, without a GPU: a call short in GPU time, whatever pace the
host kept, as its baseline did, and a call that cannot be captured launched by the host (the rest of the fixture:
test_gpu_benchmark.py; the graph on a real GPU: test_gpu_graph.py)."""

import pytest

from gpubench.gate.graph import GRAPH_BELOW_US, GRAPH_CALLS, GRAPH_PROBE_MS, GraphRefused, graph_or_not


class GraphDevice:
    """A device whose graphs run each call in call_us of GPU time, or refuse to capture."""

    def __init__(self, call_us, refuse=None):
        self.call_us, self.refuse, self.captures = call_us, refuse, []

    def graph(self, run, calls):
        self.captures.append(calls)
        if self.refuse:
            raise GraphRefused(self.refuse)
        return f"replay of {calls}", self.call_us / 1e3


def run():
    pass


@pytest.mark.parametrize("host_us", [12.0, 20.0, 45.0, 200.0, 900.0])
def test_a_call_short_on_the_gpu_is_timed_from_a_graph_whatever_pace_the_host_kept(host_us):
    """The host's pace (the warm-up's time per call) only decides whether to look; the GPU time decides."""
    dev = GraphDevice(call_us=2.8)
    timed, call_ms, calls, refused = graph_or_not(dev, run, host_us / 1e3, flush=False, asked=None)
    assert (timed, calls, refused) == (f"replay of {GRAPH_CALLS}", GRAPH_CALLS, None)
    assert call_ms == pytest.approx(2.8e-3)
    assert dev.captures[-1] == GRAPH_CALLS  # a first graph the host's pace made small is captured again, whole


@pytest.mark.parametrize(
    "call_us, host_us, flush, asked, expected_calls",
    [
        (GRAPH_BELOW_US + 1, GRAPH_BELOW_US + 5, False, None, 0),  # long enough on the GPU: the host's launches
        (GRAPH_BELOW_US - 1, GRAPH_BELOW_US + 5, False, None, 20_000 // int(GRAPH_BELOW_US + 5)),  # one graph
        (2.8, GRAPH_PROBE_MS * 1e3 + 1, False, None, 0),  # the host took 1 ms a call: not looked at
        (2.8, 12.0, True, None, 0),  # a flushed round is one call
        (2.8, 12.0, False, False, 0),  # refused
        (400.0, 500.0, False, True, 40),  # asked for: a graph of about 20 ms
    ],
)
def test_which_calls_are_timed_from_a_graph(call_us, host_us, flush, asked, expected_calls):
    dev = GraphDevice(call_us)
    _, _, calls, _ = graph_or_not(dev, run, host_us / 1e3, flush, asked)
    assert calls == expected_calls
    assert (dev.captures != []) is (not flush and asked is not False and (asked or host_us < GRAPH_PROBE_MS * 1e3))


@pytest.mark.parametrize(
    "call_us, before, asked, expected_calls",
    [
        (60.0, True, None, 333),  # grew past 50 us since the baseline: still from a graph, and compared
        (2.8, False, None, 0),  # the baseline launched it one by one: so does the run
        (2.8, None, None, GRAPH_CALLS),  # no baseline: decided afresh
        (60.0, True, False, 0),  # the caller's graph= wins over the baseline
    ],
)
def test_a_run_times_a_benchmark_as_its_baseline_did(call_us, before, asked, expected_calls):
    _, _, calls, _ = graph_or_not(GraphDevice(call_us), run, call_us / 1e3, False, asked, before)
    assert calls == expected_calls


def test_a_second_capture_that_fails_keeps_the_first_graph():
    class Once(GraphDevice):
        def graph(self, run, calls):
            if self.captures:
                self.captures.append(calls)
                raise GraphRefused("no memory for a second graph")
            return super().graph(run, calls)

    timed, call_ms, calls, refused = graph_or_not(Once(2.8), run, 0.5, False, None)
    assert (timed, calls, refused) == ("replay of 40", 40, None) and call_ms == pytest.approx(2.8e-3)


def test_a_call_that_cannot_be_captured_is_launched_by_the_host_and_why_is_said_if_it_was_short():
    why = "the call could not be captured in a CUDA graph (operation not permitted)"
    assert graph_or_not(GraphDevice(2.8, why), run, 0.012, False, None) == (run, 0.012, 0, why)
    assert graph_or_not(GraphDevice(2.8, why), run, 0.5, False, None) == (run, 0.5, 0, None)  # not short: no word
    with pytest.raises(ValueError, match="graph=True, but the call could not be captured"):
        graph_or_not(GraphDevice(2.8, why), run, 0.5, False, True)
