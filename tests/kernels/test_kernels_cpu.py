"""The families' contract on the CPU: Triton kernels under TRITON_INTERPRET=1 on small irregular shapes, the
correctness check itself, and the work models. (On a GPU machine the same tests run compiled kernels.)"""

import importlib

import pytest
import torch
import triton
import triton.language as tl
from gpubench.kernels import copy, decode, decode_tiles, fill, gemm, h2d, read, softmax
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


@triton.jit
def _wrong_decode_kernel(x_ptr, w_ptr, y_ptr, K, BLOCK_K: tl.constexpr):
    # deliberately wrong: stops one tile of K short, as an off-by-one loop bound would
    n = tl.program_id(0)
    offs = tl.arange(0, BLOCK_K)
    acc = tl.zeros((BLOCK_K,), tl.float32)
    for k in range(0, K // BLOCK_K - 1):
        acc += tl.load(w_ptr + n * K + k * BLOCK_K + offs).to(tl.float32) * tl.load(x_ptr + k * BLOCK_K + offs).to(
            tl.float32
        )
    tl.store(y_ptr + n, tl.sum(acc, axis=0).to(tl.bfloat16))


def test_a_wrong_decode_kernel_fails_the_check_and_an_unwritten_row_too():
    x, w = decode.make_inputs(1, 512, 40, device=DEVICE)
    y = torch.empty(1, 40, dtype=torch.bfloat16, device=DEVICE)
    poison(y)
    _wrong_decode_kernel[(40,)](x, w, y, 512, BLOCK_K=64)
    with pytest.raises(CheckFailed, match="relative error"):
        check_close("wrong decode", y, decode.reference(x, w))
    poison(y)
    decode.triton_decode(x, w[:39], y[:, :39])  # the last output is never written
    with pytest.raises(CheckFailed, match="NaN"):
        check_close("partial decode", y, decode.reference(x, w))


def test_decode_settings_follow_the_batch_and_the_gpu(monkeypatch):
    from gpubench.kernels import common

    monkeypatch.setitem(decode.CONFIG, "Test GPU", {"triton": ((1, {"BLOCK_N": 1}), (None, {"BLOCK_N": 2}))})
    monkeypatch.setattr(common, "gpu_name", lambda device=None: "Test GPU")
    assert [decode.settings_for(b)["BLOCK_N"] for b in (1, 2, 512)] == [1, 2, 2]
    monkeypatch.setattr(common, "gpu_name", lambda device=None: "Another GPU")  # never a neighbour's numbers
    assert decode.settings_for(1) == decode.FALLBACK[0][1] and decode.settings_for(4096) == decode.FALLBACK[-1][1]


def test_a_decode_names_the_unit_its_launch_ran_on(monkeypatch):
    """The FMA tiles (the H100's line at batch 1) and the CuPy kernel multiply-add on CUDA cores in fp32: their MFU
    is of the FP32 peak and the tensor ceiling does not bound them; the dot tiles run on the tensor cores."""
    from gpubench.kernels import common

    fma = {"BLOCK_N": 8, "BLOCK_B": 1, "BLOCK_K": 64, "num_warps": 1, "num_stages": 1, "fma": True}
    dot = {"BLOCK_N": 16, "BLOCK_B": 16, "BLOCK_K": 64, "num_warps": 1, "num_stages": 1}
    monkeypatch.setitem(decode.CONFIG, "Test GPU", {"triton": ((1, fma), (None, dot))})
    monkeypatch.setattr(common, "gpu_name", lambda device=None: "Test GPU")
    one, three = (decode.prepare("triton", b=b, k=128, n=40, device=DEVICE) for b in (1, 3))
    assert one.unit == "fp32" and "on CUDA cores" in one.launch and one.check()["check"].startswith("rel err")
    assert three.unit == "bf16_tensor" and "on CUDA cores" not in three.launch
    assert decode.unit_of("cupy", "1 block x 128 threads, one warp per output row") == "fp32"
    assert decode.unit_of("torch", "cuBLAS-chosen") == "bf16_tensor"
    assert dict(decode.CONFIG["NVIDIA H100 80GB HBM3"]["triton"])[1].get("fma")  # what the H100 runs at batch 1


def test_decode_refuses_what_it_cannot_do_in_one_sentence():
    with pytest.raises(ValueError, match=r"x \(B×K\) and W \(N×K\)"):
        decode.triton_decode(torch.zeros(2, 8), torch.zeros(4, 9), torch.zeros(2, 4))
    with pytest.raises(ValueError, match="batches up to 16, not 17"):
        decode.prepare("cupy", b=17, k=8, n=8, device=DEVICE)
    with pytest.raises(ValueError, match="unknown decode implementation 'nope'"):
        decode.prepare("nope", device=DEVICE)


def test_the_tma_variant_of_decode_computes_the_same_product():
    # Under the interpreter tensor descriptors run as plain loads, in float32 (its bf16 dots are wrong):
    # this holds the indexing, the zero fill past B and N, and the transposed token tile
    if DEVICE == "cuda":
        pytest.skip("on a GPU the bf16 kernel through TMA is checked by test_gpu_kernels.py")
    from triton.tools.tensor_descriptor import TensorDescriptor

    for b, k, n, split in ((1, 256, 80, 1), (20, 128, 48, 1), (3, 256, 80, 2)):
        x, w = (t.float() for t in decode.make_inputs(b, k, n, device=DEVICE))
        y = torch.empty(b, n, device=DEVICE)
        poison(y)
        tiles = triton.cdiv(n, 16) * triton.cdiv(b, 16)
        ws, cnt = decode_tiles.workspace(DEVICE, split, b, n, tiles) if split > 1 else (y, y)
        decode_tiles._decode_dot[(tiles * split,)](
            x,
            w,
            TensorDescriptor.from_tensor(x, [16, 64]),
            TensorDescriptor.from_tensor(w, [16, 64]),
            y,
            ws,
            cnt,
            b,
            n,
            k,
            x.stride(0),
            w.stride(0),
            y.stride(0),
            BLOCK_N=16,
            BLOCK_B=16,
            BLOCK_K=64,
            SPLIT_K=split,
            TMA=True,
            EVEN=False,
            EVICT="",
            FLATTEN=False,
            UPCAST=False,
        )
        check_close("decode through TMA", y, decode.reference(x, w))


SETTINGS = {  # one of each kind of setting the sweep tries, at tiles that fit the tiny shapes below
    "pointer loads": {"BLOCK_N": 16, "BLOCK_B": 16, "BLOCK_K": 64, "num_warps": 4, "num_stages": 3},
    "K split 3 ways": {"BLOCK_N": 16, "BLOCK_B": 16, "BLOCK_K": 32, "num_warps": 4, "num_stages": 3, "split_k": 3},
    "persistent, split": {
        "BLOCK_N": 32,
        "BLOCK_B": 16,
        "BLOCK_K": 32,
        "num_warps": 4,
        "num_stages": 2,
        "split_k": 2,
        "per_sm": 1,
    },
    "persistent, flattened, evict-first": {
        "BLOCK_N": 16,
        "BLOCK_B": 16,
        "BLOCK_K": 64,
        "num_warps": 4,
        "num_stages": 2,
        "per_sm": 1,
        "flatten": True,
        "evict": "evict_first",
    },
    "CUDA cores": {"BLOCK_N": 8, "BLOCK_B": 2, "BLOCK_K": 64, "num_warps": 4, "num_stages": 1, "fma": True},
    "CUDA cores, split, persistent": {
        "BLOCK_N": 8,
        "BLOCK_B": 4,
        "BLOCK_K": 32,
        "num_warps": 4,
        "num_stages": 1,
        "fma": True,
        "split_k": 4,
        "per_sm": 2,
    },
}


@pytest.mark.parametrize("kind", SETTINGS)
def test_every_kind_of_decode_setting_computes_the_same_product(kind):
    # irregular shapes (N, K and B not whole tiles; a K split whose last share is short), twice each: a
    # split tile's counter must be back at zero for the next call, and its sum the same
    for b, k, n in ((1, 256, 80), (3, 200, 77), (20, 128, 48)):
        x, w = decode.make_inputs(b, k, n, device=DEVICE)
        y = torch.empty(b, n, dtype=torch.bfloat16, device=DEVICE)
        results = []
        for _ in range(2):
            poison(y)
            decode.triton_decode(x, w, y, config=SETTINGS[kind])
            check_close(kind, y, decode.reference(x, w))
            results.append(y.clone())
        assert torch.equal(results[0], results[1])  # the last program adds the partials in a fixed order
    assert all(int(cnt.abs().sum()) == 0 for _, cnt in decode_tiles._workspaces.values())


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
