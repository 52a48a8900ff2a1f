"""gpubench watch end to end on a CPU: fake sources, a real sampler and Recording, real child processes."""

import json
import os
import pty
import signal
import subprocess
import sys
import textwrap
import time
import tracemalloc
from pathlib import Path

import pytest
from fakes import GPU, FakeSource

import gpubench
from gpubench.cli import main
from gpubench.inside import markwriter
from gpubench.job import watchcmd as watch
from gpubench.job.watcher import WatchOptions
from gpubench.record.config import RecordingConfig
from gpubench.record.rundir import load_run
from gpubench.inside.flops import hardware_known

ROOT = Path(__file__).resolve().parents[2]
INFO = {"nvml_index": 0, "name": GPU.name, "uuid": GPU.uuid, "memory_mib": 81559, "driver": "580.0",
        "cuda_driver": "13.0"}
BY_PHASE = {"warmup": (40.0, 20.0, 5.0), "train": (100.0, 85.0, 30.0), "eval": (100.0, 30.0, 8.0),
            "shutdown": (10.0, 5.0, 0.0)}


class LadderSource(FakeSource):
    """Util, SM active and tensor active follow the sampler's current phase, so labels can be checked."""

    columns = ("gpu_util_pct", "sm_active_pct", "tensor_active_pct", "power_w")

    def __init__(self):
        super().__init__(self.values)
        self.sampler = None

    def values(self, n):
        util, sm, tensor = BY_PHASE.get(self.sampler.phase if self.sampler else "", (0.0, 0.0, 0.0))
        return {"gpu_util_pct": util, "sm_active_pct": sm, "tensor_active_pct": tensor, "power_w": 300.0}


@pytest.fixture
def ladder(monkeypatch):
    """A LadderSource that sees the sampler of the recording it is given to."""
    import gpubench.record.recording as recording

    source = LadderSource()

    class Spy(recording.Sampler):
        def __init__(self, *a, **k):
            super().__init__(*a, **k)
            source.sampler = self

    monkeypatch.setattr(recording, "Sampler", Spy)
    return source


@pytest.fixture(autouse=True)
def _children_import_this_gpubench(monkeypatch):
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
    monkeypatch.delenv(markwriter.ENV, raising=False)


def options(out, sources, peaks=False, **kw):
    config = RecordingConfig(interval_s=0.05, sources=sources, command=["gpubench", "watch"], peaks=peaks)
    return WatchOptions(out, [GPU], INFO, config, **kw)


def py(code: str) -> list[str]:
    return [sys.executable, "-c", textwrap.dedent(code)]


PHASED = py("""
    import time, gpubench
    gpubench.mark("warmup"); time.sleep(1.2)
    gpubench.mark("train")
    for _ in range(30):
        time.sleep(0.05); gpubench.step(flops=2e12)
    gpubench.mark("eval"); time.sleep(1.2)
    print("child says goodbye")
""")


def test_phases_label_the_samples_and_each_gets_a_summary_row(tmp_path, ladder, capfd):
    code, w = watch.run(options(tmp_path / "run", [ladder]), PHASED)
    assert code == 0
    assert "child says goodbye" in capfd.readouterr().out  # the child's output passes through
    manifest, samples, summary = load_run(tmp_path / "run")
    assert manifest["kind"] == "watch" and manifest["status"] == "completed"
    assert manifest["child"]["argv"] == PHASED and manifest["child"]["exit_code"] == 0
    assert manifest["marks"]["steps"] == 30 and manifest["families"]["watch"]["story"]
    assert hardware_known(manifest)  # its marks count what the kernels run: a summary may give HFU
    labels = [r["phase"] for r in samples]
    assert {"warmup", "train", "eval"} <= set(labels)
    assert labels.index("warmup") < labels.index("train") < labels.index("eval")
    rows = {r["phase"]: r for r in summary}
    assert list(rows) == ["warmup", "train", "eval"] and all(r["family"] == "watch" for r in summary)
    for phase, (util, sm, tensor) in BY_PHASE.items():
        if phase in rows:  # every steady row of a phase was sampled while that phase was current
            assert (rows[phase]["gpu_util_pct"], rows[phase]["sm_active_pct"]) == (util, sm)
    train = rows["train"]
    assert 10 <= train["steps"] < 30 and 14 < train["steps_per_s"] <= 20.5  # the steps of its window
    assert train["tflops"] == pytest.approx(2.0 * train["steps_per_s"], rel=1e-6)
    assert train["mfu_pct"] == pytest.approx(100 * train["tflops"] / 989.4, rel=1e-6)
    assert train["verdict_rules"] == "tensor-part, mfu-low" and "tensor active 30% ≥ 10%" in train["verdict"]
    assert train["step_clock"] == "host"  # no CUDA in this child
    assert rows["warmup"]["verdict_rules"] == "host-bound, idle, no-steps"
    assert json.loads((tmp_path / "run" / "summary.json").read_text())[1]["phase"] == "train"


def test_plot_and_report_work_on_a_watch_run(tmp_path, ladder):
    watch.run(options(tmp_path / "run", [ladder]), PHASED)
    assert main(["plot", str(tmp_path / "run")]) == 0
    assert main(["report", str(tmp_path / "run")]) == 0
    report = (tmp_path / "run" / "report.md").read_text()
    assert "### train" in report and " steps at " in report and "Verdict: The tensor cores work part" in report


@pytest.mark.parametrize("code,expected,signal_name", [
    ("raise SystemExit(3)", 3, None),
    ("import os, signal; os.kill(os.getpid(), signal.SIGKILL)", 128 + 9, "SIGKILL"),
    ("import os, signal; os.kill(os.getpid(), signal.SIGTERM)", 128 + 15, "SIGTERM"),
])
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
    proc = subprocess.Popen(_harness(tmp_path) + GRACEFUL + [str(flag)], stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
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
    pid, master = pty.fork()
    if pid == 0:  # the child of pty.fork: the pty is its controlling terminal
        argv = _harness(tmp_path) + GRACEFUL + [str(flag)]
        os.execv(argv[0], argv)
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


def test_attach_mode_records_for_the_duration(tmp_path, ladder):
    t0 = time.monotonic()
    with open(tmp_path / "job-marks.tsv", "w") as f:  # a job that marked "train" before the watch began
        f.write(f"{t0 - 5:.6f}\t0\t1\tmark\ttrain\n")
    code, w = watch.run(options(tmp_path / "run", [ladder], marks_path=tmp_path / "job-marks.tsv"), [], 1.5)
    elapsed = time.monotonic() - t0
    assert code == 0 and 1.5 <= elapsed < 4.0
    manifest, samples, summary = load_run(tmp_path / "run")
    assert "child" not in manifest and manifest["status"] == "completed"
    assert [r["phase"] for r in summary] == ["train"] and summary[0]["gpu_util_pct"] == 100.0
    assert not (tmp_path / "run" / "marks.tsv").exists()


def test_sigint_ends_attach_mode_early_and_keeps_the_recording(tmp_path):
    proc = subprocess.Popen(_harness(tmp_path), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
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


def test_a_command_that_fails_to_start_leaves_nothing(tmp_path):
    bogus = tmp_path / "bogus"
    bogus.write_bytes(b"\x7fELF\x00 not really a program")
    bogus.chmod(0o755)
    with pytest.raises(watch.CannotStart) as err:
        watch.run(options(tmp_path / "run", [FakeSource()]), [str(bogus)])
    assert err.value.code == 126 and "could not be started" in str(err.value)
    assert not (tmp_path / "run").exists()


def run_cli(*args, **env):
    return subprocess.run([sys.executable, "-m", "gpubench", *args], capture_output=True, text=True, timeout=120,
                          env=dict(os.environ, **env))


@pytest.mark.parametrize("make,code,message", [
    (lambda d: "no-such-command-here", 127, "no-such-command-here: command not found on PATH"),
    (lambda d: str(d), 126, "is a directory, not a command"),
    (lambda d: (d / "script.sh").write_text("echo hi") and str(d / "script.sh"), 126, "is not executable"),
])
def test_a_command_that_cannot_be_started_is_one_sentence_and_nothing_written(tmp_path, make, code, message):
    r = run_cli("watch", "--out", str(tmp_path / "run"), "--", make(tmp_path), "arg")
    assert r.returncode == code
    assert message in r.stderr and len(r.stderr.strip().splitlines()) == 1 and "Traceback" not in r.stderr
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize("args,message", [
    (["watch"], "give the command to watch after --"),
    (["watch", "--duration", "5", "--", "true"], "--duration is for watching without a command"),
    (["watch", "--duration", "0.2"], "--duration must be longer than the 0.5 s"),
    (["watch", "--dtype", "int8", "--", "true"], "invalid choice: 'int8'"),
    (["watch", "--out", "/proc/gpubench-watch", "--", "true"], "lies under /proc"),
])
def test_bad_input_is_one_sentence_and_exit_2(args, message):
    r = run_cli(*args)
    assert r.returncode == 2 and message in r.stderr and "Traceback" not in r.stderr


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
    r = run_cli("watch", "--out", str(tmp_path / "run"), "--", sys.executable, "-c",
                "import sys; print('the job ran'); sys.exit(7)")
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
    r = subprocess.run([sys.executable, str(script), str(tmp_path / "run"), *job], capture_output=True, text=True,
                       timeout=120, env=dict(os.environ, COLUMNS="300"))
    assert r.returncode == 5, r.stderr
    assert r.stdout == "[/x] the job's own output\n"  # the job's output, untouched
    assert "Traceback" not in r.stderr and "MarkupError" not in r.stderr
    for shown in ("[/x]", "step [/b]", "a\\x00b\\x1b]0;pwned\\x07c\\x1b[31m", "GPU [/i] \\x1b[2J",
                  "a note [/u] from \\x1b]0;outside\\x07", "the command exited with code 5"):
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
        assert said == [f"the command left 1 process running when it exited (pid {pid}: sleep 30); gpubench did "
                        "not watch it after that"]
    finally:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)  # adopted by the watch: reaped here


def test_help_names_watch():
    out = run_cli("--help").stdout
    assert "gpubench watch -- python train.py" in out
    assert "CUDA_VISIBLE_DEVICES" in run_cli("watch", "--help").stdout


def test_recording_in_process(tmp_path, ladder):
    with gpubench.recording(tmp_path / "nb", gpus=[GPU], info=INFO, sources=[ladder], interval_s=0.05,
                            quiet=True) as rec:
        gpubench.mark("train")
        for _ in range(20):
            time.sleep(0.05)
            gpubench.step(flops=1e12)
        gpubench.mark("eval")
        time.sleep(1.0)
    assert [r["phase"] for r in rec.summary] == ["train", "eval"]
    assert 8 <= rec.summary[0]["steps"] <= 20 and rec.summary[0]["gpu_util_pct"] == 100.0
    assert rec.manifest["kind"] == "watch" and (tmp_path / "nb" / "summary.csv").is_file()
    assert markwriter._path is None and markwriter.ENV not in os.environ  # marks are no-ops again


def test_memory_stays_flat_however_long_the_watch(tmp_path):
    """Rows stream to disk and none stay in memory beyond the batch being gathered: at about 2000 rows a
    second, memory stays flat."""
    from gpubench.record.arrowfile import scan

    path = tmp_path / "run" / "samples.arrows"
    rows_on_disk = lambda: sum(scan(path)[1])  # noqa: E731 -- the rows of the batches written so far
    with gpubench.recording(tmp_path / "run", gpus=[GPU], info=INFO, sources=[FakeSource()], interval_s=0.0005,
                            quiet=True) as w:
        tracemalloc.start()
        try:
            def stamp_for(seconds, until=lambda: False):
                t_end = time.monotonic() + seconds
                while time.monotonic() < t_end and not until():
                    gpubench.step(flops=1e9)  # the marks file grows too
                    time.sleep(0.001)

            def just_written():
                # the sink holds up to a batch of rows before writing them: compare memory as each batch lands
                before = rows_on_disk()
                stamp_for(15.0, until=lambda: rows_on_disk() > before)
                return tracemalloc.get_traced_memory()[0], rows_on_disk()

            stamp_for(2.0)  # past start-up: the first allocations of the recording are made
            assert len(w.rec.sampler.rows) == 0
            mem_a, rows_a = just_written()
            stamp_for(10.0)
            mem_b, rows_b = just_written()
        finally:
            tracemalloc.stop()
    assert rows_b > rows_a + 5_000  # thousands more rows went to disk meanwhile
    assert mem_b - mem_a < 1_000_000, f"memory grew by {(mem_b - mem_a) / 1e6:.1f} MB in 10 s"


@pytest.mark.skipif(__import__("torch").cuda.is_available(), reason="this machine has a GPU")
def test_peaks_that_cannot_be_measured_are_a_warning_and_the_command_still_runs(tmp_path):
    code, w = watch.run(options(tmp_path / "run", [FakeSource()], peaks=True), py("print('ran')"))
    assert code == 0
    manifest, samples, summary = load_run(tmp_path / "run")
    assert any(m.startswith("the peaks could not be measured (") for m in manifest["warnings"])
    assert manifest["peaks"]["measured"] is None and manifest["peaks"]["datasheet"]["bf16_tensor"] == 989.4e12
    assert samples[0]["phase"] in ("start", "peaks") and any(r["phase"] == "peaks" for r in samples)
    assert "peaks" not in {r["phase"] for r in summary}


def test_only_the_gpus_the_command_holds_are_summarized_the_others_are_listed_idle(tmp_path, monkeypatch, capsys):
    """Two GPUs sampled, the command holds a context on the second only (a fake NVML process list)."""
    from gpubench.job import contexts
    from gpubench.record.gpus import Gpu

    other = Gpu(1, "GPU-11111111-1111-2222-3333-444444444444", GPU.name, 1)
    monkeypatch.setattr(contexts.nvml, "compute_processes", lambda i: list(contexts.parents()) if i == 1 else [])
    argv = py("""
        import time, gpubench
        gpubench.mark("train")
        for _ in range(40):
            time.sleep(0.04); gpubench.step(flops=1e12)
    """)
    opts = WatchOptions(tmp_path / "run", [GPU, other], INFO,
                        RecordingConfig(interval_s=0.05, sources=[FakeSource()], command=["gpubench", "watch"]))
    code, w = watch.run(opts, argv)
    assert code == 0
    manifest, _, summary = load_run(tmp_path / "run")
    assert manifest["gpus_used"] == [1] and [g["nvml_index"] for g in manifest["gpus_idle"]] == [0]
    assert {r["gpu"] for r in summary} == {1} and manifest["contexts"]["used"]["1"]
    watch.show(w)
    assert "idle, no process of the command used them: GPU 0" in capsys.readouterr().out


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


def test_a_summary_that_never_ends_holds_neither_the_watch_nor_the_exit_code(tmp_path, monkeypatch):
    """Whatever goes wrong in summarizing, the watch ends and hands back the command's exit code: the summary
    gets SUMMARY_S, the samples and marks stay whole, and the manifest and the warning say so."""
    import threading

    import gpubench.job.watcher as watcher

    never = threading.Event()
    monkeypatch.setattr(watcher, "summarize_watch", lambda *a, **k: never.wait())
    monkeypatch.setattr(watcher, "SUMMARY_S", 2.0)
    monkeypatch.setattr(watcher, "SUMMARY_ROW_S", 0.0)
    started = time.monotonic()
    # the job lasts a second, so that the sampler has rows to keep on a loaded machine too
    job = py("import time, gpubench; gpubench.step(); time.sleep(1.0); raise SystemExit(3)")
    rc, w = watch.run(options(tmp_path / "run", [FakeSource()]), job)
    never.set()
    assert rc == 3 and time.monotonic() - started < 20
    manifest, samples, summary = load_run(tmp_path / "run")
    assert manifest["status"] == "completed" and manifest["summary_unfinished"] and summary == []
    assert len(samples) > 0 and manifest["marks"]["steps"] == 1 and manifest["gpus_idle"] == []
    assert any("the summary did not finish within 2 s" in x for x in manifest["warnings"])


def test_bounded_hands_back_the_result_or_the_error_of_its_work():
    from gpubench.job.watcher import bounded

    assert bounded(lambda: 7, 5.0) == 7
    with pytest.raises(ZeroDivisionError):
        bounded(lambda: 1 / 0, 5.0)
