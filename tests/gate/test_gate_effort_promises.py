"""The gate's promises, kept with adaptive effort, on synthetic benchmarks whose rounds come as a GPU gives them.

Each benchmark below is a call of the gate set's sizes, its rounds scattered, stepped by the timer, held up by
the host, now and then 8 times the work, or swaying with a clock at its power limit, and each process moving
it by an effect of its own (the spreads the H100's and the H200's runs measured). Its baseline is made as the
gate makes it: the first process's rounds stop at a quarter of the floor the call's time needs, the floor
processes' at that too until three processes show a spread, then at the spread of the processes so far, and
processes stop once its floor is settled (gate.processes); a run against
it stops at a quarter of its floor and is judged by the gate's own code. Then, for every seed:

- no unchanged run reads `slower` or `faster`;
- 5% more time reads `slower` for every call of 100 us or more;
- 10% more time reads `slower` or `unsure` (never `same`) for every call of 10 us or more.
"""

import math
from dataclasses import dataclass

import pytest

from gpubench.gate import effort, floor, processes
from gpubench.gate.against_baseline import compare_run
from gpubench.gate.judgement import LEVEL
from gpubench.gate.rounds import usable
from gpubench.stats import change_intervals

np = pytest.importorskip("numpy")
STEP_S = 32e-9  # CUDA events on an H100 and an H200 tick in steps of 32 ns
LEAST = 1.0
MOST_PROCESSES = 8
FULL = "t.py::test_call"
SEEDS = (1, 2)
UNCHANGED = 10  # unchanged runs per seed and benchmark


@dataclass(frozen=True)
class Call:
    """A synthetic benchmark: its call, how its rounds scatter, how far a process moves it, and the rounds that
    --gpu-min-time and --gpu-max-time give it (fewer than a GPU would run, so the bootstrap stays quick here)."""

    name: str
    call_us: float
    round_sd: float  # a round's own scatter (log)
    process_pct: float  # the sd of a process's effect, in percent
    calls: int = 1  # calls per round: the timer's step is divided by them
    least: int = 10
    most: int = 100
    held: float = 0.0  # share of rounds the host held up 0.6 ms (the clock marks them late)
    heavy_every: int = 0  # every Nth round does 8 times the work (nothing marks it)
    sway_pct: float = 0.0  # a clock at its power limit swaying by this much, a period of 80 rounds


CALLS = (
    Call("saxpy 636 us, 30 calls a round", 636.0, 0.0003, 0.03, calls=30, least=10, most=50),
    Call("sum 126 us, 154 calls a round", 126.0, 0.0003, 0.14, calls=154, least=10, most=50),
    Call("fma 1.2 ms, flushed", 1208.0, 0.0005, 0.3, least=40, most=300),
    Call("fma 55 ms, flushed", 55_000.0, 0.002, 0.1, least=10, most=18),
    Call("softmax 34 us, graph of 500", 34.3, 0.0008, 0.06, calls=500, least=10, most=60),
    Call("matmul 27 us at a power cap, flushed", 26.7, 0.01, 0.5, least=150, most=600, sway_pct=3.0),
    Call("sum 14 us with outliers, flushed", 14.7, 0.03, 0.35, least=150, most=600, held=0.02, heavy_every=97),
    Call("matmul 6 us, flushed", 6.3, 0.04, 1.1, least=150, most=600),
)


class Process:
    """One process of a call: its own effect, then rounds as run_rounds asks for them."""

    def __init__(self, call: Call, rng, more_pct: float = 0.0):
        self.call, self.rng = call, rng
        self.per_call_s = call.call_us * 1e-6 * (1 + rng.normal(0, call.process_pct) / 100) * (1 + more_pct / 100)
        self.phase = rng.uniform(0, 2 * math.pi)
        self.late: list[bool] = []

    def one_round(self) -> float:
        c, i = self.call, len(self.late)
        x = self.per_call_s * math.exp(c.round_sd * self.rng.standard_normal())
        x *= 1 + c.sway_pct / 100 * math.sin(self.phase + 2 * math.pi * i / 80)
        if c.heavy_every and i % c.heavy_every == c.heavy_every - 1:
            x += 7 * self.per_call_s / c.calls
        held = bool(self.rng.random() < c.held)
        if held:
            x += 0.6e-3 / c.calls
        self.late.append(held)
        return max(1, round(x * c.calls / STEP_S)) * STEP_S / c.calls

    def run(self, target: effort.Target) -> tuple[list[float], dict]:
        stopped = effort.run_rounds(
            self.one_round, target, lambda: (self.call.least, self.call.most), late=lambda: self.late
        )
        info = {"rounds_host_late": [i for i, x in enumerate(self.late) if x], "calls_per_round": self.call.calls}
        return stopped.rounds, info


def baseline(call: Call, rng) -> dict:
    """The baseline the gate would save: the first process, then floor processes until its floor is settled."""
    first, info = Process(call, rng).run(effort.duty_target(LEAST).at(call.call_us * 1e-6))
    median = float(np.median(first))
    data = {
        "benchmarks": [
            {"fullname": FULL, "name": call.name, "stats": {"median": median, "data": first}, "extra_info": info}
        ]
    }
    data = floor.started(data, MOST_PROCESSES)
    before = usable(first, info)
    while not processes.status(data, FULL, LEAST)[0]:
        fs = floor.floors(data, FULL, LEAST)
        most = effort.FLOOR_SHARE * processes.duty(median)[0]
        target = (
            effort.spread_target(fs, LEAST, most) if fs["median"].processes >= 3 else effort.duty_target(LEAST, median)
        )
        rounds, now = Process(call, rng).run(target)
        # a rerun keeps its changes' points (the floor reads nothing else); few resamples give the same points
        raw = change_intervals(before, usable(rounds, now), level=LEVEL, reps=10)
        data, _ = floor.with_rerun(data, {FULL: raw}, "t", None)
    return data


def verdict(call: Call, data: dict, rng, more_pct: float = 0.0) -> str:
    target = effort.floor_target(floor.floors(data, FULL, LEAST), LEAST)
    rounds, info = Process(call, rng, more_pct).run(target)
    (c,) = compare_run(data, {FULL: {"name": call.name, "rounds": rounds, "extra_info": info}}, LEAST)
    return c.verdict.word


@pytest.fixture(scope="module", params=CALLS, ids=lambda c: c.name)
def made(request):
    """Per seed: the baseline and the words of unchanged runs, 5% and 10% more time."""
    call = request.param
    out = []
    for seed in SEEDS:
        rng = np.random.default_rng(seed)
        data = baseline(call, rng)
        words = [verdict(call, data, rng) for _ in range(UNCHANGED)]
        out.append((data, words, verdict(call, data, rng, 5.0), verdict(call, data, rng, 10.0)))
    return call, out


def test_no_unchanged_run_reads_slower_or_faster(made):
    call, seeds = made
    for data, words, _, _ in seeds:
        assert words.count("slower") + words.count("faster") == 0, (call.name, words)


def test_five_percent_more_reads_slower_from_100_us_and_ten_percent_never_same_from_10_us(made):
    call, seeds = made
    for _, _, five, ten in seeds:
        if call.call_us >= 100:
            assert (five, ten) == ("slower", "slower"), call.name
        elif call.call_us >= 10:
            assert ten in ("slower", "unsure"), call.name


def test_each_floor_is_settled_by_as_few_processes_as_it_needs(made):
    """The quiet calls settle early; every floor of a promised call is within what it needs, or from the most."""
    call, seeds = made
    for data, *_ in seeds:
        f = floor.floors(data, FULL, LEAST)["median"]
        wanted, _ = processes.duty(call.call_us * 1e-6)
        assert f.processes == MOST_PROCESSES or (f.processes >= processes.MIN_PROCESSES and f.width <= wanted)
        assert f.early is (f.processes < MOST_PROCESSES)
        if call.process_pct <= 0.06:
            assert f.processes <= 5, (call.name, f)
