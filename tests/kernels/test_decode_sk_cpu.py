"""The decode family's persistent TMA kernel (kernels/decode_sk.py) on the CPU: Triton's interpreter runs its
tensor descriptors, so stream-K tails, swapped operands and warp-specialized loops are checked against
float64 on irregular shapes; its plan and the CONFIG lines that route to it."""

import pytest
import torch
from gpubench.kernels import decode
from gpubench.kernels.common import check_close, poison

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"


SK_SETTINGS = {  # on the CPU a persistent grid is 4 programs (common.sm_count)
    "stream-K tail": {
        "BLOCK_N": 16,
        "BLOCK_B": 16,
        "BLOCK_K": 32,
        "num_warps": 4,
        "num_stages": 3,
        "tma": True,
        "per_sm": 1,
        "sk": 1,
    },
    "stream-K, a wave more, swapped": {
        "BLOCK_N": 16,
        "BLOCK_B": 16,
        "BLOCK_K": 32,
        "num_warps": 4,
        "num_stages": 3,
        "tma": True,
        "per_sm": 1,
        "sk": 2,
        "swap": True,
    },
    "every tile streamed, two programs a SM": {
        "BLOCK_N": 16,
        "BLOCK_B": 16,
        "BLOCK_K": 64,
        "num_warps": 4,
        "num_stages": 2,
        "tma": True,
        "per_sm": 2,
        "sk": 9,
    },
    "fewer tiles than programs, all streamed": {
        "BLOCK_N": 32,
        "BLOCK_B": 16,
        "BLOCK_K": 32,
        "num_warps": 4,
        "num_stages": 3,
        "tma": True,
        "per_sm": 1,
        "sk": 1,
    },
    "warp-specialized, swapped": {
        "BLOCK_N": 32,
        "BLOCK_B": 16,
        "BLOCK_K": 32,
        "num_warps": 4,
        "num_stages": 3,
        "tma": True,
        "warp_spec": True,
        "swap": True,
    },
    "warp-specialized, persistent": {
        "BLOCK_N": 16,
        "BLOCK_B": 16,
        "BLOCK_K": 64,
        "num_warps": 4,
        "num_stages": 3,
        "tma": True,
        "warp_spec": True,
        "per_sm": 1,
    },
}


@pytest.mark.parametrize("kind", SK_SETTINGS)
def test_every_kind_of_persistent_tma_setting_computes_the_same_product(kind):
    # irregular shapes; (3, 64, 160): 10 tiles of 2 k-steps on 4 programs, so a program's run crosses whole
    # tiles between two partial ones; N = 77 stores through pointers, N = 80 and 48 through TMA when swapped;
    # B = 20 and 40 make 2 and 3 token tiles, streamed by groups of as many programs (3 of the 4 at B = 40)
    from gpubench.kernels import decode_sk

    for b, k, n in ((1, 256, 80), (3, 200, 77), (20, 128, 48), (3, 64, 160), (40, 96, 48)):
        x, w = decode.make_inputs(b, k, n, device=DEVICE)
        y = torch.empty(b, n, dtype=torch.bfloat16, device=DEVICE)
        results = []
        for _ in range(2):
            poison(y)
            launch = decode.triton_decode(x, w, y, config=SK_SETTINGS[kind])
            check_close(kind, y, decode.reference(x, w))
            results.append(y.clone())
        assert torch.equal(results[0], results[1])  # the last program adds the partials in a fixed order
        assert "through TMA" in launch
    assert all(int(cnt.abs().sum()) == 0 for _, cnt in decode_sk._workspaces.values())


def test_an_applied_stream_k_line_is_what_the_suite_and_the_bench_run(monkeypatch):
    # tools/tune/bench.py and the suite time decode.prepare("triton"): a CONFIG line for this GPU with the
    # persistent kernel's knobs must reach it, checked like any other launch
    from gpubench.kernels import common

    monkeypatch.setitem(decode.CONFIG, "Test GPU", {"triton": ((None, SK_SETTINGS["stream-K tail"]),)})
    monkeypatch.setattr(common, "gpu_name", lambda device=None: "Test GPU")
    p = decode.prepare("triton", b=3, k=200, n=77, device=DEVICE)
    assert "streamed over K" in p.launch and p.check()["check"].startswith("rel err")


def test_the_stream_k_plan_deals_out_the_tiles_past_the_last_full_wave():
    from gpubench.kernels import decode_sk

    tile = {"BLOCK_N": 128, "BLOCK_B": 256}
    assert decode_sk.plan(512, 28672, {**tile, "sk": 1, "per_sm": 1}, 132) == (448, 132, 52)  # 3.39 waves
    assert decode_sk.plan(512, 28672, {**tile, "sk": 2, "per_sm": 1}, 132) == (448, 132, 184)
    assert decode_sk.plan(256, 28672, {**tile, "sk": 2, "per_sm": 1}, 132) == (224, 132, 224)  # every tile
    assert decode_sk.plan(512, 28672, {**tile, "warp_spec": True}, 132) == (448, 448, 0)  # a program a tile
    # two token tiles a row of W: the streamed tiles are whole rows, dealt to pairs of programs
    assert decode_sk.plan(256, 28672, {"BLOCK_N": 256, "BLOCK_B": 128, "sk": 1, "per_sm": 1}, 132) == (224, 132, 92)
    three = {"BLOCK_N": 16, "BLOCK_B": 16, "sk": 1, "per_sm": 1}  # B = 40: three token tiles a row of W
    assert decode_sk.plan(40, 496, three, 8) == (93, 6, 3)  # 6 of 8 programs; the 31st row streamed
    assert decode_sk.plan(40, 496, three, 2) == (93, 3, 0)  # never fewer programs than a group
    # fewer tiles than SMs: a streamed grid keeps every SM (each streams as many bytes), a plain one does not
    small = {"BLOCK_N": 256, "BLOCK_B": 16}
    assert decode_sk.plan(16, 28672, {**small, "sk": 1, "per_sm": 1}, 132) == (112, 132, 112)
    assert decode_sk.plan(16, 28672, {**small, "per_sm": 1}, 132) == (112, 112, 0)
    x, w = decode.make_inputs(2, 64, 32, device=DEVICE)
    with pytest.raises(ValueError, match="not both"):
        decode_sk.launch_sk(
            x,
            w,
            torch.empty(2, 32, dtype=torch.bfloat16, device=DEVICE),
            {**SK_SETTINGS["stream-K tail"], "warp_spec": True},
        )


def test_a_split_launch_runs_whole_waves_then_the_rest_with_the_tails_tiles(monkeypatch):
    # a wave of 4 programs (the CPU's; a GPU's SMs set to 4): 16x16 tiles at B = 20 make 2 a row of 16
    # weights, so N = 112 (7 rows, 14 tiles) fills 3 whole waves with 6 rows (96 weights) and leaves 16 rows
    # to the tail's 16x8 tiles
    monkeypatch.setattr(decode, "sm_count", lambda device=None: 4)
    head = {"BLOCK_N": 16, "BLOCK_B": 16, "BLOCK_K": 32, "num_warps": 4, "num_stages": 2, "tma": True}
    assert decode.whole_wave_rows(20, 112, head, 4) == 96
    assert decode.whole_wave_rows(512, 28672, {"BLOCK_N": 128, "BLOCK_B": 256}, 132) == 25344  # 396 of 448 tiles
    assert decode.whole_wave_rows(2, 32, head, 4) == 0  # too few tiles for a wave: one launch, the head's
    cfg = {**head, "tail": {"BLOCK_N": 16, "BLOCK_B": 8, "BLOCK_K": 32, "num_warps": 4, "num_stages": 2}}
    for b, n in ((20, 112), (2, 32)):
        x, w = decode.make_inputs(b, 64, n, device=DEVICE)
        y = torch.empty(b, n, dtype=torch.bfloat16, device=DEVICE)
        poison(y)
        launch = decode.triton_decode(x, w, y, config=cfg)
        check_close("split launch", y, decode.reference(x, w))
        assert ("rows 0-95" in launch and "the other 16" in launch) == (n == 112)


def test_a_persistent_setting_that_streams_nothing_still_gets_int32_counters(monkeypatch):
    # 8 tiles on 4 programs: no tile past the last whole wave, so nothing is streamed; the kernel's ticket
    # code compiles all the same, and an atomic on a bf16 stand-in does not compile on a GPU
    from gpubench.kernels import decode_sk

    seen = {}
    real = decode_sk._decode_sk

    class Spy:
        def __getitem__(self, grid):
            def launch(*args, **kwargs):
                seen["ws"], seen["cnt"] = args[4], args[5]
                return real[grid](*args, **kwargs)

            return launch

    monkeypatch.setattr(decode_sk, "_decode_sk", Spy())
    x, w = decode.make_inputs(32, 64, 64, device=DEVICE)
    y = torch.empty(32, 64, dtype=torch.bfloat16, device=DEVICE)
    poison(y)
    decode.triton_decode(x, w, y, config={**SK_SETTINGS["stream-K tail"], "BLOCK_N": 16, "BLOCK_B": 16})
    check_close("nothing streamed", y, decode.reference(x, w))
    assert seen["cnt"].dtype == torch.int32 and seen["ws"].dtype == torch.float32


@pytest.mark.skipif(DEVICE == "cuda", reason="records the interpreter's calls")
def test_the_programs_of_a_group_stream_the_same_rows_of_w_at_the_same_k_steps(monkeypatch):
    # W comes from DRAM once only if the programs that share a row of W (one a token tile) read its k-steps
    # together: at B = 256 on an H100, runs dealt to single programs read the streamed rows twice
    import numpy as np
    import triton.language as tl
    from gpubench.kernels import decode_sk

    calls, real = [], decode_sk._tile_product

    def spy(x_desc, w_desc, pid_n, pid_b, k_lo, k_hi, *rest):
        calls.append(
            tuple(int(np.asarray(getattr(v, "data", v)).item()) for v in (tl.program_id(0), pid_n, pid_b, k_lo, k_hi))
        )
        return real(x_desc, w_desc, pid_n, pid_b, k_lo, k_hi, *rest)

    monkeypatch.setattr(decode_sk, "_tile_product", spy)
    # B = 20: 2 token tiles a row; N = 112: 7 rows, 14 tiles on 4 programs (2 groups); sk=2 streams 3 rows
    cfg = {**SK_SETTINGS["stream-K tail"], "sk": 2}
    x, w = decode.make_inputs(20, 128, 112, device=DEVICE)
    y = torch.empty(20, 112, dtype=torch.bfloat16, device=DEVICE)
    poison(y)
    assert "the last 6 tiles of 14 streamed" in decode.triton_decode(x, w, y, config=cfg)
    check_close("groups", y, decode.reference(x, w))
    runs = {p: [(n, lo, hi) for q, n, b, lo, hi in calls if q == p] for p in range(4)}
    assert all(b == p % 2 for p, _, b, _, _ in calls)  # a program keeps its token tile
    assert runs[0] == runs[1] and runs[2] == runs[3]
    assert any(hi - lo < 4 for _, _, _, lo, hi in calls)  # some rows were split between the groups
    steps = sorted((n, b, k) for _, n, b, lo, hi in calls for k in range(lo, hi))
    assert steps == sorted((n, b, k) for n in range(7) for b in range(2) for k in range(4))  # each k-step once


def test_a_gluon_setting_runs_the_same_tiles_in_triton_where_gluon_cannot_run():
    # Gluon's kernel is Hopper's; in the interpreter (and on other GPUs) the setting's tiles run in Triton
    cfg = {"BLOCK_N": 32, "BLOCK_B": 16, "BLOCK_K": 32, "num_warps": 4, "num_stages": 3, "tma": True, "gluon": True}
    x, w = decode.make_inputs(20, 96, 80, device=DEVICE)
    y = torch.empty(20, 80, dtype=torch.bfloat16, device=DEVICE)
    poison(y)
    launch = decode.triton_decode(x, w, y, config=cfg)
    check_close("gluon fallback", y, decode.reference(x, w))
    assert ("in Gluon" in launch) == (DEVICE == "cuda" and torch.cuda.get_device_capability()[0] == 9)
    with pytest.raises(ValueError, match="not both"):
        decode.triton_decode(x, w, y, config={**cfg, "per_sm": 1, "sk": 1})
