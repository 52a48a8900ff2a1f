"""What the optimizer hook costs a job, measured side by side: a Python process's start-up with the bootstrap
and without, an optimizer step's host time with the hook and without, and, on a GPU, two threads stepping
at once while one step is counted (each step's time, the counted one's neighbours against the rest).

    python3 -m tools.watch.hook_cost --out results/logs/hook-cost          # this tree's bootstrap
    python3 -m tools.watch.hook_cost --other /path/to/another/checkout     # and another's, interleaved with it

Rounds interleave the arms so that a machine's drift falls on each alike; medians with p10-p90. Writes
<out>.csv (every sample) and <out>.log (the table).
"""

from __future__ import annotations

import argparse
import csv
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

STEP = r"""
import sys, time, torch
p = torch.nn.Parameter(torch.zeros(1)); p.grad = torch.zeros(1)
opt = torch.optim.SGD([p], lr=0.0)
for _ in range(2000): opt.step()
out = []
for _ in range(int(sys.argv[1])):
    t = time.perf_counter()
    for _ in range(2000): opt.step()
    out.append((time.perf_counter() - t) / 2000 * 1e6)
print(" ".join(f"{x:.3f}" for x in out))
"""

THREADS = r"""
import sys, threading, time, torch
from torch import nn
def worker(name, out, barrier):
    torch.manual_seed(0)
    model = nn.Sequential(*[nn.Linear(1024, 1024) for _ in range(4)]).cuda()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    x = torch.randn(256, 1024, device="cuda")
    barrier.wait()
    for i in range(60):
        t = time.perf_counter()
        model(x).square().mean().backward(); opt.step(); opt.zero_grad()
        torch.cuda.synchronize()
        out.append((name, i + 1, (time.perf_counter() - t) * 1e3))
out, barrier = [], threading.Barrier(2)
threads = [threading.Thread(target=worker, args=(n, out, barrier)) for n in "ab"]
[t.start() for t in threads]; [t.join() for t in threads]
print(" ".join(f"{n}:{i}:{ms:.3f}" for n, i, ms in out))
"""


def env_for(checkout: Path | None, marks: str) -> dict:
    """This process's environment with the bootstrap of `checkout` first (None: no watch at all)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("GPUBENCH_")}
    if checkout is None:
        return env
    boot = next(
        p
        for p in (checkout / "gpubench" / "inside" / "bootstrap", checkout / "gpubench" / "job" / "bootstrap")
        if (p / "sitecustomize.py").is_file()
    )
    env.update(GPUBENCH_MARKS=marks, PYTHONPATH=os.pathsep.join([str(boot), str(checkout)]))
    return env


def startup_ms(env: dict) -> float:
    import time

    t = time.perf_counter()
    subprocess.run([sys.executable, "-c", "pass"], env=env, check=True)
    return (time.perf_counter() - t) * 1e3


def spread(values: list[float]) -> str:
    q = statistics.quantiles(values, n=10) if len(values) > 1 else values * 9
    return f"{statistics.median(values):8.3f} ({q[0]:.3f}-{q[-1]:.3f}, n={len(values)})"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default="hook-cost", help="path without suffix for the .csv and .log")
    parser.add_argument("--other", type=Path, help="a checkout whose bootstrap to measure beside this one's")
    parser.add_argument("--rounds", type=int, default=6, help="rounds of the step's cost (a process each: torch loads)")
    parser.add_argument("--startup-rounds", type=int, default=30)
    parser.add_argument("--no-gpu", action="store_true", help="skip the two-thread GPU job")
    args = parser.parse_args(argv)
    tmp = tempfile.mkdtemp(prefix="hook-cost-")
    arms = {"none": None, "this": ROOT}
    if args.other is not None:
        arms["other"] = args.other.resolve()
    rows = []
    for r in range(args.startup_rounds):
        for arm, checkout in arms.items():
            rows.append(("startup_ms", arm, r, "", startup_ms(env_for(checkout, f"{tmp}/{arm}-{r}.tsv"))))
    print(f"start-up: {args.startup_rounds} rounds", flush=True)
    for r in range(args.rounds):
        for arm, checkout in arms.items():
            env = dict(env_for(checkout, f"{tmp}/{arm}-{r}.tsv"), GPUBENCH_AUTO="steps")  # the step alone, no count
            done = subprocess.run(
                [sys.executable, "-c", STEP, "5"], env=env, capture_output=True, text=True, check=True, timeout=300
            )
            rows += [("step_us", arm, r, "", float(x)) for x in done.stdout.split()]
        print(f"steps: round {r + 1} of {args.rounds}", flush=True)
    if not args.no_gpu:
        for r in range(2):
            for arm, checkout in arms.items():
                env = env_for(checkout, f"{tmp}/threads-{arm}-{r}.tsv")
                done = subprocess.run(
                    [sys.executable, "-c", THREADS], env=env, capture_output=True, text=True, timeout=300
                )
                print(f"two threads, {arm}: exit {done.returncode}; {done.stderr.strip()[-300:]}", flush=True)
                if done.returncode != 0:
                    continue
                for item in done.stdout.split():
                    name, i, ms = item.split(":")
                    rows.append(("thread_step_ms", arm, r, f"{name}{int(i):02d}", float(ms)))
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    with open(out.with_suffix(".csv"), "w", newline="") as f:
        csv.writer(f).writerows([("metric", "arm", "round", "step", "value"), *rows])
    lines = [f"python {sys.version.split()[0]}, {os.cpu_count()} cores; arms: {', '.join(arms)}"]
    for metric in ("startup_ms", "step_us"):
        for arm in arms:
            lines.append(f"{metric:14s} {arm:6s} {spread([v for m, a, _, _, v in rows if m == metric and a == arm])}")
    for arm in arms:
        steps = [(s, v) for m, a, _, s, v in rows if m == "thread_step_ms" and a == arm]
        if steps:
            near = [v for s, v in steps if 11 <= int(s[1:]) <= 30]
            rest = [v for s, v in steps if int(s[1:]) > 30]
            lines.append(f"two threads   {arm:6s} steps 11-30 {spread(near)} ms; steps 31-60 {spread(rest)} ms")
    out.with_suffix(".log").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
