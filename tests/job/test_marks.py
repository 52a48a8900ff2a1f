"""gpubench.mark / step inside the user's job, without a GPU: cheap outside a watch, whole lines from many
processes, steps gathered so the file stays small, stamps on the GPU's timeline where CUDA runs, and
nothing that can ever raise into the job."""

import os
import subprocess
import sys
import textwrap
import threading
import time
import timeit
from pathlib import Path

import pytest

import gpubench
from gpubench.inside import markwriter
from gpubench.job.markreader import Mark, Reader, Steps, read_all

ROOT = Path(__file__).resolve().parents[2]
UUID = "GPU-a7bf0bb4-c4b0-2abb-5034-6d549663e8da"


@pytest.fixture
def to_file(tmp_path):
    """Marks of this process go to a file for the test, and off again after it."""
    path = tmp_path / "marks.tsv"
    markwriter.target(path)
    yield path
    markwriter.target(None)


def child(code: str, path, **env) -> subprocess.CompletedProcess:
    environ = dict(os.environ, PYTHONPATH=str(ROOT), **{markwriter.ENV: str(path)}, **env)
    for var in markwriter.RANK_VARS:
        if var not in env:
            environ.pop(var, None)
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], env=environ, capture_output=True,
                          text=True, timeout=120)


def test_import_is_cheap_and_the_api_is_lazy():
    code = ("import sys, gpubench; gpubench.mark('x'); gpubench.step(flops=1.0); gpubench.count_flops; "
            "assert 'torch' not in sys.modules and 'gpubench.record.recording' not in sys.modules, sorted(sys.modules)")
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    env.pop(markwriter.ENV, None)
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=60)
    assert r.returncode == 0, r.stderr


def test_marks_outside_a_watch_cost_well_under_a_microsecond():
    assert markwriter._path is None  # no watch around this test
    n = 200_000
    for call in (lambda: gpubench.mark("train"), lambda: gpubench.step(flops=1.5e12)):
        per_call_s = min(timeit.repeat(call, number=n, repeat=5)) / n
        assert per_call_s < 1e-6, f"{per_call_s * 1e9:.0f} ns per call"


def test_steps_are_gathered_into_lines_and_every_step_is_counted(tmp_path):
    """Many processes at once: every line arrives whole; every step and FLOP is in some line."""
    path = tmp_path / "marks.tsv"
    code = ("import gpubench\n"
            "for i in range(4000):\n"
            "    gpubench.step(flops=1e9, tokens=2) if i % 1000 else gpubench.mark('phase-%d' % i)\n")
    procs = [subprocess.Popen([sys.executable, "-c", code],
                              env=dict(os.environ, PYTHONPATH=str(ROOT), RANK=str(rank), **{markwriter.ENV: str(path)}))
             for rank in range(4)]
    assert [p.wait(timeout=60) for p in procs] == [0] * 4
    events = read_all(path)
    assert len(events) == len(path.read_text().splitlines())  # every line parses
    steps = [e for e in events if isinstance(e, Steps)]
    assert {e.stream.rank for e in events} == {0, 1, 2, 3} and len({e.stream.pid for e in events}) == 4
    assert sum(isinstance(e, Mark) for e in events) == 16
    assert sum(e.n for e in steps) == 4 * 3996 and sum(e.tokens for e in steps) == 2 * 4 * 3996
    assert sum(e.flops for e in steps) == pytest.approx(4 * 3996 * 1e9)
    assert len(steps) < 200  # gathered: far fewer lines than steps
    assert all(e.clock == "host" and e.uuid == "" for e in steps)  # no CUDA in these processes


def test_a_day_of_fast_steps_stays_under_ten_megabytes(to_file, monkeypatch):
    """1,000 steps a second for a day, on a fake clock: at most one line a second once settled."""
    clock = iter(range(10**9))
    monkeypatch.setattr(markwriter.time, "monotonic", lambda: next(clock) / 1000.0)  # each call: 1 ms later
    gpubench.mark("train")
    markwriter._writer().uuid = UUID  # as where CUDA runs: a real UUID's length
    for _ in range(200_000):  # 200 s of steps: the bound per day is 432 times this
        gpubench.step(flops=1e12, bytes=1e9, tokens=8)
    markwriter.flush()
    size = to_file.stat().st_size
    assert size * 432 < 10e6, f"{size * 432 / 1e6:.1f} MB a day"
    steps = [e for e in read_all(to_file) if isinstance(e, Steps)]
    assert sum(e.n for e in steps) == 200_000 and {e.uuid for e in steps} == {UUID}


def test_a_uuid_is_written_once_per_process_and_read_back_on_every_line(tmp_path):
    """Two processes' lines interleaved, read in two polls: "=" is the uuid of the same stream's last line."""
    path = tmp_path / "m.tsv"
    a, b = "GPU-" + "a" * 36, "GPU-" + "b" * 36
    head = [f"M\t1.0\t0\t10\t{a}\tgpu\ttrain", f"M\t1.0\t1\t11\t{b}\tgpu\ttrain"]
    tail = [f"S\t{t}\t{r}\t{10 + r}\t=\tgpu\t{t}\t1\t1\t1e9\t1e9\t0\t0\t0\t0" for t in (2.0, 3.0) for r in (0, 1)]
    reader = Reader(path)
    path.write_text("\n".join(head) + "\n")
    first = reader.poll()
    with open(path, "a") as f:
        f.write("\n".join(tail) + "\n")
    later = reader.poll()
    assert [(e.stream.rank, e.uuid) for e in first + later] == [(0, a), (1, b), (0, a), (1, b), (0, a), (1, b)]
    assert [e.uuid for e in read_all(path)] == [a, b, a, b, a, b]


def test_phase_names_are_one_short_line(to_file):
    gpubench.mark("a\tb\nc" + "x" * 10**6)
    gpubench.mark("")
    names = [e.name for e in read_all(to_file) if isinstance(e, Mark)]
    assert names == ["a b c" + "x" * (markwriter.NAME_MAX - 5), "?"]


@pytest.mark.parametrize("value", ["abc", [1], float("nan"), float("inf"), -5.0, object()])
def test_unusable_flops_are_said_once_and_the_step_is_recorded(to_file, capsys, value):
    for _ in range(3):
        gpubench.step(flops=value)
    gpubench.step(flops=2.0)
    markwriter.flush()
    err = capsys.readouterr().err
    assert err.count("gpubench: gpubench.step() was given a value") == 1
    [s] = [e for e in read_all(to_file) if isinstance(e, Steps)]
    assert (s.n, s.bad, s.counted, s.flops) == (4, 3, 1, 2.0)


@pytest.mark.parametrize("value", ["10**400", "-(10**5000)", "'1e400'", "Raises()"])
def test_a_bad_value_spoils_that_value_only_never_the_later_steps_and_marks(tmp_path, value):
    """A value that overflows a float (or raises in float(), or in .hardware) loses that value alone: the
    step is counted without it, and every later step and mark is recorded."""
    r = child(f"""
        import gpubench

        class Raises:
            def __float__(self):
                raise RuntimeError("no float here")
            hardware = property(lambda self: 1 / 0)

        gpubench.mark("warmup")
        gpubench.step(flops={value})
        gpubench.step(flops=2.0, tokens={value})
        gpubench.mark("train")
        gpubench.step(flops=3.0)
        gpubench.step(flops={value}, bytes={value})
        gpubench.mark("eval")
        print("the job went on")
    """, tmp_path / "marks.tsv")
    assert r.returncode == 0 and "the job went on" in r.stdout, r.stderr
    assert "marks are off" not in r.stderr and "Traceback" not in r.stderr
    assert r.stderr.count("gpubench.step() was given a value") == 1 and len(r.stderr.splitlines()) == 1, r.stderr
    events = read_all(tmp_path / "marks.tsv")
    assert [e.name for e in events if isinstance(e, Mark)] == ["warmup", "train", "eval"]
    steps = [e for e in events if isinstance(e, Steps)]
    assert sum(s.n for s in steps) == 4 and sum(s.flops for s in steps) == 5.0
    assert sum(s.bad for s in steps) == 2 and sum(s.counted for s in steps) == 2


def test_an_error_inside_a_call_loses_that_call_only(to_file, capsys, monkeypatch):
    """Anything unexpected in one call is said once; marks stay on for the calls after it."""
    real = markwriter._Writer.on_mark
    calls = []

    def flaky(self, t, name):
        calls.append(name)
        if len(calls) == 1:
            raise RuntimeError("a passing fault")
        real(self, t, name)

    monkeypatch.setattr(markwriter._Writer, "on_mark", flaky)
    for name in ("lost", "train", "eval"):
        gpubench.mark(name)
    gpubench.step(flops=1.0)
    markwriter.flush()
    assert [e.name for e in read_all(to_file) if isinstance(e, Mark)] == ["train", "eval"]
    err = capsys.readouterr().err
    assert err.count("a mark or step was lost") == 1 and "marks are off" not in err


def test_control_characters_in_a_phase_name_are_written_out_never_sent(to_file):
    """A name is a label for a terminal and a report: NUL, ESC (a colour, an OSC title), BEL, C1 and bidi
    controls are written as escapes, whoever wrote the line."""
    gpubench.mark("a\x00b\x1b]0;pwned\x07c\x9b2J\u202ed")
    with open(to_file, "a") as f:  # lines another writer left, raw: control characters, 200,000 characters
        f.write("M\t5.0\t\t77\t\thost\tx\x1b[31my\x00z\n")
        f.write("M\t6.0\t\t77\t\thost\t" + "n" * 200_000 + "\n")
    names = [e.name for e in read_all(to_file) if isinstance(e, Mark)]
    assert names == ["a\\x00b\\x1b]0;pwned\\x07c\\x9b2J\\u202ed", "x\\x1b[31my\\x00z", "n" * markwriter.NAME_MAX]
    assert all(n.isprintable() for n in names)


def test_marks_with_times_that_are_not_times_are_left_out_and_said(tmp_path):
    """Negative, NaN and infinite times, a step group that ends before it starts: skipped, counted, and
    said in one sentence naming the file and the first line; a byte-order mark is no part of a line."""
    path = tmp_path / "marks.tsv"
    path.write_bytes("\ufeffM\t10.0\t\t9\t\thost\ttrain\n"
                     "M\t-5.0\t\t9\t=\thost\twarmup\n"
                     "M\tnan\t\t9\t=\thost\twarmup\n"
                     "S\tinf\t\t9\t=\thost\t12.0\t1\t1\t1e12\t1e12\t0\t0\t0\t0\n"
                     "S\t11.0\t\t9\t=\thost\t12.0\t2\t2\t2e12\t2e12\t0\t0\t0\tnan\n"
                     "S\t11.0\t\t9\t=\thost\t12.0\t2\t2\t2e12\t2e12\t0\t0\t0\t0.0\n"
                     "1e20\t0\t9\tmark\tlate\n".encode())
    reader = Reader(path)
    events = reader.poll()
    assert [(type(e).__name__, e.t) for e in events] == [("Mark", 10.0), ("Steps", 11.0)]
    note = reader.note()
    assert note.startswith("marks.tsv: left out ") and "4 lines whose time is not a time on the monotonic clock " \
        "(the first, line 2, reads -5.0)" in note and "1 line that is not a line of marks (line 5)" in note


@pytest.mark.parametrize("where", ["missing/dir/marks.tsv", ".", "readonly/marks.tsv"])
def test_a_marks_file_that_cannot_be_written_never_stops_the_job(tmp_path, where):
    (tmp_path / "readonly").mkdir()
    (tmp_path / "readonly").chmod(0o555)
    r = child("""
        import gpubench
        for i in range(100):
            gpubench.mark("train"); gpubench.step(flops=1.0)
        print("the job went on")
    """, tmp_path / where)
    assert r.returncode == 0 and "the job went on" in r.stdout, r.stderr
    if os.geteuid() != 0 or where != "readonly/marks.tsv":  # root writes anywhere
        assert r.stderr.count("gpubench: the marks file") == 1 and "Traceback" not in r.stderr


def test_the_rank_comes_from_the_launcher_and_streams_are_processes(tmp_path):
    path = tmp_path / "marks.tsv"
    code = "import gpubench; gpubench.mark('x'); gpubench.step()"
    child(code, path, SLURM_PROCID="3")
    child(code, path, OMPI_COMM_WORLD_RANK="5")
    child(code, path, PMI_RANK="6")
    child(code, path)
    child(code, path)  # two processes without a rank: two streams, never merged
    streams = {e.stream for e in read_all(path)}
    assert sorted(s.rank for s in streams if s.rank is not None) == [3, 5, 6]
    assert len([s for s in streams if s.rank is None]) == 2


def test_reader_waits_for_the_end_of_a_line_and_skips_garbage(tmp_path):
    path = tmp_path / "m.tsv"
    reader = Reader(path)
    assert reader.poll() == []  # not there yet
    path.write_bytes(b"M\t1.5\t0\t9\t\thost\ttrain\nnot a line\nS\t2.0\t0\t9\t\thost\t1.0\t1\t0\t0\t0\t0\t0\t0\t0\n"
                     b"S\t2.0\t0\t9\t\thost\t2.5\t3\t3\t3e12\t3e12\t0\t0\t0\t0.0")
    assert [e.name for e in reader.poll()] == ["train"]  # the S ending before it starts is no line of ours
    with open(path, "ab") as f:
        f.write(b"1\n")
    [e] = reader.poll()
    assert isinstance(e, Steps) and (e.n, e.flops, e.t_first, e.t_last, e.lead_s) == (3, 3e12, 2.0, 2.5, 0.01)


def test_the_earlier_one_line_per_call_format_is_read():
    path = ROOT / "results" / "watch-healthy-h100-80gb-hbm3" / "marks.tsv"
    if not path.is_file():
        pytest.skip("the committed run of that format was re-recorded")
    events = read_all(path)
    assert [e.name for e in events if isinstance(e, Mark)][:2] == ["warmup", "train"]
    assert all(e.n == 1 and e.clock == "host" for e in events if isinstance(e, Steps))


# --- stamps on the GPU's timeline, with a fake torch ---------------------------------------------------

class FakeEvent:
    """A CUDA event the fake GPU reaches `lag_s` after it is recorded."""

    lag_s = 0.2

    def __init__(self, blocking=False):
        assert blocking  # the waiting thread must sleep, not spin a core
        self.due = None

    def record(self):
        self.due = time.monotonic() + self.lag_s

    def synchronize(self):
        time.sleep(max(0.0, self.due - time.monotonic()))


class FakeCuda:
    Event = FakeEvent
    capturing = False

    def is_initialized(self):
        return True

    def is_current_stream_capturing(self):
        return self.capturing

    def current_device(self):
        return 0

    def get_device_properties(self, index):
        return type("Props", (), {"uuid": "0001-02"})()


@pytest.fixture
def fake_torch(monkeypatch):
    torch = type(sys)("torch")
    torch.cuda = FakeCuda()
    monkeypatch.setitem(sys.modules, "torch", torch)
    return torch


def test_steps_are_stamped_when_the_gpu_reaches_them_and_the_caller_never_waits(to_file, fake_torch):
    t_called, per_call = [], []
    for _ in range(5):
        t0 = time.monotonic()
        gpubench.step(flops=1.0)
        per_call.append(time.monotonic() - t0)
        t_called.append(t0)
        time.sleep(0.03)
    gpubench.mark("eval")
    markwriter.flush()
    assert max(per_call) < 0.05  # recording an event, not waiting for it
    events = read_all(to_file)
    steps = [e for e in events if isinstance(e, Steps)]
    [mark] = [e for e in events if isinstance(e, Mark)]
    assert {(s.clock, s.uuid) for s in steps} == {("gpu", "GPU-0001-02")} and sum(s.n for s in steps) == 5
    assert steps[0].t_first >= t_called[0] + FakeEvent.lag_s - 0.01  # the GPU's time, not the call's
    assert all(s.lead_s == pytest.approx(FakeEvent.lag_s, abs=0.05) for s in steps)
    assert mark.clock == "gpu" and mark.t >= steps[-1].t_last  # the phase starts where the GPU got to it


def test_a_step_during_graph_capture_is_stamped_on_the_host(to_file, fake_torch):
    fake_torch.cuda.capturing = True
    gpubench.step(flops=1.0)
    markwriter.flush()
    [steps] = [e for e in read_all(to_file) if isinstance(e, Steps)]
    assert steps.n == 1 and steps.lead_s == 0.0


def test_a_cuda_that_fails_leaves_the_steps_on_the_host(to_file, fake_torch, capsys):
    def broken(index):
        raise RuntimeError("CUDA error: an illegal memory access was encountered")

    fake_torch.cuda.get_device_properties = broken
    for _ in range(3):
        gpubench.step(flops=1.0)
    markwriter.flush()
    [steps] = [e for e in read_all(to_file) if isinstance(e, Steps)]
    assert steps.n == 3 and steps.clock == "host"
    assert capsys.readouterr().err.count("steps are stamped on the host") == 1


def test_marks_from_threads_of_one_process_are_all_counted(to_file):
    def work():
        for _ in range(2000):
            gpubench.step(flops=1.0)

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    markwriter.flush()
    assert sum(e.n for e in read_all(to_file) if isinstance(e, Steps)) == 8000
