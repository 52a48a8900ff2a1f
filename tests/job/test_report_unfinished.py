"""`gpubench report` and `plot` on the run directory of a watch that has not finished: what it has recorded so far,
the report's first lines saying it is unfinished and whether its watch still runs or was killed
(gpubench.record.liveness), and with gpubench.job.running.so_far its phases so far, by the summary's code."""

import json
import os
import socket
import subprocess

import pytest
from jobs import every, gpus, mark, rows, stamps, write_watch

from gpubench.cli import main
from gpubench.job.markreader import Stream
from gpubench.job.running import so_far
from gpubench.record import liveness as running
from gpubench.show import render

S = Stream(0, 4242)


def unfinished(tmp_path, watcher: dict, samples=None):
    """A watch run directory as a watch leaves it while it runs: a manifest that says running, no summary."""

    def state(t, g):
        return {"gpu_util_pct": 97.0, "sm_active_pct": 80.0, "tensor_active_pct": 40.0} if t >= 1.0 else {}

    samples = rows(1, 0.0, 30.0, state) if samples is None else samples
    events = [mark(1.0, S, "train"), *stamps(S, gpus(1)[0].uuid, every(1.1, 29.9, 0.1), flops=1e13)]
    run = write_watch(tmp_path / "run", 1, 0.0, 30.0, samples, events)
    manifest = json.loads((run / "manifest.json").read_text())
    for key in ("window", "contexts", "marks"):  # written only when a watch ends
        manifest.pop(key)
    manifest.update(
        status="running",
        completed=False,
        watcher=watcher,
        child={"argv": ["python", "train.py"], "pid": 4242, "exit_code": None},
    )
    (run / "manifest.json").write_text(json.dumps(manifest))
    return run


def first_lines(run) -> str:
    return "\n".join((run / "report.md").read_text().splitlines()[:6])


def test_a_watch_that_still_runs_is_reported_unfinished(tmp_path):
    run = unfinished(tmp_path, running.watcher_facts(0.0, "marks.tsv"))
    assert running.still_running(json.loads((run / "manifest.json").read_text())) is True
    assert main(["report", str(run)]) == 0 and main(["plot", str(run)]) == 0
    head = first_lines(run)
    assert f"**unfinished**: the watch still runs (process {os.getpid()} on this machine)" in head
    assert "`python train.py`, whose end the watch had not seen" in head
    assert "summary.csv is missing" not in (run / "report.md").read_text()  # the first line says why


def test_its_phases_so_far_come_from_the_summarys_own_code(tmp_path):
    run = unfinished(tmp_path, running.watcher_facts(0.0, "marks.tsv"))
    assert render.report(run, summarize=so_far) == 0 and render.plot(run, summarize=so_far) == 0
    assert "summarized from the samples and marks written so far" in first_lines(run)
    report = (run / "report.md").read_text()
    assert "| train · rank 0 | 97% | 10% | — | 10 | 100 | 80% |" in report and "summary.csv is missing" not in report
    assert (run / "figures" / "ladder.png").is_file() and not (run / "summary.csv").exists()


def test_a_watch_killed_before_it_finished_is_said_gone_and_one_elsewhere_cannot_be_told(tmp_path):
    gone = subprocess.Popen(["true"])
    gone.wait()
    run = unfinished(tmp_path, {"pid": gone.pid, "host": socket.gethostname(), "started": 1, "t_start": 0.0})
    assert main(["report", str(run)]) == 0
    assert f"**unfinished**: its watch (process {gone.pid}) is gone, killed before it finished" in first_lines(run)

    elsewhere = unfinished(tmp_path / "b", dict(running.watcher_facts(0.0), host="another-machine"))
    assert main(["report", str(elsewhere)]) == 0
    assert "**unfinished**: its manifest still says running" in first_lines(elsewhere)


def test_a_watch_whose_first_samples_are_not_on_disk_yet_is_one_sentence(tmp_path, capsys):
    run = unfinished(tmp_path, running.watcher_facts(0.0), samples=[])
    assert main(["report", str(run)]) == 2
    err = capsys.readouterr().err
    assert "a watch that has not finished" in err and "try again a minute after it started" in err


@pytest.mark.parametrize("facts", [None, {"pid": "12"}, {"pid": True, "host": socket.gethostname()}, {"pid": -1}])
def test_a_manifest_that_does_not_say_who_watches_cannot_be_told(facts):
    assert running.still_running({"status": "running", "watcher": facts}) is None
    assert running.still_running({"status": "completed", "watcher": running.watcher_facts()}) is None
