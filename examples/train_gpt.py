"""A small GPT trained on synthetic tokens, for `gpubench watch`: plain PyTorch, no downloads.

    gpubench watch -- python examples/train_gpt.py                          # healthy: bf16, batch 16 x 1024
    gpubench watch -- python examples/train_gpt.py --fp32                   # no tensor cores
    gpubench watch -- python examples/train_gpt.py --loader-sleep-ms 100    # a slow data loader
    gpubench watch -- python examples/train_gpt.py --batch 1 --seq 128      # a tiny batch

The default model has GPT-2 small's shape (12 layers, 768 wide, 12 heads, a 50257-token vocabulary,
124M parameters): on an H100 one bf16 step of 16 x 1024 tokens takes tens of milliseconds, so 20 s
of training is hundreds of steps. Eager PyTorch with fused attention (scaled_dot_product_attention),
bf16 autocast unless --fp32 (then plain FP32: PyTorch's default keeps TF32 off for matmuls), fused
AdamW. Like most training loops (nanoGPT logs every step) it reads the loss after each step, which
waits for the GPU. The data loader makes random tokens on the host; --loader-sleep-ms adds the host
time of a slow one.

Phases, marked with gpubench.mark: warmup (the first steps: allocation, kernel selection,
torch.compile), train, eval (forward only). One step's FLOPs are counted once with
gpubench.count_flops and printed beside the analytic count; each step reports them with
gpubench.step(flops=...). Outside `gpubench watch` the marks cost nothing and it runs as it would.
With --no-gpubench it makes none of those calls, as a job nobody changed: watched, its steps come from
its optimizer and its FLOPs from one step gpubench counts itself.
"""

from __future__ import annotations

import argparse
import contextlib
import math
import statistics
import time

import torch
import torch.nn.functional as F
from torch import nn

import gpubench


class NoGpubench:
    """--no-gpubench: marks and steps that do nothing, so the loop is the one a job without gpubench runs."""

    @staticmethod
    def mark(name):
        pass

    @staticmethod
    def step(flops=None, bytes=None, tokens=None):  # noqa: A002
        pass


class Block(nn.Module):
    def __init__(self, width: int, heads: int):
        super().__init__()
        self.heads = heads
        self.ln1, self.ln2 = nn.LayerNorm(width), nn.LayerNorm(width)
        self.qkv, self.proj = nn.Linear(width, 3 * width), nn.Linear(width, width)
        self.fc, self.out = nn.Linear(width, 4 * width), nn.Linear(4 * width, width)

    def forward(self, x):
        b, t, c = x.shape
        q, k, v = (
            z.view(b, t, self.heads, c // self.heads).transpose(1, 2) for z in self.qkv(self.ln1(x)).split(c, dim=2)
        )
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(y.transpose(1, 2).reshape(b, t, c))
        return x + self.out(F.gelu(self.fc(self.ln2(x)), approximate="tanh"))


class GPT(nn.Module):
    def __init__(self, vocab: int, seq: int, layers: int, width: int, heads: int):
        super().__init__()
        self.tok, self.pos = nn.Embedding(vocab, width), nn.Embedding(seq, width)
        self.blocks = nn.ModuleList(Block(width, heads) for _ in range(layers))
        self.ln = nn.LayerNorm(width)
        self.head = nn.Linear(width, vocab, bias=False)
        self.head.weight = self.tok.weight  # tied, as GPT-2

    def forward(self, idx, targets):
        x = self.tok(idx) + self.pos(torch.arange(idx.shape[1], device=idx.device))
        for block in self.blocks:
            x = block(x)
        logits = self.head(self.ln(x))
        return F.cross_entropy(logits.float().view(-1, logits.shape[-1]), targets.reshape(-1))


def analytic_flops(model: GPT, batch: int, seq: int, train: bool = True) -> float:
    """PaLM's count: 6 N per token for the matrix products (2 N forward), N the parameters less the
    position embedding (a lookup, not a product; the token embedding is the LM head's weight), plus
    12 L d T per token for attention's two products, forward and backward (4 L d T forward only)."""
    n = sum(p.numel() for p in model.parameters()) - model.pos.weight.numel()
    layers, width = len(model.blocks), model.tok.weight.shape[1]
    tokens = batch * seq
    return (6 if train else 2) * n * tokens + (12 if train else 4) * layers * width * seq * tokens


class Loader:
    """Random tokens made on the host, as a data loader hands them over; sleep_ms more host time each."""

    def __init__(self, vocab: int, batch: int, seq: int, device: str, sleep_ms: float):
        self.shape, self.vocab, self.device, self.sleep_s = (batch, seq + 1), vocab, device, sleep_ms / 1e3
        self.gen = torch.Generator().manual_seed(0)

    def next(self):
        if self.sleep_s:
            time.sleep(self.sleep_s)
        tokens = torch.randint(self.vocab, self.shape, generator=self.gen).to(self.device)
        return tokens[:, :-1], tokens[:, 1:]


def parse(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--seq", type=int, default=1024, help="tokens per sequence")
    p.add_argument("--layers", type=int, default=12)
    p.add_argument("--width", type=int, default=768)
    p.add_argument("--heads", type=int, default=12)
    p.add_argument("--vocab", type=int, default=50257)
    p.add_argument("--fp32", action="store_true", help="no bf16 autocast: plain FP32, no tensor cores")
    p.add_argument("--loader-sleep-ms", type=float, default=0.0, help="host sleep per batch: a slow data loader")
    p.add_argument("--compile", action="store_true", help="torch.compile the model (compiles during warmup)")
    p.add_argument("--steps", type=int, help="training steps after warm-up (default: as many as --seconds allows)")
    p.add_argument("--seconds", type=float, default=20.0, help="seconds of training after warm-up (default 20)")
    p.add_argument("--warmup-steps", type=int, default=10)
    p.add_argument("--eval-steps", type=int, help="forward-only steps (default: as many as --eval-seconds allows)")
    p.add_argument("--eval-seconds", type=float, default=3.0)
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument(
        "--no-gpubench",
        action="store_true",
        help="make no gpubench call (mark, step, count_flops): the job as it would run without gpubench",
    )
    return p.parse_args(argv)


def run_for(step, steps: int | None, seconds: float) -> tuple[int, float, float]:
    """Call step() `steps` times, or for `seconds` where steps is None; (steps done, seconds taken, the
    median step's milliseconds: a step slower than the others, such as one whose FLOPs were counted, moves
    it little)."""
    t0, n, times = time.perf_counter(), 0, []
    while (n < steps) if steps is not None else (time.perf_counter() - t0 < seconds):
        t = time.perf_counter()
        step()
        times.append(time.perf_counter() - t)
        n += 1
    return n, time.perf_counter() - t0, 1e3 * statistics.median(times) if times else math.nan


def describe(model: GPT, args, flops) -> None:
    expected = analytic_flops(model, args.batch, args.seq)
    params = sum(p.numel() for p in model.parameters())
    print(
        f"model: {args.layers} layers, {args.width} wide, {args.heads} heads, vocabulary {args.vocab}, "
        f"{params / 1e6:.1f}M parameters; {'fp32' if args.fp32 else 'bf16 autocast'}, batch {args.batch} x "
        f"{args.seq} tokens on {args.device}"
    )
    if flops is None:
        print(
            f"FLOPs per training step: {expected:.4g} analytic (6 x parameters x tokens + attention); not counted "
            "(--no-gpubench)",
            flush=True,
        )
        return
    print(
        f"FLOPs per training step: {flops:.4g} model FLOPs counted by gpubench.count_flops (PaLM's convention; "
        f"{flops.hardware:.4g} ran, recomputation included), {expected:.4g} analytic (6 x parameters x tokens + "
        f"attention): {100 * (flops / expected - 1):+.1f}%",
        flush=True,
    )


def main(argv=None) -> None:
    args = parse(argv)
    torch.manual_seed(0)
    model = GPT(args.vocab, args.seq, args.layers, args.width, args.heads).to(args.device)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4, fused=args.device.startswith("cuda"))
    loader = Loader(args.vocab, args.batch, args.seq, args.device, args.loader_sleep_ms)
    device_type = torch.device(args.device).type

    def amp():
        return contextlib.nullcontext() if args.fp32 else torch.autocast(device_type, dtype=torch.bfloat16)

    def forward_backward(net, x, y):
        with amp():
            loss = net(x, y)
        loss.backward()
        return loss

    gb = NoGpubench if args.no_gpubench else gpubench
    flops = eval_flops = None
    if not args.no_gpubench:
        x, y = loader.next()
        flops = gpubench.count_flops(forward_backward, model, x, y)
        opt.zero_grad(set_to_none=True)
        with torch.no_grad(), amp():
            eval_flops = gpubench.count_flops(model, x, y)
    describe(model, args, flops)
    net = torch.compile(model) if args.compile else model

    def train_step():
        x, y = loader.next()
        loss = forward_backward(net, x, y)
        opt.step()
        opt.zero_grad(set_to_none=True)
        loss.item()  # logging the loss each step, as most loops do, waits for the GPU
        gb.step(flops=flops)

    def eval_step():
        x, y = loader.next()
        with torch.no_grad(), amp():
            net(x, y).item()
        gb.step(flops=eval_flops)

    gb.mark("warmup")
    run_for(train_step, args.warmup_steps, math.inf)
    gb.mark("train")
    n, seconds, median_ms = run_for(train_step, args.steps, args.seconds)
    work = f", {flops * n / seconds / 1e12:.1f} TFLOP/s" if flops is not None else ""
    print(
        f"train: {n} steps in {seconds:.2f} s: {n / seconds:.3f} steps/s{work} (host clock), median step "
        f"{median_ms:.3f} ms",
        flush=True,
    )
    gb.mark("eval")
    run_for(eval_step, args.eval_steps, args.eval_seconds)


if __name__ == "__main__":
    main()
