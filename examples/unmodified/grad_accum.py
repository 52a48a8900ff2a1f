"""A plain PyTorch language model with gradient accumulation, knowing nothing of gpubench: token and position
embeddings, nn.TransformerEncoder under a causal mask (pre-norm, GELU), an untied output layer; bf16
autocast; four micro-batches' gradients summed before each AdamW step, as a job does whose batch does not fit.

    gpubench watch -- python examples/unmodified/grad_accum.py --seconds 15

Watched, its steps come from its optimizer (one step every four micro-batches) and its FLOPs from one step
gpubench counts. It prints its own count for comparison: PaLM's formula (6 x the parameters of its matrix
products x tokens, and 12 x layers x width x sequence per token for attention, counted whole though it is
causal) over the four micro-batches of an optimizer step, at its steady rate on the host clock (the last
half of its optimizer steps).
"""

import argparse
import statistics
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


class LM(nn.Module):
    def __init__(self, vocab, seq, width, layers, heads):
        super().__init__()
        self.embed = nn.Embedding(vocab, width)
        self.pos = nn.Parameter(torch.zeros(1, seq, width))
        layer = nn.TransformerEncoderLayer(
            width, heads, 4 * width, dropout=0.0, activation="gelu", batch_first=True, norm_first=True
        )
        self.encoder = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
        self.norm = nn.LayerNorm(width)
        self.head = nn.Linear(width, vocab, bias=False)
        self.register_buffer("mask", nn.Transformer.generate_square_subsequent_mask(seq), persistent=False)

    def forward(self, tokens):
        x = self.embed(tokens) + self.pos[:, : tokens.shape[1]]
        x = self.encoder(x, mask=self.mask, is_causal=True)
        return self.head(self.norm(x))


def main():
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--seconds", type=float, default=15.0)
    p.add_argument("--micro-batch", type=int, default=8)
    p.add_argument("--accum", type=int, default=4, help="micro-batches per optimizer step")
    p.add_argument("--tiny", action="store_true", help="a model small enough for a CPU (a smoke test)")
    args = p.parse_args()
    device = "cuda" if torch.cuda.is_available() else "cpu"
    vocab, seq, width, layers, heads = (256, 32, 64, 2, 4) if args.tiny else (32000, 1024, 1024, 12, 16)
    micro = 2 if args.tiny else args.micro_batch
    torch.manual_seed(0)
    model = LM(vocab, seq, width, layers, heads).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4, weight_decay=0.1, fused=device == "cuda")
    data = torch.randint(vocab, (64, micro, seq + 1), device=device)  # a ring of synthetic batches

    steps, b, t0 = [], 0, time.perf_counter()
    while time.perf_counter() - t0 < args.seconds:
        for _ in range(args.accum):
            batch = data[b % len(data)]
            b += 1
            with torch.autocast(device, dtype=torch.bfloat16):
                logits = model(batch[:, :-1])
                loss = F.cross_entropy(logits.float().view(-1, vocab), batch[:, 1:].reshape(-1))
            (loss / args.accum).backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        steps.append((time.perf_counter(), loss.item()))

    ends = [t for t, _ in steps[len(steps) // 2 :]]
    rate = 1.0 / statistics.median(b - a for a, b in zip(ends, ends[1:])) if len(ends) > 2 else float("nan")
    matrices = sum(p.numel() for n, p in model.named_parameters() if p.dim() == 2 and n != "embed.weight")
    flops = (6 * matrices + 12 * layers * width * seq) * micro * seq * args.accum
    print(
        f"own count: {flops:.6g} FLOPs a step by PaLM's formula ({args.accum} micro-batches of {micro}); "
        f"{rate:.6g} steps/s on the host clock over the last half of its {len(steps)} steps",
        flush=True,
    )


if __name__ == "__main__":
    main()
