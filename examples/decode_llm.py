"""LLM decode, for `gpubench watch`: a Llama-style decoder generating tokens with a static KV cache.

    gpubench watch -- python examples/decode_llm.py                                # eager, batch 1
    gpubench watch -- python examples/decode_llm.py --compile --graph              # fused, one graph a token
    gpubench watch -- python examples/decode_llm.py --compile --graph --batch 64   # many sequences a step

Decode reads every weight once per step, whatever the batch: at batch 1 a step is memory-bound, its floor
the weights' bytes over the memory bandwidth (1.5 B bf16 parameters, ~3 GB, take ~0.9 ms at 3.35 TB/s), so
MFU says little and MBU is the yardstick; batching more sequences multiplies tokens per step at nearly the
same step time, until the arithmetic (and the KV cache, read once per sequence) catches up with the bytes.
Eager PyTorch launches some 30 kernels a layer from Python, so at batch 1 the host is the limit;
torch.compile (--compile) fuses them into a few, and a CUDA graph (--graph) replays the whole step with
one launch.

The cache has a fixed length, so every step has the same shapes (a graph needs them): attention runs over
the whole cache with the positions not yet written masked out (an additive mask, which PyTorch's
memory-efficient attention kernel takes; it reads the cache once). Each step reports to gpubench its FLOPs,
the bytes it must move through device memory (the weights once, the part of the KV cache written so far,
the new keys and values and the logits it writes) and its tokens (the batch). Synthetic weights and
tokens: nothing is downloaded. With --no-gpubench it makes no gpubench call: watched, a decode job has no
optimizer step for gpubench to count, and its phases come from what its GPU did.
"""

from __future__ import annotations

import argparse
import math
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


class Layer(nn.Module):
    """Pre-norm attention with rotary positions and grouped KV heads, then a SwiGLU MLP."""

    def __init__(self, width: int, heads: int, kv_heads: int, ffn: int):
        super().__init__()
        self.heads, self.kv_heads, self.head_dim = heads, kv_heads, width // heads
        self.norm1, self.norm2 = nn.RMSNorm(width), nn.RMSNorm(width)
        self.qkv = nn.Linear(width, (heads + 2 * kv_heads) * self.head_dim, bias=False)
        self.out = nn.Linear(width, width, bias=False)
        self.up = nn.Linear(width, 2 * ffn, bias=False)
        self.down = nn.Linear(ffn, width, bias=False)

    def forward(self, x, cos, sin, k_cache, v_cache, pos, mask):
        b = x.shape[0]
        q, k, v = (
            self.qkv(self.norm1(x))
            .view(b, 1, -1, self.head_dim)
            .split([self.heads, self.kv_heads, self.kv_heads], dim=2)
        )
        q, k = rotate(q, cos, sin), rotate(k, cos, sin)
        k_cache.index_copy_(2, pos, k.transpose(1, 2))  # the new position, in place: shapes never change
        v_cache.index_copy_(2, pos, v.transpose(1, 2))
        if self.heads != self.kv_heads:  # grouped heads: each KV head serves heads // kv_heads query heads
            k_cache = k_cache.repeat_interleave(self.heads // self.kv_heads, dim=1)
            v_cache = v_cache.repeat_interleave(self.heads // self.kv_heads, dim=1)
        y = F.scaled_dot_product_attention(q.transpose(1, 2), k_cache, v_cache, attn_mask=mask)
        x = x + self.out(y.transpose(1, 2).reshape(b, 1, -1))
        gate, up = self.up(self.norm2(x)).chunk(2, dim=-1)
        return x + self.down(F.silu(gate) * up)


def rotate(x, cos, sin):
    a, b = x.float().chunk(2, dim=-1)
    return torch.cat((a * cos - b * sin, a * sin + b * cos), dim=-1).to(x.dtype)


class Decoder(nn.Module):
    def __init__(self, vocab: int, layers: int, width: int, heads: int, kv_heads: int, ffn: int):
        super().__init__()
        self.embed = nn.Embedding(vocab, width)
        self.layers = nn.ModuleList(Layer(width, heads, kv_heads, ffn) for _ in range(layers))
        self.norm = nn.RMSNorm(width)
        self.head = nn.Linear(width, vocab, bias=False)

    def forward(self, tokens, cos, sin, cache, pos, mask):
        x = self.embed(tokens)
        for layer, (k, v) in zip(self.layers, cache):
            x = layer(x, cos, sin, k, v, pos, mask)
        return self.head(self.norm(x)).argmax(-1)  # greedy: the next token of every sequence


class Session:
    """Everything one decode step reads and writes, allocated once: tokens, position, mask, rotary
    angles, cache. step() advances every sequence by one token."""

    def __init__(self, model: Decoder, batch: int, max_len: int, device):
        layer = model.layers[0]
        shape = (batch, layer.kv_heads, max_len, layer.head_dim)
        dtype = model.head.weight.dtype
        self.model, self.max_len = model, max_len
        self.cache = [
            (torch.zeros(shape, device=device, dtype=dtype), torch.zeros(shape, device=device, dtype=dtype))
            for _ in model.layers
        ]
        self.tokens = torch.randint(
            model.embed.num_embeddings,
            (batch, 1),
            device=device,
            generator=torch.Generator(device=device).manual_seed(0),
        )
        self.pos = torch.zeros(1, dtype=torch.long, device=device)
        self.mask = torch.full((1, 1, 1, max_len), -math.inf, dtype=dtype, device=device)  # 0 where attended
        half = layer.head_dim // 2
        self.freq = 1.0 / (10000 ** (torch.arange(half, device=device, dtype=torch.float32) / half))
        self.cos = torch.ones(1, 1, 1, half, device=device)
        self.sin = torch.zeros(1, 1, 1, half, device=device)

    def step(self) -> None:
        """One token for every sequence; everything in place, so a CUDA graph can replay it."""
        self.mask.index_fill_(3, self.pos, 0.0)  # this position may be attended to from now on
        angle = self.pos.float() * self.freq
        self.cos.copy_(angle.cos().view_as(self.cos))
        self.sin.copy_(angle.sin().view_as(self.sin))
        self.tokens.copy_(self.model(self.tokens, self.cos, self.sin, self.cache, self.pos, self.mask))
        self.pos.add_(1)

    def reset(self) -> None:
        self.pos.zero_()
        self.mask.fill_(-math.inf)


def work_model(model: Decoder, batch: int):
    """position -> (FLOPs, bytes) of the decode step that writes that position: a multiply-add per weight and
    token in the matrix products, and per cached key or value read in attention; bytes are the weights once,
    the cache up to this position, its new keys and values, and the logits. Counted once, used every step."""
    layer = model.layers[0]
    matrix = sum(p.numel() for n, p in model.named_parameters() if p.dim() == 2 and not n.startswith("embed"))
    kv = 2 * len(model.layers) * batch * layer.kv_heads * layer.head_dim  # values cached per position
    attention = 4 * len(model.layers) * batch * layer.heads * layer.head_dim  # per position attended to
    size = model.head.weight.element_size()
    fixed = gpubench.weight_bytes(model, tokens=batch) + batch * model.head.weight.shape[0] * size  # and the logits

    def at(position: int) -> tuple[float, float]:
        return 2.0 * matrix * batch + attention * (position + 1), float(fixed + kv * (position + 1) * size)

    return at


def parse(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--batch", type=int, default=1, help="sequences decoded together (default 1)")
    p.add_argument("--graph", action="store_true", help="replay each step as one CUDA graph")
    p.add_argument("--compile", action="store_true", help="torch.compile the decoder: its small kernels fused")
    p.add_argument("--layers", type=int, default=24)
    p.add_argument("--width", type=int, default=2048)
    p.add_argument("--heads", type=int, default=16)
    p.add_argument("--kv-heads", type=int, default=16, help="KV heads (fewer than --heads: grouped-query attention)")
    p.add_argument("--ffn", type=int, default=5632)
    p.add_argument("--vocab", type=int, default=32000)
    p.add_argument("--max-len", type=int, default=1024, help="the cache's length; a sequence decodes up to it")
    p.add_argument("--seconds", type=float, default=15.0, help="seconds of decoding after warm-up (default 15)")
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument(
        "--no-gpubench",
        action="store_true",
        help="make no gpubench call (mark, step): the job as it would run without gpubench",
    )
    return p.parse_args(argv)


def main(argv=None) -> None:
    args = parse(argv)
    torch.manual_seed(0)
    dtype = torch.bfloat16 if args.device.startswith("cuda") else torch.float32
    model = Decoder(args.vocab, args.layers, args.width, args.heads, args.kv_heads, args.ffn).to(args.device, dtype)
    model.eval()
    torch.backends.cuda.enable_cudnn_sdp(False)  # its plans are rebuilt per call for a masked cache: host-bound
    session = Session(model, args.batch, args.max_len, args.device)
    if args.compile:
        session.model = torch.compile(model, fullgraph=True, dynamic=False)  # compiles at the first warm-up step
    params = sum(p.numel() for p in model.parameters())
    print(
        f"decoder: {args.layers} layers, {args.width} wide, {params / 1e9:.2f} B parameters, "
        f"{gpubench.weight_bytes(model) / 1e9:.2f} GB of weights; batch {args.batch}, cache {args.max_len}, "
        f"{'compiled' if args.compile else 'eager'}{', CUDA graph' if args.graph else ''}",
        flush=True,
    )
    run, work = session.step, work_model(model, args.batch)
    gb = NoGpubench if args.no_gpubench else gpubench
    with torch.inference_mode():
        gb.mark("warmup")
        for _ in range(3):
            session.step()
        if args.graph:
            run = graph_of(session.step, args.device)
        session.reset()
        gb.mark("decode")
        t0, n = time.perf_counter(), 0
        while time.perf_counter() - t0 < args.seconds:
            position = n % args.max_len
            if position == 0 and n:
                session.reset()  # a new sequence: the cache starts again, the shapes stay
            run()
            flops, nbytes = work(position)
            gb.step(flops=flops, bytes=nbytes, tokens=args.batch)
            n += 1
        if args.device.startswith("cuda"):
            torch.cuda.synchronize()
        seconds = time.perf_counter() - t0
    print(
        f"decode: {n} steps in {seconds:.2f} s, {n * args.batch / seconds:.0f} tokens/s, "
        f"{1e3 * seconds / n:.3f} ms a step (host clock)",
        flush=True,
    )


def graph_of(step, device: str):
    """step captured once as a CUDA graph; the returned call replays it (one launch for every kernel)."""
    if not device.startswith("cuda"):
        return step
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        step()  # a step outside capture on the side stream first, as CUDA graphs want
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        step()
    return graph.replay


if __name__ == "__main__":
    main()
