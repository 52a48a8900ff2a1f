"""scripts/bench_baseline.sh without a GPU: it parses, every option and test it names exists, its slowdowns
slow the calls they say, and its checker reads what the steps leave into PASS and FAIL lines and the
summary the README's baselines text is written from."""

import importlib.util
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts" / "bench_baseline.sh"


def module(path: Path):
    spec = importlib.util.spec_from_file_location(path.stem, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


check = module(ROOT / "scripts" / "bench_baseline_check.py")
readme = module(ROOT / "scripts" / "readme_tables.py")
benches = module(ROOT / "tests" / "benchmarks" / "test_bench_kernels.py")


def test_the_script_parses():
    r = subprocess.run(["bash", "-n", str(SCRIPT)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr


class Parser:
    """What pytest_addoption hooks add, by name."""

    def __init__(self):
        self.names = set()

    def getgroup(self, *args, **kwargs):
        return self

    def addoption(self, *names, **kwargs):
        self.names.update(names)


def test_every_option_and_test_the_script_names_exists():
    from pytest_benchmark import plugin as benchmark_plugin

    from gpubench import pytest_plugin

    text = SCRIPT.read_text()
    options = set(re.findall(r"(--(?:gpu|slow|benchmark)-[a-z-]+)", text))
    assert {"--gpu-measure-floor", "--slow-calls", "--slow-share", "--gpu-fail-slower"} <= options
    parser = Parser()
    for hooks in (pytest_plugin, benchmark_plugin, module(ROOT / "tests" / "conftest.py")):
        hooks.pytest_addoption(parser)
    assert options - parser.names == set()
    tests = set(re.findall(r"::(test_\w+\[[\w-]+\])", text))
    assert tests == {"test_gemm[torch-bf16]", "test_copy[torch-1GiB]", "test_copy[triton-1GiB]"}
    ids = [f"tests/benchmarks/test_bench_kernels.py::{t}" for t in sorted(tests)]
    collected = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider",
                                *ids], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert collected.returncode == 0 and "3 tests collected" in collected.stdout, collected.stdout


class Options:
    def __init__(self, **values):
        self.values = values
        self.config = self

    def getoption(self, name):
        return self.values[name]


def test_slowed_calls_do_the_extra_work_on_the_share_they_say_in_whole_bursts():
    done = []
    request = Options(**{"--slow-calls": 30.0, "--slow-share": 0.4})
    run, facts = benches.slowed(request, lambda: done.append("call"), 8192,
                                lambda m: type("P", (), {"run": lambda: done.append(m)}))
    for _ in range(benches.BURST * benches.PERIOD * 2):
        run()
    extra = [d for d in done if d != "call"]
    assert done.count("call") == 2 * benches.BURST * benches.PERIOD and set(extra) == {2464}  # 30% of 8192 rows
    assert len(extra) == 2 * 4 * benches.BURST  # 4 whole bursts of every 10
    assert done[: 2 * benches.BURST] == [x for _ in range(benches.BURST) for x in ("call", 2464)]
    assert facts == {"slowdown": {"extra_work_pct": pytest.approx(30.08, abs=0.01), "share_of_calls": 0.4,
                                  "burst_calls": benches.BURST}}
    plain = lambda: None  # noqa: E731
    assert benches.slowed(Options(**{"--slow-calls": 0.0, "--slow-share": 1.0}), plain, 1, None) == (plain, {})


# --- the checker -------------------------------------------------------------------------------------

NAMES = ["test_copy[triton-1GiB]", "test_copy[torch-1GiB]", "test_gemm[torch-bf16]", "test_tiny"]


def verdict(name, word, pct=0.0, why=None):
    median = {"pct": pct, "lo": pct - 0.5, "hi": pct + 0.5, "floor": 1.0}
    return {"name": name, "word": word, "why": why or f"median {pct:+.1f}%", "changes": {"median": median}}


def steps(slower_rerun=False):
    """What the script's steps leave in its work folder when the gate does what it promises."""
    tiny = {"test_tiny": {"name": "test_tiny",
                          "extra_info": {"kernel_us": 1.6, "graph_us": 1.6, "launch_us": 5.3,
                                         "cuda_graph_calls": 1000}}}
    rerun = [verdict(n, "same") for n in NAMES]
    if slower_rerun:
        rerun[2] = verdict("test_gemm[torch-bf16]", "slower", 4.0)
    return {
        "1-baseline": (0, {"verdicts": [], "runs": tiny}),
        "1-floor-1": (0, {"verdicts": [verdict(n, "same") for n in NAMES]}),
        "1-floor-2": (0, {"verdicts": [verdict(n, "same") for n in NAMES]}),
        "a-uniform-5pct": (1, {"verdicts": [verdict("test_gemm[torch-bf16]", "unsure", 4.0),
                                            verdict("test_copy[torch-1GiB]", "slower", 5.0)]}),
        "b-40pct-of-calls-30pct": (1, {"verdicts": [verdict(n, "slower", 0.3, "q3 +29.8% [+28.0, +30.4]: slower")
                                                    for n in ("test_gemm[torch-bf16]", "test_copy[torch-1GiB]")]}),
        "c-rerun-1": (0, {"verdicts": rerun, "runs": tiny}),
        "c-rerun-2": (1 if slower_rerun else 0, {"verdicts": rerun, "runs": tiny}),
        "c-rerun-3": (0, {"verdicts": [verdict(n, "unsure") for n in NAMES], "runs": tiny}),
        "e-slow-copy": (1, {"verdicts": [verdict("test_copy[triton-1GiB]", "slower", 253.6)]}),
        "e-another-model": (4, None),
        "e-example": (0, None),
    }


@pytest.fixture
def left(tmp_path):
    def make(**kwargs):
        work = tmp_path / "work"
        work.mkdir(exist_ok=True)
        exits = []
        for name, (rc, data) in steps(**kwargs).items():
            exits.append(f"{name}\t{rc}")
            if data is not None:
                (work / f"{name}.json").write_text(json.dumps(data))
        (work / "exits.tsv").write_text("\n".join(exits) + "\n")
        (work / "e-another-model.out").write_text("ERROR: the baseline h100-80gb-hbm3.json was measured on NVIDIA "
                                                  "H200 but this GPU is NVIDIA H100 80GB HBM3: timings of different "
                                                  "GPU models are not comparable, so ...\n")
        full = {f"tests/benchmarks/test_bench_kernels.py::{n}": n for n in NAMES}
        base = {"machine_info": {"gpu": {"name": "NVIDIA H100 80GB HBM3"}},
                "benchmarks": [{"name": n, "fullname": f} for f, n in full.items()],
                "gpubench": {"reruns": [{}, {}], "floor_pct": {f: {"median": 1.5} for f in full}}}
        (tmp_path / "base.json").write_text(json.dumps(base))
        return work, tmp_path / "base.json", tmp_path / "summary.json"
    return make


def test_the_checker_passes_a_gate_that_does_what_it_promises(left, capsys):
    work, base, summary = left()
    assert check.main([str(work), str(base), str(summary)]) == 0
    out = capsys.readouterr().out
    assert "PASS  a-uniform-5pct: test_gemm[torch-bf16]: expected slower or unsure, never same; got unsure" in out
    assert "PASS  d: test_tiny in 1-baseline: expected nearer the CUDA graph's time than the launch rate" in out
    assert out.rstrip().endswith("0 of 25 checks failed")
    data = json.loads(summary.read_text())
    assert data["gpu"] == "NVIDIA H100 80GB HBM3" and data["numbers"]["c"] == {
        "same": 8, "unsure": 4, "slower": 0, "faster": 0, "failed": 0}
    text = readme.gate_sentence("H100", "h100-80gb-hbm3", data)
    assert text.startswith("On the H100 ([log](results/logs/bench-baseline-h100-80gb-hbm3.log), "
                           "[checks](results/logs/bench-gate-h100-80gb-hbm3.json)), 25 of 25 checks passed:")
    assert "(a) 5% more work in every call reads `unsure` for `test_gemm[torch-bf16]` (median +4.0% [+3.5, +4.5])" \
        in text
    assert "(d) the 2 µs spin took 1.60 µs a call (timed from a CUDA graph of 1000 calls), against 1.60 µs in the test's own CUDA graph" in text


def test_the_checker_fails_an_unchanged_rerun_read_slower(left, capsys):
    work, base, summary = left(slower_rerun=True)
    assert check.main([str(work), str(base), str(summary)]) == 1
    out = capsys.readouterr().out
    assert "FAIL  c-rerun-2: exit status: expected 0; got 1" in out
    assert "FAIL  c-rerun-2: every benchmark: expected same or unsure for all 4; got 4 verdicts; " \
           "test_gemm[torch-bf16] slower: median +4.0%" in out


def test_a_step_that_never_ran_is_a_failure_not_a_pass(left, capsys):
    work, base, summary = left()
    (work / "b-40pct-of-calls-30pct.json").unlink()
    (work / "exits.tsv").write_text("".join(line + "\n" for line in (work / "exits.tsv").read_text().splitlines()
                                            if not line.startswith("b-")))
    assert check.main([str(work), str(base), str(summary)]) == 1
    out = capsys.readouterr().out
    assert "FAIL  b-40pct-of-calls-30pct: exit status: expected 1; got did not run" in out
    assert "FAIL  b-40pct-of-calls-30pct: test_gemm[torch-bf16]: expected slower; got no verdict" in out


def test_where_the_host_launches_as_fast_as_the_gpu_runs_the_tiny_check_says_it_cannot_tell(left, capsys):
    work, base, summary = left()
    data = json.loads((work / "1-baseline.json").read_text())
    data["runs"]["test_tiny"]["extra_info"]["launch_us"] = 3.0  # under twice the graph's 1.6 us
    (work / "1-baseline.json").write_text(json.dumps(data))
    assert check.main([str(work), str(base), str(summary)]) == 0
    assert "N/A   d: test_tiny in 1-baseline" in capsys.readouterr().out
