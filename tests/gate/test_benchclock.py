"""The CUDA-event clock of the benchmarks, with a fake event: a failed round must not poison the next, the
blocking kernel goes ahead of the start event, and the clocks are read once the round is over."""

import itertools

import pytest

from gpubench.gate import clock as benchclock


class FakeEvent:
    now = itertools.count(0.0, 1.0)  # ms of GPU time at each record()

    def __init__(self, enable_timing=True):
        self.t = None

    def record(self):
        self.t = next(FakeEvent.now)

    def synchronize(self):
        pass

    def elapsed_time(self, end):
        return end.t - self.t


@pytest.fixture
def clock(monkeypatch):
    torch = pytest.importorskip("torch")
    monkeypatch.setattr(torch.cuda, "Event", FakeEvent)
    FakeEvent.now = itertools.count(0.0, 1.0)
    return benchclock.CudaEventClock()


def round_of(clock):
    start = clock()
    return clock() - start


def test_a_round_is_the_gpu_time_between_its_two_events(clock):
    assert round_of(clock) == pytest.approx(1e-3)


def test_a_round_whose_target_raised_does_not_poison_the_next(clock):
    clock()  # a round starts; its target raises, so the closing call never comes
    clock.reset()  # the fixture resets the clock before each benchmark
    assert round_of(clock) == pytest.approx(1e-3)


def test_a_zero_time_round_is_an_error(clock, monkeypatch):
    monkeypatch.setattr(FakeEvent, "now", itertools.repeat(5.0))
    with pytest.raises(benchclock.ClockError, match="no round takes none"):
        round_of(clock)


def test_the_lead_kernel_goes_ahead_of_the_start_event_and_the_clocks_are_read_after_the_round(clock, monkeypatch):
    order = []
    real_record = FakeEvent.record

    def record(self):
        order.append("event")
        real_record(self)

    monkeypatch.setattr(FakeEvent, "record", record)
    clock.attach(lead=lambda: order.append("lead"), on_round=lambda: order.append("read") or (1980.0, 4))
    round_of(clock)
    round_of(clock)
    assert order == ["lead", "event", "event", "read"] * 2
    assert clock.detach() == [(1980.0, 4), (1980.0, 4)]
    assert clock.lead is None and clock.on_round is None
    order.clear()
    round_of(clock)  # detached: no lead, nothing read
    assert order == ["event", "event"] and clock.rounds == [(1980.0, 4), (1980.0, 4)]
    clock.attach()
    assert clock.rounds == []  # the next benchmark starts with no rounds of the last
