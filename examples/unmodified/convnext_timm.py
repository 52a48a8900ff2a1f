"""A timm ConvNeXt-S trained from random weights on synthetic images, knowing nothing of gpubench: bf16
autocast, channels-last, AdamW. Its stages mix 7 x 7 depthwise convolutions (one filter a channel) with
pointwise (1 x 1) matrix products.

    gpubench watch -- python examples/unmodified/convnext_timm.py --seconds 15

Watched, its steps come from its optimizer and its FLOPs from one step gpubench counts. It prints its own
count for comparison: timm's published multiply-adds for a 224 x 224 image (8.71 GMACs for ConvNeXt-S, so
17.4 GFLOP forward), three times over for training, at its steady rate on the host clock (the last half of
its steps). The depthwise convolutions are a small share of those FLOPs but not of the time: they run
beside the tensor pipes.
"""

import argparse
import statistics
import time

import timm
import torch
import torch.nn.functional as F

# timm's model cards, 224 x 224: multiply-adds of one forward pass
FORWARD_MACS = {"convnext_small": 8.71e9, "convnext_atto": 0.55e9}


def main():
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--seconds", type=float, default=15.0)
    p.add_argument("--batch", type=int, default=128)
    p.add_argument("--tiny", action="store_true", help="ConvNeXt-Atto at 64 x 64 on a CPU (a smoke test)")
    args = p.parse_args()
    device = "cuda" if torch.cuda.is_available() else "cpu"
    torch.backends.cudnn.benchmark = True
    torch.manual_seed(0)
    arch = "convnext_atto" if args.tiny else "convnext_small"
    model = timm.create_model(arch, pretrained=False, num_classes=1000, drop_path_rate=0.1)
    model = model.to(device, memory_format=torch.channels_last).train()
    opt = torch.optim.AdamW(model.parameters(), lr=4e-3, weight_decay=0.05, fused=device == "cuda")
    side, batch = (64, 4) if args.tiny else (224, args.batch)
    x = torch.randn(batch, 3, side, side, device=device).contiguous(memory_format=torch.channels_last)
    y = torch.randint(1000, (batch,), device=device)

    times = []
    start = last = time.perf_counter()
    while last - start < args.seconds:
        opt.zero_grad(set_to_none=True)
        with torch.autocast(device_type=device, dtype=torch.bfloat16):
            out = model(x)
            loss = F.cross_entropy(out, y, label_smoothing=0.1)
        loss.backward()
        opt.step()
        if not torch.isfinite(loss):  # reads the loss: waits for the step, as a NaN check does
            raise SystemExit("loss is not finite")
        now = time.perf_counter()
        times.append(now - last)
        last = now

    tail = times[len(times) // 2 :]
    rate = 1.0 / statistics.median(tail) if len(tail) > 1 else float("nan")
    flops = 3 * 2 * FORWARD_MACS[arch] * batch * (side / 224) ** 2
    print(
        f"own count: {flops:.6g} FLOPs a step by timm's figure; {rate:.6g} steps/s on the host clock over "
        f"the last half of its {len(times)} steps",
        flush=True,
    )


if __name__ == "__main__":
    main()
