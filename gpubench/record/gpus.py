"""GPU identity: CUDA's device numbers and NVML's never meet except through the GPU's UUID.

CUDA numbers the GPUs a process may see (CUDA_VISIBLE_DEVICES, as SLURM and Kubernetes set it, and in
CUDA_DEVICE_ORDER); NVML, nvidia-smi --id and dcgmi -i number every GPU of the machine by PCI bus.
`--device 0` under CUDA_VISIBLE_DEVICES=1 is NVML's GPU 1. gpubench asks the CUDA driver for each
device's UUID (cuDeviceGetUuid, through ctypes: no framework needed) and NVML for the handle with that
UUID, and records CUDA index, NVML index and UUID together.
"""

from __future__ import annotations

import ctypes
import json
import os
import subprocess
import sys
from dataclasses import asdict, dataclass

from gpubench.record import nvml


@dataclass(frozen=True)
class Gpu:
    nvml_index: int
    uuid: str
    name: str
    cuda_index: int | None = None  # in this process's CUDA numbering; None where CUDA cannot see it

    def as_dict(self) -> dict:
        return asdict(self)


class CudaUnavailable(RuntimeError):
    pass


def _format_uuid(raw: bytes) -> str:
    h = raw.hex()
    return f"GPU-{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:32]}"


def cuda_uuids() -> list[str]:
    """UUIDs of the devices CUDA shows this process, in CUDA's order (honours CUDA_VISIBLE_DEVICES)."""
    try:
        cuda = ctypes.CDLL("libcuda.so.1")
    except OSError:
        raise CudaUnavailable("the CUDA driver library libcuda.so.1 could not be loaded") from None
    if cuda.cuInit(0) != 0:
        raise CudaUnavailable("the CUDA driver failed to initialise (cuInit)")
    count = ctypes.c_int()
    if cuda.cuDeviceGetCount(ctypes.byref(count)) != 0:
        raise CudaUnavailable("the CUDA driver could not count its devices")
    uuids = []
    for i in range(count.value):
        dev = ctypes.c_int()
        raw = (ctypes.c_char * 16)()
        if cuda.cuDeviceGet(ctypes.byref(dev), i) != 0 or cuda.cuDeviceGetUuid(raw, dev) != 0:
            raise CudaUnavailable(f"the CUDA driver could not give device {i}'s UUID")
        uuids.append(_format_uuid(bytes(raw)))
    return uuids


def cuda_uuids_under(env: dict) -> list[str]:
    """The UUIDs a process started with `env` would see: asked in a child, so this process's CUDA is untouched."""
    out = subprocess.run(
        [sys.executable, "-m", "gpubench.record.gpus"], env=env, capture_output=True, text=True, timeout=60
    )
    if out.returncode != 0:
        raise CudaUnavailable(out.stderr.strip().splitlines()[-1] if out.stderr.strip() else "no answer")
    return json.loads(out.stdout)


def from_uuid(uuid: str, cuda_index: int | None = None) -> Gpu:
    h = nvml.handle_by_uuid(uuid)
    return Gpu(nvml_index=nvml.index_of(h), uuid=uuid, name=nvml.name_of(h), cuda_index=cuda_index)


def by_cuda_index(index: int, uuids: list[str] | None = None) -> Gpu:
    """The GPU that CUDA device `index` of this process is."""
    uuids = cuda_uuids() if uuids is None else uuids
    if not 0 <= index < len(uuids):
        raise IndexError(index)
    return from_uuid(uuids[index], cuda_index=index)


def every_gpu(uuids: list[str] | None = None) -> list[Gpu]:
    """Every GPU NVML sees, with its CUDA index in this process where CUDA sees it."""
    cuda_of = {u: i for i, u in enumerate(uuids or [])}
    out = []
    for i in range(nvml.device_count()):
        h = nvml.handle(i)
        uuid = nvml.uuid_of(h)
        out.append(Gpu(nvml_index=i, uuid=uuid, name=nvml.name_of(h), cuda_index=cuda_of.get(uuid)))
    return out


def resolve(cuda_index: int, all_gpus: bool) -> tuple[Gpu, list[Gpu]]:
    """The GPU that CUDA device `cuda_index` of this process is, and the GPUs to sample (it, or every GPU);
    IndexError (one sentence) where CUDA has no such device."""
    uuids = cuda_uuids()
    if not 0 <= cuda_index < len(uuids):
        visible = os.environ.get("CUDA_VISIBLE_DEVICES")
        raise IndexError(
            f"CUDA device {cuda_index} does not exist: CUDA sees {len(uuids)} GPU(s)"
            + (f" (CUDA_VISIBLE_DEVICES={visible})" if visible else "")
        )
    gpu = by_cuda_index(cuda_index, uuids)
    return gpu, (every_gpu(uuids) if all_gpus else [gpu])


def visible_under(env: dict) -> tuple[list[Gpu], str | None]:
    """The GPUs a child started with `env` will use: its CUDA_VISIBLE_DEVICES mapped by UUID, else every GPU.

    Returns the GPUs and, where the mapping had to be guessed, a sentence saying so.
    """
    if not env.get("CUDA_VISIBLE_DEVICES", "").strip():
        return every_gpu(), None
    try:
        uuids = cuda_uuids_under(env)
    except (CudaUnavailable, subprocess.SubprocessError, ValueError) as err:
        return _guess(env["CUDA_VISIBLE_DEVICES"], str(err))
    return [from_uuid(u, cuda_index=i) for i, u in enumerate(uuids)], None


def _guess(visible: str, why: str) -> tuple[list[Gpu], str]:
    """Without a CUDA driver to ask: UUIDs map directly, numbers are taken as NVML's (PCI) order."""
    gpus = []
    for i, item in enumerate(x.strip() for x in visible.split(",")):
        if item.startswith(("GPU-", "MIG-")):
            gpus.append(from_uuid(item, cuda_index=i))
        elif item.isdigit() and int(item) < nvml.device_count():
            g = every_gpu()[int(item)]
            gpus.append(Gpu(g.nvml_index, g.uuid, g.name, cuda_index=i))
        else:
            break  # CUDA stops at the first entry it cannot use
    return gpus, (
        f"CUDA could not be asked which GPUs CUDA_VISIBLE_DEVICES={visible} means ({why}); "
        "its numbers were taken in PCI order, which CUDA uses only with CUDA_DEVICE_ORDER=PCI_BUS_ID"
    )


if __name__ == "__main__":
    try:
        print(json.dumps(cuda_uuids()))
    except CudaUnavailable as err:
        print(err, file=sys.stderr)
        raise SystemExit(1)
