"""tools/gate/effort.py without a GPU: its dry run collects every step's tests, its real path (its sessions
replaced by fakes) runs the steps in order within its budget and packs what they left, and its checker turns
what the steps leave (verdicts made by the gate's own code, with counter fingerprints) into PASS, FAIL and N/A
lines and a summary."""

import json
import os
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from tools.gate import effort as effort_script
from tools.gate import effort_check as check

ROOT = Path(__file__).resolve().parents[2]


def test_the_dry_run_collects_every_step(tmp_path):
    """One unchanged run: the same steps as the script's twenty, fewer times; --slowdown and -k parse."""
    env = {**os.environ, "OUT": str(tmp_path)}
    r = subprocess.run(
        [sys.executable, "-m", "tools.gate.effort", "--dry-run", "--reruns", "1"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert r.returncode == 0, r.stdout[-3000:]
    assert "dry run: 0 of 9 pytest commands could not collect their tests" in r.stdout
    with tarfile.open(tmp_path / "steps.tar.gz") as tar:
        assert "./exits.tsv" in tar.getnames() and "./gate-effort.log" in tar.getnames()


def test_the_real_path_runs_every_step_in_order_and_skips_what_the_budget_cannot_hold(tmp_path, monkeypatch):
    sessions = []

    def run(argv, out, env, timeout):
        sessions.append((argv, env.get("CUDA_VISIBLE_DEVICES")))
        out.write_text("a session\n")
        for a in argv:
            if a.startswith("--gpu-save-baseline="):
                Path(a.split("=", 1)[1], "h200.json").write_text(
                    json.dumps({"machine_info": {"gpu": {"name": "NVIDIA H200"}}, "benchmarks": []})
                )
        return 4 if env.get("CUDA_VISIBLE_DEVICES") == "" else 1 if any("more-work" in a for a in argv) else 0

    monkeypatch.setattr(effort_script, "install", lambda log: None)
    monkeypatch.setattr(effort_script, "identify", lambda: ("h200", "NVIDIA H100 80GB HBM3"))
    rc = effort_script.main(["--out", str(tmp_path / "out"), "--reruns", "4"], run=run)
    assert rc == 1  # the fake sessions leave no verdicts: the checks fail, and say so
    with tarfile.open(tmp_path / "out" / "steps.tar.gz") as tar:
        exits = [line.split("\t") for line in tar.extractfile("./exits.tsv").read().decode().splitlines()]
        other = json.load(tar.extractfile("./other/h200.json"))
    assert [e[0] for e in exits] == [
        "e-no-gpu",
        "e-another-model",
        "1-baseline",
        "c-rerun-1",
        "c-rerun-2",
        "a-more-work-5pct",
        "a-more-work-10pct",
        "s-fp32",
        "s-grid",
        "b-part-of-calls",
        "c-rerun-3",
        "c-rerun-4",
    ]
    assert other["machine_info"]["gpu"]["name"] == "NVIDIA H100 80GB HBM3"
    baseline_argv = sessions[2][0]
    assert "tests/gate_benchmarks" in baseline_argv and any(a.startswith("--gpu-save-baseline=") for a in baseline_argv)
    assert not any(
        a.startswith(("--gpu-min-time", "--gpu-max-time", "--gpu-settle", "--gpu-baseline-runs")) for a in baseline_argv
    )  # the recipe as it stands
    assert "--slowdown=fp32" in sessions[7][0] and "--slowdown=grid" in sessions[8][0]
    log = (tmp_path / "out" / "gate-effort.log").read_text()
    assert "checks failed" in log and (tmp_path / "out" / "gate-effort-checks.json").is_file()

    sessions.clear()
    rc = effort_script.main(["--out", str(tmp_path / "short"), "--reruns", "4", "--budget", "100"], run=run)
    with tarfile.open(tmp_path / "short" / "steps.tar.gz") as tar:
        exits = [line.split("\t") for line in tar.extractfile("./exits.tsv").read().decode().splitlines()]
    # the refusals run; 100 s cannot hold the baseline's six sessions' worth
    assert [e[:2] for e in exits[:3]] == [["e-no-gpu", "4"], ["e-another-model", "0"], ["1-baseline", "skipped"]]
    assert rc == 1


def test_two_calls_run_every_step_once_and_the_second_checks_them_all(tmp_path, monkeypatch):
    names = []

    def run(argv, out, env, timeout):
        names.append(out.stem)
        out.write_text(f"{out.stem} ran\n")
        return 4 if env.get("CUDA_VISIBLE_DEVICES") == "" else 0

    monkeypatch.setattr(effort_script, "install", lambda log: None)
    monkeypatch.setattr(effort_script, "identify", lambda: ("h200", "NVIDIA H100 80GB HBM3"))
    effort_script.main(["--out", str(tmp_path / "one"), "--reruns", "4", "--steps", "e-,1-,c-"], run=run)
    assert names == ["e-no-gpu", "e-another-model", "1-baseline", *(f"c-rerun-{i}" for i in range(1, 5))]
    names.clear()
    effort_script.main(
        ["--out", str(tmp_path / "two"), "--reruns", "4", "--resume", str(tmp_path / "one" / "steps.tar.gz")], run=run
    )
    assert names == ["a-more-work-5pct", "a-more-work-10pct", "s-fp32", "s-grid", "b-part-of-calls"]
    with tarfile.open(tmp_path / "two" / "steps.tar.gz") as tar:
        exits = [line.split("\t")[0] for line in tar.extractfile("./exits.tsv").read().decode().splitlines()]
    assert sorted(exits) == sorted(
        [
            "e-no-gpu",
            "e-another-model",
            "1-baseline",
            "a-more-work-5pct",
            "a-more-work-10pct",
            "s-fp32",
            "s-grid",
            "b-part-of-calls",
            *(f"c-rerun-{i}" for i in range(1, 5)),
        ]
    )
    log = (tmp_path / "two" / "gate-effort.log").read_text()
    assert log.index("1-baseline ran") < log.index("resumed: 7 steps") < log.index("s-fp32 ran")
    r = subprocess.run(
        [sys.executable, "-m", "tools.gate.effort", "--out", str(tmp_path / "x"), "--resume", str(tmp_path / "no")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 2 and "--resume: no file" in r.stderr and "Traceback" not in r.stderr


# --- the checker ----------------------------------------------------------------------------------------------

NAMES = {
    "test_matmul_tiny": 6.2,
    "test_sum_small": 14.0,
    "test_saxpy": 480.0,
    "test_sum_large": 180.0,
    "test_matmul_2048": 27.0,
    "test_fma_1ms": 1200.0,
}
LADDER = {
    "test_saxpy": {"dram_active_pct": 90.0, "sm_active_pct": 95.0},
    "test_sum_large": {"dram_active_pct": 85.0, "sm_active_pct": 95.0},
    "test_matmul_2048": {"tensor_active_pct": 60.0, "fp32_active_pct": 1.0, "sm_active_pct": 90.0},
    "test_fma_1ms": {"fp32_active_pct": 45.0, "sm_active_pct": 50.0, "sm_occupancy_pct": 6.0},
    "test_matmul_tiny": {"tensor_active_pct": 20.0, "sm_active_pct": 40.0},
    "test_sum_small": {"dram_active_pct": 30.0, "sm_active_pct": 60.0},
}


def rounds_of(us: float, shift_pct: float, n: int = 60) -> list[float]:
    return [us * (1 + shift_pct / 100) * (1 + 0.001 * (i % 5)) * 1e-6 for i in range(n)]


def info(name: str, shift_pct: float = 0.0, ladder: dict | None = None) -> dict:
    return {
        "l2_flush": True,
        "counters": {**(ladder or LADDER[name]), "call_ms": NAMES[name] * (1 + shift_pct / 100) / 1e3},
    }


def baseline_of(shifts: list[float], most: int = 8) -> dict:
    from gpubench.gate import floor
    from gpubench.gate.against_baseline import compare_run

    data = {
        "machine_info": {"gpu": {"name": "NVIDIA H200", "uuid": "GPU-1"}},
        "benchmarks": [
            {
                "name": n,
                "fullname": f"t::{n}",
                "stats": {"median": us * 1e-6, "rounds": 60, "data": rounds_of(us, shifts[0])},
                "extra_info": info(n),
            }
            for n, us in NAMES.items()
        ],
    }
    data = floor.started(data, most)
    for s in shifts[1:]:
        runs = {f"t::{n}": {"name": n, "rounds": rounds_of(us, s), "extra_info": {}} for n, us in NAMES.items()}
        data, _ = floor.with_rerun(
            data, {c.fullname: dict(c.verdict.raw) for c in compare_run(data, runs, 1.0)}, "t", None
        )
    return data


def session(base: dict, shifts: dict, ladders: dict | None = None, names=NAMES) -> dict:
    """--gpu-verdict-json after a run whose calls moved by shifts[name] percent (and whose counters read
    ladders[name]), made by the gate."""
    from gpubench.gate.against_baseline import compare_run
    from gpubench.gate.finish import verdict_records

    runs = {
        f"t::{n}": {
            "name": n,
            "rounds": rounds_of(NAMES[n], shifts.get(n, 0.0)),
            "extra_info": info(n, shifts.get(n, 0.0), (ladders or {}).get(n)),
        }
        for n in names
    }
    return verdict_records(
        {"name": "NVIDIA H200", "uuid": "GPU-1"}, "h200.json", 1.0, [], compare_run(base, runs, 1.0), runs
    )


@pytest.fixture
def left(tmp_path, monkeypatch):
    monkeypatch.setenv("RERUNS", "2")

    def make(baseline_s=95, fp32_ladder=None):
        work = tmp_path / "work"
        work.mkdir(exist_ok=True)
        base = baseline_of([0.0, 0.02, -0.02, 0.01])
        (tmp_path / "base.json").write_text(json.dumps(base))
        fp32 = fp32_ladder or {"tensor_active_pct": 0.3, "fp32_active_pct": 70.0, "sm_active_pct": 95.0}
        grid = {"fp32_active_pct": 22.0, "sm_active_pct": 25.0, "sm_occupancy_pct": 3.0}
        steps = {
            "1-baseline": (0, baseline_s, None),
            "c-rerun-1": (0, 13, session(base, {})),
            "c-rerun-2": (0, 14, session(base, {"test_saxpy": 0.1})),
            "a-more-work-5pct": (1, 15, session(base, {n: 5.0 for n in NAMES})),
            "a-more-work-10pct": (1, 15, session(base, {n: 10.0 for n in NAMES})),
            "s-fp32": (
                1,
                8,
                session(
                    base,
                    {"test_matmul_2048": 1200.0, "test_matmul_tiny": 60.0},
                    {"test_matmul_2048": fp32},
                    ("test_matmul_2048", "test_matmul_tiny"),
                ),
            ),
            "s-grid": (1, 6, session(base, {"test_fma_1ms": 100.0}, {"test_fma_1ms": grid}, ("test_fma_1ms",))),
            "b-part-of-calls": (
                1,
                10,
                session(base, {"test_saxpy": 12.0, "test_sum_large": 12.0}, None, ("test_saxpy", "test_sum_large")),
            ),
            "e-no-gpu": (4, 5, None),
            "e-another-model": (4, 5, None),
        }
        for name, (rc, seconds, data) in steps.items():
            with open(work / "exits.tsv", "a") as f:
                f.write(f"{name}\t{rc}\t{seconds}\n")
            if data is not None:
                (work / f"{name}.json").write_text(json.dumps(data))
        (work / "e-no-gpu.out").write_text("ERROR: --gpu-fail-slower, but there is no GPU here (...): ...\n")
        (work / "e-another-model.out").write_text(
            "ERROR: the baseline h200.json was measured on NVIDIA H100 80GB "
            "HBM3 but this GPU is NVIDIA H200: timings of different GPU models "
            "are not comparable, so ...\n"
        )
        return work, tmp_path / "base.json", tmp_path / "summary.json"

    return make


def test_the_checker_passes_a_gate_that_keeps_its_promises_and_names_what_moved(left, capsys):
    work, base, summary = left()
    assert check.main([str(work), str(base), str(summary)]) == 0, capsys.readouterr().out
    out = capsys.readouterr().out
    assert "PASS  1-baseline: the README's recipe, every process of it: expected at most 120 s; got 95 s" in out
    assert (
        "PASS  1-baseline: test_saxpy: expected a floor settled by as few processes as it needs; got 1.00% "
        "from 4 processes; at the least floor" in out
    )
    assert (
        "PASS  a-more-work-5pct: test_saxpy: what moved: expected more bytes; got DRAM active 90% → 90% (+5% "
        "a call): more bytes" in out
    )
    assert (
        "PASS  s-fp32: test_matmul_2048: what moved: expected left the tensor cores; got tensor active 60% → "
        "0.3%, FP32 active 1% → 70%: the call left the tensor cores for FP32" in out
    )
    assert (
        "PASS  s-grid: test_fma_1ms: what moved: expected fewer SMs or occupancy; got SM active 50% → 25%, "
        "occupancy halved: fewer SMs busy, a smaller grid" in out
    )
    data = json.loads(summary.read_text())
    assert data["failed"] == 0 and data["numbers"]["baseline"]["wall_s"] == 95
    assert data["numbers"]["baseline"]["benchmarks"]["test_saxpy"]["processes"] == 4
    assert data["numbers"]["reruns"] == {"runs": 2, "same": 12, "unsure": 0, "slower": 0, "faster": 0, "failed": 0}


def test_a_baseline_past_two_minutes_or_a_line_that_names_nothing_fails(left, capsys):
    work, base, summary = left(baseline_s=130, fp32_ladder={"tensor_active_pct": 60.0, "fp32_active_pct": 1.0})
    assert check.main([str(work), str(base), str(summary)]) == 1
    out = capsys.readouterr().out
    assert "FAIL  1-baseline: the README's recipe, every process of it: expected at most 120 s; got 130 s" in out
    assert (
        "FAIL  s-fp32: test_matmul_2048: what moved: expected left the tensor cores; got tensor active 60% → 60% "
        "(+1200% a call): more tensor-core work" in out
    )
