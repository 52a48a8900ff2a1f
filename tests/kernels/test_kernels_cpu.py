"""The families' contract on the CPU: Triton kernels under TRITON_INTERPRET=1 on small irregular shapes, the
correctness check itself, the work models and the read family (the decode family's kernels are checked in
tests/kernels/test_decode_cpu.py). (On a GPU machine the same tests run compiled kernels.)"""

import importlib

import pytest
import torch
import triton
import triton.language as tl
from gpubench.kernels import copy, decode, fill, gemm, h2d, read, softmax
from gpubench.kernels.common import CheckFailed, Prepared, check_close, check_equal, poison

from gpubench.suite.scenarios import SCENARIOS

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"
FAMILIES = sorted({s.family for s in SCENARIOS})


@pytest.mark.parametrize("family", FAMILIES)
def test_every_family_has_the_contract(family):
    mod = importlib.import_module(f"gpubench.kernels.{family}")
    assert isinstance(mod.IMPLS, tuple) and mod.IMPLS
    assert isinstance(mod.SIZES, dict)
    assert mod.STORY and all(isinstance(s, str) for s in mod.STORY)
    for sc in (s for s in SCENARIOS if s.family == family):
        assert sc.impl in mod.IMPLS, sc.name
        assert set(sc.sizes) <= set(mod.SIZES), sc.name


@pytest.mark.parametrize(
    "family,impl,sizes",
    [
        ("copy", "triton", {"n": 1823 + 781}),
        ("copy", "torch", {"n": 1000}),
        ("fill", "triton", {"n": 1823 + 781}),
        ("fill", "torch", {"n": 999}),
        ("softmax", "triton-fused", {"m": 37, "n": 781}),
        ("softmax", "torch-naive", {"m": 33, "n": 129}),
        ("softmax", "torch", {"m": 33, "n": 129}),
        ("gemm", "torch", {"m": 45, "n": 37, "k": 70, "dtype": "float16"}),
        ("decode", "triton", {"b": 3, "k": 200, "n": 77}),
        ("decode", "torch", {"b": 3, "k": 200, "n": 77}),
        ("read", "triton", {"n": 3 * 4096 + 5}),
        ("read", "torch", {"n": 1001}),
    ],
)
def test_prepare_checks_the_call_it_times(family, impl, sizes):
    mod = importlib.import_module(f"gpubench.kernels.{family}")
    p = mod.prepare(impl, device=DEVICE, **sizes)
    assert isinstance(p, Prepared) and p.bound in ("dram", "compute", "both")
    assert p.check()["check"] in ("exact",) or p.check()["check"].startswith("rel err")
    assert p.launch and p.sizes_text != "-"


def test_launch_text_is_the_launch_as_launched():
    assert copy.prepare("triton", n=3000, device=DEVICE).launch == "3 programs x 8 warps, 1024 elements each"
    tiles = {"BLOCK_N": 32, "BLOCK_B": 16, "BLOCK_K": 64, "num_warps": 2, "num_stages": 2}
    x, w = decode.make_inputs(20, 64, 100, device=DEVICE)
    y = torch.empty(20, 100, dtype=torch.bfloat16, device=DEVICE)
    assert decode.triton_decode(x, w, y, config=tiles) == (
        "8 programs x 2 warps, 32x16x64 tiles (weights x tokens x depth), 2 stages"
    )  # 4 weight tiles x 2 token tiles
    assert softmax.prepare("triton-fused", m=1, n=100, device=DEVICE).launch.startswith("1 program x ")


def test_triton_gemm_irregular_shape_fp16():
    a, b = gemm.make_inputs(45, 37, 70, torch.float16, device=DEVICE)
    out = torch.empty(45, 37, dtype=torch.float16, device=DEVICE)
    poison(out)
    launch = gemm.triton_matmul(a, b, out, config=dict(BLOCK_M=16, BLOCK_N=16, BLOCK_K=16, GROUP_M=2))
    check_close("gemm", out, gemm.reference(a, b))
    assert launch.startswith("9 programs")


# --- the check catches what it must -----------------------------------------------------------------


@triton.jit
def _wrong_softmax_kernel(out_ptr, in_ptr, n_cols, BLOCK: tl.constexpr):
    # deliberately wrong: divides by the row max instead of the row sum
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    mask = offs < n_cols
    x = tl.load(in_ptr + row * n_cols + offs, mask=mask, other=-float("inf"))
    num = tl.exp(x - tl.max(x, axis=0))
    tl.store(out_ptr + row * n_cols + offs, num / tl.max(num, axis=0), mask=mask)


def test_a_wrong_kernel_fails_the_check():
    x = softmax.make_input(8, 100, device=DEVICE)
    out = torch.empty_like(x)
    poison(out)
    _wrong_softmax_kernel[(8,)](out, x, 100, BLOCK=128)
    with pytest.raises(CheckFailed, match="relative error"):
        check_close("wrong", out, softmax.reference(x))


def test_an_unwritten_element_fails_the_check():
    x = softmax.make_input(8, 100, device=DEVICE)
    out = torch.empty_like(x)
    poison(out)
    softmax.triton_fused(x[:7], out[:7])  # the last row is never written
    with pytest.raises(CheckFailed, match="NaN"):
        check_close("partial", out, softmax.reference(x))


def test_exact_checks_catch_one_wrong_and_one_unwritten_element():
    src = torch.rand(100)
    dst = src.clone()
    dst[17] += 1e-7
    with pytest.raises(CheckFailed, match="1 elements differ"):
        check_equal("copy", dst, src)
    filled = torch.full((10,), fill.VALUE)
    filled[3] = float("nan")
    with pytest.raises(CheckFailed, match="1 elements differ"):
        check_equal("fill", filled, fill.VALUE)


def test_shape_errors_are_clear():
    with pytest.raises(ValueError, match=r"\(M×K\)·\(K×N\)"):
        gemm.triton_matmul(torch.zeros(4, 5, dtype=torch.float16), torch.zeros(4, 5, dtype=torch.float16))
    with pytest.raises(ValueError, match="M×N matrix"):
        softmax.triton_fused(torch.zeros(4))
    with pytest.raises(ValueError, match="equal shapes"):
        copy.triton_copy(torch.zeros(4), torch.zeros(5))
    with pytest.raises(ValueError, match="unknown copy implementation 'nope'"):
        copy.prepare("nope", n=4, device=DEVICE)


# --- work models: useful bytes beside what each implementation moves -----------------------------------


def test_copy_counts_bytes_read_plus_written():
    w = copy.work(2**28)
    assert w.bytes == w.traffic == 2 * 2**30 and w.flops == 0


def test_naive_softmax_moves_over_four_times_its_useful_bytes():
    m, n = 8192, 8192
    naive, fused, peer = (softmax.work(i, m, n) for i in ("torch-naive", "triton-fused", "torch"))
    assert naive.bytes == fused.bytes == peer.bytes == 2 * m * n * 4  # the same useful work
    assert naive.traffic == ((5 * m * n + 2 * m) + (3 * m * n + 2 * m)) * 4 > 4 * fused.traffic
    assert peer.traffic is None  # torch.softmax's passes are not ours to count
    assert naive.flops == fused.flops == 5 * m * n


def test_gemm_bytes_are_its_minimum_traffic():
    w = gemm.work(8192, 8192, 8192)
    assert w.flops == 2 * 8192**3 and w.bytes == 3 * 8192 * 8192 * 2 and w.traffic is None


def test_h2d_counts_read_plus_written_and_the_link_once():
    w = h2d.work(2**26)
    assert w.bytes == 2 * 2**28 and w.link_bytes == 2**28


def test_fill_writes_and_reads_nothing():
    assert fill.work(10).bytes == 40 and fill.work(10).flops == 0


def test_decode_counts_the_weights_once_and_the_tokens_it_makes():
    w = decode.work(16, 8192, 28672)
    assert w.flops == 2 * 16 * 8192 * 28672 and w.tokens == 16
    assert w.bytes == 2 * (8192 * 28672 + 16 * 8192 + 16 * 28672)  # weights, tokens in, outputs out
    weights_only = 2 * 8192 * 28672
    assert 1.0 < w.bytes / weights_only < 1.01  # at small batch the weights are nearly all of it
    intensity = [decode.work(b, 8192, 28672).flops / decode.work(b, 8192, 28672).bytes for b in (1, 256)]
    assert 0.99 < intensity[0] < 1.0 and 240 < intensity[1] < 256  # about B FLOP per byte while B << K, N


# --- the read family ----------------------------------------------------------------------------------


def test_read_counts_the_bytes_read_once_and_one_add_an_element():
    w = read.work(2**28)
    assert w.bytes == w.traffic == 4 * (2**28 + 1) and w.flops == 2**28
    assert read.work(2**28).bytes / copy.work(2**27).bytes == pytest.approx(1.0, abs=1e-8)  # the same bytes moved


def test_the_read_is_one_launch_the_same_sum_every_call_and_leaves_its_counter_at_zero():
    x = read.make_input(5 * 4096 + 3, device=DEVICE)
    out = torch.empty((), device=DEVICE)
    ws = read.Workspace(read.triton_programs(DEVICE), DEVICE)
    sums = []
    for cfg in (None, {"BLOCK": 1024, "num_warps": 4, "per_sm": 1, "stages": 1, "evict": "evict_first"}):
        for _ in range(2):
            poison(out)
            launch = read.triton_read(x, out, ws, cfg)
            check_close("read", out, read.reference(x), tol=read.TOLERANCE)
            sums.append(float(out))
            assert int(ws.count) == 0
    assert sums[0] == sums[1] and sums[2] == sums[3]
    assert launch == f"{read.sm_count()} programs x 4 warps, 1024 elements an iteration, grid-stride"


@triton.jit
def _wrong_read_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    # deliberately wrong: one program, and the last partial tile left unread, as a floor instead of a ceil would
    offs = tl.arange(0, BLOCK)
    acc = tl.zeros((BLOCK,), tl.float32)
    for t in range(0, n // BLOCK):
        acc += tl.load(x_ptr + t * BLOCK + offs)
    tl.store(out_ptr, tl.sum(acc, axis=0))


def test_a_read_that_leaves_a_tail_unread_fails_the_check():
    x = read.make_input(4 * 1024 + 300, device=DEVICE)
    out = torch.empty((), device=DEVICE)
    poison(out)
    _wrong_read_kernel[(1,)](x, out, x.numel(), BLOCK=1024)
    with pytest.raises(CheckFailed, match="relative error"):
        check_close("wrong read", out, read.reference(x), tol=read.TOLERANCE)
    with pytest.raises(ValueError, match="sums a vector into a scalar"):
        read.triton_read(x.view(2, -1), out, read.Workspace(4, DEVICE))
    with pytest.raises(ValueError, match="unknown read implementation 'nope'"):
        read.prepare("nope", n=8, device=DEVICE)
