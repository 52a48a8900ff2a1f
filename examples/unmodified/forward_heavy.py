"""A small MLP scored thousands of times a second under torch.no_grad(): a job whose forwards are as frequent
as a job's get (about 9,000 a second on an H200 at width 1024, batch 32; its host launches them), to show what
gpubench's forward hook costs it; at width 4096, batch 512, about 1,500 a second, bound by the GPU.

    gpubench watch -- python examples/unmodified/forward_heavy.py --seconds 12
    gpubench watch --no-auto -- python examples/unmodified/forward_heavy.py --seconds 12   # the hook off

It prints its own rate: forwards per second on the host clock over the last third of its run, when the hook's
one-time work (finding the model, counting one forward) is long over (it reads a result every 100 forwards, so
its launches run ahead of the GPU only briefly).
"""

import argparse
import time

import torch
from torch import nn


def main():
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--seconds", type=float, default=10.0)
    p.add_argument("--width", type=int, default=1024)
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--tiny", action="store_true", help="as small on a CPU as it is (a smoke test)")
    args = p.parse_args()
    device = "cuda" if torch.cuda.is_available() else "cpu"
    torch.manual_seed(0)
    w = args.width
    model = nn.Sequential(nn.Linear(256, w), nn.GELU(), nn.Linear(w, w), nn.GELU(), nn.Linear(w, 16)).to(device).eval()
    x = torch.randn(args.batch, 256, device=device)
    n, t0, mid_t, mid_n = 0, time.perf_counter(), None, 0
    with torch.no_grad():
        while True:
            y = model(x)
            n += 1
            if n % 100 == 0:
                y.sum().item()
                now = time.perf_counter()
                if mid_t is None and now - t0 >= args.seconds * 2 / 3:
                    mid_t, mid_n = now, n
                elif mid_t is not None and now - t0 >= args.seconds:
                    break
    print(
        f"own count: {(n - mid_n) / (now - mid_t):.6g} forwards/s on the host clock over the last third of its "
        f"{n} forwards",
        flush=True,
    )


if __name__ == "__main__":
    main()
