"""A BERT-base encoder (a config, random weights, nothing downloaded) run forward only, bf16, over batches of
64 sequences of 512 tokens under torch.no_grad(): an embedding or scoring job, knowing nothing of gpubench.

    gpubench watch -- python examples/unmodified/bert_inference.py --seconds 20

Watched, its steps are the calls of its model and their FLOPs the count of one forward (gpubench.inside.forwards).
It prints its own count for comparison: forwards per second timed with CUDA events over the last half of its
forwards, and the FLOPs of one forward by PaLM's formula: 2 x the parameters of its matrix products x tokens,
and 4 x layers x width x sequence per token for attention's two products.
"""

import argparse
import statistics
import time

import torch
from transformers import BertConfig, BertModel


def main():
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--seconds", type=float, default=20.0)
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--seq", type=int, default=512)
    p.add_argument("--tiny", action="store_true", help="a model small enough for a CPU (a smoke test)")
    args = p.parse_args()
    device = "cuda" if torch.cuda.is_available() else "cpu"
    size = (
        dict(vocab_size=512, hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=128)
        if args.tiny
        else {}
    )
    batch, seq = (4, 64) if args.tiny else (args.batch, args.seq)
    config = BertConfig(max_position_embeddings=seq, attn_implementation="sdpa", **size)
    torch.manual_seed(0)
    model = BertModel(config, add_pooling_layer=False).to(device, torch.bfloat16).eval()
    ids = torch.randint(config.vocab_size, (8, batch, seq), device=device)
    stamps, i = [], 0
    t0 = time.perf_counter()
    with torch.no_grad():
        while time.perf_counter() - t0 < args.seconds:
            out = model(input_ids=ids[i % 8]).last_hidden_state
            if device == "cuda":
                e = torch.cuda.Event(enable_timing=True)
                e.record()
                stamps.append(e)
            i += 1
            if i % 50 == 0:
                out.float().sum().item()  # the job looks at a result now and then, as a real one would
    if device == "cuda":
        torch.cuda.synchronize()
        half = stamps[len(stamps) // 2 :]
        ms = statistics.median(a.elapsed_time(b) for a, b in zip(half, half[1:]))
    else:
        ms = float("nan")
    matrices = sum(q.numel() for n, q in model.named_parameters() if q.dim() == 2 and "embeddings" not in n)
    per_token = 2 * matrices + 4 * config.num_hidden_layers * config.hidden_size * seq
    print(
        f"own count: {per_token * batch * seq:.6g} FLOPs a forward by PaLM's formula; {1e3 / ms:.6g} forwards/s "
        f"on the GPU clock over the last half of its {i} forwards; {batch * seq * 1e3 / ms:.6g} tokens/s",
        flush=True,
    )


if __name__ == "__main__":
    main()
