"""The gate's CUDA graph on a real GPU: a Triton call captures and replays at its GPU time; a call that cannot
be captured (a host read-back, CuPy's launches on the legacy stream) is refused in one clause, and the GPU
works as before afterwards."""

import pytest
import torch
from gpubench.kernels import spin

from gpubench.gate.graph import GraphRefused

pytestmark = pytest.mark.gpu


@pytest.fixture(scope="module")
def device():
    from gpubench.gate.device import CudaDevice

    dev = CudaDevice(torch.cuda.current_device())
    yield dev
    dev.close()


def test_a_triton_call_captures_and_a_replay_runs_every_call(device):
    out = torch.zeros(2, dtype=torch.int64, device="cuda")
    run = lambda: spin.triton_spin(2000, out)  # noqa: E731
    replay, call_ms = device.graph(run, 100)
    assert 0.002 <= call_ms < 0.02  # 2 us of spin, a little more per call, never the host's launch rate
    out.zero_()
    replay()
    torch.cuda.synchronize()
    assert int(out[0]) >= 2000  # the replay ran the spin: it wrote how long it waited


def test_a_call_that_reads_back_to_the_host_is_refused_and_the_gpu_still_works(device):
    x = torch.ones(1024, device="cuda")
    with pytest.raises(GraphRefused, match="could not be captured in a CUDA graph"):
        device.graph(lambda: float(x.sum()), 10)
    # nothing of the failed capture is left behind: torch's graph context left its capture stream current
    assert torch.cuda.current_stream() == torch.cuda.default_stream()
    assert float((x * 2).sum()) == 2048.0
    replay, _ = device.graph(lambda: x.mul_(1.0), 10)  # and the next capture works
    replay()
    torch.cuda.synchronize()


def test_a_cupy_call_on_its_own_stream_is_refused_and_the_gpu_still_works(device):
    from gpubench.kernels.common import CupyMissing, cupy

    try:
        cp = cupy()
    except CupyMissing as err:
        pytest.skip(str(err))
    out = cp.zeros(2, dtype=cp.int64)
    run = lambda: spin.cupy_spin(2000, 1, 1, out)  # noqa: E731
    run()
    # on the legacy default stream: made to wait on the blocking capture stream, which CUDA refuses, or run at
    # once outside the graph, which leaves it empty; either way refused, never an empty graph timed
    with pytest.raises(GraphRefused, match="captured"):
        device.graph(run, 10)
    assert torch.cuda.current_stream() == torch.cuda.default_stream()
    out[:] = 0
    run()  # CuPy and torch both still launch and complete
    cp.cuda.runtime.deviceSynchronize()
    assert int(out[0]) >= 2000
    assert float(torch.ones(8, device="cuda").sum()) == 8.0
