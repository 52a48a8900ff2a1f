"""The decode family on the CPU: Triton kernels under TRITON_INTERPRET=1 on small irregular shapes. A wrong
kernel and an unwritten row fail the check; the settings follow the batch and the GPU and name the unit their
launch ran on; the TMA variant and every kind of setting the sweep tries compute the same product. (On a GPU
machine the same tests run compiled kernels.)"""

import pytest
import torch
import triton
import triton.language as tl
from gpubench.kernels import decode, decode_tiles
from gpubench.kernels.common import CheckFailed, check_close, poison

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"


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
