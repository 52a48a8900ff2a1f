"""straggler: a training step on every rank (bf16 GEMMs, then an all-reduce of their output), with one rank
that sleeps on the host before each step, like a slow data loader. The other ranks reach the all-reduce
first and wait inside it: NCCL's kernel spins on their GPUs until the slow rank's data arrives.

Each call is one step. Before it enters the all-reduce, a rank waits for its own GEMMs and notes the
host time: its arrival. The merged run names the straggler by those arrival times (gathered from every
rank, on one clock), not by the step's or the collective's time, which the all-reduce makes equal on
every rank.
"""

from __future__ import annotations

import time

import torch

from gpubench.truth.peaks import MATMUL_UNITS

from . import gemm
from .allreduce import bytes_text, ranks
from .common import DTYPES, Prepared, Work, check_close, poison

IMPLS = ("torch",)
SIZES = {"m": 8192, "n": 8192, "k": 8192, "gemms": 4, "delay_ms": 10.0, "slow_rank": -1, "dtype": "bfloat16"}
STORY = [
    "Rank {rank} reached the all-reduce a median {arrival_delay_ms:.2f} ms (p90 {arrival_delay_ms_p90:.2f} ms) "
    "after the first rank, over {n_steps} steps: {straggler_text}; rank {slow_rank} was the one made to sleep "
    "{delay_ms:g} ms before each step.",
    "Waiting a median {waited_ms:.2f} ms a step inside the all-reduce, this GPU read {gpu_util_pct:.0f}% GPU-Util, "
    "SM activity {sm_active_pct:.1f}% and {power_w_energy:.0f} W: {wait_signature}.",
    "{straggler_note}",
    "A step took {kernel_ms:.2f} ms here, and step times differ by {step_spread_pct:.1f}% across ranks: the "
    "all-reduce makes every rank as slow as the slowest, so timing the step or the collective cannot name the "
    "straggler; arrival times can.",
    "Over the whole step the GEMMs achieved {tflops:.0f} TFLOP/s, MFU {mfu_pct:.0f}%.",
]


def work(m: int, n: int, k: int, gemms: int, itemsize: int = 2) -> Work:
    # the step's GEMMs (each 2mnk FLOPs and its minimum traffic); the all-reduce moves data, no FLOPs counted
    one = gemm.work(m, n, k, itemsize)
    return Work(flops=gemms * one.flops, bytes=gemms * one.bytes)


def prepare(
    impl: str,
    m: int = SIZES["m"],
    n: int = SIZES["n"],
    k: int = SIZES["k"],
    gemms: int = SIZES["gemms"],
    delay_ms: float = SIZES["delay_ms"],
    slow_rank: int = SIZES["slow_rank"],
    dtype: str = SIZES["dtype"],
    device="cuda",
    seed: int = 0,
) -> Prepared:
    import torch.distributed as dist

    if impl not in IMPLS:
        raise ValueError(f"unknown straggler implementation {impl!r}; choose from {', '.join(IMPLS)}")
    if dtype not in MATMUL_UNITS:
        raise ValueError(f"straggler's GEMMs run in {' or '.join(MATMUL_UNITS)}, not {dtype}")
    rank, world = ranks()
    if not -world <= slow_rank < world:
        raise ValueError(f"the slow rank {slow_rank} is not a rank of this job (0 to {world - 1})")
    slow = slow_rank % world
    a, b = gemm.make_inputs(m, n, k, DTYPES[dtype], device, seed)  # the same on every rank
    c = torch.empty(m, n, device=device, dtype=a.dtype)
    arrivals: list[float] = []
    pause_s = delay_ms / 1e3 if rank == slow else 0.0
    ready = torch.cuda.current_stream().synchronize if c.is_cuda else (lambda: None)

    def step():
        if pause_s:
            time.sleep(pause_s)  # the slow data loader: this host is late, and its GPU idles meanwhile
        for _ in range(gemms):
            torch.matmul(a, b, out=c)
        ready()  # this rank's part is computed ...
        arrivals.append(time.monotonic())  # ... and it reaches the collective now
        dist.all_reduce(c)

    def check():
        poison(c)
        step()
        return check_close(f"straggler[{impl}] over {world} ranks", c, world * gemm.reference(a, b))

    size = bytes_text(c.numel() * c.element_size())
    launch = (
        f"{gemms} x torch.matmul {m}x{n}x{k}, then all_reduce of {size}; "
        f"rank {slow} sleeps {delay_ms:g} ms before each step"
    )
    unit = MATMUL_UNITS[dtype]
    return Prepared(
        run=step,
        check=check,
        work=work(m, n, k, gemms, a.element_size()),
        unit=unit,
        bound="compute",
        launch=launch,
        calls_per_timing=1,
        arrivals=arrivals,
        info={"slow_rank": slow, "delay_ms": float(delay_ms), "world_size": world, "gemms": gemms},
        sizes={"m": m, "n": n, "k": k, "gemms": gemms, "dtype": dtype},
    )
