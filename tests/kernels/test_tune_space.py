"""The tuning sweep's settings, its choice of winners and its CONFIG lines, and the sweep itself run on the
CPU (Triton's interpreter, tiny sizes): what must hold before it meets a GPU."""

import csv
import importlib.util
import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
space = pytest.importorskip("tools.tune.space")


def _module(name, path):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("b", [1, 2, 4, 8, 16, 32, 64, 128, 256, 512])
def test_every_setting_fits_an_sm_and_the_wave_rule_and_names_itself_once(b):
    configs = space.decode_space(b)
    assert 10 <= len(configs) <= 100  # broad, but a sweep of ten batches stays within minutes
    tags = [space.tag(c) for c in configs]
    assert len(set(tags)) == len(tags)
    for c in configs:
        r = space.resources(c, b)
        assert r["smem"] <= space.SMEM_BLOCK and r["per_sm"] >= 1 and r["regs"] <= 255, space.tag(c)
        assert space.wave_efficiency(c, b, 28672, 8192, 132) >= space.MIN_WAVE_EFFICIENCY
        assert 8192 % (c["BLOCK_K"] * c.get("split_k", 1)) == 0
        assert not (c.get("tma") and (c.get("evict") or c.get("fma")))  # TMA loads take no hint
        assert c["BLOCK_B"] <= max(16, 2 * b)  # no tile of tokens much wider than the batch
    kinds = {t.split("-")[0] for t in tags}
    assert kinds >= {"ptr", "tma"} and ("fma" in kinds) == (b <= 4)


def test_the_broad_sweep_holds_the_h100s_setting_at_b256():
    # a persistent, flattened 128x256 tile at 4 stages: at 3 stages, the only depth the sweep once gave a
    # persistent GEMM tile, it ran at 0.88-0.89 of torch where 4 stages run at 0.97-0.99
    from gpubench.kernels import decode

    in_force = dict(next(c for limit, c in decode.CONFIG["NVIDIA H100 80GB HBM3"]["triton"] if limit == 256))
    assert space.tag(in_force) in {space.tag(c) for c in space.decode_space(256)}


def test_waves_count_the_tail():
    # 196 KB of stages: 224 tiles at one program a SM on 132 SMs: 2 waves, the second 70% full
    one = space.cfg(128, 64, 128, 8, 4)
    assert space.resources(one, 64)["per_sm"] == 1
    assert space.wave_efficiency(one, 64, 28672, 8192, 132) == pytest.approx(224 / 264)
    split = space.cfg(128, 64, 128, 8, 4, split_k=4)  # 896 pieces: 7 waves, the last 79% full
    assert space.wave_efficiency(split, 64, 28672, 8192, 132) == pytest.approx(896 / 924)


def test_around_moves_one_knob_and_keeps_what_fits():
    seed = space.cfg(64, 16, 128, 4, 4, tma=True)
    near = space.around(seed, 1)
    assert near and all(space.fits(c, 1, 28672, 8192, 132) for c in near)
    assert space.tag(seed) not in {space.tag(c) for c in near}
    differs = [sum(c.get(k) != seed.get(k) for k in space.KEYS) for c in near]
    assert max(differs) <= 2 and min(differs) >= 1  # one move (turning TMA off may also allow the hint)


def test_the_choice_takes_the_final_rounds_fastest_and_writes_lines_that_load(tmp_path):
    from tools.tune import choice as tune

    rows = [
        {"family": "decode-b1", "stage": "final", "name": "torch", "b": 1, "speed_vs_ref": 1.0, "median_ms": 1},
        {"family": "decode-b1", "stage": "final", "name": "cupy-t256", "b": 1, "speed_vs_ref": 0.9, "median_ms": 1},
    ]
    winners = {
        1: space.cfg(8, 1, 512, 4, 1, fma=True, split_k=4),
        64: space.cfg(128, 64, 64, 8, 4, split_k=2),
        512: space.cfg(128, 256, 64, 8, 3, tma=True, per_sm=1, flatten=True),
    }
    for b, win in winners.items():
        for i, c in enumerate(space.decode_space(b)[:5]):
            rows.append(
                {
                    "family": f"decode-b{b}",
                    "stage": "final",
                    "name": space.tag(c),
                    "b": b,
                    "speed_vs_ref": 0.9 - i / 100,
                    "cfg": space.dumps(c),
                    "median_ms": 1,
                }
            )
        rows.append(
            {
                "family": f"decode-b{b}",
                "stage": "screen",
                "name": "ptr-screen-only",
                "b": b,
                "speed_vs_ref": 9.0,
                "cfg": space.dumps(space.cfg(16, 16, 64, 4, 3)),
                "median_ms": 1,
            }
        )
        rows.append(
            {
                "family": f"decode-b{b}",
                "stage": "final",
                "name": space.tag(win),
                "b": b,
                "speed_vs_ref": 1.05,
                "cfg": space.dumps(win),
                "median_ms": 1,
            }
        )
    entry = tune.decode_choice(rows)
    assert entry == {"triton": ((1, winners[1]), (64, winners[64]), (None, winners[512])), "cupy_threads": 256}
    rows += [
        {
            "family": "read",
            "stage": "final",
            "name": "triton-4096-w8-p4-s1",
            "speed_vs_ref": 1.01,
            "cfg": json.dumps({"BLOCK": 4096, "num_warps": 8, "per_sm": 4, "stages": 1, "evict": ""}),
        },
        {
            "family": "read",
            "stage": "final",
            "name": "cupy-t256-p8-u4",
            "speed_vs_ref": 0.99,
            "cfg": json.dumps({"threads": 256, "per_sm": 8, "unroll": 4}),
        },
    ]
    read_entry = tune.read_choice(rows)
    assert read_entry["triton"]["BLOCK"] == 4096 and read_entry["cupy"]["unroll"] == 4
    for name, entry_, apply in (("decode", entry, tune.apply_decode), ("read", read_entry, tune.apply_read)):
        copy = tmp_path / f"{name}.py"
        copy.write_text((ROOT / "kernels" / f"{name}.py").read_text())
        apply(entry_, "NVIDIA Test GPU", copy)
        apply(entry_, "NVIDIA Test GPU", copy)  # a second sweep replaces the line
        assert copy.read_text().count('"NVIDIA Test GPU"') == 1
        text = copy.read_text().replace("from .", "from gpubench.kernels.")
        copy.write_text(text)
        module = _module(f"gpubench.kernels._tuned_{name}", copy)
        assert module.CONFIG["NVIDIA Test GPU"] == entry_


def test_apply_from_refuses_a_csv_of_several_gpus_in_one_sentence(tmp_path, capsys):
    from tools.tune import kernels as tune

    path = tmp_path / "t.csv"
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=["gpu", "family", "name"])
        w.writeheader()
        w.writerows([{"gpu": "A", "family": "read", "name": "torch"}, {"gpu": "B", "family": "read", "name": "torch"}])
    assert tune.apply_from([str(path)]) == 2
    assert capsys.readouterr().err.count("\n") == 1
    assert tune.apply_from([str(tmp_path / "missing.csv")]) == 2


def _csv(path, rows):
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=sorted({k for r in rows for k in r}))
        w.writeheader()
        w.writerows(rows)


def test_a_second_sweeps_batches_replace_the_first_ones_and_the_rest_stay(tmp_path, monkeypatch):
    from tools.tune import output as io

    applied = {}
    monkeypatch.setattr(io, "apply_decode", lambda entry, gpu: applied.setdefault(gpu, entry))
    first, second = space.cfg(64, 16, 128, 4, 4), space.cfg(128, 256, 64, 8, 3, tma=True, per_sm=1, sk=1)

    def row(b, c, speed):
        return {
            "gpu": "G",
            "family": f"decode-b{b}",
            "stage": "final",
            "b": b,
            "name": space.tag(c),
            "cfg": space.dumps(c),
            "speed_vs_ref": speed,
            "median_ms": 1,
        }

    _csv(tmp_path / "first.csv", [row(1, first, 1.05), row(512, first, 0.93)])
    _csv(tmp_path / "second.csv", [row(512, second, 1.02), row(512, first, 0.95)])
    assert io.apply_from([str(tmp_path / "first.csv"), str(tmp_path / "second.csv")]) == 0
    assert applied["G"]["triton"] == ((1, first), (None, second))
    applied.clear()  # the other way round, the first sweep's batch 512 stands
    assert io.apply_from([str(tmp_path / "second.csv"), str(tmp_path / "first.csv")]) == 0
    assert applied["G"]["triton"] == ((1, first), (None, first))


def test_a_sweep_of_some_batches_leaves_the_others_rows_as_they_were(tmp_path):
    """A sweep of B = 1 to 64 on an H200 once wrote a line of those batches alone, and B = 256 and 512 fell to
    the B = 64 tile (0.69 and 0.64 of torch): the batches it did not tune keep their rows."""
    from tools.tune import choice

    copy = tmp_path / "decode.py"
    copy.write_text((ROOT / "kernels" / "decode.py").read_text())
    old = choice.current("NVIDIA H200", copy)
    assert old is not None and old["triton"][-1][0] is None
    small, mid = space.cfg(64, 16, 128, 4, 4, tma=True), space.cfg(128, 64, 128, 8, 4, tma=True)
    rows = [
        {
            "family": f"decode-b{b}",
            "stage": "final",
            "b": b,
            "name": space.tag(c),
            "cfg": space.dumps(c),
            "speed_vs_ref": 1.01,
            "median_ms": 1,
        }
        for b, c in ((2, small), (64, mid))
    ]
    entry = choice.decode_choice(rows, old)
    got = dict(entry["triton"])
    assert got[2] == small and got[64] == mid
    assert {b: c for b, c in old["triton"] if b not in (2, 64)} == {b: c for b, c in got.items() if b not in (2, 64)}
    assert list(got) == sorted(b for b in got if b is not None) + [None]  # in order, the open row last
    assert entry["cupy_threads"] == old["cupy_threads"]
    choice.apply_decode(entry, "NVIDIA H200", copy)
    assert choice.current("NVIDIA H200", copy) == entry
    assert choice.merged((), {16: small, 512: mid}) == ((16, small), (None, mid))  # a new GPU: the largest serves above


@pytest.mark.parametrize("b", [16, 256, 512])
def test_the_second_sweep_tries_each_new_idea_on_the_new_kernel_and_fits(b):
    configs = space.second_space(b)
    tags = [space.tag(c) for c in configs]
    assert 10 <= len(configs) <= 48 and len(set(tags)) == len(tags)
    for c in configs:
        assert space.fits(c, b, 28672, 8192, 132), space.tag(c)
        assert c.get("sk") or c.get("warp_spec")  # every one runs kernels/decode_sk.py
        assert not (c.get("sk") and c.get("warp_spec")) and c["BLOCK_B"] <= max(16, b)
    assert any("-sk1" in t for t in tags) and any("-sk2" in t for t in tags) and any("-ws" in t for t in tags)
    from gpubench.kernels import decode_sk

    for c in configs:  # a wave more streamed is another launch, never the same one timed twice
        if c.get("sk") == 2:
            assert decode_sk.plan(b, 28672, c, 132) != decode_sk.plan(b, 28672, {**c, "sk": 1}, 132), space.tag(c)
    assert any("-sw" in t for t in tags) == (b > 16)


def test_the_shared_memory_model_matches_what_triton_allocates():
    # bytes Triton 3.6 allocated compiling kernels/decode_sk.py for sm_90 (its report; the model leaves out
    # its few KB of barriers): stages, the store buffer of a swapped tile, warp specialization's
    for c, allocated in (
        (space.cfg(128, 256, 64, 8, 3, tma=True, per_sm=1, sk=1), 147480),
        (space.cfg(128, 256, 64, 8, 3, tma=True, per_sm=1, sk=1, swap=True), 213016),
        (space.cfg(128, 16, 128, 4, 6, tma=True, warp_spec=True), 223576),
    ):
        assert 0 <= allocated - space.resources(c, 256)["smem"] <= 4096
    assert space.resources(space.cfg(128, 256, 64, 4, 3, tma=True, warp_spec=True), 256)["per_sm"] == 1


def test_the_second_sweep_times_the_setting_in_force_and_the_first_sweeps_best_again():
    from tools.tune import decode as tune

    rows = [
        {
            "family": "decode-b512",
            "stage": "final",
            "name": space.tag(c),
            "cfg": space.dumps(c),
            "speed_vs_ref": 0.9 + i / 100,
        }
        for i, c in enumerate(space.decode_space(512)[:6])
    ]
    in_force = space.cfg(128, 128, 64, 8, 5, tma=True)  # not among the rows
    settings = tune.decode_settings([512], rows, second=True, applied=lambda b: in_force)[512]
    tags = [space.tag(c) for c in settings]
    seeds = [space.tag(json.loads(r["cfg"])) for r in rows[::-1][: tune.SEEDS]]
    assert tags[0] == space.tag(in_force) and tags[1 : 1 + len(seeds)] == seeds
    assert set(tags) >= {space.tag(c) for c in space.second_space(512)}


def test_the_sweep_runs_through_on_the_cpu(monkeypatch):
    # the whole path a GPU run takes (settings, check, screen, final round, rows), in the interpreter
    import torch

    if torch.cuda.is_available():
        pytest.skip("on a GPU the sweep itself is the test")
    from tools.tune import decode as tune

    monkeypatch.setattr(tune, "SCREEN", {"rounds": 1, "window_s": 0.0})
    monkeypatch.setattr(tune, "FINAL", {"rounds": 2, "window_s": 0.0})
    tune.sweep_decode([1], tune.Budget(300), save=lambda: None, workers=0, dry=True)
    rows = tune.ROWS
    final = [r for r in rows if r["stage"] == "final"]
    assert {"torch", "read-same-bytes", "copy-same-bytes"} <= {r["name"] for r in final}
    kernels = [r for r in rows if r.get("cfg")]
    assert kernels and all(r["check"].startswith("rel err") for r in kernels)
    assert {space.tag(json.loads(r["cfg"])).split("-")[0] for r in kernels} == {"ptr", "tma", "fma"}
    from tools.tune import choice

    assert choice.decode_choice(rows)["triton"][0][0] is None  # one batch tuned: it serves every batch
