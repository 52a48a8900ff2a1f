"""plot and report of a day on eight GPUs, timed in every test session: pytest-benchmark records the time
(its table at the end, extra_info per command), and the test holds what was written, never the time, which a
loaded machine stretches. tools/longrun/day.py measures the same on a quiet machine for docs/storage.md.
A session that saves or compares GPU baselines (--gpu-baseline, --gpu-save-baseline, ...) times only the
GPU's kernels, so this one skips there."""

import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
GATE_OPTIONS = ("gpu_baseline", "gpu_save_baseline", "gpu_measure_floor", "gpu_fail_slower", "benchmark_compare")


@pytest.fixture(scope="module")
def day_script():
    from tools.longrun import day

    return day


@pytest.mark.benchmark(group="long run")
def test_plot_and_report_of_a_day_on_eight_gpus(benchmark, day_script, tmp_path, pytestconfig):
    if any(pytestconfig.getoption(name, None) for name in GATE_OPTIONS):
        pytest.skip("a session with GPU baselines times the GPU's kernels only")
    run = day_script.make_day(tmp_path / "day")
    took = {}
    benchmark.pedantic(lambda: took.update(day_script.plot_and_report(run, tmp_path / "out")), rounds=1, iterations=1)
    benchmark.extra_info.update(
        took, machine=day_script.machine(), target_s=day_script.TARGET_S, rows=day_script.GPUS * 864_000
    )
    print(
        f"\nplot + report of 24 h x 8 GPUs: {took['s']:.1f} s (target {day_script.TARGET_S:g} s): "
        + json.dumps({v: took[v] for v in day_script.VERBS})
    )
    md = (tmp_path / "out" / "report" / "report.md").read_text()
    assert "figures/timeline.png" in md and "## " in md
    for name in ("headline", "ladder", "timeline"):
        assert (tmp_path / "out" / "plot" / f"{name}.png").stat().st_size > 0
        assert (tmp_path / "out" / "report" / "figures" / f"{name}.svg").stat().st_size < 2e6


def test_the_docs_print_the_committed_measurement(day_script):
    bench = json.loads(day_script.RESULT.read_text())
    text = (ROOT / "docs" / "storage.md").read_text()
    assert day_script.docs(text, bench) == text, "run python -m tools.longrun.day --docs"
    assert bench["run"] == {"gpus": 8, "hours": 24.0, "rows": 6_912_000, "seed": 0} and len(bench["rounds"]) >= 3
