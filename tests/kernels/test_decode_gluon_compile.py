"""kernels/decode_gluon.py compiled for Hopper (sm_90) on a machine with no GPU: Triton's interpreter does not
run Gluon, so this is what the CPU can hold it to before it meets a GPU (tests/kernels/test_gpu_kernels.py
checks its products there)."""

import pytest

gluon_lang = pytest.importorskip("triton.experimental.gluon.language")


@pytest.mark.parametrize("bm,bn,bk,stages", [(128, 256, 64, 3), (128, 128, 64, 4)])
def test_the_gluon_kernel_compiles_to_tma_and_wgmma_within_an_sms_shared_memory(bm, bn, bk, stages, monkeypatch):
    # a compile for the GPU, not an interpreter run: Triton 3.6 leaves Gluon's layouts unbuilt under TRITON_INTERPRET
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.experimental.gluon._runtime import GluonASTSource

    from gpubench.kernels import decode_gluon

    def desc(shape):
        layout = gluon_lang.NVMMASharedLayout.get_default_for(shape, gluon_lang.bfloat16)
        return f"tensordesc<bf16[{shape[0]}, {shape[1]}],{layout!r}>"

    sig = {
        "x_desc": desc([bm, bk]),
        "w_desc": desc([bn, bk]),
        "y_desc": desc([bm, bn]),
        "B": "i32",
        "N": "i32",
        "K": "i32",
        "NUM_STAGES": "constexpr",
        "num_warps": "constexpr",
    }
    src = GluonASTSource(decode_gluon._decode_gluon, sig, constexprs={"NUM_STAGES": stages, "num_warps": 8})
    kernel = triton.compile(src, target=GPUTarget("cuda", 90, 32), options={"num_warps": 8})
    ptx = kernel.asm["ptx"]
    assert "wgmma.mma_async" in ptx
    assert "cp.async.bulk.tensor.2d.shared::" in ptx  # TMA loads into shared memory
    assert "cp.async.bulk.tensor.2d.global.shared::" in ptx  # and the output tile's store from it
    assert "mbarrier.try_wait" in ptx
    tiles = stages * (bm + bn) * bk * 2 + bm * bn * 2  # the ring of operand tiles and the output tile, in bytes
    assert tiles <= kernel.metadata.shared <= 227 * 1024
