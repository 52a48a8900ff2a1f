"""A Wasserstein GAN trained on synthetic 64 x 64 images, knowing nothing of gpubench: a generator of transposed
convolutions and a critic of strided convolutions, each with its own RMSprop, the critic stepped five times
(its weights clipped after each step) for each generator step, as the WGAN paper's training loop does.

    gpubench watch -- python examples/unmodified/wgan_critic.py --seconds 15

Watched, its optimizers step in a pattern of five critic steps and one generator step: each pattern is one
step, and its FLOPs are those gpubench counts over one whole pattern. It prints its own count for comparison:
an iteration's convolutions, forward 2 x in x out x k x k FLOPs at each output position of a convolution (each
input position of a transposed one) and as much again for each gradient the backward computes (the weights'
always, the inputs' where they need one: never for the noise, the real images or the detached fakes), and its
iterations per second at its steady rate (the last half of its iterations), on the host clock and, on a GPU,
on the GPU's clock (CUDA events recorded at the end of each iteration).
"""

import argparse
import statistics
import time

import torch
import torch.nn as nn

NZ = 128  # the noise's width


def generator(w):
    chans, layers = [NZ, 8 * w, 4 * w, 2 * w, w], []
    for i, (cin, cout) in enumerate(zip(chans, chans[1:])):
        up = nn.ConvTranspose2d(cin, cout, 4, 2 if i else 1, 1 if i else 0, bias=False)
        layers += [up, nn.BatchNorm2d(cout), nn.ReLU(True)]
    return nn.Sequential(*layers, nn.ConvTranspose2d(w, 3, 4, 2, 1, bias=False), nn.Tanh())


def critic(w):
    chans, layers = [3, w, 2 * w, 4 * w, 8 * w], []
    for i, (cin, cout) in enumerate(zip(chans, chans[1:])):
        norm = [nn.BatchNorm2d(cout)] if i else []
        layers += [nn.Conv2d(cin, cout, 4, 2, 1, bias=False), *norm, nn.LeakyReLU(0.2, True)]
    return nn.Sequential(*layers, nn.Conv2d(8 * w, 1, 4, 1, 0, bias=False), nn.Flatten())


def conv_flops(model, side_in):
    """Forward FLOPs of one sample's convolutions, each layer's in a list: a convolution's at each output
    position, a transposed one's at each input position (each input value scatters in x out x k x k products)."""
    out_flops, side = [], side_in
    for m in model:
        if isinstance(m, (nn.Conv2d, nn.ConvTranspose2d)):
            k, s, pad = m.kernel_size[0], m.stride[0], m.padding[0]
            out = (side - 1) * s - 2 * pad + k if isinstance(m, nn.ConvTranspose2d) else (side + 2 * pad - k) // s + 1
            at = side if isinstance(m, nn.ConvTranspose2d) else out
            out_flops.append(2 * m.in_channels * m.out_channels * k * k * at * at)
            side = out
    return out_flops


def iteration_flops(net_g, net_c, batch, n_critic):
    """One iteration's convolution FLOPs. A critic step: the generator forward (no gradient), the critic forward
    and backward on the real images and on the fakes, no input gradient at its first layer. The generator step:
    both forward, the critic's backward whole, the generator's without its first layer's input gradient."""
    g, c = conv_flops(net_g, 1), conv_flops(net_c, 64)
    critic_step = sum(g) + 2 * (3 * sum(c) - c[0])
    generator_step = 3 * sum(g) - g[0] + 3 * sum(c)
    return batch * (n_critic * critic_step + generator_step)


def build(width, batch, device):
    torch.manual_seed(0)
    net_g, net_c = generator(width).to(device), critic(width).to(device)
    opt_g = torch.optim.RMSprop(net_g.parameters(), lr=5e-5)
    opt_c = torch.optim.RMSprop(net_c.parameters(), lr=5e-5)
    real = torch.rand(batch, 3, 64, 64, device=device) * 2 - 1  # stands in for a data set's images
    return net_g, net_c, opt_g, opt_c, real


def iteration(net_g, net_c, opt_g, opt_c, real, n_critic, clip=0.01):
    """Five critic steps (the Wasserstein estimate, weights clipped), then one generator step."""
    batch, device = real.shape[0], real.device
    for _ in range(n_critic):
        with torch.no_grad():
            fake = net_g(torch.randn(batch, NZ, 1, 1, device=device))
        loss_c = net_c(fake).mean() - net_c(real).mean()
        opt_c.zero_grad()
        loss_c.backward()
        opt_c.step()
        with torch.no_grad():
            for p in net_c.parameters():
                p.clamp_(-clip, clip)
    loss_g = -net_c(net_g(torch.randn(batch, NZ, 1, 1, device=device))).mean()
    opt_g.zero_grad()
    loss_g.backward()
    opt_g.step()
    return loss_c, loss_g


def median_rate(gaps):
    return 1.0 / statistics.median(gaps) if len(gaps) > 1 else float("nan")


def main():
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--seconds", type=float, default=15.0)
    p.add_argument("--iterations", type=int, default=0, help="at least this many iterations, however long they take")
    p.add_argument("--batch", type=int, default=512)
    p.add_argument("--width", type=int, default=128, help="the first layer's channels (DCGAN's 64, doubled)")
    p.add_argument("--critic", type=int, default=5, help="critic steps per generator step")
    p.add_argument("--tiny", action="store_true", help="narrow nets and a small batch for a CPU (a smoke test)")
    args = p.parse_args()
    device = "cuda" if torch.cuda.is_available() else "cpu"
    torch.backends.cudnn.benchmark = True
    width, batch = (4, 2) if args.tiny else (args.width, args.batch)
    net_g, net_c, opt_g, opt_c, real = build(width, batch, device)
    timed = device == "cuda"

    ends, events, started = [], [], time.perf_counter()
    while time.perf_counter() - started < args.seconds or len(ends) < args.iterations:
        loss_c, loss_g = iteration(net_g, net_c, opt_g, opt_c, real, args.critic)
        if timed:
            events.append(torch.cuda.Event(enable_timing=True))
            events[-1].record()
        loss_g.item()  # the loop reads its loss, as most loops do
        ends.append(time.perf_counter())

    half = len(ends) // 2
    late = ends[half:]
    host = median_rate([b - a for a, b in zip(late, late[1:])])
    gpu = "no GPU clock (no CUDA)"
    if timed:
        torch.cuda.synchronize()
        gaps = [a.elapsed_time(b) / 1e3 for a, b in zip(events[half:], events[half + 1 :])]
        gpu = f"{median_rate(gaps):.6g} steps/s on the GPU clock (CUDA events) over the same iterations"
    flops = iteration_flops(net_g, net_c, batch, args.critic)
    print(
        f"own count: {flops:.6g} FLOPs a step by its convolutions (a step is an iteration: {args.critic} critic "
        f"steps and 1 generator step); {host:.6g} steps/s on the host clock over the last half of its "
        f"{len(ends)} iterations; {gpu}",
        flush=True,
    )
    print(f"iterations: {len(ends)}; critic loss {loss_c.item():.4g}, generator loss {loss_g.item():.4g}", flush=True)


if __name__ == "__main__":
    main()
