"""A torchvision ViT-B/16 trained from random weights on synthetic images in fp16, knowing nothing of gpubench:
fp16 autocast with a GradScaler (fp16's narrow range needs the loss scaled), AdamW, a cosine schedule.

    gpubench watch -- python examples/unmodified/vit_fp16_scaler.py --seconds 15

Watched (with --dtype fp16 its MFU is of the fp16 peak, on Hopper the same as bf16's), its steps come from its
optimizer, stepped through the scaler, and its FLOPs from one step gpubench counts. It prints its own count for
comparison: a ViT's multiply-adds counted by layer (per image, 12 x width^2 x tokens a block for its
matrix products and 2 x tokens^2 x width for attention, plus the patch embedding; ViT-B/16 at 224 x 224 comes
to torchvision's 17.56 GFLOPS, which are multiply-adds), twice for FLOPs and three times over for training,
at its steady rate on the host clock (the last half of its steps).
"""

import argparse
import math
import statistics
import time

import torch
import torch.nn.functional as F
from torchvision.models import VisionTransformer, vit_b_16


def forward_macs(vit: VisionTransformer) -> float:
    """One image's multiply-adds: patch embedding, the blocks (attention and MLP), and the head."""
    d, patches = vit.hidden_dim, (vit.image_size // vit.patch_size) ** 2
    n = patches + 1  # the class token
    blocks = len(vit.encoder.layers) * (4 * d * d * n + 2 * d * vit.mlp_dim * n + 2 * n * n * d)
    return patches * 3 * vit.patch_size**2 * d + blocks + d * vit.num_classes


def main():
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--seconds", type=float, default=15.0)
    p.add_argument("--batch", type=int, default=256)
    p.add_argument("--tiny", action="store_true", help="a two-block ViT at 32 x 32 on a CPU (a smoke test)")
    args = p.parse_args()
    device = "cuda" if torch.cuda.is_available() else "cpu"
    torch.manual_seed(0)
    if args.tiny:
        model = VisionTransformer(image_size=32, patch_size=8, num_layers=2, num_heads=2, hidden_dim=64, mlp_dim=128)
        batch = 4
    else:
        model, batch = vit_b_16(weights=None), args.batch
    model = model.to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.05)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: 0.5 * (1 + math.cos(math.pi * min(s, 10000) / 10000)))
    scaler = torch.amp.GradScaler(device)
    images = torch.randn(batch, 3, model.image_size, model.image_size, device=device)
    targets = torch.randint(1000, (batch,), device=device)

    log, begin = [], time.perf_counter()
    while time.perf_counter() - begin < args.seconds:
        opt.zero_grad(set_to_none=True)
        with torch.autocast(device, dtype=torch.float16):
            loss = F.cross_entropy(model(images), targets)
        scaler.scale(loss).backward()
        scaler.unscale_(opt)
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        scaler.step(opt)  # skipped where the scaled gradients overflowed
        scaler.update()
        sched.step()
        log.append((time.perf_counter(), loss.item(), scaler.get_scale()))

    last = [t for t, _, _ in log[len(log) // 2 :]]
    rate = 1.0 / statistics.median(b - a for a, b in zip(last, last[1:])) if len(last) > 2 else float("nan")
    flops = 3 * 2 * forward_macs(model) * batch
    print(
        f"own count: {flops:.6g} FLOPs a step by its layers' multiply-adds; {rate:.6g} steps/s on the host "
        f"clock over the last half of its {len(log)} steps (loss scale {log[-1][2]:g})",
        flush=True,
    )


if __name__ == "__main__":
    main()
