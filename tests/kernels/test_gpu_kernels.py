"""Every family, every implementation, checked through its contract on a real GPU: at full size and at
an irregular size that catches masking bugs."""

import importlib

import pytest
from gpubench.kernels import spin
from gpubench.kernels.common import CupyMissing, cupy

from gpubench.suite.scenarios import SCENARIOS

pytestmark = pytest.mark.gpu

IRREGULAR = {
    "copy": {"n": 2**20 + 3},
    "fill": {"n": 2**20 + 5},
    "h2d": {"n": 2**20 + 7},
    "softmax": {"m": 1823, "n": 781},
    "gemm": {"m": 1823, "n": 781, "k": 517},
    "decode": {"k": 1000, "n": 781},
    "read": {"n": 2**20 + 3},
}
# the distributed families need a process group: tests/ranks/test_dist_jobs.py checks them over several processes
CASES = sorted({(s.family, s.impl, tuple(sorted(s.sizes.items()))) for s in SCENARIOS if not s.distributed})


def _prepare(family, impl, **sizes):
    try:
        return importlib.import_module(f"gpubench.kernels.{family}").prepare(impl, **sizes)
    except CupyMissing as err:
        pytest.skip(str(err))


@pytest.mark.parametrize("family,impl,sizes", CASES, ids=lambda c: str(c))
def test_every_scenario_passes_its_check(family, impl, sizes):
    _prepare(family, impl, **dict(sizes)).check()


@pytest.mark.parametrize("family,impl,sizes", CASES, ids=lambda c: str(c))
def test_irregular_sizes_pass_too(family, impl, sizes):
    if family not in IRREGULAR:
        pytest.skip("no size axis to make irregular")
    _prepare(family, impl, **{**dict(sizes), **IRREGULAR[family]}).check()


@pytest.mark.parametrize("shape", ["1thread", "1block", "1warp-per-sm", "half-sms"])
def test_spin_shapes_spread_over_distinct_sms(shape):
    p = _prepare("spin", "cupy", shape=shape, ns=1_000_000)
    facts = p.check()
    assert facts["max_spun_ns"] >= 1_000_000
    assert facts["sms_used"] == p.info["blocks"]  # the block scheduler spreads a small grid over distinct SMs


def test_spin_duration_within_one_percent():
    from gpubench.truth.timing import time_loop

    p = _prepare("spin", "triton", shape="1thread", ns=10_000_000)
    p.run()
    t = time_loop(p.run, groups=10)
    assert abs(t.median_ms - 10.0) / 10.0 < 0.01


def test_the_cupy_copy_refuses_misaligned_arrays():
    cp = cupy()
    a = cp.zeros(17, dtype=cp.float32)
    with pytest.raises(ValueError, match="16-byte aligned"):
        importlib.import_module("gpubench.kernels.copy").cupy_copy(a[1:], a[:-1])
    assert spin.sm_count() > 0


@pytest.mark.parametrize("impl", ["triton", "cupy", "torch"])
def test_decode_is_right_at_every_batch_up_to_16_and_past_a_tile(impl):
    # Triton compiles apart for batch 1, multiples of 16 and the rest; the tuned rows change at batch
    # limits; 17 and 300 take a second tile of tokens (an irregular last one)
    for b in [*range(1, 17), 17, 300] if impl != "cupy" else range(1, 17):
        _prepare("decode", impl, b=b, k=4096, n=4096 + 24).check()


def test_the_cupy_decode_kernel_refuses_large_batches():
    with pytest.raises(ValueError, match="batches up to 16"):
        _prepare("decode", "cupy", b=17, k=64, n=64)


SWEPT = [  # one of each kind the tuning sweep tries (tools/tune/space.py), at sizes past a tile
    {"BLOCK_N": 64, "BLOCK_B": 16, "BLOCK_K": 128, "num_warps": 4, "num_stages": 4, "split_k": 4},
    {"BLOCK_N": 32, "BLOCK_B": 16, "BLOCK_K": 256, "num_warps": 4, "num_stages": 4, "per_sm": 2, "flatten": True},
    {
        "BLOCK_N": 32,
        "BLOCK_B": 16,
        "BLOCK_K": 256,
        "num_warps": 4,
        "num_stages": 4,
        "evict": "evict_first",
        "split_k": 2,
    },
    {"BLOCK_N": 128, "BLOCK_B": 64, "BLOCK_K": 64, "num_warps": 8, "num_stages": 4, "split_k": 2, "per_sm": 1},
    {"BLOCK_N": 8, "BLOCK_B": 4, "BLOCK_K": 512, "num_warps": 4, "num_stages": 1, "fma": True, "split_k": 4},
]


@pytest.mark.parametrize("tma", [False, True])
@pytest.mark.parametrize("setting", SWEPT, ids=lambda c: "-".join(f"{k}{v}" for k, v in c.items()))
def test_every_kind_of_swept_decode_setting_is_right_twice(setting, tma):
    import torch

    from gpubench.kernels import decode
    from gpubench.kernels.common import check_close, poison

    for b in (1, 3, 4, 17, 64):
        if setting.get("fma") and b > setting["BLOCK_B"]:
            continue
        x, w = decode.make_inputs(b, 4096, 4096 + 24)
        y = torch.empty(b, 4096 + 24, device="cuda", dtype=torch.bfloat16)
        first = None
        for _ in range(2):  # a split tile's counter is back at zero for the next call, and its sum the same
            poison(y)
            decode.triton_decode(x, w, y, config={**setting, "tma": tma})
            check_close("decode", y, decode.reference(x, w))
            assert first is None or torch.equal(first, y)
            first = y.clone()


@pytest.mark.parametrize("tile", [(256, 128, 64, 3), (128, 128, 64, 4), (256, 128, 32, 6)])
def test_the_gluon_decode_kernel_is_right_past_every_edge(tile):
    # irregular B, N and K: the last token tile, row tile and k-step partly past the edges (TMA fills zeros
    # and clips the store); several tiles a program, so the loads run ahead across the end of a tile
    import torch

    from gpubench.kernels import decode
    from gpubench.kernels.common import check_close, poison

    if torch.cuda.get_device_capability()[0] != 9:
        pytest.skip("Gluon's WGMMA kernel is Hopper's")
    bn, bb, bk, stages = tile
    cfg = {
        "BLOCK_N": bn,
        "BLOCK_B": bb,
        "BLOCK_K": bk,
        "num_warps": 8,
        "num_stages": stages,
        "tma": True,
        "gluon": True,
    }
    for b, k, n in ((256, 8192, 28672), (300, 1000, 4096 + 24), (17, 520, 70000), (1, 64, 512)):
        x, w = decode.make_inputs(b, k, n)
        y = torch.empty(b, n, device="cuda", dtype=torch.bfloat16)
        for _ in range(2):
            poison(y)
            assert "in Gluon" in decode.triton_decode(x, w, y, config=cfg)
            check_close("gluon decode", y, decode.reference(x, w))
