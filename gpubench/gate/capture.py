"""A call captured in a CUDA graph, with its work in it.

torch captures on a stream of its pool, which is non-blocking: a launch on the legacy default stream (CuPy's,
by default) does not wait for it, so it runs at once, outside the graph. Captured that way, a CuPy spin
left an empty graph whose replays took no time. So the capture runs on a blocking stream made for it (one
per device, kept until the device closes, since torch's allocator remembers the streams it served): a
launch on the legacy stream must then wait on a stream being captured, which CUDA refuses, and the capture
fails instead of leaving work out. A graph with no nodes is refused as well: work launched on a
non-blocking stream of the call's own escapes both, and then nothing is left to time. The stream and the
node count come from the CUDA driver (libcuda), which torch's Python API does not reach.
"""

from __future__ import annotations

import ctypes

from gpubench.gate.graph import GraphRefused

WARMUP_CALLS = 3  # torch asks for calls on the capture's stream before a capture, so lazy setup happens outside it


def _libcuda():
    try:
        return ctypes.CDLL("libcuda.so.1")
    except OSError:
        raise GraphRefused("no CUDA driver library (libcuda.so.1) to check what a graph captured") from None


class CaptureStream:
    """A blocking CUDA stream of the current device, as a torch stream; close() destroys it."""

    def __init__(self):
        import torch

        self._lib = _libcuda()
        self._handle = None
        handle = ctypes.c_void_p()
        rc = self._lib.cuStreamCreate(ctypes.byref(handle), 0)  # 0: CU_STREAM_DEFAULT, blocking
        if rc != 0:
            raise GraphRefused(f"no stream to capture on (CUDA driver error {rc})")
        self._handle = handle
        try:
            self.torch = torch.cuda.ExternalStream(handle.value)
        except Exception as err:  # noqa: BLE001 - any failure here means no graph, never a failed benchmark
            self.close()
            raise GraphRefused(f"no stream to capture on ({type(err).__name__}: {err})") from None

    def close(self) -> None:
        """Destroy the stream once the work on it is done (a second close does nothing)."""
        if self._handle is not None:
            self._lib.cuStreamSynchronize(self._handle)
            self._lib.cuStreamDestroy_v2(self._handle)
            self._handle = None


def node_count(raw_graph: int) -> int:
    """How many nodes a captured cudaGraph_t holds."""
    lib = _libcuda()
    count = ctypes.c_size_t(0)
    rc = lib.cuGraphGetNodes(ctypes.c_void_p(raw_graph), None, ctypes.byref(count))
    if rc != 0:
        raise GraphRefused(f"the captured graph could not be read (CUDA driver error {rc})")
    return count.value


def capture(run, calls: int, stream: CaptureStream):
    """`calls` calls of run in one instantiated CUDA graph: (its replay, one call's GPU time in ms in it)."""
    import torch

    home = torch.cuda.current_stream()
    stream.torch.wait_stream(home)
    graph = torch.cuda.CUDAGraph(keep_graph=True)
    try:
        with torch.cuda.stream(stream.torch):
            for _ in range(WARMUP_CALLS):
                run()
        torch.cuda.current_stream().wait_stream(stream.torch)
        with torch.cuda.graph(graph, stream=stream.torch):
            for _ in range(calls):
                run()
    except Exception as err:  # noqa: BLE001 - whatever the call raised under capture, it cannot be captured
        raise _refused("the call could not be captured in a CUDA graph", err, home) from None
    if node_count(graph.raw_cuda_graph()) == 0:
        raise GraphRefused(
            "nothing of the call was captured in a CUDA graph: it launches its work on a stream of its own"
        )
    try:
        graph.instantiate()
        graph.replay()  # the first replay uploads the graph
        torch.cuda.synchronize()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        graph.replay()
        end.record()
        end.synchronize()
    except RuntimeError as err:
        raise _refused("the captured graph could not be replayed", err, home) from None
    return graph.replay, start.elapsed_time(end) / calls


def _refused(what: str, err: Exception, home) -> GraphRefused:
    """GraphRefused for a failure, once the process is back where it was: torch's graph context leaves the
    capture stream current when its capture_end raises (an invalidated capture), and the failed capture
    may have left work running. The caller's next step is to launch the call one by one."""
    import torch

    torch.cuda.set_stream(home)
    try:
        torch.cuda.synchronize()
    except RuntimeError:
        pass
    text = str(err).strip()
    return GraphRefused(f"{what} ({text.splitlines()[0][:200] if text else type(err).__name__})")
