"""A torchvision ResNet-50 trained from random weights on synthetic images, knowing nothing of gpubench:
bf16 autocast, channels-last, SGD with momentum.

    gpubench watch -- python examples/unmodified/resnet50.py --seconds 15

Watched, its steps come from its optimizer and its FLOPs from one step gpubench counts. It prints its own
count for comparison: torchvision's 4.09 GFLOPS a 224 x 224 image (multiply-adds, so 8.18 GFLOP forward)
three times over for training, at its steady rate on the host clock (the last half of its steps).
"""

import argparse
import statistics
import time

import torch
import torch.nn.functional as F

FORWARD_MACS = {"resnet50": 4.089e9, "resnet18": 1.814e9}  # torchvision's figures at 224 x 224, multiply-adds


def main():
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--seconds", type=float, default=15.0)
    p.add_argument("--batch", type=int, default=128)
    p.add_argument("--tiny", action="store_true", help="resnet18 at 32 x 32 on a CPU (a smoke test)")
    args = p.parse_args()
    import torchvision

    device = "cuda" if torch.cuda.is_available() else "cpu"
    torch.manual_seed(0)
    name = "resnet18" if args.tiny else "resnet50"
    model = getattr(torchvision.models, name)(weights=None)
    model = model.to(device, memory_format=torch.channels_last)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    side, batch = (32, 4) if args.tiny else (224, args.batch)
    images = torch.randn(batch, 3, side, side, device=device).to(memory_format=torch.channels_last)
    labels = torch.randint(1000, (batch,), device=device)
    ends, t0 = [], time.perf_counter()
    while time.perf_counter() - t0 < args.seconds:
        with torch.autocast(device, dtype=torch.bfloat16):
            loss = F.cross_entropy(model(images), labels)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        loss.item()
        ends.append(time.perf_counter())
    half = ends[len(ends) // 2 :]
    rate = 1.0 / statistics.median(b - a for a, b in zip(half, half[1:])) if len(half) > 2 else float("nan")
    flops = 3 * 2 * FORWARD_MACS[name] * batch * (side / 224) ** 2
    print(
        f"own count: {flops:.6g} FLOPs a step by torchvision's figure; {rate:.6g} steps/s on the host clock over "
        f"the last half of its {len(ends)} steps",
        flush=True,
    )


if __name__ == "__main__":
    main()
