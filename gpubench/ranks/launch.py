"""Runs under torchrun: who this process is, the process groups, and what the ranks tell each other.

torchrun starts one process per GPU and tells each, in its environment, its RANK in the job, the
WORLD_SIZE, its LOCAL_RANK on its node and the LOCAL_WORLD_SIZE (and GROUP_RANK, the node's rank). Each
rank uses CUDA device LOCAL_RANK. The benchmark's own collectives (all-reduce) run over the default
group, NCCL on GPUs. What the ranks tell each other (agreement before each scenario, results, samples,
clock offsets) goes over a second group on gloo: host memory and TCP, so it never puts a kernel on a GPU
while that GPU is measured.

Clocks: a rank's times are on its host's monotonic clock, one clock per host that never jumps. Ranks on
rank 0's host share it exactly; for another host, the offset to rank 0's clock is measured as NTP does
(a ping-pong, keeping the round with the shortest round trip; the error is at most half of it) at the
start and at the end of the run. Wall time is not used: NTP may step it mid-run, and two hosts' wall
clocks differ by their synchronisation error, which nothing here could bound.
"""

from __future__ import annotations

import socket
import time
from dataclasses import dataclass
from datetime import timedelta

TORCHRUN_VARS = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE")
OFFSET_ROUNDS = 8


class LaunchError(ValueError):
    """torchrun's environment is incomplete or inconsistent; one sentence for the user."""


class RankProblem(RuntimeError):
    """A rank cannot go on; every rank raises it with the same sentence."""


@dataclass(frozen=True)
class Launch:
    rank: int
    world_size: int
    local_rank: int
    local_world_size: int
    node: str  # torchrun's GROUP_RANK (this node's rank in the rendezvous), else the host name

    @property
    def is_root(self) -> bool:
        return self.rank == 0

    @property
    def samples(self) -> bool:
        """One process per node, local rank 0, samples that node's GPUs."""
        return self.local_rank == 0


def launch_from(env) -> Launch | None:
    """The torchrun launch this process belongs to; None when it was not started by torchrun."""
    present = [v for v in TORCHRUN_VARS if v in env]
    if not present:
        return None
    if len(present) < len(TORCHRUN_VARS):
        missing = [v for v in TORCHRUN_VARS if v not in env]
        raise LaunchError(
            f"{', '.join(present)} {'is' if len(present) == 1 else 'are'} set but not "
            f"{', '.join(missing)}: start distributed runs with "
            "`torchrun --nproc-per-node=N -m gpubench run`"
        )
    try:
        rank, world, local, local_world = (int(env[v]) for v in TORCHRUN_VARS)
    except ValueError:
        raise LaunchError(
            "torchrun's " + ", ".join(f"{v}={env[v]!r}" for v in TORCHRUN_VARS) + " must be whole numbers"
        ) from None
    if not (0 <= rank < world and 0 <= local < local_world <= world) or (rank == 0 and local != 0):
        raise LaunchError(
            f"RANK={rank} WORLD_SIZE={world} LOCAL_RANK={local} LOCAL_WORLD_SIZE={local_world} "
            "do not describe a rank of a job"
        )
    group = env.get("GROUP_RANK", "")
    node = f"node{group}" if group.isdigit() else socket.gethostname()
    return Launch(rank, world, local, local_world, node)


def from_env() -> Launch | None:
    """The torchrun launch this process belongs to, or None; UsageError where torchrun's variables disagree."""
    import os

    from gpubench.usage import UsageError

    try:
        return launch_from(os.environ)
    except LaunchError as err:
        raise UsageError(str(err)) from None


def is_quiet_rank(env) -> bool:
    """A rank other than 0 under torchrun: it leaves messages for the whole job to rank 0."""
    try:
        launch = launch_from(env)
    except LaunchError:
        return False
    return launch is not None and not launch.is_root


class Comm:
    """The ranks' host-side conversation, over a gloo group (the default group when that is gloo)."""

    def __init__(self, launch: Launch, group=None):
        self.launch = launch
        self.group = group

    def all_gather(self, obj) -> list:
        import torch.distributed as dist

        out = [None] * self.launch.world_size
        dist.all_gather_object(out, obj, group=self.group)
        return out

    def gather(self, obj) -> list | None:
        """Every rank's obj on rank 0, in rank order; None elsewhere."""
        import torch.distributed as dist

        out = [None] * self.launch.world_size if self.launch.is_root else None
        dist.gather_object(obj, out, dst=0, group=self.group)
        return out

    def broadcast(self, obj):
        """Rank 0's obj, on every rank."""
        import torch.distributed as dist

        box = [obj]
        dist.broadcast_object_list(box, src=0, group=self.group)
        return box[0]

    def agree(self, problem: str | None) -> None:
        """Every rank learns whether any rank has a problem, and each raises RankProblem for the first one."""
        problems = [(r, p) for r, p in enumerate(self.all_gather(problem)) if p]
        if problems:
            r, p = problems[0]
            raise RankProblem(p if self.launch.world_size == 1 else f"rank {r}: {p}")

    def clock_offset(self, clock=time.monotonic, rounds: int = OFFSET_ROUNDS) -> tuple[float, float]:
        """(offset, error): add offset to this rank's clock to read rank 0's; |error| bounds its mistake.

        Each round sends this rank's time t1 to rank 0, which answers with its time t0, received at t2:
        rank 0's clock read t0 about when this one read (t1 + t2) / 2, give or take half the round trip.
        """
        import torch
        import torch.distributed as dist

        t = torch.zeros(1, dtype=torch.float64)
        if self.launch.is_root:
            for peer in range(1, self.launch.world_size):
                for _ in range(rounds):
                    dist.recv(t, src=peer, group=self.group)
                    t[0] = clock()
                    dist.send(t, dst=peer, group=self.group)
            return 0.0, 0.0
        best = (0.0, float("inf"))
        for _ in range(rounds):
            t1 = clock()
            t[0] = t1
            dist.send(t, dst=0, group=self.group)
            dist.recv(t, src=0, group=self.group)
            t2 = clock()
            if t2 - t1 < best[1]:
                best = (float(t[0]) - (t1 + t2) / 2, t2 - t1)
        return best[0], best[1] / 2


def start(launch: Launch, backend: str, timeout_s: float) -> Comm:
    """Join the job's default process group (`backend`: nccl on GPUs, gloo on CPUs) and a gloo group."""
    import torch.distributed as dist

    timeout = timedelta(seconds=timeout_s)
    dist.init_process_group(backend, timeout=timeout)
    group = None if backend == "gloo" else dist.new_group(backend="gloo", timeout=timeout)
    return Comm(launch, group)


def stop() -> None:
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        dist.destroy_process_group()
