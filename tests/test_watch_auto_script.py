"""tools/watch/auto.py's plan and what tools/watch/auto_tables.py reads back from its run directories:
interleaved arms, and the README table from synthetic runs with and without the jobs' own calls."""

import json

import pytest
from jobs import every, mark, rows, stamps, write_watch

from gpubench.job.markreader import Stream
from gpubench.job.watcher import resummarize
from gpubench.record.rundir import write_summary
from tools.watch import auto
from tools.watch import auto_tables as tables


def test_the_plan_interleaves_the_arms_and_switches_the_examples_calls_off():
    runs = auto.plan("all", dry=False)
    gpt = [(r["arm"], r["i"]) for r in runs if r["job"] == "gpt"]
    assert gpt[:3] == [("own", 1), ("auto", 1), ("off", 1)] and sorted(gpt) == sorted(
        (arm, i) for arm in ("own", "auto", "off") for i in (1, 2, 3)
    )
    for r in runs:
        example = r["job"] in ("gpt", "llama", "decode")
        assert ("--no-gpubench" in r["argv"]) == (example and r["arm"] != "own")
        assert r["no_auto"] == (r["arm"] == "off")
    assert {r["job"] for r in runs if r["arm"] == "auto"} >= {"hftrainer", "lightning", "jax", "resnet50", "decode"}
    assert [r["job"] for r in auto.plan("jobs", dry=True)] == ["hftrainer", "lightning", "jax", "resnet50"]


def test_llama_pairs_alone_alternate_which_arm_runs_first():
    runs = auto.plan("llama", dry=False, pairs=3)
    assert [(r["arm"], r["i"]) for r in runs] == [
        ("own", 1),
        ("auto", 1),
        ("auto", 2),
        ("own", 2),
        ("own", 3),
        ("auto", 3),
    ]
    assert all(r["job"] == "llama" and ("--no-gpubench" in r["argv"]) == (r["arm"] == "auto") for r in runs)


def run_dir(results, name, events, log="", command=()):
    def state(t, g):
        return (
            {"gpu_util_pct": 99.0, "sm_active_pct": 80.0, "tensor_active_pct": 30.0, "power_w": 500.0}
            if 2.0 <= t < 14.0
            else {}
        )

    run = write_watch(results / name, 1, 0.0, 16.0, rows(1, 0.0, 16.0, state), events)
    if command:
        manifest = json.loads((run / "manifest.json").read_text())
        (run / "manifest.json").write_text(json.dumps({**manifest, "command": list(command)}))
    write_summary(run, resummarize(run).summary)
    (run / "job.log").write_text(log)
    return run


def hooked(s, uuid) -> list:
    """The hook's steps of the loop that marks its own from 2.0 s: the one at 3.3 s counted."""
    return [
        *stamps(s, uuid, every(2.1, 3.1, 0.1), origin="optimizer"),
        *stamps(s, uuid, [3.3], flops=5e13, origin="counted"),
        *stamps(s, uuid, every(3.4, 14.0, 0.1), flops=5e13, origin="optimizer"),
    ]


def test_the_table_sets_the_jobs_own_count_beside_gpubenchs(tmp_path):
    s, uuid = Stream(None, 7), "GPU-00000000-0000-0000-0000-000000000000"
    own = [
        mark(2.0, s, "warmup"),
        *stamps(s, uuid, every(2.1, 3.0, 0.1), flops=5e13),
        mark(3.0, s, "train"),
        *stamps(s, uuid, every(3.1, 14.0, 0.1), flops=5e13),
    ]
    auto = hooked(s, uuid)
    for i in (1, 2):
        run_dir(tmp_path, f"watch-auto-gpt-own-{i}-h100-80gb-hbm3", own, "train: median step 100.0 ms")
        run_dir(tmp_path, f"watch-auto-gpt-auto-{i}-h100-80gb-hbm3", auto, f"train: median step {100.5 + i} ms")
        run_dir(tmp_path, f"watch-auto-gpt-off-{i}-h100-80gb-hbm3", [], "train: median step 100.0 ms")
    run_dir(
        tmp_path,
        "watch-auto-hftrainer-auto-1-h100-80gb-hbm3",
        auto,
        "own count: 4.9e+13 FLOPs a step by PaLM's formula; 10 steps/s on the host clock over ...",
    )
    text = tables.table(tmp_path)
    mfu = 100 * 5e14 / 989.4e12
    gpt = next(line for line in text.splitlines() if line.startswith("| GPT-2 small"))
    assert gpt.split(" | ")[1:4] == ["2, 2", f"{mfu:.0f}%", f"{mfu:.0f}%"]
    hf = next(line for line in text.splitlines() if "Trainer" in line)
    assert hf.split(" | ")[1:3] == ["–, 1", f"{100 * 4.9e14 / 989.4e12:.0f}%"]
    assert "`gpt`" in text and "within the targets (steps/s within 1%, MFU within 2%)" in text
    c = tables.compare(tables.runs(tmp_path)["h100-80gb-hbm3"]["gpt"], "train")
    assert c["pairs"] == 2 and c["steps_per_s"]["ratio"] == pytest.approx(1.0, abs=0.01)
    assert c["flops_per_step"]["ratio"] == pytest.approx(1.0, rel=1e-6)
    cost = tables.hook_cost(tables.runs(tmp_path)["h100-80gb-hbm3"]["gpt"])
    assert cost["cost_pct"] == pytest.approx(2.0) and "+2.00%" in text
    # the README's short table: the same cells, a GPU to a cell ("–" where the GPU ran no such job)
    run_dir(
        tmp_path,
        "watch-auto-hftrainer-auto-1-h200",
        auto,
        "own count: 9.8e+13 FLOPs a step by PaLM's formula; 10 steps/s on the host clock over ...",
    )
    names = {"h100-80gb-hbm3": "H100", "h200": "H200"}
    brief = tables.brief(tmp_path, names).splitlines()
    assert brief[0].startswith("Each cell: H100 / H200")
    gpt = next(line for line in brief if line.startswith("| GPT-2 small")).split(" | ")
    assert gpt[1:3] == [f"{mfu:.0f}% / –", f"{mfu:.0f}% / –"]
    hf = next(line for line in brief if "Trainer" in line).split(" | ")
    assert hf[1] == f"{100 * 4.9e14 / 989.4e12:.0f}% / {100 * 9.8e14 / 989.4e12:.0f}%"
    assert tables.brief(tmp_path / "none", names).startswith("(no run committed yet")


def test_a_job_whose_printed_count_is_wrong_is_counted_from_its_command(tmp_path):
    """The JAX job printed XLA's cost analysis, which leaves its matrix products out on a GPU: its own MFU is
    its products at the sizes its command gave, at the rate it printed, and the README says so."""
    s, uuid = Stream(None, 7), "GPU-00000000-0000-0000-0000-000000000000"
    command = [
        "gpubench",
        "watch",
        "--",
        "python3",
        "/x/examples/unmodified/jax_mlp.py",
        "--seconds",
        "10",
        "--width",
        "4096",
    ]
    run_dir(
        tmp_path,
        "watch-auto-jax-auto-1-h200",
        stamps(s, uuid, []),
        "own count: 6.97932e+09 FLOPs a step by XLA's cost analysis; 50 steps/s on the host clock over ...",
        command,
    )
    flops = (3 * 4 - 1) * 2.0 * 8192 * 4096 * 4096
    assert tables.own_count("jax", tmp_path / "watch-auto-jax-auto-1-h200")["flops"] == flops
    text = tables.table(tmp_path)
    row = next(line for line in text.splitlines() if "JAX" in line).split(" | ")
    assert row[2] == f"{100 * flops * 50 / 989.4e12:.0f}%" and row[3] == "–"
    assert "XLA's cost analysis (6.98e+09), leaves the products out" in text and "`jax` has no optimizer" in text


def test_a_difference_between_the_arms_is_traced_to_its_steps_not_said_to_be_met(tmp_path):
    """Own calls slower in a stretch of their steps: the target is said to be missed, the windows and the
    clocks cleared, and the slow stretch found in the arm that has it."""
    s, uuid = Stream(None, 7), "GPU-00000000-0000-0000-0000-000000000000"
    slow = every(3.1, 8.0, 0.1)[:-1] + every(8.0, 14.0, 0.125)  # 8.0 once: a line written twice counts once
    own = [
        mark(2.0, s, "warmup"),
        *stamps(s, uuid, every(2.1, 3.0, 0.1), flops=5e13),
        mark(3.0, s, "train"),
        *stamps(s, uuid, slow, flops=5e13),
    ]
    auto = hooked(s, uuid)
    for i in (1, 2):
        run_dir(tmp_path, f"watch-auto-llama-own-{i}-h200", own, "train: median step 100.0 ms")
        run_dir(tmp_path, f"watch-auto-llama-auto-{i}-h200", auto, "train: median step 100.0 ms")
    line = next(x for x in tables.table(tmp_path).splitlines() if x.startswith("- `llama`"))
    assert "**not within the targets**" in line and "Not the rows' windows" in line
    assert "the typical step is the same" in line and "49% and 49% of them with the calls, 0% and 0% without" in line


def test_with_no_run_the_readme_says_how_to_make_them(tmp_path):
    assert "python3 -m tools.watch.auto" in tables.table(tmp_path)
