"""A DCGAN trained on synthetic 64 x 64 images, knowing nothing of gpubench: a generator of transposed
convolutions and a discriminator of strided convolutions, each with its own Adam, both stepped every
iteration (the discriminator, then the generator), under bf16 autocast, as PyTorch's DCGAN example does.

    gpubench watch -- python examples/unmodified/gan_two_optimizers.py --seconds 15

Watched, its steps come from its optimizers, two an iteration, and its FLOPs from one step gpubench counts.
It prints its own count for comparison: an iteration's convolutions, forward 2 x in x out x k x k FLOPs
at each output position of a convolution (each input position of a transposed one), three times over for
the backward: the generator's pass once, the discriminator's three times (real images, fakes for its own
step, fakes for the generator's), at its steady rate on the host clock (the last half of its iterations).
"""

import argparse
import statistics
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

NZ = 128  # the noise's width


def generator(w):
    def up(cin, cout, first=False):
        return [
            nn.ConvTranspose2d(cin, cout, 4, 1 if first else 2, 0 if first else 1, bias=False),
            nn.BatchNorm2d(cout),
            nn.ReLU(True),
        ]

    return nn.Sequential(
        *up(NZ, 8 * w, True),
        *up(8 * w, 4 * w),
        *up(4 * w, 2 * w),
        *up(2 * w, w),
        nn.ConvTranspose2d(w, 3, 4, 2, 1, bias=False),
        nn.Tanh(),
    )


def discriminator(w):
    def down(cin, cout, norm=True):
        return (
            [nn.Conv2d(cin, cout, 4, 2, 1, bias=False)]
            + ([nn.BatchNorm2d(cout)] if norm else [])
            + [nn.LeakyReLU(0.2, True)]
        )

    return nn.Sequential(
        *down(3, w, False),
        *down(w, 2 * w),
        *down(2 * w, 4 * w),
        *down(4 * w, 8 * w),
        nn.Conv2d(8 * w, 1, 4, 1, 0, bias=False),
        nn.Flatten(),
    )


def conv_flops(model, side_in):
    """Forward FLOPs of one sample's convolutions: a convolution's at each output position, a transposed
    one's at each input position (each input value scatters in x out x k x k products)."""
    total, side = 0, side_in
    for m in model:
        if isinstance(m, (nn.Conv2d, nn.ConvTranspose2d)):
            k, s, pad = m.kernel_size[0], m.stride[0], m.padding[0]
            out = (side - 1) * s - 2 * pad + k if isinstance(m, nn.ConvTranspose2d) else (side + 2 * pad - k) // s + 1
            at = side if isinstance(m, nn.ConvTranspose2d) else out
            total += 2 * m.in_channels * m.out_channels * k * k * at * at
            side = out
    return total


def main():
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--seconds", type=float, default=15.0)
    p.add_argument("--batch", type=int, default=1024)
    p.add_argument("--width", type=int, default=128, help="the first layer's channels (DCGAN's 64, doubled)")
    p.add_argument("--tiny", action="store_true", help="narrow nets and a small batch for a CPU (a smoke test)")
    args = p.parse_args()
    device = "cuda" if torch.cuda.is_available() else "cpu"
    torch.backends.cudnn.benchmark = True
    width, batch = (8, 4) if args.tiny else (args.width, args.batch)
    torch.manual_seed(0)
    net_g, net_d = generator(width).to(device), discriminator(width).to(device)
    opt_g = torch.optim.Adam(net_g.parameters(), lr=2e-4, betas=(0.5, 0.999))
    opt_d = torch.optim.Adam(net_d.parameters(), lr=2e-4, betas=(0.5, 0.999))
    real = torch.rand(batch, 3, 64, 64, device=device) * 2 - 1  # stands in for a data set's images
    ones, zeros = torch.ones(batch, 1, device=device), torch.zeros(batch, 1, device=device)

    history, started = [], time.perf_counter()
    while time.perf_counter() - started < args.seconds:
        noise = torch.randn(batch, NZ, 1, 1, device=device)
        with torch.autocast(device, dtype=torch.bfloat16):
            fake = net_g(noise)
            loss_d = F.binary_cross_entropy_with_logits(net_d(real), ones) + F.binary_cross_entropy_with_logits(
                net_d(fake.detach()), zeros
            )
        opt_d.zero_grad()
        loss_d.backward()
        opt_d.step()
        with torch.autocast(device, dtype=torch.bfloat16):
            loss_g = F.binary_cross_entropy_with_logits(net_d(fake), ones)
        opt_g.zero_grad()
        loss_g.backward()
        opt_g.step()
        history.append((time.perf_counter(), loss_d.item(), loss_g.item()))

    late = [t for t, _, _ in history[len(history) // 2 :]]
    rate = 1.0 / statistics.median(b - a for a, b in zip(late, late[1:])) if len(late) > 2 else float("nan")
    flops = 3 * batch * (conv_flops(net_g, 1) + 3 * conv_flops(net_d, 64))
    print(
        f"own count: {flops:.6g} FLOPs a step by its convolutions (a step is an iteration: both optimizers); "
        f"{rate:.6g} steps/s on the host clock over the last half of its {len(history)} steps",
        flush=True,
    )


if __name__ == "__main__":
    main()
