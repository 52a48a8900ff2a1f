"""A Hugging Face GPT-2 (its output layer is its input embedding, tied) trained through Accelerate with bf16
mixed precision, knowing nothing of gpubench: a model from a config (random weights, nothing downloaded),
synthetic tokens from a DataLoader, AdamW and a warm-up schedule, as Accelerate's examples write it.

    gpubench watch -- python examples/unmodified/gpt2_accelerate.py --seconds 15

Watched, its steps come from its optimizer (Accelerate wraps it) and its FLOPs from one step gpubench counts.
It prints its own count for comparison: PaLM's formula, 6 x the parameters of its matrix products x tokens
(the tied embedding counted once, as the output layer's product: the input side is a lookup) and
12 x layers x width x sequence per token for attention, at its steady rate on the host clock (the last half
of its steps).
"""

import argparse
import statistics
import time

import torch
from accelerate import Accelerator
from transformers import GPT2Config, GPT2LMHeadModel, get_linear_schedule_with_warmup


class RandomTokens(torch.utils.data.IterableDataset):
    def __init__(self, vocab, seq):
        self.vocab, self.seq = vocab, seq

    def __iter__(self):
        g = torch.Generator().manual_seed(1234)
        while True:
            yield torch.randint(self.vocab, (self.seq,), generator=g)


def palm_flops(model, config, batch, seq):
    # wte is tied to lm_head: named_parameters() lists it once; wpe is a lookup only
    matrices = sum(p.numel() for n, p in model.named_parameters() if p.dim() == 2 and "wpe" not in n)
    per_token = 6 * matrices + 12 * config.n_layer * config.n_embd * seq
    return per_token * batch * seq


def main():
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--seconds", type=float, default=15.0)
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--seq", type=int, default=1024)
    p.add_argument("--tiny", action="store_true", help="a model small enough for a CPU (a smoke test)")
    args = p.parse_args()
    gpu = torch.cuda.is_available()
    accelerator = Accelerator(mixed_precision="bf16", cpu=not gpu)
    if args.tiny:
        seq, size = 64, dict(vocab_size=512, n_embd=64, n_layer=2, n_head=4, bos_token_id=511, eos_token_id=511)
    else:
        seq, size = args.seq, dict(vocab_size=50257, n_embd=768, n_layer=12, n_head=12)
    config = GPT2Config(n_positions=seq, attn_implementation="sdpa", **size)
    torch.manual_seed(0)
    model = GPT2LMHeadModel(config)
    assert model.lm_head.weight is model.transformer.wte.weight  # tied
    optimizer = torch.optim.AdamW(model.parameters(), lr=6e-4, betas=(0.9, 0.95), weight_decay=0.1)
    scheduler = get_linear_schedule_with_warmup(optimizer, num_warmup_steps=100, num_training_steps=100000)
    loader = torch.utils.data.DataLoader(
        RandomTokens(config.vocab_size, seq), batch_size=args.batch, num_workers=2 if gpu else 0, pin_memory=gpu
    )
    model, optimizer, loader, scheduler = accelerator.prepare(model, optimizer, loader, scheduler)

    model.train()
    stamps = []
    t0 = time.perf_counter()
    for input_ids in loader:
        outputs = model(input_ids=input_ids, labels=input_ids)
        accelerator.backward(outputs.loss)
        accelerator.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        scheduler.step()
        optimizer.zero_grad()
        loss = outputs.loss.item()
        stamps.append(time.perf_counter())
        if stamps[-1] - t0 >= args.seconds:
            break
    accelerator.wait_for_everyone()

    half = stamps[len(stamps) // 2 :]
    # the median step, so that one slow step (a data loader's hiccup) moves it little
    rate = 1.0 / statistics.median(b - a for a, b in zip(half, half[1:])) if len(half) > 2 else float("nan")
    flops = palm_flops(accelerator.unwrap_model(model), config, args.batch, seq)
    accelerator.print(
        f"own count: {flops:.6g} FLOPs a step by PaLM's formula; {rate:.6g} steps/s on the host "
        f"clock over the last half of its {len(stamps)} steps (last loss {loss:.3f})"
    )


if __name__ == "__main__":
    main()
