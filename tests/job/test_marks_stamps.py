"""gpubench.step where CUDA runs, with a fake torch: steps stamped when the GPU reaches them while the caller
never waits, and a step during graph capture stamped on the host."""

import time

import pytest
from markfakes import FakeEvent, fake_torch, to_file

import gpubench
from gpubench.inside import markwriter
from gpubench.job.markfile import read_all
from gpubench.job.markreader import Mark, Steps

FIXTURES = (fake_torch, to_file)  # pytest finds them by their names in this module


# --- stamps on the GPU's timeline, with a fake torch ---------------------------------------------------


def test_steps_are_stamped_when_the_gpu_reaches_them_and_the_caller_never_waits(to_file, fake_torch):
    t_called, per_call = [], []
    for _ in range(5):
        t0 = time.monotonic()
        gpubench.step(flops=1.0)
        per_call.append(time.monotonic() - t0)
        t_called.append(t0)
        time.sleep(0.03)
    gpubench.mark("eval")
    markwriter.flush()
    assert max(per_call) < 0.05  # recording an event, not waiting for it
    events = read_all(to_file)
    steps = [e for e in events if isinstance(e, Steps)]
    [mark] = [e for e in events if isinstance(e, Mark)]
    assert {(s.clock, s.uuid) for s in steps} == {("gpu", "GPU-0001-02")} and sum(s.n for s in steps) == 5
    assert steps[0].t_first >= t_called[0] + FakeEvent.lag_s - 0.01  # the GPU's time, not the call's
    assert all(s.lead_s == pytest.approx(FakeEvent.lag_s, abs=0.05) for s in steps)
    assert mark.clock == "gpu" and mark.t >= steps[-1].t_last  # the phase starts where the GPU got to it


def test_a_step_during_graph_capture_is_stamped_on_the_host(to_file, fake_torch):
    fake_torch.cuda.capturing = True
    gpubench.step(flops=1.0)
    markwriter.flush()
    [steps] = [e for e in read_all(to_file) if isinstance(e, Steps)]
    assert steps.n == 1 and steps.lead_s == 0.0
