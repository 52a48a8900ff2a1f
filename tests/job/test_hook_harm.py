"""The code inside the job never harms it and never loses, doubles or invents its steps, whatever the job does
with its descriptors, its module names, fork, failing optimizers or its marks file. Each job runs in a child
Python with the bootstrap first on its PYTHONPATH, as `gpubench watch` starts a command."""

import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

from gpubench.inside import PRIVATE, markwriter
from gpubench.job import hookenv, markreader
from gpubench.job.markfile import Reader, read_all
from gpubench.job.markreader import Steps

ROOT = Path(__file__).resolve().parents[2]

TRAIN = """
import torch
from torch import nn
torch.manual_seed(0)
model = nn.Linear(8, 4)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
def train_step(opt=opt):
    model(torch.randn(2, 8)).square().mean().backward()
    opt.step()
    opt.zero_grad()
"""


def job(tmp_path, body: str, cwd=None, **extra):
    """Run body in a child Python as a watch would; (the process, the steps it recorded, the marks file)."""
    marks = tmp_path / "marks.tsv"
    env = {k: v for k, v in os.environ.items() if not k.startswith("GPUBENCH_")}
    env.update(PYTHONPATH=str(ROOT), **{markwriter.ENV: str(marks)}, **extra)
    hook = hookenv.prepare(env)
    script = tmp_path / "job.py"
    script.write_text(textwrap.dedent(body))
    try:
        done = subprocess.run(
            [sys.executable, str(script)], env=env, capture_output=True, text=True, timeout=300, cwd=cwd or tmp_path
        )
    finally:
        hookenv.release(hook)
    events = read_all(marks) if marks.is_file() else []
    return done, sum(e.n for e in events if isinstance(e, Steps)), marks


def test_a_job_that_closes_every_descriptor_and_opens_its_own_files_gets_none_of_our_lines(tmp_path):
    data = tmp_path / "data.txt"
    body = f"""
import os, gpubench
gpubench.mark("start")
gpubench.step()
os.closerange(3, 4096)  # as a daemon does
with open({str(data)!r}, "w") as f:
    for i in range(25):
        gpubench.mark(f"phase {{i}}")
        gpubench.step()
        f.write(f"row {{i}}\\n")
"""
    done, steps, marks = job(tmp_path, body)
    assert done.returncode == 0 and "gpubench" not in done.stderr, done.stderr
    assert data.read_text() == "".join(f"row {i}\n" for i in range(25))
    names = [e.name for e in read_all(marks) if isinstance(e, markreader.Mark)]
    assert names == ["start", *(f"phase {i}" for i in range(25))] and steps == 26


def test_a_job_with_a_module_named_gpubench_of_its_own_keeps_it_and_is_still_watched(tmp_path):
    own = tmp_path / "gpubench"
    own.mkdir()
    (own / "__init__.py").write_text("ANSWER = 42\n")
    body = (
        TRAIN
        + """
import sys, gpubench
for _ in range(5): train_step()
print(gpubench.ANSWER, gpubench.__file__)
"""
    )
    done, steps, _ = job(tmp_path, body)
    assert done.returncode == 0, done.stderr
    answer, where = done.stdout.split()
    assert answer == "42" and Path(where) == own / "__init__.py"
    assert steps == 5


def test_the_bootstrap_loads_its_room_under_a_private_name_only(tmp_path):
    body = """
import sys
print(sorted(n.split('.')[0] for n in sys.modules if 'gpubench' in n and not n.startswith('__editable__')))
"""
    done, _, _ = job(tmp_path, body)
    assert done.returncode == 0, done.stderr
    assert set(eval(done.stdout)) == {PRIVATE}


def test_a_forked_child_that_exits_normally_writes_none_of_its_parents_steps(tmp_path):
    body = """
import os, sys, gpubench
for _ in range(20): gpubench.step()
pid = os.fork()
if pid == 0:
    sys.exit(0)  # atexit runs here, in the child
os.waitpid(pid, 0)
for _ in range(20): gpubench.step()
"""
    done, steps, marks = job(tmp_path, body)
    assert done.returncode == 0, done.stderr
    assert steps == 40
    lines = marks.read_text().splitlines()
    assert len(lines) == len(set(lines))


def test_a_forked_child_steps_as_a_process_of_its_own(tmp_path):
    body = """
import os, sys, gpubench
for _ in range(7): gpubench.step()
pid = os.fork()
if pid == 0:
    for _ in range(5): gpubench.step()
    sys.exit(0)
os.waitpid(pid, 0)
for _ in range(3): gpubench.step()
"""
    done, steps, marks = job(tmp_path, body)
    assert done.returncode == 0, done.stderr
    per = {}
    for e in read_all(marks):
        per[e.stream.pid] = per.get(e.stream.pid, 0) + e.n
    assert sorted(per.values()) == [5, 10] and steps == 15


def test_an_optimizer_whose_step_raised_silences_no_other(tmp_path):
    body = (
        TRAIN
        + """
class Fails(torch.optim.SGD):
    def step(self, closure=None):
        raise RuntimeError("the job's own failure")
failing = Fails(nn.Linear(2, 2).parameters(), lr=0.1)
try:
    failing.step()
except RuntimeError:
    pass
for _ in range(40): train_step()
print(failing is not None)
"""
    )
    done, steps, _ = job(tmp_path, body, GPUBENCH_AUTO="steps")
    assert done.returncode == 0 and done.stdout == "True\n", done.stderr
    assert steps == 40


def test_multiprocessing_pool_workers_keep_their_last_steps(tmp_path):
    body = """
import multiprocessing as mp, gpubench
def work(n):
    for _ in range(n): gpubench.step()
    return n
if __name__ == "__main__":
    pool = mp.get_context("fork").Pool(2)
    print(sum(pool.map(work, [10] * 6)))
    pool.close()
    pool.join()
"""
    done, steps, _ = job(tmp_path, body)
    assert done.returncode == 0 and done.stdout == "60\n", done.stderr
    assert steps == 60


def test_a_bootstrap_under_a_path_with_the_path_separator_is_still_reached(tmp_path, monkeypatch):
    odd = tmp_path / "a:b" / "inside"
    shutil.copytree(ROOT / "gpubench" / "inside", odd, ignore=shutil.ignore_patterns("__pycache__"))
    monkeypatch.setattr(hookenv, "BOOTSTRAP", str(odd / "bootstrap"))
    body = TRAIN + "for _ in range(4): train_step()\n"
    done, steps, _ = job(tmp_path, body)
    assert done.returncode == 0, done.stderr
    assert steps == 4


def test_lines_that_repeat_earlier_ones_count_once_and_are_said(tmp_path):
    path = tmp_path / "marks.tsv"
    markwriter.target(path)
    try:
        gpubench_mark, gpubench_step = markwriter.mark, markwriter.step
        gpubench_mark("train")
        for _ in range(30):
            gpubench_step(flops=10)
    finally:
        markwriter.target(None)
    once = path.read_bytes()
    path.write_bytes(once + once)  # the file appended to itself
    reader = Reader(path)
    events = reader.poll()
    assert sum(e.n for e in events if isinstance(e, Steps)) == 30
    assert "repeat" in reader.note() and str(len(once.splitlines())) in reader.note()


def test_a_marks_file_the_job_removes_loses_no_steps(tmp_path):
    path = tmp_path / "marks.tsv"
    path.touch()
    tail = Reader(path)
    markwriter.target(path)
    seen = 0
    try:
        for round_ in range(3):
            for _ in range(10):
                markwriter.step()
            markwriter.flush()
            seen += sum(e.n for e in tail.poll() if isinstance(e, Steps))
            os.remove(path)  # the job removes it; the next line makes it anew
    finally:
        markwriter.target(None)
    seen += sum(e.n for e in tail.poll() if isinstance(e, Steps))
    assert seen == 30
    again = tail.again()
    assert sum(e.n for e in again.poll() if isinstance(e, Steps)) == 30
    assert "removed" in again.note()


def test_the_start_up_of_a_watched_process_loads_no_marks_writer_until_torch_optimizers_load(tmp_path):
    body = """
import sys
print(sorted(n for n in sys.modules if n.startswith('_gpubench_inside')), 'threading' in sys.modules)
"""
    done, _, _ = job(tmp_path, body)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split("]")[0] + "]" == (
        "['_gpubench_inside', '_gpubench_inside.autohook', '_gpubench_inside.finder', '_gpubench_inside.jaxhook']"
    )  # the
    # hooks, waiting for torch or jax


def test_a_step_counted_on_one_thread_and_ended_on_another_leaves_the_count_at_the_first_module_call(tmp_path):
    body = (
        TRAIN
        + """
import threading
from torch.utils._python_dispatch import _get_current_dispatch_mode
for _ in range(10): train_step()  # the tenth starts the count, on this thread
counting = _get_current_dispatch_mode() is not None
other = threading.Thread(target=train_step)
other.start(); other.join()  # the step that ends it comes from another thread
model(torch.randn(2, 8))  # this thread's first module call after it
print(counting, _get_current_dispatch_mode() is None)
"""
    )
    done, _, _ = job(tmp_path, body)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["True", "True"]
    assert "stepped on another thread" in done.stderr and "dispatch mode the job pushed" not in done.stderr


def test_a_child_forked_while_a_step_is_counted_runs_without_the_counting_modes(tmp_path):
    body = (
        TRAIN
        + """
import os, sys
from torch.utils._python_dispatch import _get_current_dispatch_mode
for _ in range(10): train_step()  # the tenth starts the count
counting = _get_current_dispatch_mode() is not None
pid = os.fork()  # as a DataLoader makes its workers when an epoch begins
if pid == 0:
    print("child", _get_current_dispatch_mode() is None, flush=True)
    os._exit(0)
os.waitpid(pid, 0)
for _ in range(3): train_step()
print("parent", counting)
"""
    )
    done, steps, _ = job(tmp_path, body)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["child", "True", "parent", "True"] and steps == 13


def test_marks_before_torch_loads_and_steps_after_it_share_one_writer(tmp_path):
    """The job's gpubench.mark comes before torch's optimizers load the hook's writer: a mark still closes the
    steps gathered before it (two writers in one process gave one line of steps across a phase's start)."""
    body = """
import gpubench
gpubench.mark("train")
import torch.optim
gpubench.step()
gpubench.mark("eval")
gpubench.step()
"""
    done, steps, marks = job(tmp_path, body)
    assert done.returncode == 0, done.stderr
    events = read_all(marks)
    [eval_mark] = [e for e in events if isinstance(e, markreader.Mark) and e.name == "eval"]
    lines = [e for e in events if isinstance(e, Steps)]
    assert steps == 2 and all(e.t_last < eval_mark.t or e.t_first > eval_mark.t for e in lines)
