"""How many processes measure each benchmark's floor (gate.processes): a floor is settled once it is as narrow as
its benchmark needs or at the least floor, from four processes on, or at the most the command allows; later
floor processes leave settled benchmarks out and the command stops once none is left. A floor from fewer
processes than the most is the bound at 1 in 10,000, which keeps the stop from letting unchanged processes
past it more often than one time in a thousand (simulated here); how sure a floor is, in the range its spread
gives the floor of endless processes."""

import json
import math

import pytest

from gpubench.gate import floor, processes
from gpubench.stats import STATISTICS, Interval
from gatefakes import PLUGINS, fake_gpu, no_autoload, spawned

FIXTURES = (fake_gpu, no_autoload, spawned)  # pytest finds them by their names in this module

np = pytest.importorskip("numpy")
pytest_plugins = ["pytester"]


def baseline(points: list[float], median_s: float = 1e-3, most: int | None = 8) -> dict:
    """A baseline of benchmark t whose processes landed at these changes (percent) from its first."""
    data = {"benchmarks": [{"fullname": "t", "name": "t", "stats": {"median": median_s, "data": [median_s] * 3}}]}
    if most is not None:
        data = floor.started(data, most)
    for p in points:
        data, _ = floor.with_rerun(data, {"t": {s: Interval(p, p, p) for s in STATISTICS}}, "when", None)
    return data


@pytest.mark.parametrize(
    "points, median_s, settled, said",
    [
        ([0.1, -0.1], 1e-3, False, "3 processes: a floor needs 4 or more"),
        ([0.01, -0.01, 0.0], 1e-3, True, "at the least floor"),  # 31 x 0.01%: the least floor, 1%
        ([0.05, -0.05, 0.02], 1e-3, True, "within the 3% it needs (5% more work must read slower)"),
        ([0.3, -0.3, 0.2], 1e-3, False, "wider than the 3% it needs"),
        ([0.3, -0.3, 0.2], 20e-6, False, "wider than the 6% it needs (10% more work must not read same)"),
        ([0.3, -0.3, 0.2, -0.2, 0.1, -0.1, 0.0], 1e-3, True, "measured by the most processes, 8"),
        ([0.5, -0.5, 0.4, -0.4], 5e-6, True, "at the least floor, 12%"),  # a short call's least floor
    ],
)
def test_a_floor_is_settled_when_as_narrow_as_its_benchmark_needs(points, median_s, settled, said):
    got, why = processes.status(baseline(points, median_s), "t", 1.0)
    assert got is settled and why.startswith(said), why


def test_a_baseline_that_sets_no_most_is_measured_by_every_floor_process():
    got, why = processes.status(baseline([0.0] * 5, most=None), "t", 1.0)
    assert not got and "no most" in why


def test_a_floor_of_fewer_processes_than_the_most_is_the_stricter_bound():
    points = [0.3, -0.3, 0.2, -0.2]
    early, full = (floor.floors(baseline(points, most=m), "t", 0.0)["median"] for m in (8, 5))
    assert early.early and not full.early and early.spread == full.spread
    assert early.width / full.width == pytest.approx(floor.multiplier(5, True) / floor.multiplier(5), rel=1e-9)
    assert floor.multiplier(4, True) == pytest.approx(31.30, abs=0.01)  # t(3) at 0.99995, x sqrt(1 + 1/4)


def test_the_stricter_t_quantiles_are_students():
    stats = pytest.importorskip("scipy.stats")
    for df in (1, 3, 7, 30, 31, 60):
        assert floor.t_quantile(df, True) == pytest.approx(stats.t.ppf(1 - floor.FALSE_ALARM_EARLY / 2, df), rel=2e-3)


def sequential(worlds: int, wanted: float, early: bool, seed: int = 0) -> tuple[float, float]:
    """Processes whose effects are normal with a spread of 1, measured one after another from MIN_PROCESSES to 8
    and stopped once the floor is within `wanted` (in spreads): how often the next process lands beyond the floor
    it stopped at, and how many processes it took on average."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((worlds, 9))
    done, beyond, count = np.zeros(worlds, bool), np.zeros(worlds, bool), np.zeros(worlds)
    for k in range(processes.MIN_PROCESSES, 9):
        s, m = x[:, :k].std(axis=1, ddof=1), x[:, :k].mean(axis=1)
        width = floor.multiplier(k, early and k < 8) * s
        stop = ~done & ((width <= wanted) | (k == 8))
        beyond[stop], count[stop] = (np.abs(x[:, 8] - m) > width)[stop], k
        done |= stop
    return float(beyond.mean()), float(count.mean())


def test_stopping_when_the_floor_is_narrow_enough_lets_unchanged_processes_past_it_no_more_than_a_fixed_count():
    """Stopping is chosen on the spread itself: where the floor needed is a few spreads, the rare early stops
    come on spreads that came out small, and at the plain bound an unchanged process lands past the floor about
    twice as often as its 1 in 1000. The stricter bound brings it back."""
    fixed = np.mean([sequential(200_000, 0.0, False, seed)[0] for seed in (1, 2)])  # never stops early
    assert fixed == pytest.approx(floor.FALSE_ALARM, rel=0.25)
    plain = max(sequential(200_000, w, False)[0] for w in (2.0, 3.0))
    assert plain > 1.7 * floor.FALSE_ALARM
    for wanted in (1.5, 2.0, 3.0, 4.0, 6.0, 10.0, 30.0):
        rate, count = sequential(200_000, wanted, True)
        assert rate < 1.35 * floor.FALSE_ALARM, wanted
    assert sequential(200_000, 30.0, True)[1] < 5.5  # a quiet benchmark needs few processes


def test_how_sure_a_floor_is_the_range_of_the_floor_of_endless_processes():
    rng = np.random.default_rng(3)
    held, widths = 0, []
    for _ in range(2_000):
        x = rng.normal(0, 0.5, 5)
        f = floor.Floor(width=0.0, processes=5, spread=float(np.std(x, ddof=1)))
        lo, hi = processes.sure_range(f)
        held += lo <= floor.Z * 0.5 <= hi
        widths.append(hi / lo)
    assert 0.87 < held / 2_000 < 0.93  # 90%
    assert processes.sure_range(floor.Floor(1.0)) is None  # one process: no spread


def test_the_summary_says_each_floor_with_its_processes_and_how_sure(tmp_path):
    data = baseline([0.3, -0.3, 0.2, -0.2])
    (line,) = processes.summary(data, 1.0)
    assert line.startswith("  t: floor ") and "from 5 processes (bound at 1 in 10,000); 90% sure endless " in line
    assert line.endswith("wider than the 3% it needs (5% more work must read slower)")


# --- from one command ----------------------------------------------------------------------------------------

TWO = """
import os

def test_quiet(gpu_benchmark, gpu_device):
    gpu_benchmark(gpu_device.kernel, 1.0, flush_l2=False)

def test_noisy(gpu_benchmark, gpu_device):
    gpu_benchmark(gpu_device.kernel, float(os.environ["NOISY_MS"]), flush_l2=False)
"""
NOISY_MS = (1.0, 1.01, 0.99, 1.008, 0.992, 1.004, 0.996, 1.0)  # what each process does to the noisy call


def test_later_processes_leave_out_the_settled_benchmarks_and_the_command_stops_with_none_left(
    pytester, fake_gpu, spawned, monkeypatch, tmp_path
):
    pytester.makepyfile(test_two=TWO)
    pytester.makeconftest("def pytest_benchmark_generate_machine_info(config):\n    return {'node': 'test'}\n")
    effects, outs = iter(NOISY_MS[1:]), []

    def run(args, cwd):
        monkeypatch.setenv("NOISY_MS", str(next(effects)))
        r = pytester.runpytest(*args)
        outs.append(r.stdout.str())
        return r.ret

    spawned.run = run
    monkeypatch.setenv("NOISY_MS", str(NOISY_MS[0]))
    out = tmp_path / "out"
    r = pytester.runpytest(
        *PLUGINS, "--gpu-min-time=0.02", "--gpu-settle=0.01", f"--gpu-save-baseline={out}", "--gpu-baseline-runs=6"
    )
    assert r.ret == 0 and len(spawned) == 5
    # the quiet call settles at 4 processes (its floor at the least floor); runs 5 and 6 time the noisy one alone
    assert ["1 benchmark left out, their floors settled" in o for o in outs] == [False, False, False, True, True]
    data = json.loads((out / "h100-80gb-hbm3.json").read_text())
    counts = data["gpubench"]["floor_processes"]
    assert counts == {"test_two.py::test_quiet": 4, "test_two.py::test_noisy": 6}
    text = r.stdout.str()
    assert "run 5 of at most 6, a fresh process measuring its floor for 1 benchmark whose floors need it" in text
    assert (
        "  test_quiet: floor 1.00% from 4 processes (bound at 1 in 10,000); 90% sure endless processes would "
        "give 1%;" in text
    )
    assert "test_noisy: floor" in text and "measured by the most processes, 6" in text
    assert math.isfinite(floor.floors(data, "test_two.py::test_noisy", 1.0)["median"].width)


def test_the_command_stops_once_every_floor_is_settled(pytester, fake_gpu, spawned, monkeypatch, tmp_path):
    pytester.makepyfile(test_two=TWO)
    pytester.makeconftest("def pytest_benchmark_generate_machine_info(config):\n    return {'node': 'test'}\n")
    monkeypatch.setenv("NOISY_MS", "1.0")
    spawned.run = lambda args, cwd: pytester.runpytest(*args).ret
    out = tmp_path / "out"
    r = pytester.runpytest(*PLUGINS, "--gpu-min-time=0.02", "--gpu-settle=0.01", f"--gpu-save-baseline={out}")
    assert r.ret == 0 and len(spawned) == 3
    assert "every benchmark's floor is settled after 4 processes" in r.stdout.str()
    assert "gpu baseline: 4 processes measured" in r.stdout.str()


class Clock:
    """A clock that each fake process moves on by its seconds."""

    def __init__(self, now: float):
        self.now = now

    def __call__(self) -> float:
        return self.now


def floor_processes(seconds: float, each_s: list[float], first_s: float = 20.0, runs: int = 8):
    """measure_floor's processes under --gpu-baseline-seconds, the first having taken first_s: (started, lines)."""
    from gpubench.gate import runs as benchruns

    clock, took, said = Clock(first_s), iter(each_s), []

    def run(args, cwd):
        clock.now += next(took)
        return 0

    rc, done = benchruns.measure_floor(
        ["x"],
        ".",
        "DIR",
        runs,
        lambda line, red: said.append(line),
        run=run,
        needed=lambda: ["t"],
        seconds=seconds,
        started=0.0,
        clock=clock,
    )
    assert rc == 0
    return done, clock.now, said


def test_no_floor_process_starts_that_would_end_past_the_commands_seconds():
    # the first process took 20 s; then 10 s each: 4 processes by 50 s, 5 by 60 ... 8 by 90
    assert floor_processes(0.0, [10.0] * 7)[:2] == (8, 90.0)  # no limit
    assert floor_processes(110.0, [10.0] * 7)[:2] == (8, 90.0)  # the limit not reached
    done, ended, said = floor_processes(75.0, [10.0] * 7)
    assert (done, ended) == (6, 70.0)  # a 7th would have ended at 80 s
    assert said[-1] == (
        "gpu baseline: 6 processes in 70 s; another (about 10 s) would end past "
        "--gpu-baseline-seconds 75, so the floors still open come from these"
    )
    # a slow process sets the estimate; before any rerun the first process's own time does
    assert floor_processes(75.0, [10.0, 25.0] + [10.0] * 5)[:2] == (4, 65.0)
    assert floor_processes(45.0, [10.0] * 7)[:2] == (4, 50.0)  # never fewer than four, whatever the time


def test_the_baseline_seconds_are_a_non_negative_number(pytester, fake_gpu):
    pytester.makepyfile(test_k="def test_k():\n    pass\n")
    r = pytester.runpytest(*PLUGINS, "--gpu-baseline-seconds=-1")
    assert r.ret == pytest.ExitCode.USAGE_ERROR and "--gpu-baseline-seconds" in r.stderr.str()
