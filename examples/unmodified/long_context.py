"""A causal decoder trained at a sequence length of 8192, knowing nothing of gpubench: RMSNorm, rotary
positions, fused QKV and F.scaled_dot_product_attention(is_causal=True) (flash attention on a GPU), a SwiGLU
MLP; bf16 weights and autocast, AdamW; synthetic tokens. At this length attention is most of its work.

    gpubench watch -- python examples/unmodified/long_context.py --seconds 15

Watched, its steps come from its optimizer and its FLOPs from one step gpubench counts. It prints its own
count for comparison: PaLM's formula (6 x the parameters of its matrix products x tokens, and 12 x layers x
width x sequence per token for attention), which counts causal attention whole where the kernel skips the
masked half; the count of what ran (attention halved) follows it. Both at its steady rate on the host clock
(the mean over the last half of its steps).
"""

import argparse
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


def rotate(x, cos, sin):
    a, b = x.chunk(2, dim=-1)
    return torch.cat((a * cos - b * sin, b * cos + a * sin), dim=-1)


class Layer(nn.Module):
    def __init__(self, d, heads, hidden):
        super().__init__()
        self.heads = heads
        self.norm1, self.norm2 = nn.RMSNorm(d), nn.RMSNorm(d)
        self.qkv, self.o = nn.Linear(d, 3 * d, bias=False), nn.Linear(d, d, bias=False)
        self.up, self.down = nn.Linear(d, 2 * hidden, bias=False), nn.Linear(hidden, d, bias=False)

    def forward(self, x, cos, sin):
        b, t, d = x.shape
        q, k, v = self.qkv(self.norm1(x)).view(b, t, 3, self.heads, d // self.heads).unbind(2)
        q, k, v = rotate(q.transpose(1, 2), cos, sin), rotate(k.transpose(1, 2), cos, sin), v.transpose(1, 2)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.o(y.transpose(1, 2).reshape(b, t, d))
        gate, up = self.up(self.norm2(x)).chunk(2, dim=-1)
        return x + self.down(F.silu(gate) * up)


class Decoder(nn.Module):
    def __init__(self, vocab, d, heads, layers, seq):
        super().__init__()
        self.embed = nn.Embedding(vocab, d)
        self.layers = nn.ModuleList(Layer(d, heads, 8 * d // 3 // 64 * 64) for _ in range(layers))
        self.norm, self.lm_head = nn.RMSNorm(d), nn.Linear(d, vocab, bias=False)
        half = d // heads // 2
        angles = torch.outer(torch.arange(seq).float(), 10000.0 ** (-torch.arange(half).float() / half))
        self.register_buffer("cos", angles.cos(), persistent=False)
        self.register_buffer("sin", angles.sin(), persistent=False)

    def forward(self, tokens):
        x = self.embed(tokens)
        cos, sin = self.cos[: tokens.shape[1]].to(x.dtype), self.sin[: tokens.shape[1]].to(x.dtype)
        for layer in self.layers:
            x = layer(x, cos, sin)
        return self.lm_head(self.norm(x))


def main():
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--seconds", type=float, default=15.0)
    p.add_argument("--batch", type=int, default=2)
    p.add_argument("--seq", type=int, default=8192)
    p.add_argument("--tiny", action="store_true", help="a small model at a sequence of 128 on a CPU (a smoke test)")
    args = p.parse_args()
    device = "cuda" if torch.cuda.is_available() else "cpu"
    vocab, d, heads, layers = (256, 64, 4, 2) if args.tiny else (32000, 2048, 16, 12)
    seq, batch = (128, 2) if args.tiny else (args.seq, args.batch)
    torch.manual_seed(0)
    model = Decoder(vocab, d, heads, layers, seq).to(device, torch.bfloat16)
    opt = torch.optim.AdamW(model.parameters(), lr=2e-4, betas=(0.9, 0.95), eps=1e-6, fused=device == "cuda")
    data = torch.randint(vocab, (batch, seq + 1), device=device)

    marks, t0 = [], time.perf_counter()
    while time.perf_counter() - t0 < args.seconds:
        with torch.autocast(device, dtype=torch.bfloat16):
            logits = model(data[:, :-1])
        loss = F.cross_entropy(logits.float().view(-1, vocab), data[:, 1:].reshape(-1))
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        marks.append((time.perf_counter(), loss.item()))

    late = marks[len(marks) // 2 :]  # its steps take the same time: their mean rate is their typical one
    rate = (len(late) - 1) / (late[-1][0] - late[0][0]) if len(late) > 2 else float("nan")
    matrices = sum(q.numel() for n, q in model.named_parameters() if q.dim() == 2 and n != "embed.weight")
    tokens = batch * seq
    attention = 12 * layers * d * seq * tokens
    palm = 6 * matrices * tokens + attention
    print(
        f"own count: {palm:.6g} FLOPs a step by PaLM's formula (causal attention whole; {palm - attention / 2:.6g}"
        f" with its masked half left out); {rate:.6g} steps/s on the host clock over the last half of its "
        f"{len(marks)} steps",
        flush=True,
    )


if __name__ == "__main__":
    main()
