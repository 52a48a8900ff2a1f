"""kernels/decode_gluon.py compiled for Hopper (sm_90) on a machine with no GPU: Triton's interpreter does not
run Gluon, so this is what the CPU can hold it to before it meets a GPU (tests/kernels/test_gpu_kernels.py
checks its products there).

The compile runs in a fresh process without TRITON_INTERPRET: in the whole suite, after other tests had run
kernels in Triton's interpreter, the compile in the test's own process met triton.language's tensor operators
still patched for the interpreter (Triton 3.9) and failed on its builder; alone, it passed."""

import json
import os
import subprocess
import sys

import pytest

pytest.importorskip("triton.experimental.gluon.language")

COMPILE = """
import json, sys
import triton
from triton.backends.compiler import GPUTarget
from triton.experimental.gluon import language as gl
from triton.experimental.gluon._runtime import GluonASTSource

from gpubench.kernels import decode_gluon

bm, bn, bk, stages = map(int, sys.argv[1:])


def desc(shape):
    layout = gl.NVMMASharedLayout.get_default_for(shape, gl.bfloat16)
    return f"tensordesc<bf16[{shape[0]}, {shape[1]}],{layout!r}>"


sig = {"x_desc": desc([bm, bk]), "w_desc": desc([bn, bk]), "y_desc": desc([bm, bn]), "B": "i32", "N": "i32",
       "K": "i32", "NUM_STAGES": "constexpr", "num_warps": "constexpr"}
src = GluonASTSource(decode_gluon._decode_gluon, sig, constexprs={"NUM_STAGES": stages, "num_warps": 8})
kernel = triton.compile(src, target=GPUTarget("cuda", 90, 32), options={"num_warps": 8})
print(json.dumps({"ptx": kernel.asm["ptx"], "shared": kernel.metadata.shared}))
"""


@pytest.mark.parametrize("bm,bn,bk,stages", [(128, 256, 64, 3), (128, 128, 64, 4)])
def test_the_gluon_kernel_compiles_to_tma_and_wgmma_within_an_sms_shared_memory(bm, bn, bk, stages):
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}  # a compile for the GPU, not a run
    r = subprocess.run(
        [sys.executable, "-c", COMPILE, *map(str, (bm, bn, bk, stages))],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert r.returncode == 0, r.stderr[-3000:]
    built = json.loads(r.stdout.strip().splitlines()[-1])
    ptx = built["ptx"]
    assert "wgmma.mma_async" in ptx
    assert "cp.async.bulk.tensor.2d.shared::" in ptx  # TMA loads into shared memory
    assert "cp.async.bulk.tensor.2d.global.shared::" in ptx  # and the output tile's store from it
    assert "mbarrier.try_wait" in ptx
    tiles = stages * (bm + bn) * bk * 2 + bm * bn * 2  # the ring of operand tiles and the output tile, in bytes
    assert tiles <= built["shared"] <= 227 * 1024
