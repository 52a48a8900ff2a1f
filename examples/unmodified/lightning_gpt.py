"""A Lightning job that knows nothing of gpubench: examples/train_gpt.py's model (GPT-2 small's shape) as a
LightningModule, trained on synthetic tokens in bf16.

    gpubench watch -- python examples/unmodified/lightning_gpt.py --seconds 15

Lightning runs the forward and backward inside the optimizer's step (a closure): watched, each step is
counted whole all the same. It prints its own count for comparison: train_gpt.py's analytic count (PaLM's
formula) at its steady rate on the host clock (the last half of its steps).
"""

import argparse
import importlib.util
import statistics
import time
from pathlib import Path

import lightning as L
import torch

spec = importlib.util.spec_from_file_location("train_gpt", Path(__file__).resolve().parents[1] / "train_gpt.py")
gpt = importlib.util.module_from_spec(spec)
spec.loader.exec_module(gpt)


class Module(L.LightningModule):
    def __init__(self, model):
        super().__init__()
        self.model = model

    def training_step(self, batch, i):
        x, y = batch
        return self.model(x, y)

    def configure_optimizers(self):
        return torch.optim.AdamW(self.parameters(), lr=3e-4, fused=torch.cuda.is_available())


class Tokens(torch.utils.data.IterableDataset):
    def __init__(self, vocab, seq):
        self.vocab, self.seq = vocab, seq

    def __iter__(self):
        gen = torch.Generator().manual_seed(0)
        while True:
            t = torch.randint(self.vocab, (self.seq + 1,), generator=gen)
            yield t[:-1], t[1:]


class Clock(L.Callback):
    def __init__(self, seconds):
        self.seconds, self.ends = seconds, []

    def on_train_batch_end(self, trainer, module, outputs, batch, i):
        self.ends.append(time.perf_counter())
        if self.ends[-1] - self.ends[0] > self.seconds:
            trainer.should_stop = True


def main():
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--seconds", type=float, default=15.0)
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--tiny", action="store_true", help="a model small enough for a CPU (a smoke test)")
    args = p.parse_args()
    shape = (
        dict(vocab=256, seq=32, layers=2, width=64, heads=4)
        if args.tiny
        else dict(vocab=50257, seq=1024, layers=12, width=768, heads=12)
    )
    torch.manual_seed(0)
    model = gpt.GPT(**shape)
    clock = Clock(args.seconds)
    gpu = torch.cuda.is_available()
    trainer = L.Trainer(
        accelerator="gpu" if gpu else "cpu",
        devices=1,
        precision="bf16-mixed",
        max_steps=100000,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        callbacks=[clock],
    )
    loader = torch.utils.data.DataLoader(
        Tokens(shape["vocab"], shape["seq"]), batch_size=args.batch, num_workers=2 if gpu else 0
    )
    trainer.fit(Module(model), loader)
    flops = gpt.analytic_flops(model, args.batch, shape["seq"])
    half = clock.ends[len(clock.ends) // 2 :]
    rate = 1.0 / statistics.median(b - a for a, b in zip(half, half[1:])) if len(half) > 2 else float("nan")
    print(
        f"own count: {flops:.6g} FLOPs a step by PaLM's formula; {rate:.6g} steps/s on the host clock over the "
        f"last half of its {len(clock.ends)} steps",
        flush=True,
    )


if __name__ == "__main__":
    main()
