"""A torchvision ResNet-50 (random weights) classifying batches of 256 images under torch.inference_mode, bf16,
channels-last: an offline scoring job, knowing nothing of gpubench.

    gpubench watch -- python examples/unmodified/vision_inference.py --seconds 20

Watched, its steps are the calls of its model and their FLOPs the count of one forward. It prints its own count:
forwards per second timed with CUDA events over the last half of its forwards, and the FLOPs of one forward
from its convolutions and its classifier, computed from their shapes (2 x output elements x the inputs each sums).
"""

import argparse
import statistics
import time

import torch
import torchvision


def conv_flops(model, size: int) -> int:
    """2 x multiply-adds of every convolution and linear layer at one image of size x size, from their shapes."""
    total, hooks = [0], []

    def conv(m, args, out):
        total[0] += 2 * out.numel() * (m.in_channels // m.groups) * m.kernel_size[0] * m.kernel_size[1]

    def linear(m, args, out):
        total[0] += 2 * out.numel() * m.in_features

    for m in model.modules():
        if isinstance(m, torch.nn.Conv2d):
            hooks.append(m.register_forward_hook(conv))
        elif isinstance(m, torch.nn.Linear):
            hooks.append(m.register_forward_hook(linear))
    with torch.no_grad():
        model(
            torch.zeros(1, 3, size, size, device=next(model.parameters()).device, dtype=next(model.parameters()).dtype)
        )
    for h in hooks:
        h.remove()
    return total[0]


def main():
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--seconds", type=float, default=20.0)
    p.add_argument("--batch", type=int, default=256)
    p.add_argument("--size", type=int, default=224)
    p.add_argument("--tiny", action="store_true", help="small enough for a CPU (a smoke test)")
    args = p.parse_args()
    device = "cuda" if torch.cuda.is_available() else "cpu"
    batch, size = (2, 64) if args.tiny else (args.batch, args.size)
    torch.manual_seed(0)
    model = torchvision.models.resnet50().to(device, torch.bfloat16).eval()
    model = model.to(memory_format=torch.channels_last)
    per_image = conv_flops(model, size)
    images = torch.randn(4, batch, 3, size, size, device=device, dtype=torch.bfloat16)
    images = images.contiguous(memory_format=torch.channels_last) if images.dim() == 4 else images
    stamps, i = [], 0
    t0 = time.perf_counter()
    with torch.inference_mode():
        while time.perf_counter() - t0 < args.seconds:
            logits = model(images[i % 4])
            if device == "cuda":
                e = torch.cuda.Event(enable_timing=True)
                e.record()
                stamps.append(e)
            i += 1
            if i % 20 == 0:
                logits.argmax(-1).sum().item()
    if device == "cuda":
        torch.cuda.synchronize()
        half = stamps[len(stamps) // 2 :]
        ms = statistics.median(a.elapsed_time(b) for a, b in zip(half, half[1:]))
    else:
        ms = float("nan")
    print(
        f"own count: {per_image * batch:.6g} FLOPs a forward from its layers' shapes; {1e3 / ms:.6g} forwards/s "
        f"on the GPU clock over the last half of its {i} forwards; {batch * 1e3 / ms:.6g} images/s",
        flush=True,
    )


if __name__ == "__main__":
    main()
