"""Compile the second decode sweep's settings of kernels/decode_sk.py for Hopper (sm_90) on a machine with no
GPU, with the Triton installed here, and print what the compiler made of each: shared memory, registers a
thread, local memory (spills), warps, whether the warps were specialized, HGMMA instructions in the SASS.

    python -m research.compile_sm90 [--batches 16,256,512]

The GPU machines run Triton 3.6: compile with that version (pip install triton==3.6.0 in another
environment, and the project with pip install --no-deps -e .) to see what they will run. A setting that
fails to compile, spills, or asks for more than 227 KB of shared memory would fail or crawl on the GPU.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

import triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource

from gpubench.kernels import decode_sk
from tools.tune import space

TOOLS = Path(triton.__file__).parent / "backends" / "nvidia" / "bin"


def compile_one(c: dict) -> dict:
    bn, bb, bk = c["BLOCK_N"], c["BLOCK_B"], c["BLOCK_K"]
    swap, spec = bool(c.get("swap")), bool(c.get("warp_spec"))
    store = swap and not spec  # as launch_sk decides for a y with 16-byte aligned rows
    sig = {
        "x_desc": f"tensordesc<bf16[{bb},{bk}]>",
        "w_desc": f"tensordesc<bf16[{bn},{bk}]>",
        "y_desc": f"tensordesc<bf16[{bb},{bn}]>" if store else "constexpr",
        "y_ptr": "*bf16",
        "ws_ptr": "*fp32",
        "cnt_ptr": "*i32",
        "B": "i32",
        "N": "i32",
        "K": "i32",
        "stride_yb": "i32",
        "sk_tiles": "i32",
    }
    consts = {
        "BLOCK_N": bn,
        "BLOCK_B": bb,
        "BLOCK_K": bk,
        "SWAP": swap,
        "TMA_STORE": store,
        "WARP_SPEC": spec,
        "UPCAST": False,
        **({} if store else {"y_desc": None}),
    }
    sig.update({name: "constexpr" for name in consts if name != "y_desc"})
    try:
        k = triton.compile(
            ASTSource(decode_sk._decode_sk, sig, constexprs=consts),
            target=GPUTarget("cuda", 90, 32),
            options={"num_warps": c["num_warps"], "num_stages": c["num_stages"]},
        )
    except Exception as err:  # reported per setting
        return {"error": (str(err).strip().splitlines() or [type(err).__name__])[0][:160]}
    with tempfile.NamedTemporaryFile(suffix=".cubin") as f:
        f.write(k.asm["cubin"])
        f.flush()
        usage = subprocess.run(
            [str(TOOLS / "cuobjdump"), "--dump-resource-usage", f.name], capture_output=True, text=True
        ).stdout
        sass = subprocess.run([str(TOOLS / "cuobjdump"), "-sass", f.name], capture_output=True, text=True).stdout
    regs, local = (re.search(rf"{key}:(\d+)", usage) for key in ("REG", "LOCAL"))
    return {
        "smem": k.metadata.shared,
        "regs": int(regs[1]) if regs else -1,
        "local": int(local[1]) if local else -1,
        "warps": k.metadata.num_warps,
        "specialized": "ttg.warp_specialize" in k.asm["ttgir"],
        "hgmma": sass.count("HGMMA"),
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--batches", default="16,256,512")
    args = ap.parse_args()
    if os.environ.get("TRITON_INTERPRET") == "1":
        print("TRITON_INTERPRET=1 is set: unset it to compile for sm_90", file=sys.stderr)
        return 2
    seen, bad = set(), 0
    print(f"Triton {triton.__version__}, sm_90")
    for b in (int(x) for x in args.batches.split(",")):
        for c in space.second_space(b):
            if space.dumps(c) in seen:
                continue
            seen.add(space.dumps(c))
            r = compile_one(c)
            ok = (
                "error" not in r
                and r["local"] == 0
                and r["smem"] <= space.SMEM_BLOCK
                and (r["specialized"] or not c.get("warp_spec"))
            )
            bad += not ok
            print(
                f"{'ok ' if ok else 'BAD'} {space.tag(c):<34} "
                + (
                    r.get("error")
                    or (
                        f"{r['smem'] / 1024:6.1f} KB smem  {r['regs']:3d} regs  {r['local']} B local  "
                        f"{r['warps']:2d} warps  "
                        f"{'specialized' if r['specialized'] else '           '}  {r['hgmma']} HGMMA"
                    )
                ),
                flush=True,
            )
    print(f"{len(seen) - bad} of {len(seen)} settings compile as meant")
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
