"""tools/gate/baseline.sh without a GPU: it parses, every option and test it names exists (its runs:
test_bench_baseline_run.py), its benchmarks' sizes and bursts are what they say (the FMA chains:
test_gate_set_fma.py), the probe's analysis reads its files, and its checker turns what the steps leave
(verdicts made by the gate's own code from synthetic rounds) into PASS, FAIL and N/A lines and the summary the
README's gate text is written from."""

import importlib.util
import json
import re
import subprocess
import sys
from pathlib import Path

import gatecalls
import pytest

from research import bench_baseline_probe as probe
from tools.gate import baseline_check as check
from tools.readme import gate as readme

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "tools" / "gate" / "baseline.sh"


def module(path: Path):
    spec = importlib.util.spec_from_file_location(path.stem, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


gate_set = module(ROOT / "tests" / "gate_benchmarks" / "test_gate_set.py")


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


def test_every_option_and_benchmark_the_script_names_exists():
    from pytest_benchmark import plugin as benchmark_plugin

    from gpubench import pytest_plugin

    text = SCRIPT.read_text()
    options = set(re.findall(r"(--(?:gpu|slow|benchmark|more)-[a-z-]+)", text))
    assert {"--gpu-baseline-runs", "--more-work", "--slow-share", "--gpu-fail-slower"} <= options
    parser = Parser()
    for hooks in (pytest_plugin, benchmark_plugin, module(ROOT / "tests" / "conftest.py")):
        hooks.pytest_addoption(parser)
    assert options - parser.names == set()
    tests = {n for n in dir(gate_set) if n.startswith("test_")}
    assert set(check.PART) <= tests and len(tests) >= 8
    for k in re.findall(r'-k "([^"]+)"', text) + re.findall(r"-k (\w+)", text):
        assert any(word in t for t in tests for word in k.split(" or ")), k


# --- the benchmarks ----------------------------------------------------------------------------------------


def test_more_work_grows_a_size_by_as_much():
    assert gatecalls.grown(2**22, 5, 1024) == round(2**22 * 1.05 / 1024) * 1024
    assert gatecalls.grown(512, 10, 16) == 560 and gatecalls.grown(60_000, 0) == 60_000


def test_a_share_of_the_calls_does_more_work_in_whole_bursts():
    done = []
    call = gatecalls.bursts(lambda: done.append("base"), lambda: done.append("more"), 0.4)
    for _ in range(gatecalls.BURST * gatecalls.PERIOD * 3):
        call()
    assert done.count("more") == 3 * 4 * gatecalls.BURST
    assert done[: gatecalls.BURST * 4] == ["more"] * gatecalls.BURST * 4


# --- the probe ----------------------------------------------------------------------------------------------


def test_the_probe_says_its_plan_without_a_gpu():
    r = subprocess.run(
        [sys.executable, "-m", "research.bench_baseline_probe", "--dry-run"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["placements"] == probe.PLACEMENTS


class CpuGpu:
    """The probe's Gpu on the CPU: calls run for real, 'time' is a counter that each timed call advances, graphs
    are the call repeated; enough to run every part of the probe and read what it writes."""

    device = "cpu"
    name, l2 = "cpu", 50 * 2**20

    def __init__(self, step_us=1.0):
        import torch

        self.torch, self.now, self.step_us = torch, 0.0, step_us

    def clock(self):
        return 1980.0

    def hold(self, us):
        pass

    def timed(self, target, rounds, flush, per=1):
        out = []
        for i in range(rounds):
            t = self.now
            target()
            self.now += self.step_us * (1 + (i % 3)) + (0.5 if flush == "read" else 0.0)
            out.append((self.now - t) / per)
        return out

    def graph(self, run, calls):
        class Graph:
            def replay(self_inner):
                for _ in range(calls):
                    run()
                self.now += 0.01 * calls

        return Graph()


def test_the_probe_runs_every_part_and_its_summary_reads_what_it_wrote(monkeypatch):
    monkeypatch.setattr(probe, "PLACEMENTS", 2)
    monkeypatch.setattr(probe, "ROUNDS", 3)
    monkeypatch.setattr(probe, "WARM_ROUNDS", 2)
    monkeypatch.setattr(probe, "GRAPH_CALLS", 2)
    monkeypatch.setattr(probe, "FIT_CALLS", (1, 2, 4))
    monkeypatch.setattr(probe, "PAD_BYTES", 4096)
    runs = [json.loads(json.dumps(probe.probe(CpuGpu(step_us=s)))) for s in (1.0, 1.1)]
    assert all(r["errors"] == {} for r in runs), runs[0]["errors"]
    assert set(runs[0]["placements"]) == {"matmul_512", "sum_2^22"}
    row = runs[0]["placements"]["matmul_512"][0]
    assert {"host_us", "graph1_us", "warm_graph_us", "host_read_flush_us", "address_mod_2mib"} <= set(row)
    summary = check.probe_summary(runs)
    host = summary["calls"]["matmul_512"]["methods"]["host_us"]
    assert summary["processes"] == 2 and host["between_processes_pct"] == pytest.approx(
        100 * 0.1 / 1.05 / 2**0.5, rel=0.01
    )
    assert (
        summary["calls"]["matmul_512"]["flush"]["host_read_flush_us"]
        > summary["calls"]["matmul_512"]["flush"]["host_us"]
    )
    assert summary["graph_launch_us"] is not None


# --- the checker ----------------------------------------------------------------------------------------------

NAMES = {"test_matmul_tiny": 6.2, "test_sum_small": 14.0, "test_saxpy": 480.0, "test_sum_large": 180.0}


def rounds_of(us: float, shift_pct: float, n: int = 60) -> list[float]:
    return [us * (1 + shift_pct / 100) * (1 + 0.001 * (i % 5)) * 1e-6 for i in range(n)]


def session(baseline: dict, shifts: dict, names=NAMES, uuid="GPU-1") -> dict:
    """What --gpu-verdict-json holds after a run whose calls moved by shifts[name] percent, made by the gate."""
    from gpubench.gate.against_baseline import compare_run
    from gpubench.gate.finish import verdict_records

    runs = {
        f"t::{n}": {"name": n, "rounds": rounds_of(us, shifts.get(n, 0.0)), "extra_info": {"l2_flush": True}}
        for n, us in names.items()
    }
    compared = compare_run(baseline, runs, 1.0)
    return verdict_records({"name": "NVIDIA H100 80GB HBM3", "uuid": uuid}, "h100.json", 1.0, [], compared, runs)


def baseline_of(process_shifts: list[float]) -> dict:
    """A baseline of NAMES measured in len(process_shifts) processes, its reruns added as the plugin adds them."""
    from gpubench.gate import floor
    from gpubench.gate.against_baseline import compare_run

    data = {
        "machine_info": {"gpu": {"name": "NVIDIA H100 80GB HBM3", "uuid": "GPU-1"}},
        "benchmarks": [
            {
                "name": n,
                "fullname": f"t::{n}",
                "stats": {"median": us * 1e-6, "rounds": 60, "data": rounds_of(us, process_shifts[0])},
                "extra_info": {"l2_flush": True, "timer_step_us": 0.032},
            }
            for n, us in NAMES.items()
        ],
    }
    for s in process_shifts[1:]:
        runs = {f"t::{n}": {"name": n, "rounds": rounds_of(us, s), "extra_info": {}} for n, us in NAMES.items()}
        changes = {c.fullname: dict(c.verdict.raw) for c in compare_run(data, runs, 1.0)}
        data, _ = floor.with_rerun(data, changes, "t", None)
    return data


@pytest.fixture
def left(tmp_path, monkeypatch):
    """What the script leaves when the gate does what it promises; rerun_shift moves one unchanged run."""
    monkeypatch.setenv("BASELINE_RUNS", "8")
    monkeypatch.setenv("RERUNS", "3")

    def make(rerun_shift=0.0, skip=(), rerun_gpu="GPU-1", probes=1):
        work = tmp_path / "work"
        work.mkdir(exist_ok=True)
        base = baseline_of([0.0, 0.3, -0.3, 0.2, -0.2, 0.1, -0.1, 0.0])
        (tmp_path / "base.json").write_text(json.dumps(base))
        steps = {
            "1-baseline": (0, None),
            "c-rerun-1": (0, session(base, {})),
            "c-rerun-2": (0, session(base, {"test_saxpy": 0.1})),
            "c-rerun-3": (1 if rerun_shift else 0, session(base, {"test_sum_large": rerun_shift}, uuid=rerun_gpu)),
            "a-more-work-5pct": (1, session(base, {n: 5.0 for n in NAMES})),
            "a-more-work-10pct": (1, session(base, {n: 10.0 for n in NAMES})),
            "b-part-of-calls": (1, session(base, {n: 12.0 for n in check.PART}, {n: NAMES[n] for n in check.PART})),
            "e-no-gpu": (4, None),
            "e-another-model": (4, None),
        }
        exits = []
        for name, (rc, data) in steps.items():
            exits.append(f"{name}\t{'skipped' if name in skip else rc}\t{0 if name in skip else 17}")
            if data is not None and name not in skip:
                (work / f"{name}.json").write_text(json.dumps(data))
        (work / "exits.tsv").write_text("\n".join(exits) + "\n")
        (work / "e-no-gpu.out").write_text(
            "ERROR: --gpu-fail-slower, but there is no GPU here (CUDA sees no GPU in this process): ...\n"
        )
        (work / "e-another-model.out").write_text(
            "ERROR: the baseline h100-80gb-hbm3.json was measured on NVIDIA "
            "H200 but this GPU is NVIDIA H100 80GB HBM3: timings of different "
            "GPU models are not comparable, so ...\n"
        )
        for i in range(1, probes + 1):
            (work / f"probe-{i}.json").write_text(
                json.dumps({"errors": {}, "placements": {}, "timer": {"step_ns": 32.0}})
            )
        return work, tmp_path / "base.json", tmp_path / "summary.json"

    return make


def test_the_checker_passes_a_gate_that_does_what_it_promises(left, capsys, monkeypatch):
    monkeypatch.setenv("BASELINE_RUNS", "8")
    work, base, summary = left()
    assert check.main([str(work), str(base), str(summary)]) == 0, capsys.readouterr().out
    out = capsys.readouterr().out
    assert "PASS  1-baseline: the baseline's processes: expected 8, each measuring all 4 benchmarks" in out
    assert "PASS  a-more-work-5pct: test_saxpy: expected slower (a call of 480.0 us)" in out
    assert "a-more-work-5pct: test_sum_small" not in out  # under 100 us: no promise at 5%
    assert "PASS  a-more-work-10pct: test_sum_small: expected slower or unsure (a call of 14.0 us)" in out
    assert "PASS  gpu: the GPU of every step: expected the baseline's; got 1 GPU: GPU-1" in out
    assert out.rstrip().endswith("an unchanged run took 17 s (median); the steps 153 s in all\n0 of 25 checks failed")
    data = json.loads(summary.read_text())
    n = data["numbers"]
    assert n["version"] == 2 and n["reruns"] == {
        "runs": 3,
        "same": 12,
        "unsure": 0,
        "slower": 0,
        "faster": 0,
        "failed": 0,
    }
    row = n["benchmarks"]["test_saxpy"]
    assert row["unchanged_runs"] == 3 and row["spread_pct"] == pytest.approx(0.0577, abs=0.001)
    assert row["floor_pct"] > 1.0 and 0 < row["false_alarm_at_floor"] < 1e-6
    text = readme.gate_sentence("H100", "h100-80gb-hbm3", data)
    assert text.startswith(
        "On the H100 ([log](results/logs/bench-baseline-h100-80gb-hbm3.log), "
        "[checks](results/logs/bench-gate-h100-80gb-hbm3.json)), 25 of 25 checks passed:"
    )
    assert "an unchanged run took 17 s, most of it its process's start." in text and "| `test_saxpy` | 480 |" in text


def test_the_checker_fails_an_unchanged_rerun_read_slower(left, capsys):
    work, base, summary = left(rerun_shift=20.0)
    assert check.main([str(work), str(base), str(summary)]) == 1
    out = capsys.readouterr().out
    assert "FAIL  c-rerun-3: exit status: expected 0; got 1" in out
    assert (
        "FAIL  c-rerun-3: every benchmark: expected same or unsure for all 4; got 4 verdicts; test_sum_large "
        "slower: median +20.0%" in out
    )


def test_a_step_skipped_for_time_is_a_failure_not_a_pass(left, capsys):
    work, base, summary = left(skip=("b-part-of-calls", "c-rerun-3"))
    assert check.main([str(work), str(base), str(summary)]) == 1
    out = capsys.readouterr().out
    assert "FAIL  b-part-of-calls: exit status: expected 1; got skipped: out of time" in out
    assert "FAIL  c: unchanged runs: expected 3 or more; got 2 ran" in out


def test_without_a_probe_or_on_another_gpu_a_check_is_not_applicable_and_said(left, capsys):
    """The probe runs only where asked and time is left; a step resumed on another GPU of the model is compared,
    but the floor holds the processes of one GPU, and the line says so."""
    work, base, summary = left(probes=0, rerun_gpu="GPU-2")
    assert check.main([str(work), str(base), str(summary)]) == 0
    out = capsys.readouterr().out
    assert "N/A   x-probe: the experiment's processes: expected every one that ran, whole; got 0 ran" in out
    assert "N/A   gpu: the GPU of every step: expected the baseline's; got 2 GPUs: GPU-1, GPU-2" in out
    assert out.rstrip().endswith("0 of 23 checks failed (2 N/A)")
    sentence = readme.gate_sentence("H100", "h100-80gb-hbm3", json.loads(summary.read_text()))
    assert ", 23 of 23 checks passed:" in sentence


def test_a_step_a_resumed_run_ran_counts_as_it_ran_there(left, capsys):
    work, base, summary = left(skip=("b-part-of-calls", "c-rerun-3"))
    rerun = json.loads((work.parent / "base.json").read_text())
    (work / "c-rerun-3.json").write_text(json.dumps(session(rerun, {})))
    (work / "b-part-of-calls.json").write_text(
        json.dumps(session(rerun, {n: 12.0 for n in check.PART}, {n: NAMES[n] for n in check.PART}))
    )
    with open(work / "exits.tsv", "a") as f:
        f.write("c-rerun-3\t0\t16\nb-part-of-calls\t1\t12\n")
    assert check.main([str(work), str(base), str(summary)]) == 0, capsys.readouterr().out
