"""The gate set's FMA chains (tests/gatecalls.py): the kernel does the steps it is asked and the check catches
one that does not, and its float32 chain, run here with the kernel's rounding, ends exactly where the float64
reference does for every step count the gate set runs."""

import gatecalls
import pytest


def test_the_fma_chains_do_the_steps_they_are_asked_and_the_check_catches_fewer():
    """Under Triton's interpreter, at a tiny size: the kernel's result is the float64 closed form, and a kernel
    that runs half the steps fails the check."""
    call = gatecalls.fma("triton", iters=40, pct=0.0, blocks=2, block=32, device="cpu")
    call.check()
    assert call.flops == 2.0 * gatecalls.FMA_CHAINS * 40 * 64 and call.bound == "compute"
    more = gatecalls.fma("triton", iters=40, pct=50.0, blocks=2, block=32, device="cpu")
    more.check()
    assert more.flops == 1.5 * call.flops
    wrong = gatecalls.fma("triton", iters=4000, pct=0.0, blocks=2, block=32, device="cpu", steps=2000)
    with pytest.raises(AssertionError, match="relative error"):
        wrong.check()


def float32_chain(a0, b: float, c: float, iters: int):
    """The kernel's chains run in float32: each step is fmaf(a, b, c), the exact a * b + c rounded once to
    float32. With b = 1 the product is exact, so a step is float32's a + c, which numpy's float32 add.accumulate
    does step by step; otherwise the steps run one by one (exact in float64 for these constants, then rounded
    once), until no lane moves any more (a float32 fixed point: every later step gives the same value)."""
    import numpy as np

    lanes = np.asarray(a0, dtype=np.float32)
    if b == 1.0:
        return np.array([np.add.accumulate(np.concatenate([[a], np.full(iters, c, np.float32)]))[-1] for a in lanes])
    a = lanes.astype(np.float64)
    for _ in range(iters):
        nxt = (a * b + c).astype(np.float32).astype(np.float64)
        if np.array_equal(nxt, a):
            break
        a = nxt
    return a


def test_the_fma_chains_in_float32_end_where_the_float64_reference_does():
    """Every step count the gate set runs (1 ms, 50 ms, and 50 ms with the most --more-work the chains take), from
    the smallest, the largest and a few of the kernel's seeded inputs: the float32 chain the GPU runs ends exactly
    where fma_reference does, so the check passes the kernel and fails one that ran other steps."""
    import numpy as np

    inputs = gatecalls.fma_inputs(64, "cpu").numpy()
    lanes = np.array([inputs.min(), inputs.max(), *inputs[:2]], dtype=np.float32)
    for iters in (gatecalls.FMA_1MS_ITERS, gatecalls.FMA_50MS_ITERS, gatecalls.FMA_MAX_ITERS):
        got = float32_chain(lanes, gatecalls.FMA_B, gatecalls.FMA_C, iters)
        ref = gatecalls.fma_reference(lanes.astype(np.float64), iters)
        assert np.array_equal(got, ref), (iters, got, ref)  # exact: no step rounds


def test_a_contracting_chain_stalls_in_float32_where_the_gpu_did():
    """a -> a (1 - 2^-19) + 10 * 2^-19 approaches 10 in float64, but in float32 it stops moving once a step is less
    than half a unit in the last place: at 9.75, which the H100 returned for every element of its 50 ms chain.
    The emulation above reproduces that, and so the gate set's chain does not contract."""
    import numpy as np

    got = float32_chain(np.array([9.5, 9.7], np.float32), 1 - 2.0**-19, 10 * 2.0**-19, 2_000_000)
    assert list(got) == [9.75, 9.75]
    assert gatecalls.FMA_B == 1.0
