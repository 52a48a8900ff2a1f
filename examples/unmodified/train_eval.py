"""A Hugging Face BERT-base classifier (a config, random weights, nothing downloaded) fine-tuned with a plain
loop that alternates training and evaluation, knowing nothing of gpubench: a stretch of training steps, then
a pass over a held-out set under torch.no_grad() in eval mode, and again, bf16 autocast throughout.

    gpubench watch -- python examples/unmodified/train_eval.py --seconds 20

Watched, its training steps come from its optimizer and its FLOPs from one step gpubench counts; the
evaluations, with no optimizer step, are phases of their own, found from what its GPU did. It prints its own
count for comparison: PaLM's formula (6 x the parameters of its matrix products x tokens, and 12 x layers x
width x sequence per token for attention) at its steady training rate on the host clock (the last half of
its training steps; the evaluations fall between them and out of the median), its training rate on the GPU
clock (steps over their time within its stretches), and its evaluation rate.
"""

import argparse
import statistics
import time

import torch
from transformers import BertConfig, BertForSequenceClassification


def main():
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--seconds", type=float, default=20.0)
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--seq", type=int, default=512)
    p.add_argument("--train-steps", type=int, default=150, help="training steps between evaluations")
    p.add_argument("--eval-batches", type=int, default=250, help="batches of the held-out set")
    p.add_argument("--tiny", action="store_true", help="a model small enough for a CPU (a smoke test)")
    args = p.parse_args()
    device = "cuda" if torch.cuda.is_available() else "cpu"
    if args.tiny:
        size = dict(vocab_size=512, hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=128)
        seq, batch, train_steps, eval_batches = 64, 4, 4, 3
    else:
        size = {}  # BERT-base: 12 layers of width 768
        seq, batch, train_steps, eval_batches = args.seq, args.batch, args.train_steps, args.eval_batches
    config = BertConfig(max_position_embeddings=seq, num_labels=4, attn_implementation="sdpa", **size)
    torch.manual_seed(0)
    model = BertForSequenceClassification(config).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=2e-5, weight_decay=0.01, fused=device == "cuda")
    ids = torch.randint(config.vocab_size, (16, batch, seq), device=device)
    labels = torch.randint(config.num_labels, (16, batch), device=device)

    eval_ms = []  # the time between one evaluation forward's end and the next's, on the GPU clock

    def evaluate():
        model.eval()
        correct, ends = 0, []
        with torch.no_grad(), torch.autocast(device, dtype=torch.bfloat16):
            for i in range(eval_batches):
                logits = model(input_ids=ids[i % 16]).logits
                correct += (logits.argmax(-1) == labels[i % 16]).sum()
                if device == "cuda":
                    ends.append(torch.cuda.Event(enable_timing=True))
                    ends[-1].record()
        model.train()
        accuracy = correct.item() / (eval_batches * batch)
        eval_ms.extend(a.elapsed_time(b) for a, b in zip(ends, ends[1:]))
        return accuracy

    train_ends, eval_s, step, train_ms = [], [], 0, []  # train_ms: between two training steps' ends, GPU clock
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < args.seconds:
        events = []
        for _ in range(train_steps):
            with torch.autocast(device, dtype=torch.bfloat16):
                loss = model(input_ids=ids[step % 16], labels=labels[step % 16]).loss
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
            if device == "cuda":
                events.append(torch.cuda.Event(enable_timing=True))
                events[-1].record()
            loss.item()
            train_ends.append(time.perf_counter())
            step += 1
        train_ms.extend(a.elapsed_time(b) for a, b in zip(events, events[1:]))
        t = time.perf_counter()
        accuracy = evaluate()
        eval_s.append(time.perf_counter() - t)
        print(f"step {step}: loss {loss.item():.3f}, eval accuracy {accuracy:.3f} ({eval_s[-1]:.2f} s)", flush=True)

    half = train_ends[len(train_ends) // 2 :]
    rate = 1.0 / statistics.median(b - a for a, b in zip(half, half[1:])) if len(half) > 2 else float("nan")
    # the embeddings are lookups; the pooler and the classifier see one token of each sequence
    matrices = sum(
        q.numel()
        for n, q in model.named_parameters()
        if q.dim() == 2 and not any(w in n for w in ("embeddings", "pooler", "classifier"))
    )
    per_token = 6 * matrices + 12 * config.num_hidden_layers * config.hidden_size * seq
    # a rate is steps over time: the mean over every stretch (the time from each step's end to the next's, the
    # evaluations between stretches left out), with the median beside it
    gpu_rate = 1e3 * len(train_ms) / sum(train_ms) if train_ms else float("nan")
    gpu_median = 1e3 / statistics.median(train_ms) if train_ms else float("nan")
    print(
        f"own count: {per_token * batch * seq:.6g} FLOPs a step by PaLM's formula; {rate:.6g} steps/s on the "
        f"host clock over the last half of its {len(train_ends)} training steps, {gpu_rate:.6g} training "
        f"steps/s on the GPU clock (steps over their time, every stretch; {gpu_median:.6g} from the median "
        f"time between two); evaluation "
        f"{eval_batches / statistics.median(eval_s):.4g} batches/s over {len(eval_s)} passes on the host clock, "
        f"{1e3 / statistics.median(eval_ms) if eval_ms else float('nan'):.4g} forwards/s on the GPU clock "
        f"(the median time between two)",
        flush=True,
    )


if __name__ == "__main__":
    main()
