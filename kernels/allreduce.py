"""allreduce: NCCL's all-reduce (SUM) of a bf16 buffer over every rank, measured as nccl-tests measures it.

It runs under torchrun (`torchrun --nproc-per-node=2 -m gpubench run allreduce-1gib`), over the default
process group: NCCL on GPUs, gloo in the CPU tests. One call is one in-place all_reduce; the scenario loop times
calls with CUDA events like any other kernel. Results follow NVIDIA/nccl-tests doc/PERFORMANCE.md:
algbw = size / time, busbw = algbw * 2(n-1)/n (summary.derive), and busbw is held against the NVLinks.
"""

from __future__ import annotations

import torch

from .columns import ALLREDUCE as SUMMARY_COLUMNS  # noqa: F401 - declared in kernels/columns.py, which loads no torch
from .common import DTYPES, Prepared, Work, check_equal, generator

IMPLS = ("nccl",)  # the process group's backend: NCCL on GPUs
SIZES = {"size_bytes": 2**30, "dtype": "bfloat16"}
STORY = [
    "{said} while NCCL all-reduced {msg_text} of bf16 over {world_size} GPUs, with SM activity at "
    "{sm_active_pct:.1f}%, occupancy {sm_occupancy_pct:.1f}% and tensor pipes {tensor_active_pct:.1f}%: GPU-Util "
    "counts the GPU busy whenever NCCL's kernel runs, however few SMs it occupies.",
    "A call took {kernel_us:.1f} µs (median of {n_timings} timed groups): algbw {algbw_gbps:.1f} GB/s (size / time) "
    "and busbw {busbw_gbps:.1f} GB/s (algbw x 2(n-1)/n), as nccl-tests reports them.",
    "busbw is {nvlink_pct:.1f}% of the {nvlink_gbps:.0f} GB/s per direction that NVML reports for this GPU's "
    "{nvlink_links} active NVLinks it can use (those to an NVSwitch or to a GPU of the job; their raw rate, "
    "protocol overhead included).",
    "Its busbw is not held against NVLink: {nvlink_note}.",
    "{regime_text}",
]

# Below about 1 MiB an all-reduce over NVLink costs a fixed time per call (NCCL's latency, ~10 µs, and
# torch's launch of the call), not bandwidth.
LATENCY_BOUND_BYTES = 2**20


class NoProcessGroup(RuntimeError):
    pass


def ranks() -> tuple[int, int]:
    """(this rank, world size) of the default process group; one clear error outside torchrun."""
    import torch.distributed as dist

    if not (dist.is_available() and dist.is_initialized()):
        raise NoProcessGroup(
            "collectives need several processes: launch with `torchrun --nproc-per-node=N -m gpubench run ...`"
        )
    return dist.get_rank(), dist.get_world_size()


def bytes_text(n: int) -> str:
    """8192 -> '8 KiB', 2**30 -> '1 GiB'."""
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= scale:
            return f"{n / scale:.3g} {unit}"
    return f"{n} B"


# --- the contract: inputs with a known sum, check, work model ----------------------------------------


def rank_inputs(count: int, rank: int, world: int, device, seed: int = 0) -> torch.Tensor:
    """Seeded small integers, different on every rank. With |x| <= limit and limit * world <= 256, every
    partial sum is an integer of at most 8 significant bits, so bf16 adds them exactly in any order."""
    limit = max(1, min(4, 256 // world))
    return torch.randint(
        -limit, limit + 1, (count,), generator=generator(device, seed + rank), device=device, dtype=torch.int8
    )


def expected_sum(count: int, world: int, device, seed: int = 0) -> torch.Tensor:
    """The sum every rank must hold after the all-reduce, from regenerating every rank's inputs here."""
    total = torch.zeros(count, dtype=torch.int16, device=device)
    for r in range(world):
        total += rank_inputs(count, r, world, device, seed)
    return total


def work(size_bytes: int) -> Work:
    # DRAM: the buffer read once and the result written once. Across the links: the message size, which
    # nccl-tests' algbw divides by the time (busbw then applies the all-reduce's factor). The reduction's
    # additions are not counted: a collective's work is the data it moves.
    return Work(flops=0.0, bytes=2.0 * size_bytes, link_bytes=float(size_bytes))


def prepare(
    impl: str, size_bytes: int = SIZES["size_bytes"], dtype: str = SIZES["dtype"], device="cuda", seed: int = 0
) -> Prepared:
    import torch.distributed as dist

    if impl not in IMPLS:
        raise ValueError(f"unknown allreduce implementation {impl!r}; choose from {', '.join(IMPLS)}")
    rank, world = ranks()
    tdtype = DTYPES[dtype]
    if size_bytes % tdtype.itemsize:
        raise ValueError(f"allreduce size {size_bytes} B is not a whole number of {dtype} elements")
    count = size_bytes // tdtype.itemsize
    buf = torch.empty(count, dtype=tdtype, device=device)

    def run():
        # In place, as a gradient all-reduce runs. From call to call the values grow n-fold and saturate
        # at +-inf; NCCL's time does not depend on the values.
        dist.all_reduce(buf)

    def check():
        buf.copy_(rank_inputs(count, rank, world, device, seed))
        run()
        expected = expected_sum(count, world, device, seed).to(tdtype)
        return check_equal(f"allreduce[{impl}] over {world} ranks", buf, expected)

    size = bytes_text(size_bytes)
    regime = (
        "latency-bound: its time is the fixed cost of a call (NCCL's latency and torch's launch of the "
        "call), and busbw stays far below the links' rate"
        if size_bytes < LATENCY_BOUND_BYTES
        else "bandwidth-bound: busbw is the number to hold against the links"
    )
    info = {
        "world_size": world,
        "bus_factor": 2.0 * (world - 1) / world,
        "msg_text": size,
        "regime_text": f"At {size} a call is {regime}.",
    }
    return Prepared(
        run=run,
        check=check,
        work=work(size_bytes),
        unit=None,
        bound="interconnect",
        launch=f"{dist.get_backend()}-chosen, in place",
        info=info,
        sizes={"size": size, "dtype": dtype},
    )
