"""Steps stamped on the GPU's timeline: where a process runs CUDA through torch, each step() and mark()
records a CUDA event on the current stream, and a thread of this process stamps time.monotonic() when
the GPU reaches it. The host runs ahead of the GPU by CUDA's queue, so a host stamp says how fast Python
enqueued the work; this stamp says when the GPU finished it.

The caller's thread only records an event (a few microseconds; no synchronisation); the events are
blocking-sync events, so the waiting thread sleeps instead of spinning a core. A step taken while a CUDA
graph is being captured, or with too many events outstanding, is stamped on the host instead.
"""

from __future__ import annotations

import queue
import sys
import threading
import time

MAX_PENDING = 4096  # events in flight; beyond, steps are stamped on the host rather than queue without end
DRAIN_S = 5.0  # at exit, how long to wait for the GPU to reach the last events


def device_uuid(torch) -> str:
    """The UUID of this process's current CUDA device, as NVML writes it ('GPU-...')."""
    uuid = str(torch.cuda.get_device_properties(torch.cuda.current_device()).uuid)
    return uuid if uuid.startswith(("GPU-", "MIG-")) else f"GPU-{uuid}"


def start(writer):
    """A Stamper for this process once it has initialised CUDA through torch, else None. Never initialises
    CUDA itself."""
    torch = sys.modules.get("torch")
    try:
        if torch is None or not torch.cuda.is_initialized():
            return None
        return Stamper(writer, torch, device_uuid(torch))
    except Exception as err:  # noqa: BLE001 -- a broken CUDA is the job's business: stamp on the host
        writer.warn(
            "gpu-off", f"steps are stamped on the host: the GPU could not be asked ({type(err).__name__}: {err})"
        )
        return None


class Stamper:
    def __init__(self, writer, torch, uuid: str):
        self.writer, self.torch, self.uuid = writer, torch, uuid
        self.queue: queue.SimpleQueue = queue.SimpleQueue()
        self.pool: list = []  # events the GPU has passed, to record again
        self.thread = threading.Thread(target=self._run, name="gpubench-stamps", daemon=True)
        self.thread.start()

    def put(self, item) -> bool:
        """Record an event for a step or mark and queue it; False where the caller must stamp on the host."""
        cuda = self.torch.cuda
        if self.queue.qsize() >= MAX_PENDING or cuda.is_current_stream_capturing():
            return False
        event = self.pool.pop() if self.pool else cuda.Event(blocking=True)
        event.record()
        self.queue.put((event, item))
        return True

    def drain(self, timeout_s: float = DRAIN_S) -> None:
        """Wait until the GPU has passed every event queued so far (at most timeout_s)."""
        done = threading.Event()
        self.queue.put((None, done))
        done.wait(timeout_s)

    def stop(self) -> None:
        self.queue.put(None)
        self.thread.join(timeout=1.0)

    def _run(self) -> None:
        while True:
            entry = self.queue.get()
            if entry is None:
                return
            event, item = entry
            if event is None:
                item.set()  # a drain() waiting for the events before it
                continue
            try:
                event.synchronize()
            except Exception as err:  # noqa: BLE001
                self.writer.warn(
                    "sync",
                    f"a step's CUDA event could not be waited for ({type(err).__name__}: "
                    f"{err}); it is stamped when seen",
                )
            t = time.monotonic()
            self.pool.append(event)
            kind, payload, t_host = item
            try:
                with self.writer.lock:
                    if kind == "mark":
                        self.writer.on_mark(t, payload)
                    else:
                        self.writer.on_step(t, *payload, lead_s=t - t_host)
            except Exception as err:  # noqa: BLE001 -- a full disk, a closed file: said once, never raised
                self.writer.warn("write", f"marks could not be written ({type(err).__name__}: {err})")
