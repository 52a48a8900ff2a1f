"""The writer of one process's marks lines (gpubench.inside.markwriter keeps one a process): who writes (rank,
pid, GPU), the steps gathered into intervals, and each line (gpubench.inside.markline's) appended whole to the
marks file with one write().
"""

from __future__ import annotations

import math
import os
import sys
import threading
import time

from . import stamps
from .markline import MARK, MARK_LINE, SAME, STEPS_LINE
from .values import Bucket, number, shown

# Where the rank of a process comes from, first found wins: torchrun, SLURM, Open MPI, PMI (MPICH, Intel MPI).
RANK_VARS = ("RANK", "SLURM_PROCID", "OMPI_COMM_WORLD_RANK", "PMI_RANK")
OPEN_S, SETTLED_S = 0.05, 1.0  # steps are gathered over OPEN_S for the first FINE_S after a mark, then SETTLED_S
FINE_S = 2.0
GPU_EVERY_S = 0.05  # how often step() asks whether the process has initialised CUDA, until it has


def env_rank(env=os.environ) -> int | None:
    for var in RANK_VARS:
        try:
            return int(env[var])
        except (KeyError, ValueError):
            continue
    return None


class _Writer:
    """This process's marks: the file, who it is, the open bucket, and the GPU stamper where CUDA runs."""

    def __init__(self, path: str):
        self.pid = os.getpid()
        self.rank = env_rank()
        self.path = path
        os.close(_open(path))  # one that cannot be opened turns marks off now, once
        self.bucket: Bucket | None = None
        self.clock = "host"
        self.uuid = ""
        self.uuid_written: str | None = None  # the uuid of this process's last line: later lines say "="
        self.fine_until = time.monotonic() + FINE_S
        self.stamper = None  # gpubench.inside.stamps.Stamper, once this process runs CUDA
        self.gpu_next = 0.0  # when step() next asks whether CUDA is up: not at every step of a CPU job
        self.last_flops, self.last_values = None, (None, None, None, None, False)  # the values of that object, read
        self.warned: set[str] = set()
        self.lock = threading.Lock()  # the bucket: the user's threads and the stamper's thread
        self.closed = False

    # called in the user's thread
    def mark(self, name: str) -> None:
        self._gpu()
        now = time.monotonic()
        if self.stamper is None or not self.stamper.put(("mark", name, now)):
            with self.lock:
                self.on_mark(now, name)

    def step(self, flops, nbytes, tokens, origin: str = "S", n: int = 1) -> None:
        """n steps that end now, each with these values (the forward hook gathers fast forwards: one event for
        several spares the GPU's stamping thread thousands of wake-ups a second)."""
        now = time.monotonic()
        # the hook's steps carry one count (an int that never changes) or none: read once; the job's own values
        # are read at every step (an object of its may change in place)
        hook = origin in ("A", "C", "J")  # a forward's values change with its input's shape: read at every step
        if hook and flops is self.last_flops:
            values = (*self.last_values, origin, n)
        else:
            values = (*self._values(flops, nbytes, tokens), origin, n)
            if hook:
                self.last_flops, self.last_values = flops, values[:5]
        if self.stamper is None and now >= self.gpu_next:
            self.gpu_next = now + GPU_EVERY_S
            self._gpu()
        # a JAX step is stamped where it was dispatched: torch's stream, where an event would go, is not JAX's
        if origin == "J" or self.stamper is None or not self.stamper.put(("step", values, now)):
            with self.lock:
                self.on_step(now, *values, lead_s=0.0)

    def _values(self, flops, nbytes, tokens) -> tuple:
        """(model, hardware, bytes, tokens, bad) from what step() was given, each a finite number or None."""
        try:
            hardware = getattr(flops, "hardware", None)
        except Exception:  # noqa: BLE001 -- a property that raises: no hardware count
            hardware = math.nan
        model, ok_f = number(flops)
        hardware, ok_h = number(hardware)
        nbytes, ok_b = number(nbytes)
        tokens, ok_t = number(tokens)
        if not (ok_f and ok_h and ok_b and ok_t):
            self.warn(
                "values",
                "gpubench.step() was given a value that is not a finite number of 0 or more "
                f"(flops={shown(flops)}, bytes={shown(nbytes)}, tokens={shown(tokens)}); the step is "
                "recorded without it, and so is any later step given such a value",
            )
        return model, hardware, nbytes, tokens, not (ok_f and ok_h)

    # called, holding self.lock, where the stamp is known: in the user's thread (host clock) or the
    # stamper's thread (GPU clock)
    def on_mark(self, t: float, name: str) -> None:
        self._close_bucket()
        self.fine_until = t + FINE_S
        self._write(MARK_LINE.write(letter=MARK, t=t, **self._who(), name=name))

    def on_step(
        self, t: float, flops, hw_flops, nbytes, tokens, bad, origin: str = "S", n: int = 1, lead_s: float = 0.0
    ) -> None:
        b = self.bucket
        width = OPEN_S if t < self.fine_until else SETTLED_S
        if b is not None and (t - b.t_first >= width or b.origin != origin):
            self._close_bucket()
            b = None
        if b is None:
            b = self.bucket = Bucket(t, origin)
        b.add(t, flops, hw_flops, nbytes, tokens, bad, lead_s, n)
        if origin in ("C", "K"):  # the step whose FLOPs were counted: a line of its own
            self._close_bucket()

    def flush(self) -> None:
        if self.stamper is not None:
            self.stamper.drain()
        with self.lock:
            self._close_bucket()

    def close(self) -> None:
        if self.closed:
            return  # at exit, after target() closed it; or by both atexit and multiprocessing's finalizers
        self.closed = True
        try:
            self.flush()
        finally:
            if self.stamper is not None:
                self.stamper.stop()

    def warn(self, key: str, message: str) -> None:
        if key not in self.warned:
            self.warned.add(key)
            print(f"gpubench: {message}", file=sys.stderr)

    # --- inside
    def _who(self) -> dict:
        uuid = SAME if self.uuid == self.uuid_written else self.uuid
        self.uuid_written = self.uuid
        return {"rank": "" if self.rank is None else self.rank, "pid": self.pid, "uuid": uuid, "clock": self.clock}

    def _close_bucket(self) -> None:
        b, self.bucket = self.bucket, None
        if b is None or b.n == 0:
            return
        self._write(
            STEPS_LINE.write(
                letter=b.origin,
                t_first=b.t_first,
                **self._who(),
                t_last=b.t_last,
                n=b.n,
                counted=b.counted,
                flops=b.flops,
                hw_flops=b.hw_flops,
                bytes=b.bytes,
                tokens=b.tokens,
                bad=b.bad,
                lead_s=b.lead_s / b.n,
            )
        )

    def _write(self, line: str) -> None:
        # opened for each line, never held: a job that closes the descriptors it did not open (as daemons do)
        # and opens its own files could be handed a held one's number, and get our lines in its file
        fd = _open(self.path)
        try:
            os.write(fd, line.encode())
        finally:
            os.close(fd)

    def _gpu(self) -> None:
        """Start stamping on the GPU once this process has initialised CUDA through torch (never before: a
        step must not be what creates a CUDA context)."""
        if self.stamper is not None or "torch" not in sys.modules or "gpu-off" in self.warned:
            return
        made = stamps.start(self)
        if made is not None:
            with self.lock:
                self._close_bucket()  # host-stamped steps and GPU-stamped ones do not share a line
                self.stamper, self.uuid, self.clock = made, made.uuid, "gpu"


def _open(path: str) -> int:
    # O_APPEND: each line lands whole at the end, whoever else appends; O_CREAT: a file the job removed is
    # made anew, and the watch reads on from the new one
    return os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o644)
