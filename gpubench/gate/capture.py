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
        handle = ctypes.c_void_p()
        rc = self._lib.cuStreamCreate(ctypes.byref(handle), 0)  # 0: CU_STREAM_DEFAULT, blocking
        if rc != 0:
            raise GraphRefused(f"no stream to capture on (CUDA driver error {rc})")
        self._handle = handle
        self.torch = torch.cuda.ExternalStream(handle.value)

    def close(self) -> None:
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

    stream.torch.wait_stream(torch.cuda.current_stream())
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
        _settle_after_failure()
        text = str(err).strip()
        first = text.splitlines()[0][:200] if text else type(err).__name__
        raise GraphRefused(f"the call could not be captured in a CUDA graph ({first})") from None
    if node_count(graph.raw_cuda_graph()) == 0:
        raise GraphRefused("nothing of the call was captured in a CUDA graph: it launches its work on a stream of "
                           "its own")
    graph.instantiate()
    graph.replay()  # the first replay uploads the graph
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    graph.replay()
    end.record()
    end.synchronize()
    return graph.replay, start.elapsed_time(end) / calls


def _settle_after_failure() -> None:
    """Wait for what the failed capture left running, whatever CUDA says of it: the caller's next step is to
    launch the call one by one."""
    import torch

    try:
        torch.cuda.synchronize()
    except RuntimeError:
        pass
