"""The numbers of the README and of the documentation site (docs/*.md) are written from results/: they must
agree with the committed runs."""

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"


def page(name: str) -> str:
    return (DOCS / name).read_text()


def everything() -> str:
    """The README and every page of the site, one after the other."""
    return "\n".join(p.read_text() for p in [ROOT / "README.md", *sorted(DOCS.glob("*.md"))])


def test_readme_tables_agree_with_the_committed_results():
    r = subprocess.run(
        [sys.executable, "-m", "tools.readme.tables", "--check"], cwd=ROOT, capture_output=True, text=True, timeout=600
    )
    assert r.returncode == 0, r.stderr


def test_every_generated_part_has_results_behind_it():
    text = everything()
    assert "<!-- gpubench:ladder -->" in (ROOT / "README.md").read_text()  # the front door shows the ladder
    for name, gpus in (
        ("ladder", ("H100", "H200")),
        ("peaks", ("H100", "H200")),
        ("kernels", ("H100", "H200")),
        ("baselines", ("H100", "H200")),
        ("watch", ("H100",)),
        ("dist", ("H200",)),
    ):
        start = text.index(f"<!-- gpubench:{name} -->")
        body = text[start : text.index(f"<!-- /gpubench:{name} -->")]
        assert all(g in body for g in gpus) and "<<measure" not in body, name
    assert "<<measure" not in text


def test_every_promise_names_tests_that_exist():
    import re

    promises = page("promises.md")
    named = re.findall(r"`(tests/[\w/]+\.py)::(\w+)`", promises)
    assert len(named) >= 4 * 2
    for path, name in named:
        assert f"\ndef {name}(" in (ROOT / path).read_text(), f"{path}::{name}"


def test_the_ceiling_says_which_dtypes_have_a_calibration_and_where_its_points_come_from():
    """The calibration note names every committed calibration's runs and each tensor dtype none covers, so the
    README cannot say a dtype is calibrated that was never measured."""
    import json

    from gpubench.truth.ceiling import TENSOR_DTYPES

    text = page("ceiling.md")
    note = text[text.index("<!-- gpubench:calibration -->") : text.index("<!-- /gpubench:calibration -->")]
    files = [json.loads(p.read_text()) for p in sorted((ROOT / "results" / "calibration").glob("tensor-*.json"))]
    assert files
    for data in files:  # a point of a suite run names its run; one of tools/truth/gpu.py its samples
        assert all(
            (f"`{p['run']}`" if p.get("run") else f"results/calibration/{p['samples']}") in note for p in data["points"]
        )
    covered = {d for data in files for d in data["dtypes"]}
    for dtype in TENSOR_DTYPES:
        assert (dtype.upper() in note.split("have no calibration")[0].split(". ")[-1]) == (dtype not in covered), dtype


def generated_spans(text: str) -> list[tuple[int, int]]:
    import re

    block = r"<!-- gpubench:([\w-]+) -->.*?<!-- /gpubench:\1 -->"
    return [(m.start(), m.end()) for m in re.finditer(block, text, re.S)]


def test_the_prose_that_states_measured_numbers_is_written_by_the_generator():
    """Sentences about the committed results lie inside generated parts, so `--check` holds them to the files:
    the ones written by hand had drifted from the files they cite."""
    text = everything()
    spans = generated_spans(text)
    for start in (
        "Read it row by row",
        "Read down the GPU-Util column",
        "Of these runs, GPU-Util reads",
        "The ratio of two medians",
        "A fused softmax must read",
        "the ridge lies at",
        "the Triton kernel reads the weights at",
        "The compiled loop's `warmup`",
        "Each run's `train` phase",
        "The committed calibrations",
    ):
        at = text.find(start)
        assert at >= 0 and any(a <= at < b for a, b in spans), start
    for start in ("HFU is above the tensor ceiling in", "HFU is not known for", "runs were recorded before"):
        at = text.find(start)  # said only where the committed runs call for it
        assert at < 0 or any(a <= at < b for a, b in spans), start
    by_hand = "".join(text[a:b] for a, b in zip([0] + [b for _, b in spans], [a for a, _ in spans] + [len(text)]))
    for stale in (
        "three of the four loops are busy",
        "2.1% above the analytic",
        "1.017x",
        "234 (B ≈ 243)",
        "89-91%",
        "62-86%",
        "a few microseconds",
    ):
        assert stale not in by_hand, stale


def test_the_readme_states_the_trails_the_summary_uses():
    from gpubench.read.summary import TRAIL_S
    from gpubench.truth.ceiling import PEAK_CLOCK_MHZ

    text = " ".join(everything().split())
    assert (
        f"{TRAIL_S['sm_active_pct']:g} s into the window for GPM's columns, {TRAIL_S['gpu_util_pct']:g} s for "
        f"NVML's utilization, {TRAIL_S['power_w']:g} s for power"
    ) in text
    assert f"({PEAK_CLOCK_MHZ['NVIDIA H100 80GB HBM3']:.0f} MHz on an H100 SXM and an H200)" in text


def test_a_watch_table_says_which_peak_each_row_is_against(tmp_path):
    """From each run's --dtype: 'the bf16 datasheet peak in every row' only where every run was watched so; a
    share a run cannot give (no model count, a hardware count of another day) reads –, never a number."""
    import json

    from tools.readme import watch as rt

    runs = {}
    for name, dtype in (("healthy", "bf16"), ("fp32", "fp32")):
        runs[name] = tmp_path / name
        runs[name].mkdir()
        (runs[name] / "manifest.json").write_text(json.dumps({"dtype": dtype}))
    trains = {n: {"tensor_ceiling_dtype": "bf16"} for n in runs}
    mixed = rt._against(runs, trains)
    assert "in every row" not in mixed and "bf16 for `healthy`" in mixed and "fp32 for `fp32`" in mixed
    assert "against the bf16 peak" in mixed  # the tensor ceiling: what ran on the tensor pipes, of bf16's peak
    assert rt._against({"healthy": runs["healthy"]}, trains).endswith("against the bf16 datasheet peak in every row")
    row = {
        "gpu_util_pct": 99.0,
        "steps_per_s": 10.0,
        "tflops": 200.0,
        "mfu_pct": 20.0,
        "hfu_pct": float("nan"),
        "tensor_ceiling_pct": 24.0,
        "verdict_rules": "tensor-part, mfu-mid",
    }
    # what nvidia-smi said, the work done, the ceiling and the verdict lead; the rate and the activity follow
    assert rt._watch_row("job", "(defaults)", row).startswith(
        "| job | 99% | 20% | – | 24% | `tensor-part, mfu-mid` | 10.0 | 200 |"
    )
    assert rt._watch_row("job", "`--fp32`", row).startswith("| job (`--fp32`) | 99% |")
