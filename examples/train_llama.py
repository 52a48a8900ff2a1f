"""A Llama-style model trained on synthetic tokens, for `gpubench watch`: another shape than train_gpt.py,
with the options that change what a watch sees. Plain PyTorch, no downloads.

    gpubench watch -- python examples/train_llama.py                        # eager, bf16, 2k context
    gpubench watch -- python examples/train_llama.py --compile              # torch.compile, inside warmup
    gpubench watch -- python examples/train_llama.py --seq 8192 --batch 1   # long context: attention grows
    gpubench watch -- python examples/train_llama.py --experts 8 --top 2    # a mixture of experts
    gpubench watch -- python examples/train_llama.py --checkpoint           # activations recomputed: HFU > MFU
    gpubench watch -- torchrun --nproc-per-node 2 examples/train_llama.py --slow-rank 1 --slow-ms 40

RMSNorm, rotary positions, grouped KV heads and SwiGLU MLPs, bf16 autocast, fused AdamW; the loss is read
after each step, as most loops do. The mixture of experts routes each token to its top experts with a loop
over the experts, as simple implementations do: each expert's share of the batch is found on the host,
which waits for the GPU once per expert. Under torchrun each rank trains a replica (DistributedDataParallel
over NCCL); --slow-rank makes one rank's data loader slower by --slow-ms a step, the straggler the watch
must name. One step's FLOPs are counted once with gpubench.count_flops (model FLOPs by PaLM's convention,
and the hardware FLOPs beside them) and printed with PaLM's formula for comparison. With --no-gpubench
it makes no gpubench call, as a job nobody changed: watched, its steps come from its optimizer and its
FLOPs from one step gpubench counts itself.
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import time

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.checkpoint import checkpoint

import gpubench


class NoGpubench:
    """--no-gpubench: marks and steps that do nothing, so the loop is the one a job without gpubench runs."""

    @staticmethod
    def mark(name):
        pass

    @staticmethod
    def step(flops=None, bytes=None, tokens=None):  # noqa: A002
        pass


class Attention(nn.Module):
    def __init__(self, width: int, heads: int, kv_heads: int):
        super().__init__()
        self.heads, self.kv_heads, self.head_dim = heads, kv_heads, width // heads
        self.qkv = nn.Linear(width, (heads + 2 * kv_heads) * self.head_dim, bias=False)
        self.out = nn.Linear(width, width, bias=False)

    def forward(self, x, cos, sin):
        b, t, _ = x.shape
        q, k, v = self.qkv(x).view(b, t, -1, self.head_dim).split([self.heads, self.kv_heads, self.kv_heads], 2)
        q, k = rotate(q, cos, sin), rotate(k, cos, sin)
        y = F.scaled_dot_product_attention(
            q.transpose(1, 2),
            k.transpose(1, 2),
            v.transpose(1, 2),
            is_causal=True,
            enable_gqa=self.heads != self.kv_heads,
        )
        return self.out(y.transpose(1, 2).reshape(b, t, -1))


def rotate(x, cos, sin):
    a, b = x.float().chunk(2, dim=-1)
    return torch.cat((a * cos - b * sin, a * sin + b * cos), dim=-1).to(x.dtype)


class SwiGLU(nn.Module):
    def __init__(self, width: int, ffn: int):
        super().__init__()
        self.up = nn.Linear(width, 2 * ffn, bias=False)
        self.down = nn.Linear(ffn, width, bias=False)

    def forward(self, x):
        gate, up = self.up(x).chunk(2, dim=-1)
        return self.down(F.silu(gate) * up)


class Experts(nn.Module):
    """Top-k of n SwiGLU experts per token, routed with a loop over the experts."""

    def __init__(self, width: int, ffn: int, n: int, top: int):
        super().__init__()
        self.router = nn.Linear(width, n, bias=False)
        self.experts = nn.ModuleList(SwiGLU(width, ffn) for _ in range(n))
        self.top = top

    def forward(self, x):
        flat = x.reshape(-1, x.shape[-1])
        weights, chosen = self.router(flat).softmax(-1).topk(self.top, dim=-1)
        out = torch.zeros_like(flat)
        for e, expert in enumerate(self.experts):
            rows, slot = (chosen == e).nonzero(as_tuple=True)  # the host waits for the GPU here
            if rows.numel():
                out.index_add_(0, rows, expert(flat[rows]) * weights[rows, slot, None].to(flat.dtype))
        return out.view_as(x)


class Block(nn.Module):
    def __init__(self, width, heads, kv_heads, ffn, experts, top):
        super().__init__()
        self.norm1, self.norm2 = nn.RMSNorm(width), nn.RMSNorm(width)
        self.attn = Attention(width, heads, kv_heads)
        self.mlp = Experts(width, ffn, experts, top) if experts else SwiGLU(width, ffn)

    def forward(self, x, cos, sin):
        x = x + self.attn(self.norm1(x), cos, sin)
        return x + self.mlp(self.norm2(x))


class Llama(nn.Module):
    def __init__(self, vocab, seq, layers, width, heads, kv_heads, ffn, experts=0, top=2, checkpointed=False):
        super().__init__()
        self.embed = nn.Embedding(vocab, width)
        self.blocks = nn.ModuleList(Block(width, heads, kv_heads, ffn, experts, top) for _ in range(layers))
        self.norm = nn.RMSNorm(width)
        self.head = nn.Linear(width, vocab, bias=False)
        half = width // heads // 2
        angle = torch.arange(seq)[:, None] / (10000 ** (torch.arange(half) / half))[None, :]
        self.register_buffer("cos", angle.cos()[None, :, None, :], persistent=False)
        self.register_buffer("sin", angle.sin()[None, :, None, :], persistent=False)
        self.checkpointed = checkpointed

    def forward(self, idx, targets):
        x = self.embed(idx)
        for block in self.blocks:
            if self.checkpointed and self.training:
                x = checkpoint(block, x, self.cos, self.sin, use_reentrant=False)
            else:
                x = block(x, self.cos, self.sin)
        logits = self.head(self.norm(x))
        return F.cross_entropy(logits.float().view(-1, logits.shape[-1]), targets.reshape(-1))


def palm_flops(model: Llama, args, train: bool = True) -> float:
    """PaLM's count per step (Chowdhery et al. 2022, appendix B): 6 N per token for the matrix products, N
    the parameters a token passes through (the experts it is routed to, not all of them; the embedding is a
    lookup, not a product), plus 12 L d T per token for attention over the whole T x T, causal or not."""
    expert_params = sum(
        p.numel() for b in model.blocks if isinstance(b.mlp, Experts) for p in b.mlp.experts.parameters()
    )
    active = (
        sum(p.numel() for p in model.parameters())
        - model.embed.weight.numel()
        - expert_params * (1 - args.top / args.experts if args.experts else 0)
    )
    tokens = args.batch * args.seq
    return (6 if train else 2) * active * tokens + (12 if train else 4) * args.layers * args.width * args.seq * tokens


def parse(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--batch", type=int, default=4)
    p.add_argument("--seq", type=int, default=2048, help="tokens per sequence")
    p.add_argument("--layers", type=int, default=12)
    p.add_argument("--width", type=int, default=1024)
    p.add_argument("--heads", type=int, default=16)
    p.add_argument("--kv-heads", type=int, default=4)
    p.add_argument("--ffn", type=int, default=2816)
    p.add_argument("--vocab", type=int, default=32000)
    p.add_argument("--experts", type=int, default=0, help="experts per layer (0: a dense MLP)")
    p.add_argument("--top", type=int, default=2, help="experts each token is routed to")
    p.add_argument("--checkpoint", action="store_true", help="recompute each block's activations in backward")
    p.add_argument("--compile", action="store_true", help="torch.compile the model (it compiles during warmup)")
    p.add_argument("--slow-rank", type=int, help="under torchrun: the rank whose data loader is slower")
    p.add_argument("--slow-ms", type=float, default=40.0, help="how much slower, per step (default 40)")
    p.add_argument("--warmup-steps", type=int, default=8)
    p.add_argument("--seconds", type=float, default=20.0, help="seconds of training after warm-up (default 20)")
    p.add_argument("--eval-seconds", type=float, default=3.0)
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument(
        "--no-gpubench",
        action="store_true",
        help="make no gpubench call (mark, step, count_flops): the job as it would run without gpubench",
    )
    return p.parse_args(argv)


def run_for(step, steps: int | None, seconds: float) -> tuple[int, float, float]:
    """(steps done, seconds taken, the median step's milliseconds)."""
    t0, n, times = time.perf_counter(), 0, []
    while (n < steps) if steps is not None else (time.perf_counter() - t0 < seconds):
        t = time.perf_counter()
        step()
        times.append(time.perf_counter() - t)
        n += 1
    return n, time.perf_counter() - t0, 1e3 * statistics.median(times) if times else math.nan


def main(argv=None) -> None:
    args = parse(argv)
    rank, world = int(os.environ.get("RANK", 0)), int(os.environ.get("WORLD_SIZE", 1))
    if world > 1:
        torch.distributed.init_process_group("nccl" if args.device.startswith("cuda") else "gloo")
        if args.device.startswith("cuda"):
            local = int(os.environ.get("LOCAL_RANK", 0))
            torch.cuda.set_device(local)
            args.device = f"cuda:{local}"
    torch.manual_seed(0)
    model = Llama(
        args.vocab,
        args.seq,
        args.layers,
        args.width,
        args.heads,
        args.kv_heads,
        args.ffn,
        args.experts,
        args.top,
        args.checkpoint,
    ).to(args.device)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4, fused=args.device.startswith("cuda"))
    gen = torch.Generator().manual_seed(rank)
    sleep_s = args.slow_ms / 1e3 if args.slow_rank is not None and rank == args.slow_rank % max(world, 1) else 0.0
    device_type = torch.device(args.device).type

    def batch():
        if sleep_s:
            time.sleep(sleep_s)  # a slower data loader on this rank only
        tokens = torch.randint(args.vocab, (args.batch, args.seq + 1), generator=gen).to(args.device)
        return tokens[:, :-1], tokens[:, 1:]

    def forward_backward(net, x, y):
        with torch.autocast(device_type, dtype=torch.bfloat16):
            loss = net(x, y)
        loss.backward()
        return loss

    gb = NoGpubench if args.no_gpubench else gpubench
    flops = eval_flops = None
    if not args.no_gpubench:
        x, y = batch()
        flops = gpubench.count_flops(forward_backward, model, x, y)
        opt.zero_grad(set_to_none=True)
        model.eval()
        with torch.no_grad(), torch.autocast(device_type, dtype=torch.bfloat16):
            eval_flops = gpubench.count_flops(model, x, y)
        model.train()
    if rank == 0:
        palm = palm_flops(model, args)
        print(
            f"llama: {args.layers} layers, {args.width} wide, "
            f"{sum(p.numel() for p in model.parameters()) / 1e6:.0f}M "
            f"parameters{f', {args.experts} experts, top {args.top}' if args.experts else ''}; batch {args.batch} x "
            f"{args.seq} tokens; {world} rank(s)",
            flush=True,
        )
        if flops is not None:
            print(
                f"FLOPs per training step: {flops:.4g} model (PaLM's formula: {palm:.4g}, "
                f"{100 * (flops / palm - 1):+.1f}%), {flops.hardware:.4g} hardware",
                flush=True,
            )
        else:
            print(f"FLOPs per training step: {palm:.4g} by PaLM's formula; not counted (--no-gpubench)", flush=True)
    net = model
    if world > 1:
        net = torch.nn.parallel.DistributedDataParallel(model)
    if args.compile:
        net = torch.compile(net)

    def train_step():
        x, y = batch()
        loss = forward_backward(net, x, y)
        opt.step()
        opt.zero_grad(set_to_none=True)
        loss.item()
        gb.step(flops=flops, tokens=args.batch * args.seq)

    def eval_step():
        x, y = batch()
        with torch.no_grad(), torch.autocast(device_type, dtype=torch.bfloat16):
            net(x, y).item()
        gb.step(flops=eval_flops, tokens=args.batch * args.seq)

    gb.mark("warmup")
    run_for(train_step, args.warmup_steps, 0)
    gb.mark("train")
    n, seconds, median_ms = run_for(train_step, None, args.seconds)
    gb.mark("eval")
    model.eval()
    run_for(eval_step, None, args.eval_seconds)
    if rank == 0:
        print(
            f"train: {n} steps in {seconds:.2f} s: {n / seconds:.3f} steps/s (host clock), median step "
            f"{median_ms:.3f} ms",
            flush=True,
        )
    if world > 1:
        torch.distributed.destroy_process_group()


if __name__ == "__main__":
    main()
