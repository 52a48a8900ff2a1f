"""A Hugging Face Trainer job that knows nothing of gpubench: a Llama-style model from a config (random
weights, nothing downloaded) trained on synthetic tokens, then evaluated once.

    gpubench watch -- python examples/unmodified/hf_trainer.py --seconds 15

Watched, its steps come from its optimizer (Accelerate wraps it), its FLOPs from one step gpubench counts,
and its phases from what its GPU did. It prints its own count, for comparison: PaLM's formula (6 x the
parameters of its matrix products x tokens, and 12 x layers x width x sequence per token for attention)
at its steady rate (the host's clock over the last half of its steps).
"""

import argparse
import statistics
import time

import torch
from transformers import LlamaConfig, LlamaForCausalLM, Trainer, TrainerCallback, TrainingArguments


class Tokens(torch.utils.data.Dataset):
    def __init__(self, n, seq, vocab):
        self.data = torch.randint(vocab, (n, seq), generator=torch.Generator().manual_seed(0))

    def __len__(self):
        return len(self.data)

    def __getitem__(self, i):
        return {"input_ids": self.data[i], "labels": self.data[i]}


class Clock(TrainerCallback):
    """Stops training after `seconds` and keeps each step's end on the host clock."""

    def __init__(self, seconds):
        self.seconds, self.ends, self.t0 = seconds, [], None

    def on_step_end(self, args, state, control, **kwargs):
        now = time.perf_counter()
        self.t0 = self.t0 or now
        self.ends.append(now)
        if now - self.t0 > self.seconds:
            control.should_training_stop = True


def palm_flops(model, config, batch, seq) -> float:
    matrices = sum(p.numel() for n, p in model.named_parameters() if p.dim() == 2 and "embed_tokens" not in n)
    per_token = 6 * matrices + 12 * config.num_hidden_layers * config.hidden_size * seq
    return per_token * batch * seq


def steady_rate(ends) -> float:
    half = ends[len(ends) // 2 :]
    return 1.0 / statistics.median(b - a for a, b in zip(half, half[1:])) if len(half) > 2 else float("nan")


def main():
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--seconds", type=float, default=15.0)
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--seq", type=int, default=1024)
    p.add_argument("--tiny", action="store_true", help="a model small enough for a CPU (a smoke test)")
    args = p.parse_args()
    size = (
        dict(
            hidden_size=64,
            intermediate_size=128,
            num_hidden_layers=2,
            num_attention_heads=4,
            num_key_value_heads=2,
            vocab_size=256,
        )
        if args.tiny
        else dict(
            hidden_size=1024,
            intermediate_size=2816,
            num_hidden_layers=12,
            num_attention_heads=16,
            num_key_value_heads=4,
            vocab_size=32000,
        )
    )
    seq = 32 if args.tiny else args.seq
    config = LlamaConfig(max_position_embeddings=seq, attn_implementation="sdpa", **size)
    torch.manual_seed(0)
    model = LlamaForCausalLM(config)
    gpu = torch.cuda.is_available()
    training = TrainingArguments(
        output_dir="/tmp/hf-trainer-job",
        per_device_train_batch_size=args.batch,
        per_device_eval_batch_size=args.batch,
        max_steps=100000,
        learning_rate=3e-4,
        bf16=gpu,
        use_cpu=not gpu,
        logging_strategy="no",
        save_strategy="no",
        eval_strategy="no",
        report_to=[],
        dataloader_num_workers=2 if gpu else 0,
        disable_tqdm=True,
        optim="adamw_torch_fused" if gpu else "adamw_torch",
    )
    clock = Clock(args.seconds)
    trainer = Trainer(
        model=model,
        args=training,
        train_dataset=Tokens(100000, seq, config.vocab_size),
        eval_dataset=Tokens(16 * args.batch, seq, config.vocab_size),
        callbacks=[clock],
    )
    trainer.train()
    trainer.evaluate()
    flops = palm_flops(model, config, args.batch, seq)
    print(
        f"own count: {flops:.6g} FLOPs a step by PaLM's formula; {steady_rate(clock.ends):.6g} steps/s on the "
        f"host clock over the last half of its {len(clock.ends)} steps",
        flush=True,
    )


if __name__ == "__main__":
    main()
