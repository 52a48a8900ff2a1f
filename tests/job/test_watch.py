"""gpubench watch end to end on a CPU, what it promises the job it runs: fake sources, a real sampler and
Recording, real child processes. The job's exit code is kept; SIGINT and Ctrl-C reach it once (and end a watch
without a command early), the recording kept; it runs unrecorded where there is no GPU; its words reach the
terminal as text; a process it leaves running is said; marks whose times are not times are left out. What a
watch records and summarizes: test_watch_summary.py; the command line: test_watch_usage.py."""

import os
import pty
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from fakes import FakeSource
from watchfakes import ROOT, _children_import_this_gpubench, options, py, run_cli

from gpubench.job import watchcmd as watch
from gpubench.record.rundir import load_run

FIXTURES = (_children_import_this_gpubench,)  # pytest finds it by its name in this module


@pytest.mark.parametrize(
    "code,expected,signal_name",
    [
        ("raise SystemExit(3)", 3, None),
        ("import os, signal; os.kill(os.getpid(), signal.SIGKILL)", 128 + 9, "SIGKILL"),
        ("import os, signal; os.kill(os.getpid(), signal.SIGTERM)", 128 + 15, "SIGTERM"),
    ],
)
def test_the_exit_code_is_the_childs(tmp_path, code, expected, signal_name):
    rc, w = watch.run(options(tmp_path / "run", [FakeSource()]), py(code))
    assert rc == expected
    manifest, _, _ = load_run(tmp_path / "run")
    assert manifest["child"]["exit_code"] == expected and manifest["child"]["signal"] == signal_name
    assert manifest["status"] == "completed"  # the recording completed, whatever the command did


HARNESS = """
import sys
sys.path.insert(0, {tests!r})
from pathlib import Path
from fakes import GPU, FakeSource
from gpubench.job import watchcmd as watch
from gpubench.job.watcher import WatchOptions
from gpubench.record.config import RecordingConfig
opts = WatchOptions(Path(sys.argv[1]), [GPU], {{"name": GPU.name}},
                    RecordingConfig(interval_s=0.05, sources=[FakeSource()]))
argv = sys.argv[2:]
code, w = watch.run(opts, argv, duration_s=None if argv else 30.0)
watch.show(w)
sys.exit(code)
"""

GRACEFUL = py("""
    import signal, sys, time, gpubench
    from pathlib import Path
    got = []
    signal.signal(signal.SIGINT, lambda *a: got.append(time.monotonic()))
    gpubench.mark("train")
    Path(sys.argv[1]).write_text("ready")
    while not got:
        time.sleep(0.01)
    gpubench.mark("shutdown")
    time.sleep(0.8)  # a checkpoint being saved: the recording goes on meanwhile
    Path(sys.argv[1]).write_text(str(len(got)))
    sys.exit(7)
""")


def _harness(tmp_path) -> list[str]:
    script = tmp_path / "harness.py"
    script.write_text(HARNESS.format(tests=str(ROOT / "tests")))
    return [sys.executable, str(script), str(tmp_path / "run")]


def _wait_for(path: Path, text: str, timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not (path.is_file() and path.read_text() == text):
        assert time.monotonic() < deadline, f"{path} never said {text!r}"
        time.sleep(0.02)


def test_sigint_to_gpubench_goes_to_the_child_and_the_recording_is_kept(tmp_path):
    flag = tmp_path / "flag"
    proc = subprocess.Popen(
        _harness(tmp_path) + GRACEFUL + [str(flag)],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    _wait_for(flag, "ready")
    time.sleep(1.0)
    proc.send_signal(signal.SIGINT)  # to gpubench alone, as `kill -INT` would
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 7, err  # the child's own exit code
    assert flag.read_text() == "1"  # the child got the one SIGINT
    assert "Traceback" not in err and "the command exited with code 7" in out
    manifest, samples, summary = load_run(tmp_path / "run")
    assert manifest["status"] == "interrupted" and manifest["child"]["exit_code"] == 7
    assert sum(r["phase"] == "shutdown" for r in samples) >= 10  # recorded through the child's shutdown
    assert [r["phase"] for r in summary] == ["train", "shutdown"]


def test_ctrl_c_at_a_terminal_reaches_the_child_once(tmp_path):
    """The terminal signals the whole foreground group: gpubench must not pass it on a second time."""
    flag = tmp_path / "flag"
    argv = _harness(tmp_path) + GRACEFUL + [str(flag)]  # before the fork: the forked child only calls exec
    pid, master = pty.fork()
    if pid == 0:  # the child of pty.fork: the pty is its controlling terminal
        try:
            os.execv(argv[0], argv)
        finally:  # an exec that failed must not go on as a second copy of this test session
            os._exit(127)
    output = b""
    try:
        _wait_for(flag, "ready")
        time.sleep(0.3)
        os.write(master, b"\x03")  # Ctrl-C typed at the terminal
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                chunk = os.read(master, 4096)
            except OSError:  # the terminal closed: everything has exited
                break
            if not chunk:
                break
            output += chunk
        _, status = os.waitpid(pid, 0)
    finally:
        os.close(master)
    assert os.waitstatus_to_exitcode(status) == 7, output.decode(errors="replace")
    assert flag.read_text() == "1"
    assert load_run(tmp_path / "run")[0]["status"] == "interrupted"


def test_sigint_ends_attach_mode_early_and_keeps_the_recording(tmp_path):
    proc = subprocess.Popen(
        _harness(tmp_path), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    _wait_for_file(tmp_path / "run" / "samples.arrows")
    time.sleep(1.0)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 130 and "Traceback" not in err
    manifest, _, summary = load_run(tmp_path / "run")
    assert manifest["status"] == "interrupted" and [r["phase"] for r in summary] == ["run"]


def _wait_for_file(path: Path, timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not path.is_file():
        assert time.monotonic() < deadline, f"{path} never appeared"
        time.sleep(0.02)


def _no_nvml() -> bool:
    from gpubench.record import nvml

    try:
        nvml.device_count()
    except nvml.GpuUnavailable:
        return True
    return False


@pytest.mark.skipif(not _no_nvml(), reason="this machine has an NVIDIA driver")
def test_without_a_gpu_the_job_runs_unrecorded_and_its_exit_code_is_kept(tmp_path):
    """A CPU node: the job runs as it would alone, gpubench says once that nothing is recorded, writes
    nothing, and exits with the job's code."""
    r = run_cli(
        "watch",
        "--out",
        str(tmp_path / "run"),
        "--",
        sys.executable,
        "-c",
        "import sys; print('the job ran'); sys.exit(7)",
    )
    assert r.returncode == 7 and r.stdout == "the job ran\n"
    assert r.stderr.startswith("gpubench watch: nothing can be recorded here (no NVIDIA driver found")
    assert len(r.stderr.strip().splitlines()) == 1 and "Traceback" not in r.stderr
    assert not (tmp_path / "run").exists()
    r = run_cli("watch", "--", "no-such-command-here")
    assert r.returncode == 127 and "no-such-command-here: command not found" in r.stderr
    r = run_cli("watch", "--duration", "2")  # attach mode: nothing to run, nothing to record
    assert r.returncode == 2 and "needs an NVIDIA GPU" in r.stderr


SHOW_HARNESS = """
import sys
sys.path.insert(0, {tests!r})
from pathlib import Path
from fakes import GPU, FakeSource
from gpubench.job import watchcmd as watch
from gpubench.job.watcher import WatchOptions
from gpubench.record.config import RecordingConfig
opts = WatchOptions(Path(sys.argv[1]), [GPU], {{"name": "GPU [/i] \\x1b[2J"}},
                    RecordingConfig(interval_s=0.05, sources=[FakeSource()]))
sys.exit(watch._run_and_show(opts, sys.argv[2:], None, ["a note [/u] from \\x1b]0;outside\\x07"]))
"""


def test_words_from_the_job_reach_the_terminal_as_text_and_its_exit_code_is_kept(tmp_path):
    """The command, the phase names, the GPU's name and the warnings: never rich markup (`[/x]` would end
    the watch in a MarkupError), never a raw control character (ESC, OSC, NUL)."""
    script = tmp_path / "harness.py"
    script.write_text(SHOW_HARNESS.format(tests=str(ROOT / "tests")))
    job = py("""
        import sys, time, gpubench
        print("[/x] the job's own output")
        gpubench.mark("step [/b]"); time.sleep(0.8)
        gpubench.mark("a\\x00b\\x1b]0;pwned\\x07c\\x1b[31m"); time.sleep(0.8)
        sys.exit(5)
    """) + ["[/x]"]
    r = subprocess.run(
        [sys.executable, str(script), str(tmp_path / "run"), *job],
        capture_output=True,
        text=True,
        timeout=120,
        env=dict(os.environ, COLUMNS="300"),
    )
    assert r.returncode == 5, r.stderr
    assert r.stdout == "[/x] the job's own output\n"  # the job's output, untouched
    assert "Traceback" not in r.stderr and "MarkupError" not in r.stderr
    for shown in (
        "[/x]",
        "step [/b]",
        "a\\x00b\\x1b]0;pwned\\x07c\\x1b[31m",
        "GPU [/i] \\x1b[2J",
        "a note [/u] from \\x1b]0;outside\\x07",
        "the command exited with code 5",
    ):
        assert shown in r.stderr, shown
    assert not set(r.stderr) & ({chr(c) for c in range(32)} - {"\n"} | {"\x7f"}), repr(r.stderr)


def test_a_process_the_job_leaves_running_is_said_in_the_manifest_and_one_line(tmp_path, capfd):
    """A job that forks and exits, leaving its child running, does not pass unsaid."""
    job = py("""
        import subprocess, sys
        p = subprocess.Popen(["sleep", "30"], start_new_session=True)  # a daemon's own session, even
        print(p.pid)
    """)
    code, _ = watch.run(options(tmp_path / "run", [FakeSource()]), job)
    pid = int(capfd.readouterr().out.strip())
    try:
        assert code == 0
        manifest, _, _ = load_run(tmp_path / "run")
        child = manifest["child"]
        assert child["exit_code"] == 0 and child["still_running"] is False
        assert child["left_running"] == [{"pid": pid, "argv": ["sleep", "30"]}]
        said = [m for m in manifest["warnings"] if "left 1 process running" in m]
        assert said == [
            f"the command left 1 process running when it exited (pid {pid}: sleep 30); gpubench did "
            "not watch it after that"
        ]
    finally:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)  # adopted by the watch: reaped here


def test_marks_with_times_that_are_not_times_are_left_out_and_said(tmp_path):
    """Lines a job wrote by hand with a negative, NaN or infinite time never shape a phase: they are left out,
    and the watch says so (manifest warnings, and so the report's notes)."""
    job = py("""
        import os, time, gpubench
        with open(os.environ["GPUBENCH_MARKS"], "a") as f:
            f.write("M\\t-100.0\\t\\t1\\t\\thost\\twarmup\\n")
            f.write("M\\tnan\\t\\t1\\t\\thost\\twarmup\\n")
            f.write("S\\t-inf\\t\\t1\\t\\thost\\t1.0\\t5\\t5\\t1e15\\t1e15\\t0\\t0\\t0\\t0\\n")
        gpubench.mark("train")
        for _ in range(30):
            time.sleep(0.05); gpubench.step(flops=1e12)
    """)
    code, _ = watch.run(options(tmp_path / "run", [FakeSource()]), job)
    assert code == 0
    manifest, _, summary = load_run(tmp_path / "run")
    assert [r["phase"] for r in summary] == ["train"]
    assert manifest["marks"]["marks"] == 1 and manifest["marks"]["steps"] == 30
    [note] = [m for m in manifest["warnings"] if m.startswith("marks.tsv: left out")]
    assert "3 lines whose time is not a time on the monotonic clock (the first, line 1, reads -100.0)" in note
