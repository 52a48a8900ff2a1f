"""A torchrun job on the CPU: processes spawned with torchrun's environment and the gloo backend, fake GPUs
and fake metric sources, and the real distributed run."""

from __future__ import annotations

import os
import socket
import time

import torch.multiprocessing as mp

from gpubench.ranks import launch as dist
from gpubench.record.gpus import Gpu
from gpubench.record.sources import Source
from gpubench.truth.timing import Timings

NVLINK_BYTES_PER_S = 18 * 26_562e6  # what NVML reports for an H100 or H200 SXM: 18 links at 26562 MB/s


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def spawn(fn, world: int, *args, nodes: int = 1) -> None:
    """Run fn(launch, comm, *args) in `world` processes, `nodes` simulated nodes; raise if any rank fails."""
    mp.start_processes(_entry, args=(fn, world, nodes, free_port(), args), nprocs=world, start_method="spawn")


def _entry(rank, fn, world, nodes, port, args):
    per_node = world // nodes
    os.environ.update(
        RANK=str(rank),
        WORLD_SIZE=str(world),
        LOCAL_RANK=str(rank % per_node),
        LOCAL_WORLD_SIZE=str(per_node),
        GROUP_RANK=str(rank // per_node),
        MASTER_ADDR="127.0.0.1",
        MASTER_PORT=str(port),
    )
    launch = dist.launch_from(os.environ)
    comm = dist.start(launch, "gloo", timeout_s=60)
    try:
        fn(launch, comm, *args)
    finally:
        dist.stop()


def fake_gpu(node: str, index: int) -> Gpu:
    return Gpu(nvml_index=index, uuid=f"GPU-{node}-{index}", name="NVIDIA H200", cuda_index=index)


class CpuBackend:
    """Each rank's 'GPU' is a name; calls run on the CPU and are timed with the host clock."""

    UNUSED = 7  # the GPU of each node that --all-gpus samples and no rank uses

    def __init__(self, node: str, interrupt_at: str | None = None):
        self.node = node
        self.interrupt_at = interrupt_at  # a scenario's name: Ctrl-C while it is measured, as on every rank

    def resolve(self, cuda_index, all_gpus):
        return fake_gpu(self.node, cuda_index), [fake_gpu(self.node, cuda_index)]

    def node_gpus(self, uuids, all_gpus):
        gpus = [fake_gpu(self.node, int(u.rsplit("-", 1)[1])) for u in uuids]
        return gpus + ([fake_gpu(self.node, self.UNUSED)] if all_gpus else [])

    def other_processes(self, gpu):
        return []

    def device_info(self, gpu):
        return {
            "nvml_index": gpu.nvml_index,
            "uuid": gpu.uuid,
            "name": gpu.name,
            "memory_mib": 143771,
            "sm_count": 132,
            "pcie": {"bytes_per_s": 63e9},
            "nvlink": {
                "links": [
                    {
                        "link": i,
                        "active": True,
                        "version": 5,
                        "speed_mbps": NVLINK_BYTES_PER_S / 18e6,
                        "peer_bus": None,
                        "peer": None,
                    }
                    for i in range(18)
                ],
                "active_links": 18,
                "bytes_per_s": NVLINK_BYTES_PER_S,
            },
        }

    def versions(self):
        return {"gpubench": "test"}

    def prepare(self, gpu):
        pass

    def measure_peaks(self, on_window=None):
        return None

    def warmup_ms(self, prepared):
        return self.host_ms(prepared, 3)

    def host_ms(self, prepared, calls):
        t0 = time.perf_counter()
        for _ in range(calls):
            prepared.run()
        return (time.perf_counter() - t0) * 1e3 / calls

    def time_groups(self, prepared, calls, groups):
        if self.interrupt_at and prepared.info.get("name") == self.interrupt_at:
            raise KeyboardInterrupt
        per_call, spans = [], []
        for _ in range(groups):  # each group stamped when it ran, as the GPU's timeline stamps it
            t0 = time.monotonic()
            per_call.append(self.host_ms(prepared, calls))
            spans.append((t0, time.monotonic()))
        return Timings(per_call, calls * groups, spans)

    def idle(self, duration_s):
        time.sleep(duration_s)

    def release(self):
        pass


class RankSource(Source):
    """GPU g reads util 100 - g, SM activity 5 + g and 100 + 10 g W: each row's values tell whose GPU it is."""

    name = "fake"
    columns = ("gpu_util_pct", "sm_active_pct", "power_w", "energy_j")

    def open(self, gpus):
        self.gpus = gpus

    def read(self):
        t = time.monotonic()
        return {
            g: {
                "gpu_util_pct": 100.0 - g,
                "sm_active_pct": 5.0 + g,
                "power_w": 100.0 + 10 * g,
                "energy_j": (100.0 + 10 * g) * t,
            }
            for g in self.gpus
        }
