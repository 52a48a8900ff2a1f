"""Triton kernels under TRITON_INTERPRET=1 on small irregular shapes, the correctness check itself, and
the work models. (On a GPU machine the same tests run the compiled kernels.)"""

import pytest
import torch
import triton
import triton.language as tl

from gpubench.kernels import copy, gemm, softmax
from gpubench.kernels.common import CheckFailed, check_close, check_equal, poison

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"


def test_triton_copy_irregular_length():
    src, dst = copy.make_buffers(1823 + 781, "triton", device=DEVICE)
    copy.triton_copy(src, dst, block=256, num_warps=4)
    check_equal("copy", dst, src)


def test_triton_fused_softmax_irregular_shape():
    x = softmax.make_input(37, 781, device=DEVICE)
    out = torch.empty_like(x)
    poison(out)
    softmax.triton_fused(x, out, programs=5)  # fewer programs than rows: each walks several rows
    assert check_close("softmax", out, softmax.reference(x)) < 1e-6


def test_naive_torch_softmax_matches_reference():
    x = softmax.make_input(33, 129, device=DEVICE)
    check_close("naive", softmax.torch_naive(x), softmax.reference(x))


def test_triton_gemm_irregular_shape_fp16():
    a, b = gemm.make_inputs(45, 37, 70, torch.float16, device=DEVICE)
    out = torch.empty(45, 37, dtype=torch.float16, device=DEVICE)
    poison(out)
    gemm.triton_matmul(a, b, out, config=dict(BLOCK_M=16, BLOCK_N=16, BLOCK_K=16, GROUP_M=2))
    check_close("gemm", out, gemm.reference(a, b))


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


def test_copy_check_is_exact():
    src = torch.rand(100)
    dst = src.clone()
    dst[17] += 1e-7
    with pytest.raises(CheckFailed, match="1 elements differ"):
        check_equal("copy", dst, src)


def test_shape_errors_are_clear():
    with pytest.raises(ValueError, match=r"\(M×K\)·\(K×N\)"):
        gemm.triton_matmul(torch.zeros(4, 5, dtype=torch.float16), torch.zeros(4, 5, dtype=torch.float16))
    with pytest.raises(ValueError, match="M×N matrix"):
        softmax.triton_fused(torch.zeros(4))
    with pytest.raises(ValueError, match="equal shapes"):
        copy.triton_copy(torch.zeros(4), torch.zeros(5))


# --- work models -------------------------------------------------------------------------------------

def test_copy_counts_bytes_read_plus_written():
    assert copy.work(2**28).bytes == 2 * 2**30 and copy.work(10).flops == 0


def test_naive_softmax_moves_over_four_times_the_fused_bytes():
    m, n = 8192, 8192
    naive, fused = softmax.work("torch-naive", m, n), softmax.work("triton-fused", m, n)
    assert naive.bytes > 4 * fused.bytes
    assert fused.bytes == 2 * m * n * 4
    assert naive.bytes == ((5 * m * n + 2 * m) + (3 * m * n + 2 * m)) * 4
    assert naive.flops == fused.flops == 5 * m * n


def test_gemm_work_model():
    w = gemm.work(8192, 8192, 8192)
    assert w.flops == 2 * 8192**3
    assert w.bytes == 3 * 8192 * 8192 * 2
    assert w.intensity == pytest.approx(8192 * 2 / 6)
