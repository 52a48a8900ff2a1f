"""A small MLP scored thousands of times a second under torch.no_grad(), batch 32: a job whose forwards are
as frequent as a job's get, to show what gpubench's forward hook costs it.

    gpubench watch -- python examples/unmodified/forward_heavy.py --seconds 10
    gpubench watch --no-auto -- python examples/unmodified/forward_heavy.py --seconds 10   # the hook off

It prints its own rate: forwards per second on the host clock over the last half of its run (its forwards are
launched faster than they run only briefly: it reads a result every 100 forwards).
"""

import argparse
import time

import torch
from torch import nn


def main():
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--seconds", type=float, default=10.0)
    p.add_argument("--tiny", action="store_true", help="as small on a CPU as it is (a smoke test)")
    args = p.parse_args()
    device = "cuda" if torch.cuda.is_available() else "cpu"
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(256, 1024), nn.GELU(), nn.Linear(1024, 1024), nn.GELU(),
                          nn.Linear(1024, 16)).to(device).eval()
    x = torch.randn(32, 256, device=device)
    n, t0, mid_t, mid_n = 0, time.perf_counter(), None, 0
    with torch.no_grad():
        while True:
            y = model(x)
            n += 1
            if n % 100 == 0:
                y.sum().item()
                now = time.perf_counter()
                if mid_t is None and now - t0 >= args.seconds / 2:
                    mid_t, mid_n = now, n
                elif mid_t is not None and now - t0 >= args.seconds:
                    break
    print(f"own count: {(n - mid_n) / (now - mid_t):.6g} forwards/s on the host clock over the last half of its "
          f"{n} forwards", flush=True)


if __name__ == "__main__":
    main()
