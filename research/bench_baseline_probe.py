"""What moves a small call's time from one process to the next: one process's share of the experiment that
tools/gate/baseline.sh runs in several fresh processes (PROBE_RUNS), each writing one JSON file.

Within this process, for a 6 us bf16 matmul (512^3) and a 14 us sum of 2^22 floats, timed as the gate times
them (one call per round after an L2 flush, behind a blocking kernel, CUDA events around the call):
  - placement: the inputs allocated afresh PLACEMENTS times, each behind a pad that shifts where they land,
    all kept alive (new memory each time): the spread of the medians across placements is what a process's
    buffer placement can do, seen inside one process;
  - launch: each placement timed launched by the host and replayed from a CUDA graph of the one call, and,
    unflushed, from a graph of GRAPH_CALLS calls back to back (the gate's way for calls under 50 us);
  - L2 state: the first placement after a flush that writes (dirty lines, the gate's) and one that reads;
  - the graph's own launch: replays of graphs of 50, 200 and 800 calls, fitted as a + b * calls;
  - the timer: the step of CUDA events, from back-to-back events around a 2 us spin;
  - clocks: the SM clock after each block of rounds (NVML).
The first placement is allocated in the same order in every process: across processes, its medians show
what a process does to the same code; tools/gate/baseline_check.py sets the two spreads side by side.

    python -m research.bench_baseline_probe OUT.json
    python -m research.bench_baseline_probe --dry-run      # the plan, and the script's imports, without a GPU
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
import traceback
from pathlib import Path

PLACEMENTS = 6
ROUNDS = 150
WARM_ROUNDS = 30
GRAPH_CALLS = 200
FIT_CALLS = (50, 200, 800)
LEAD_US = 100.0  # the blocking kernel ahead of each flushed round: the host queues one launch in far less
PAD_BYTES = 1_572_864 + 4096  # 1.5 MiB and a page: each placement lands at another offset and in new memory


def plan() -> dict:
    return {
        "placements": PLACEMENTS,
        "rounds": ROUNDS,
        "warm_rounds": WARM_ROUNDS,
        "graph_calls": GRAPH_CALLS,
        "fit_calls": list(FIT_CALLS),
        "lead_us": LEAD_US,
        "calls": ["matmul 512^3 bf16", "sum 2^22 fp32"],
    }


class Gpu:
    """The pieces the gate uses, stripped: a blocking kernel, an L2 flush by writing or reading, events."""

    device = "cuda"

    def __init__(self):
        import torch

        from gpubench.kernels.spin import triton_spin
        from gpubench.record import gpus, nvml

        self.torch, self.spin = torch, triton_spin
        props = torch.cuda.get_device_properties(0)
        self.name, self.l2 = props.name, int(props.L2_cache_size)
        self.flush_buf = torch.empty(max(2 * self.l2, 256 * 2**20), dtype=torch.uint8, device="cuda")
        self.flush_sum = torch.empty((), dtype=torch.int64, device="cuda")
        self.hold_out = torch.empty(2, dtype=torch.int64, device="cuda")
        try:
            self.nvml = nvml.handle(gpus.by_cuda_index(torch.cuda.current_device()).nvml_index)
            self.clock_now = nvml.clock_now
        except Exception:  # noqa: BLE001 - clocks are a note here, not a measurement
            self.nvml = None

    def clock(self) -> float | None:
        return self.clock_now(self.nvml)[0] if self.nvml is not None else None

    def hold(self, us: float) -> None:
        self.spin(max(16, int(us * 1e3) // 16 * 16), self.hold_out)

    def flush(self, how: str) -> None:
        if how == "write":
            self.flush_buf.zero_()
        else:  # read: every line of the buffer through L2, none written
            self.torch.sum(self.flush_buf.view(self.torch.int64), dim=0, out=self.flush_sum)

    def event(self):
        return self.torch.cuda.Event(enable_timing=True)

    def timed(self, target, rounds: int, flush: str | None, per: int = 1) -> list[float]:
        """Per-call GPU time (us) of `rounds` rounds: each optionally after a flush, behind the blocking kernel."""
        out = []
        for _ in range(rounds):
            if flush:
                self.flush(flush)
            self.hold(LEAD_US)
            start, end = self.event(), self.event()
            start.record()
            target()
            end.record()
            end.synchronize()
            out.append(start.elapsed_time(end) * 1e3 / per)
        return out

    def graph(self, run, calls: int):
        torch = self.torch
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(3):
                run()
        torch.cuda.current_stream().wait_stream(side)
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            for _ in range(calls):
                run()
        g.replay()
        torch.cuda.synchronize()
        return g


def calls(gpu: Gpu, pad: int):
    """The two calls at a new placement: (name, run) each."""
    torch, dev = gpu.torch, gpu.device
    keep = [torch.empty(pad, dtype=torch.uint8, device=dev)]
    g = torch.Generator(device=dev).manual_seed(0)
    a = torch.randn(512, 512, device=dev, dtype=torch.bfloat16, generator=g)
    b = torch.randn(512, 512, device=dev, dtype=torch.bfloat16, generator=g)
    c = torch.empty(512, 512, device=dev, dtype=torch.bfloat16)
    x = torch.rand(2**22, device=dev, generator=g)
    s = torch.empty((), device=dev)
    keep += [a, b, c, x, s]
    return keep, [("matmul_512", lambda: torch.matmul(a, b, out=c)), ("sum_2^22", lambda: torch.sum(x, 0, out=s))]


def median(xs: list[float]) -> float:
    return statistics.median(xs)


def place_and_time(gpu: Gpu) -> dict:
    """Each call at PLACEMENTS placements, timed three ways; the first placement also after a reading flush."""
    out, kept = {}, []
    for p in range(PLACEMENTS):
        keep, pairs = calls(gpu, p * PAD_BYTES)
        kept.append(keep)
        for name, run in pairs:
            run()
            one, many = gpu.graph(run, 1), gpu.graph(run, GRAPH_CALLS)
            row = {
                "address_mod_2mib": keep[1].data_ptr() % 2**21,
                "host_us": median(gpu.timed(run, ROUNDS, "write")),
                "graph1_us": median(gpu.timed(one.replay, ROUNDS, "write")),
                "warm_graph_us": median(gpu.timed(many.replay, WARM_ROUNDS, None, GRAPH_CALLS)),
                "sm_clock_mhz": gpu.clock(),
            }
            if p == 0:
                row["host_read_flush_us"] = median(gpu.timed(run, ROUNDS, "read"))
                row["host_write_flush_again_us"] = median(gpu.timed(run, ROUNDS, "write"))
            out.setdefault(name, []).append(row)
            del one, many
    return out


def graph_fit(gpu: Gpu) -> dict:
    """A replay of n calls takes a + b n: a is the graph's own launch inside the timed events."""
    torch = gpu.torch
    a = torch.randn(512, 512, device=gpu.device, dtype=torch.bfloat16)
    c = torch.empty_like(a)
    points = []
    for n in FIT_CALLS:
        g = gpu.graph(lambda: torch.matmul(a, a, out=c), n)
        points.append((n, median(gpu.timed(g.replay, WARM_ROUNDS, None))))
    xs, ys = [p[0] for p in points], [p[1] for p in points]
    mx, my = statistics.mean(xs), statistics.mean(ys)
    slope = sum((x - mx) * (y - my) for x, y in points) / sum((x - mx) ** 2 for x in xs)
    return {"points_us": points, "per_call_us": slope, "per_replay_us": my - slope * mx}


def timer_step(gpu: Gpu) -> dict:
    from gpubench.gate.rounds import timer_step as step

    spins = gpu.timed(lambda: gpu.hold(2.0), 200, None)
    empty = gpu.timed(lambda: None, 200, None)
    return {"step_ns": step([s * 1e-6 for s in spins]) * 1e9, "empty_us": median(empty), "spin_2us": median(spins)}


def probe(gpu=None) -> dict:
    gpu = gpu or Gpu()
    data = {"gpu": gpu.name, "l2_bytes": gpu.l2, "plan": plan(), "errors": {}}
    for part, fn in (("timer", timer_step), ("placements", place_and_time), ("graph_launch", graph_fit)):
        t0 = time.monotonic()
        try:
            data[part] = fn(gpu)
        except Exception as err:  # noqa: BLE001 - one part failing leaves the others' numbers
            data["errors"][part] = "".join(traceback.format_exception_only(type(err), err)).strip()
        data.setdefault("seconds", {})[part] = round(time.monotonic() - t0, 2)
    return data


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", nargs="?", help="the JSON file this process's measurements go to")
    parser.add_argument("--dry-run", action="store_true", help="print the plan and check the imports; time nothing")
    args = parser.parse_args(argv)
    if args.dry_run:
        import gpubench.gate.rounds  # noqa: F401 - what the probe imports on a GPU, checked here
        import gpubench.kernels.spin  # noqa: F401
        import gpubench.record.gpus  # noqa: F401
        import gpubench.record.nvml  # noqa: F401

        print(json.dumps(plan()))
        return 0
    if not args.out:
        parser.error("give the JSON file to write (or --dry-run)")
    import torch

    if not torch.cuda.is_available():
        print("bench_baseline_probe: no GPU (torch.cuda.is_available() is False)", file=sys.stderr)
        return 2
    Path(args.out).write_text(json.dumps(probe(), indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
