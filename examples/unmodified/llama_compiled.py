"""A Hugging Face LlamaForCausalLM built from a small config (random weights, nothing downloaded), compiled
with torch.compile and trained in bf16 autocast with fused AdamW on synthetic tokens, knowing nothing of
gpubench.

    gpubench watch -- python examples/unmodified/llama_compiled.py --seconds 15

The first step compiles (tens of seconds on a GPU host); --seconds of training follow it. Watched, its steps
come from its optimizer and its FLOPs from one step gpubench counts. It prints its own count for
comparison: PaLM's formula (6 x the parameters of its matrix products x tokens, and 12 x layers x width x
sequence per token for attention, counted whole though it is causal) at its steady rate on the host clock
(the last half of its steps after the compiling one).
"""

import argparse
import statistics
import time

import torch
import torch.nn.functional as F
from transformers import LlamaConfig, LlamaForCausalLM


def main():
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--seconds", type=float, default=15.0)
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--seq", type=int, default=2048)
    p.add_argument("--tiny", action="store_true", help="a model small enough for a CPU (a smoke test)")
    args = p.parse_args()
    gpu = torch.cuda.is_available()
    device = "cuda" if gpu else "cpu"
    size = (
        dict(
            hidden_size=64,
            intermediate_size=172,
            num_hidden_layers=2,
            num_attention_heads=4,
            num_key_value_heads=2,
            vocab_size=256,
        )
        if args.tiny
        else dict(
            hidden_size=2048,
            intermediate_size=5632,
            num_hidden_layers=8,
            num_attention_heads=16,
            num_key_value_heads=8,
            vocab_size=32000,
        )
    )
    seq = 32 if args.tiny else args.seq
    config = LlamaConfig(max_position_embeddings=seq, attn_implementation="sdpa", use_cache=False, **size)
    torch.manual_seed(0)
    model = LlamaForCausalLM(config).to(device).train()
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4, betas=(0.9, 0.95), weight_decay=0.1, fused=gpu)
    # Inductor's CPU backend builds C++ with the host's compiler: minutes for a smoke test on a small CPU,
    # so only a GPU run compiles; a CPU run trains the same model eagerly.
    forward = torch.compile(model) if gpu else model
    tokens = torch.randint(config.vocab_size, (args.batch, seq + 1), device=device)

    def step():
        with torch.autocast(device, dtype=torch.bfloat16):
            logits = forward(input_ids=tokens[:, :-1]).logits
        loss = F.cross_entropy(logits.float().flatten(0, 1), tokens[:, 1:].flatten())
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        return loss.item()

    t = time.perf_counter()
    step()  # compiles
    print(f"first step (compiling) took {time.perf_counter() - t:.1f} s", flush=True)
    done, t0 = [], time.perf_counter()
    while not done or done[-1] - t0 < args.seconds:
        step()
        done.append(time.perf_counter())

    half = done[len(done) // 2 :]
    rate = 1.0 / statistics.median(b - a for a, b in zip(half, half[1:])) if len(half) > 2 else float("nan")
    matrices = sum(q.numel() for n, q in model.named_parameters() if q.dim() == 2 and "embed_tokens" not in n)
    per_token = 6 * matrices + 12 * config.num_hidden_layers * config.hidden_size * seq
    print(
        f"own count: {per_token * args.batch * seq:.6g} FLOPs a step by PaLM's formula; {rate:.6g} steps/s on "
        f"the host clock over the last half of its {len(done)} steps",
        flush=True,
    )


if __name__ == "__main__":
    main()
