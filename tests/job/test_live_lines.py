"""Where gpubench's stderr is no terminal (a job log), `gpubench watch --every S` writes a live line each S seconds:
the real watch, run whole in a process of its own behind a fake NVML (tests/job/livewatch.py), with stderr into a
file. Nothing waits a fixed time: the test reads the file until the lines it needs are there, within a deadline
far beyond any machine's pace, and holds the lines to what they say, not to when they came."""

import json
import shlex
import subprocess
import sys
import time

import pytest
from livewatch import FLOPS, PEAK, STEPPING, environment, watch_argv

from gpubench.record.rundir import load_run

DEADLINE_S = 120.0
KEYS = {
    "elapsed_s",
    "window_s",
    "phase",
    "gpu",
    "rank",
    "steps_per_s",
    "phase_steps_per_s",
    "mfu_pct",
    "phase_mfu_pct",
    "tensor_ceiling_pct",
    "gpu_util_pct",
    "sm_active_pct",
    "tensor_active_pct",
    "dram_active_pct",
    "power_w",
    "rules",
}
# the job's stderr ends without a newline (a progress bar's carriage return) before the first live line
JOB = "import sys; sys.stderr.write('loss 0.52\\r'); sys.stderr.flush()\n" + STEPPING


def parse(line: str) -> dict:
    return dict(word.split("=", 1) for word in shlex.split(line[len("gpubench live ") :]))


def live_lines(path) -> list[dict]:
    text = path.read_text(errors="replace") if path.exists() else ""
    return [parse(line) for line in text.splitlines() if line.startswith("gpubench live ")]


def test_a_live_line_every_interval_in_a_log_says_the_phase_row_as_the_summary_does(tmp_path):
    run, done, err, out = tmp_path / "run", tmp_path / "done", tmp_path / "stderr.log", tmp_path / "stdout.log"
    argv = watch_argv(tmp_path, run, ["--every", "0.5"], [sys.executable, "-c", JOB, str(done)])
    with open(err, "wb") as e, open(out, "wb") as o:
        proc = subprocess.Popen(argv, stdout=o, stderr=e, stdin=subprocess.DEVNULL, env=environment())
    try:
        deadline = time.monotonic() + DEADLINE_S
        while len([x for x in live_lines(err) if "steps_per_s" in x]) < 5:
            assert proc.poll() is None, err.read_text()[-3000:]
            if time.monotonic() > deadline:
                pytest.fail(f"five live lines with a rate never came within {DEADLINE_S:g} s:\n{err.read_text()}")
            time.sleep(0.2)
    finally:
        done.write_text("")
    assert proc.wait(timeout=DEADLINE_S) == 0, err.read_text()[-3000:]

    text = err.read_text()
    assert all(line.startswith("gpubench live ") for line in text.split("\n") if "gpubench live" in line)
    assert out.read_text() == ""  # nothing of gpubench's on stdout, which is the job's
    said = live_lines(err)
    assert all(set(x) <= KEYS and x["window_s"] == "15" for x in said)
    assert [float(x["elapsed_s"]) for x in said] == sorted(float(x["elapsed_s"]) for x in said)
    assert {x["phase"] for x in said} <= {"start-up", "train"}
    rated = [x for x in said if "steps_per_s" in x]
    assert all(x["phase"] == "train" and x["gpu"] == "0" and x["rules"] for x in rated)
    last = rated[-1]
    assert "phase_steps_per_s" in last and "phase_mfu_pct" in last  # the phase's so far, beside the window's
    assert float(last["mfu_pct"]) == pytest.approx(float(last["steps_per_s"]) * FLOPS / PEAK * 100, rel=0.02)
    assert (last["gpu_util_pct"], last["sm_active_pct"], last["tensor_active_pct"], last["power_w"]) == (
        "100",
        "96.6",
        "93.8",
        "697",
    )

    manifest, _, summary = load_run(run)
    (row,) = [r for r in summary if r["kind"] == "phase"]
    assert row["phase"] == last["phase"] and f"{row['sm_active_pct']:.3g}" == last["sm_active_pct"]
    assert manifest["live"]["mode"] == "lines" and manifest["live"]["updates"] >= 5 and not manifest["live"]["errors"]
    assert manifest["watcher"]["pid"] == proc.pid and manifest["watcher"]["marks"] == "marks.tsv"


def test_quiet_says_nothing_live(tmp_path):
    run, err = tmp_path / "run", tmp_path / "stderr.log"
    job = (
        "import time, gpubench\ngpubench.mark('train')\nfor _ in range(60):\n    time.sleep(0.05)\n"
        "    gpubench.step(flops=1e13)\n"
    )
    argv = watch_argv(tmp_path, run, ["--every", "0.5", "--quiet"], [sys.executable, "-c", job])
    with open(err, "wb") as e:
        done = subprocess.run(
            argv, stdout=subprocess.DEVNULL, stderr=e, stdin=subprocess.DEVNULL, env=environment(), timeout=DEADLINE_S
        )
    assert done.returncode == 0, err.read_text()[-3000:]
    assert "gpubench live" not in err.read_text() and "medians over each phase" in err.read_text()
    assert "live" not in json.loads((run / "manifest.json").read_text())
