"""The in-process API (marks, steps) and the verdict table, without a GPU."""

import os
import subprocess
import sys
import timeit
from pathlib import Path

import pytest

import gpubench
from gpubench.job import marks
from gpubench.job.marks import Event
from gpubench.job.phases import cut, step_stats
from gpubench.read import verdict

ROOT = Path(__file__).resolve().parents[1]


def test_import_is_cheap_and_the_api_is_lazy():
    code = ("import sys, gpubench; gpubench.mark('x'); gpubench.step(flops=1.0); gpubench.count_flops; "
            "assert 'torch' not in sys.modules and 'gpubench.record.recording' not in sys.modules, sorted(sys.modules)")
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    env.pop(marks.ENV, None)
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=60)
    assert r.returncode == 0, r.stderr


def test_marks_outside_a_watch_cost_well_under_a_microsecond():
    assert marks._path is None  # no watch around this test
    n = 200_000
    for call in (lambda: gpubench.mark("train"), lambda: gpubench.step(flops=1.5e12)):
        per_call_s = min(timeit.repeat(call, number=n, repeat=5)) / n
        assert per_call_s < 1e-6, f"{per_call_s * 1e9:.0f} ns per call"


def test_lines_from_many_processes_arrive_whole(tmp_path):
    """Several ranks append at once: every line arrives whole, stamped with its rank and pid."""
    path = tmp_path / "marks.tsv"
    code = ("import gpubench\n"
            "for i in range(2000):\n"
            "    gpubench.step(flops=1e9 * i) if i % 10 else gpubench.mark('phase-%d' % i)\n")
    procs = [subprocess.Popen([sys.executable, "-c", code],
                              env=dict(os.environ, PYTHONPATH=str(ROOT), RANK=str(rank), **{marks.ENV: str(path)}))
             for rank in range(4)]
    assert [p.wait(timeout=60) for p in procs] == [0] * 4
    lines = path.read_text().splitlines()
    events = marks.read_all(path)
    assert len(lines) == len(events) == 8000
    assert {e.rank for e in events} == {0, 1, 2, 3} and len({e.pid for e in events}) == 4
    assert sum(e.kind == "mark" for e in events) == 800
    assert max(e.flops or 0 for e in events) == pytest.approx(1e9 * 1999)


def test_reader_waits_for_the_end_of_a_line_and_skips_garbage(tmp_path):
    path = tmp_path / "m.tsv"
    reader = marks.Reader(path)
    assert reader.poll() == []  # not there yet
    path.write_bytes(b"1.5\t0\t9\tmark\ttrain\nnot a line\n2.0\t0\t9\tstep\tabc\n2.5\t0\t9\tst")
    assert [e.value for e in reader.poll()] == ["train"]
    with open(path, "ab") as f:
        f.write(b"ep\t3e12\n")
    [e] = reader.poll()
    assert e.kind == "step" and e.flops == 3e12 and e.t == 2.5


def events(*items):
    return [Event(t, rank, 100 + rank, kind, value) for t, rank, kind, value in items]


def test_phases_from_the_lowest_ranks_marks():
    evs = events((5.0, 0, "mark", "warmup"), (5.2, 1, "mark", "warmup"), (10.0, 0, "mark", "train"),
                 (10.5, 1, "mark", "eval"),  # another rank's marks never cut the phases
                 (20.0, 0, "mark", "eval"), (22.0, 0, "mark", "eval"), (25.0, 0, "mark", "train"),
                 (40.0, 0, "mark", "late"))
    phases = {p.name: p.spans for p in cut(evs, 1.0, 30.0)}
    assert phases == {"run": [(1.0, 5.0)], "warmup": [(5.0, 10.0)], "train": [(10.0, 20.0), (25.0, 30.0)],
                      "eval": [(20.0, 25.0)]}


def test_a_mark_before_the_recording_names_its_first_phase():
    """Attach mode: the job marked "train" before the watch began."""
    phases = cut(events((1.0, 0, "mark", "train"), (8.0, 0, "mark", "eval")), 5.0, 10.0)
    assert [(p.name, p.spans) for p in phases] == [("train", [(5.0, 8.0)]), ("eval", [(8.0, 10.0)])]


def test_step_rate_is_taken_between_stamps_in_each_span():
    evs = events(*[(10.0 + 0.1 * i, 0, "step", "2e12") for i in range(11)],  # 10 steps of 0.1 s in [10, 11]
                 *[(30.0 + 0.2 * i, 0, "step", "2e12") for i in range(6)],  # 5 steps of 0.2 s in [30, 31]
                 *[(10.05 + 0.01 * i, 1, "step", "") for i in range(50)])  # rank 1: not the lowest rank
    s = step_stats(evs, [(9.5, 12.0), (29.0, 35.0)])
    assert s["steps"] == 17
    assert s["steps_per_s"] == pytest.approx(15 / 2.0)  # 15 intervals over 1 s + 1 s
    assert s["step_ms"] == pytest.approx(2000 / 15)
    assert s["step_ms_p10"] == pytest.approx(100) and s["step_ms_p90"] == pytest.approx(200)
    assert s["flops_per_step"] == pytest.approx(2e12)


def test_steps_without_flops_give_no_flops():
    s = step_stats(events(*[(1.0 + i, 0, "step", "" if i == 3 else "1e9") for i in range(5)]), [(0.0, 9.0)])
    assert s["steps"] == 5 and s["steps_per_s"] == pytest.approx(1.0) and s["flops_per_step"] != s["flops_per_step"]


LADDER = dict(gpu_util_pct=100.0, sm_active_pct=87.0, sm_occupancy_pct=30.0, tensor_active_pct=26.0,
              dram_active_pct=30.0, steps_per_s=18.0, tflops=250.0, mfu_pct=25.3)


@pytest.mark.parametrize("changes,where,work", [
    ({"gpu_util_pct": 33.0, "sm_active_pct": 29.0, "mfu_pct": 8.0}, "host-bound", "mfu-low"),
    ({"sm_active_pct": 20.0, "mfu_pct": 0.5}, "few-sms", "mfu-low"),
    ({"dram_active_pct": 70.0, "tensor_active_pct": 2.0}, "memory-bound", "mfu-mid"),
    ({"tensor_active_pct": 4.0, "mfu_pct": 4.0}, "no-tensor-cores", "mfu-low"),
    ({"tensor_active_pct": 60.0, "mfu_pct": 45.0}, "tensor-busy", "mfu-high"),
    ({}, "tensor-part", "mfu-mid"),
    ({"sm_active_pct": None, "tensor_active_pct": None, "steps_per_s": None, "tflops": None, "mfu_pct": None},
     "util-only", "no-steps"),
    ({"tensor_active_pct": None, "tflops": None, "mfu_pct": None}, "tensor-unknown", "no-flops"),
    ({"mfu_pct": None}, "tensor-part", "no-peak"),
])
def test_each_rule_is_triggered_by_its_numbers(changes, where, work):
    row = {k: v for k, v in {**LADDER, **changes}.items() if v is not None}
    text, names = verdict.verdict(row, "bf16")
    assert names == [where, work]
    rule = next(r for r in verdict.WHERE if r.name == where)
    assert rule.says[:30].lower() in text.lower()
    for column, op, threshold in rule.when:  # the numbers that triggered it are in the sentence
        if op != "missing":
            assert f"{verdict.SHOWN[op]} {threshold:g}%" in text


def test_a_rule_on_a_metric_the_run_lacks_does_not_hold():
    row = {"gpu_util_pct": 100.0, "sm_active_pct": 90.0}  # no tensor, no DRAM columns
    assert not any(r.holds(row) for r in verdict.WHERE if r.name in ("memory-bound", "no-tensor-cores",
                                                                      "tensor-busy", "tensor-part"))


def test_the_readme_shows_the_rules_the_code_applies():
    assert verdict.markdown_table() in (ROOT / "README.md").read_text()


def test_rows_go_to_phases_by_interval_and_recurring_spans_gather():
    """Two GPUs, train in [2, 4) and [6, 8), eval between: labels are ignored, intervals decide."""
    from gpubench.job.phases import Phase, summarize
    from gpubench.record.gpus import Gpu

    gpus = [Gpu(0, "GPU-a", "NVIDIA H100 80GB HBM3"), Gpu(1, "GPU-b", "NVIDIA H100 80GB HBM3")]
    rows, energy = [], {0: 0.0, 1: 0.0}
    for i in range(100):
        a, b = i / 10, (i + 1) / 10
        train = 2 <= a < 4 or 6 <= a < 8
        for g in (0, 1):
            energy[g] += (50.0 if train else 20.0) * (g + 1)  # J per 0.1 s: GPU 1 draws twice GPU 0's power
            rows.append({"t_start_s": a, "t_end_s": b, "gpu": g, "phase": "mislabelled",
                         "gpu_util_pct": 100.0 if train else 20.0, "energy_j": energy[g]})
    phases = [Phase("train", [(2.0, 4.0), (6.0, 8.0)]), Phase("eval", [(4.0, 6.0)])]
    steps = events(*[(2.0 + 0.1 * i, 0, "step", "1e12") for i in range(21)])
    peaks = {"datasheet": {"bf16_tensor": 1000e12}, "measured": None}
    summary = summarize(rows, steps, phases, gpus, peaks, "bf16", ("gpu_util_pct", "energy_j"))
    by = {r["scenario"]: r for r in summary}
    assert list(by) == ["train · GPU 0", "train · GPU 1", "eval · GPU 0", "eval · GPU 1"]
    train0, eval1 = by["train · GPU 0"], by["eval · GPU 1"]
    assert train0["gpu_util_pct"] == 100.0 and eval1["gpu_util_pct"] == 20.0
    assert train0["n_samples"] == 30 and train0["spans"] == 2 and train0["seconds"] == pytest.approx(4.0)
    assert train0["power_w_energy"] == pytest.approx(500.0)
    assert by["train · GPU 1"]["power_w_energy"] == pytest.approx(1000.0)
    assert train0["steps"] == 20 and train0["steps_per_s"] == pytest.approx(10.0)  # the stamp at 4.0 is eval's
    assert train0["tflops"] == pytest.approx(10.0) and train0["mfu_pct"] == pytest.approx(1.0)
    assert eval1["steps"] == 1 and eval1["verdict_rules"] == "host-bound, no-steps"
