"""What the pytest plugin's tests share: a fake GPU and host whose clocks the benchmarked calls advance, a
user's test suite with one or two GPU benchmarks, a saved baseline file, and the sessions a baseline's
other runs would start (recorded instead)."""

import itertools
import json
from pathlib import Path

import pytest

from gpubench.gate import configure
from gpubench.gate import runs as benchruns
from gpubench.gate.clock import CLOCK
from gpubench.gate.graph import GraphRefused

ROOT = Path(__file__).resolve().parents[1]
PLUGIN = "gpubench.pytest_plugin"
# The sessions under test load pytest-benchmark and this plugin only, whatever else is installed here.
PLUGINS = ("-p", "pytest_benchmark.plugin", "-p", PLUGIN)
H100 = {
    "name": "NVIDIA H100 80GB HBM3",
    "uuid": "GPU-0a1b",
    "memory_mib": 81559.0,
    "driver": "580.65.06",
    "cuda_driver": "13.0",
    "power_limit_w": 700.0,
    "mig_mode": False,
}
H200 = {**H100, "name": "NVIDIA H200", "uuid": "GPU-9f8e", "memory_mib": 143771.0}

# A test as a user writes it: the fake device's kernel takes KERNEL_MS of GPU time per call; a second,
# tiny one (a few microseconds, far shorter than its launch) runs back to back.
TEST_KERNEL = """
import os

def test_kernel(gpu_benchmark, gpu_device):
    gpu_benchmark(gpu_device.kernel, float(os.environ["KERNEL_MS"]), flops=2e9, bytes=1e6, unit="fp32")
"""
TEST_TINY = """
import os

def test_tiny(gpu_benchmark, gpu_device):
    graph = {"auto": None, "no": False, "yes": True}[os.environ.get("TINY_GRAPH", "auto")]
    gpu_benchmark(gpu_device.kernel, float(os.environ["TINY_MS"]), flush_l2=False, graph=graph)
"""


class GpuClock:
    """A fake GPU and its host, in ms. A launch costs the host launch_ms and queues a kernel, which the GPU
    starts once it is free and the launch has happened; an event completes when the GPU reaches it, and
    synchronizing brings the host there. Kernels run jitter x their time, and boost x that while the GPU
    has been busy for less than boost_ms (a clock that falls as the GPU reaches its power limit)."""

    def __init__(self, launch_ms=0.0):
        self.host = self.gpu = self.busy = 0.0
        self.launch_ms = launch_ms
        self.jitter = itertools.cycle([1.0, 0.998, 1.002, 0.999, 1.001])
        self.boost, self.boost_ms = 1.0, 0.0
        self.captured = None  # while a CUDA graph is captured: the kernels' times, which nothing runs yet

    def run(self, ms):
        if self.captured is not None:
            self.captured.append(ms)
            return
        self.run_many([ms])

    def run_many(self, kernels):
        """Launch kernels: one at a time from the host, or all at once as a CUDA graph's one launch."""
        self.host += self.launch_ms
        self.gpu = max(self.gpu, self.host)
        for ms in kernels:
            ms *= next(self.jitter) * (self.boost if self.busy < self.boost_ms else 1.0)
            self.gpu += ms
            self.busy += ms

    def event(self):
        return max(self.gpu, self.host)

    def sync(self):
        self.host = max(self.host, self.gpu)


class FakeDevice:
    """What gpu_benchmark needs of a device, with an H100's fingerprint and L2, on the fake GPU."""

    fingerprint = H100
    l2_bytes = 50 * 2**20
    peaks = {"datasheet": {"fp32": 66.9e12, "dram": 3.35e12}, "measured": None}
    versions = {"gpubench": "test"}

    def __init__(self, clock):
        self.clock = clock
        self.flushes = self.settled_ms = 0
        self.closed = False
        self.sm_clock_mhz, self.clock_events = 1980.0, 0
        self.refuse_graph = None  # why a capture fails, as the real device says it, or None
        self.calls, self.stall_every, self.stall_ms = 0, 0, 0.0
        # what the sampler reads: NVML's alone by default (no profiling source, as on a GPU without GPM), so the
        # counters say nothing; a test gives the ladder's rungs here to read them
        self.ladder = {}
        self.windows = 0  # counter windows read

    def kernel(self, ms):
        self.calls += 1
        if self.stall_every and self.calls % self.stall_every == 0:
            self.clock.host += self.stall_ms  # the host held up before this launch (another thread, the OS)
        self.clock.run(ms)

    def warm_up(self, run):
        t = self.clock.event()
        run()
        self.clock.sync()
        return self.clock.event() - t

    def launch_us(self, run, call_ms=0.0):
        t = self.clock.host
        for _ in range(20):
            run()
        host_ms = self.clock.host - t
        self.clock.sync()
        return host_ms / 20 * 1e3

    def graph(self, run, calls):
        if self.refuse_graph:
            raise GraphRefused(self.refuse_graph)
        self.clock.captured = []
        for _ in range(calls):
            run()
        kernels, self.clock.captured = self.clock.captured, None
        t = self.clock.event()
        self.clock.run_many(kernels)
        self.clock.sync()
        return (lambda: self.clock.run_many(kernels)), (self.clock.event() - t) / calls

    def hold(self, us):
        """A spin on the GPU's timer: exactly `us`, at any clock."""
        self.clock.host += self.clock.launch_ms
        self.clock.gpu = max(self.clock.gpu, self.clock.host) + us / 1e3

    def settle(self, run, call_ms, settle_s):
        t = self.clock.gpu
        while self.clock.gpu - t < settle_s * 1e3:
            run()
        self.settled_ms += self.clock.gpu - t

    def round_state(self):
        return self.sm_clock_mhz, self.clock_events

    def event_names(self, mask):
        return [name for bit, name in ((1, "idle"), (4, "power cap")) if mask and mask & bit]

    def flush_l2(self):
        self.flushes += 1

    def flush_ms(self):
        return 0.1

    def back_to_back(self, run, call_ms, duration_s):
        self.windows += 1
        return 10.0, 20.0, call_ms

    def metrics(self, t_start, t_end):
        nan = float("nan")
        return {
            "gpu_util_pct": 100.0,
            "sm_clock_mhz": self.sm_clock_mhz,
            "power_w": nan,
            "sm_active_pct": nan,
            "tensor_active_pct": nan,
            **self.ladder,
            "n_samples": 7,
        }

    def close(self):
        self.closed = True


@pytest.fixture
def fake_gpu(monkeypatch):
    """A fake GPU behind the plugin: its device, its identity, and CUDA events that read its clock."""
    torch = pytest.importorskip("torch")
    clock = GpuClock()

    class Event:
        def __init__(self, enable_timing=True):
            self.ms = None

        def record(self):
            self.ms = clock.event()

        def synchronize(self):
            clock.sync()

        def elapsed_time(self, end):
            return end.ms - self.ms

    device = FakeDevice(clock)
    monkeypatch.setattr(torch.cuda, "Event", Event)
    monkeypatch.setattr(CLOCK, "host_time", lambda: clock.host / 1e3)  # the fake host's clock, in seconds
    monkeypatch.setattr(configure, "open_device", lambda: device)
    monkeypatch.setattr(configure, "this_gpu", lambda: dict(device.fingerprint))
    return device


@pytest.fixture(autouse=True)
def no_autoload(monkeypatch):
    monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")


@pytest.fixture(autouse=True)
def spawned(monkeypatch):
    """The sessions --gpu-save-baseline would start in fresh processes: recorded, not run (each returns 0),
    unless a test puts its own runner in spawned.run."""

    class Spawned(list):
        run = None

    calls = Spawned()

    def run(args, cwd):
        calls.append(list(args))
        return calls.run(args, cwd) if calls.run else 0

    monkeypatch.setattr(benchruns, "run_pytest", run)
    return calls


@pytest.fixture
def suite(pytester, monkeypatch):
    """A user's test suite with one GPU benchmark; run(*args, kernel_ms=...) runs it in this process."""
    pytester.makepyfile(test_k=TEST_KERNEL)
    # pytest-benchmark's own machine_info asks py-cpuinfo, a second per session; the GPU's is added to this
    pytester.makeconftest("def pytest_benchmark_generate_machine_info(config):\n    return {'node': 'test'}\n")

    def run(*args, kernel_ms=1.0):
        monkeypatch.setenv("KERNEL_MS", str(kernel_ms))
        return pytester.runpytest(*PLUGINS, "--gpu-min-time=0.05", "--gpu-settle=0.05", *args)

    return run


def baseline(path: Path, gpu: dict | None, median_s=1e-3) -> Path:
    """A saved pytest-benchmark file, as --gpu-save-baseline writes it, with the GPU it claims."""
    stats = {
        "min": median_s,
        "max": median_s,
        "mean": median_s,
        "stddev": 0.0,
        "rounds": 10,
        "median": median_s,
        "iqr": 0.0,
        "q1": median_s,
        "q3": median_s,
        "iqr_outliers": 0,
        "stddev_outliers": 0,
        "outliers": "0;0",
        "ld15iqr": median_s,
        "hd15iqr": median_s,
        "ops": 1 / median_s,
        "total": 10 * median_s,
        "iterations": 1,
    }
    machine = {"node": "x"} | ({"gpu": gpu} if gpu else {})
    bench = {
        "group": None,
        "name": "test_kernel",
        "fullname": "test_k.py::test_kernel",
        "params": None,
        "param": None,
        "extra_info": {},
        "options": {},
        "stats": stats,
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(
        json.dumps(
            {
                "machine_info": machine,
                "commit_info": {},
                "benchmarks": [bench],
                "datetime": "2026-01-01T00:00:00",
                "version": "5.2.3",
            }
        )
    )
    return path


@pytest.fixture
def saved(suite, fake_gpu, tmp_path):
    """A baseline of the fake kernel at 1 ms per call (its rounds spread +-0.2%)."""
    suite(f"--gpu-save-baseline={tmp_path}", kernel_ms=1.0).assert_outcomes(passed=1)
    return tmp_path


def verdict_line(result) -> str:
    return next(line for line in result.stdout.lines if line.startswith("test_kernel ") and " ms  " in line)
