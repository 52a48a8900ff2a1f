"""A training job of gpubench's own for tools/truth/gpu.py to watch: a small causal transformer on random
data, its steps and FLOPs reported to gpubench (count_flops on the eager module, once).

    python -m tools.truth.job --role compiled          # torch.compile'd, a short warm-up, train, eval
    python -m tools.truth.job --role a --train-s 5 --eval-s 2   # one of two processes sharing a GPU
    ... --tiny --device cpu                              # a few layers of 64 on the CPU (the dry run)

--role compiled marks `warmup` (3 steps after compiling), `train` and `eval` (eager); --role a and b mark `train`
and, where --eval-s is given, `eval`: two processes whose phases end at different times.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import torch
import torch.nn.functional as F

import gpubench


class Block(torch.nn.Module):
    def __init__(self, width: int, heads: int):
        super().__init__()
        self.heads = heads
        self.norm1, self.norm2 = torch.nn.LayerNorm(width), torch.nn.LayerNorm(width)
        self.qkv, self.proj = torch.nn.Linear(width, 3 * width), torch.nn.Linear(width, width)
        self.up, self.down = torch.nn.Linear(width, 4 * width), torch.nn.Linear(4 * width, width)

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(self.norm1(x)).view(b, t, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2).reshape(b, t, d)
        x = x + self.proj(y)
        return x + self.down(F.gelu(self.up(self.norm2(x))))


def parse(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--role", choices=("compiled", "a", "b"), default="compiled")
    p.add_argument("--device", default="cuda")
    p.add_argument("--tiny", action="store_true", help="a model of a few layers of 64 (the CPU dry run)")
    p.add_argument("--warmup-steps", type=int, default=3)
    p.add_argument("--train-s", type=float, default=8.0)
    p.add_argument("--eval-s", type=float, default=0.0)
    p.add_argument("--sync", type=Path, help="a folder where the processes of a job wait for each other to start")
    return p.parse_args(argv)


def together(folder: Path, role: str) -> None:
    """Wait (at most two minutes) until processes a and b are both ready; b starts a second after a, so
    that a marks first and its marks cut the phases."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / role).touch()
    deadline = time.monotonic() + 120
    while not all((folder / r).exists() for r in ("a", "b")) and time.monotonic() < deadline:
        time.sleep(0.05)
    if role == "b":
        time.sleep(1.0)


def main(argv=None) -> None:
    args = parse(argv)
    width, heads, layers, batch, seq = (64, 4, 2, 2, 32) if args.tiny else (1024, 16, 4, 8, 1024)
    torch.manual_seed(0)
    model = torch.nn.Sequential(*[Block(width, heads) for _ in range(layers)]).to(args.device)
    opt = torch.optim.SGD(model.parameters(), lr=1e-4)
    x = torch.randn(batch, seq, width, device=args.device)
    amp = torch.autocast(args.device, dtype=torch.bfloat16) if args.device == "cuda" else torch.autocast("cpu")

    def forward_backward(net):
        with amp:
            loss = net(x).float().pow(2).mean()
        loss.backward()

    flops = gpubench.count_flops(forward_backward, model)  # the eager module: the counter cannot see compiled code
    with torch.no_grad(), amp:
        eval_flops = gpubench.count_flops(model, x)
    opt.zero_grad(set_to_none=True)
    net = torch.compile(model) if args.role == "compiled" and not args.tiny else model
    print(
        f"{args.role}: {sum(p.numel() for p in model.parameters()) / 1e6:.1f}M parameters, {flops:.4g} model FLOPs "
        f"a step, {flops.hardware:.4g} ran",
        flush=True,
    )

    def train_step():
        forward_backward(net)
        opt.step()
        opt.zero_grad(set_to_none=True)
        gpubench.step(flops=flops, tokens=batch * seq)

    def eval_step():
        with torch.no_grad(), amp:
            model(x)  # eager: a compiled module would compile again under no_grad, 10-20 s of a short budget
        gpubench.step(flops=eval_flops, tokens=batch * seq)

    if args.sync is not None:
        together(args.sync, args.role)
    if args.role == "compiled":
        train_step()  # compiles
        gpubench.mark("warmup")
        for _ in range(args.warmup_steps):
            train_step()
    gpubench.mark("train")
    deadline = time.monotonic() + args.train_s
    while time.monotonic() < deadline:
        train_step()
    if args.eval_s > 0:
        gpubench.mark("eval")
        deadline = time.monotonic() + args.eval_s
        while time.monotonic() < deadline:
            eval_step()
    if args.device == "cuda":
        torch.cuda.synchronize()


if __name__ == "__main__":
    main()
