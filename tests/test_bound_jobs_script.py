"""tools/watch/bound_jobs.py (its rows judged in tools/watch/bound_rows.py) and the jobs of examples/unmodified/
it watches: every job takes --seconds and --tiny, knows nothing of gpubench and prints its own count as the
harness reads it; a row whose HFU is above the tensor ceiling's limit is flagged, whether the verdict kept its
HFU or withheld it."""

import ast
import math
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
JOBS = sorted((ROOT / "examples" / "unmodified").glob("*.py"))
NAN = math.nan


def script():
    from tools.watch import bound_jobs

    return bound_jobs


def judged():
    from tools.watch import bound_rows

    return bound_rows


def options(tree) -> set[str]:
    return {
        a.value
        for node in ast.walk(tree)
        if isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "add_argument"
        for a in node.args
        if isinstance(a, ast.Constant) and isinstance(a.value, str)
    }


def printed(tree) -> list[str]:
    """The text of each string the file writes, an f-string's literal parts joined (its fields left out)."""
    return [
        node.value
        if isinstance(node, ast.Constant)
        else "".join(v.value for v in node.values if isinstance(v, ast.Constant))
        for node in ast.walk(tree)
        if isinstance(node, ast.JoinedStr) or isinstance(node, ast.Constant) and isinstance(node.value, str)
    ]


def imported(tree) -> set[str]:
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module.split(".")[0])
    return names


@pytest.mark.parametrize("path", JOBS, ids=[p.stem for p in JOBS])
def test_each_job_takes_seconds_and_tiny_and_prints_its_own_count(path):
    text = path.read_text()
    tree = ast.parse(text)
    assert {"--seconds", "--tiny"} <= options(tree)
    assert "gpubench" not in imported(tree)  # written as its user writes it
    if path.stem in script().LEFT_OUT:  # a job of another harness: its own count, in its own words
        assert any(t.startswith("own count") for t in printed(tree))
    else:  # as the harness reads it: "own count: F FLOPs a step <how>; R steps/s ..."
        assert any(
            t.startswith("own count: ") and " FLOPs a step " in t and " steps/s on the host clock" in t
            for t in printed(tree)
        )
    assert len(text.splitlines()) <= 150 and max(map(len, text.splitlines())) <= 120


def test_the_harness_runs_every_job_but_those_it_leaves_out_and_knows_their_times():
    bound = script()
    names = bound.jobs()
    assert sorted(names + list(bound.LEFT_OUT)) == [p.stem for p in JOBS]
    assert names[:8] == bound.ORDER[:8] and set(bound.EXPECT_S) <= {p.stem for p in JOBS}
    with pytest.raises(SystemExit):
        bound.jobs(["no_such_job"])
    dry = bound.command("vit_fp16_scaler", Path("/r/out"), dry=True)
    assert dry[1:5] == ["-m", "tools.watch.bound_jobs", "--dry-watch", "/r/out"]
    assert dry[dry.index("--") - 2 : dry.index("--")] == ["--dtype", "fp16"] and dry[-1] == "--tiny"
    real = bound.command("resnet50", Path("/r/out"), dry=False)
    assert real[1:5] == ["-m", "gpubench", "watch", "--out"] and real[-2:] == ["--seconds", "10"]


def test_a_plain_torch_job_runs_tiny_and_its_own_count_reads_back():
    done = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "unmodified" / "long_context.py"), "--tiny", "--seconds", "0.5"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    count = judged().own_count(done.stdout)
    # 2 layers of width 64 (QKV, output, SwiGLU of 128) and the output layer over 2 x 128 tokens, PaLM's way
    matrices = 2 * (64 * 192 + 64 * 64 + 64 * 256 + 128 * 64) + 64 * 256
    assert count["flops"] == pytest.approx(6 * matrices * 256 + 12 * 2 * 64 * 128 * 256, rel=1e-5)
    assert count["how"].startswith("by PaLM's formula")


def row(phase, hfu, limit, over=NAN, rules="tensor-part, mfu-mid", kind="phase", steps=10.0):
    return {
        "phase": phase,
        "kind": kind,
        "seconds": 8.0,
        "steps_per_s": steps,
        "mfu_pct": hfu,
        "hfu_pct": hfu,
        "tensor_ceiling_pct": limit / 1.03,
        "tensor_ceiling_limit_pct": limit,
        "ran_over_ceiling": over,
        "verdict_rules": rules,
    }


def test_a_row_above_its_limit_is_flagged_and_counted():
    bound = judged()
    own = {"flops": 1e12, "rate": 9.9, "how": "by PaLM's formula"}
    rows = [
        bound.judge("a", row("warmup", 30.0, 10.0, 3.0, "flops-above-ceiling"), own),  # not steady
        bound.judge("a", row("train", 9.0, 10.0, 0.9), own),
        bound.judge("b", row("train", 11.0, 10.0, 1.1, "tensor-part, flops-above-ceiling"), own),
        bound.judge("c", row("train", NAN, 10.0, 1.2, "tensor-part, gpubench-count-above-ceiling"), own),
        bound.judge("d", row("train", 12.0, 10.0), own),  # no ratio given: HFU and limit say it
        bound.judge("e", row("busy", NAN, 10.0, steps=NAN, rules="tensor-part, tensor-ceiling"), own),
        bound.judge("e", row("eval", NAN, NAN, rules="too-short"), own),
    ]
    assert [r["steady"] for r in rows] == [False, True, True, True, True, True, False]
    assert [r["bounded"] for r in rows] == [False, True, False, False, False, None, None]
    withheld = rows[3]
    assert withheld["hfu_withheld"] and withheld["hfu_pct"] == pytest.approx(12.0)
    assert rows[1]["own_steps_per_s"] == 9.9 and math.isnan(rows[5]["own_steps_per_s"])
    lines = bound.table(rows)
    assert lines[-1] == "1 of 4 steady rows at or below the ceiling; 3 flops-above-ceiling verdicts"
    assert "1 of the verdicts above are gpubench-count-above-ceiling" in lines[-2]
    cells = [line.split() for line in lines[1:8]]  # job, phase, steady, s, steps/s, own/s, MFU, HFU, ceil, limit, ok
    assert [c[2] for c in cells] == ["no", "yes", "yes", "yes", "yes", "yes", "no"]
    assert [c[10] for c in cells] == ["NO", "yes", "NO", "NO", "NO", "–", "–"] and cells[3][7] == "12*"


def test_the_ceiling_page_prints_the_committed_runs_table():
    """docs/ceiling.md's table of the eleven jobs is the one the committed runs' summaries make, row for row."""
    table = judged().docs_table(judged().committed_rows(ROOT / "results", "h200"))
    page = (ROOT / "docs" / "ceiling.md").read_text()
    assert len(table) == 13 and all(line in page.splitlines() for line in table)


def test_the_ceiling_page_prose_states_the_ranges_its_table_holds():
    """The sentences under the table give each kind of job's MFU ÷ ceiling as a range: each range is the one the
    committed runs make, and the cost in tightness is the calibration's highest over its median."""
    from gpubench.truth.ceiling import load_calibrations

    rows = {
        r["job"]: r
        for r in judged().committed_rows(ROOT / "results", "h200")
        if r["steady"] and r.get("tensor_ceiling_limit_pct", 0) > 0 and r.get("steps_per_s", 0) > 0
    }  # its rows
    page = " ".join((ROOT / "docs" / "ceiling.md").read_text().split())
    vision = ("convnext_timm", "vit_fp16_scaler", "resnet50", "gpt2_accelerate", "lightning_gpt", "gan_two_optimizers")
    kinds = {
        "for the eager vision models, GPT-2 and the GAN": vision,
        "for BERT, gradient accumulation, the compiled Llama and the `Trainer`": (
            "train_eval",
            "grad_accum",
            "llama_compiled",
            "hf_trainer",
        ),
    }
    for words, jobs in kinds.items():
        ratios = [rows[j]["mfu_pct"] / rows[j]["tensor_ceiling_pct"] for j in jobs]
        assert f"{min(ratios):.2f}–{max(ratios):.2f} {words}" in page, words
    assert len(rows) == sum(map(len, kinds.values())) + 1  # and the one at 8k context, said on its own:
    long = rows["long_context"]
    assert f"and {long['mfu_pct'] / long['tensor_ceiling_pct']:.2f} at 8k context" in page
    bf16 = load_calibrations("NVIDIA H200")["bf16"]
    assert (
        f"{bf16.factor:.3f} ÷ {bf16.median:.3f} (the median of every kernel measured) = "
        f"{bf16.factor / bf16.median:.2f}" in page
    )
