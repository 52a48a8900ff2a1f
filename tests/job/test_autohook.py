"""Steps with no code change: the bootstrap in a child Python, as `gpubench watch` starts a command. With and
without a sitecustomize of the user's, a process that never imports torch, a job that calls step() itself,
an optimizer wrapped twice, several optimizers, and the hook failing or turned off."""

import os
import subprocess
import sys
import textwrap
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from gpubench.inside import autohook, markwriter
from gpubench.job import hookenv, markfile, markreader, provenance
from gpubench.inside.bootstrap import BOOTSTRAP
from gpubench.inside.onestep import COUNT_AFTER

ROOT = Path(__file__).resolve().parents[2]

LOOP = """
import sys, torch
from torch import nn
torch.manual_seed(0)
model = nn.Sequential(nn.Linear(16, 32), nn.GELU(), nn.Linear(32, 8))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
x = torch.randn(4, 16)
def train_step():
    model(x).square().mean().backward()
    opt.step()
    opt.zero_grad()
"""


def child(tmp_path, body: str, steps_env=None, marks=None, pythonpath=(), on=True):
    """Run `body` in a child Python as `gpubench watch` would; (completed process, marks file events)."""
    marks = marks or tmp_path / "marks.tsv"
    env = {k: v for k, v in os.environ.items() if not k.startswith("GPUBENCH_")}
    env["PYTHONPATH"] = os.pathsep.join([*map(str, pythonpath), str(ROOT)])
    env[markwriter.ENV] = str(marks)
    env.update(steps_env or {})
    facts = hookenv.prepare(env, on)
    script = tmp_path / "job.py"
    script.write_text(textwrap.dedent(body))
    done = subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True, timeout=120)
    events = markfile.read_all(marks) if Path(marks).is_file() else []
    return done, events, facts


def steps_of(events, origins=("optimizer", "counted")):
    return sum(e.n for e in events if isinstance(e, markreader.Steps) and e.origin in origins)


def expected_flops():
    """One training step of LOOP's model, as gpubench.count_flops counts it."""
    import gpubench

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.GELU(), torch.nn.Linear(32, 8))
    x = torch.randn(4, 16)
    return gpubench.count_flops(lambda: model(x).square().mean().backward())


def test_each_optimizer_step_is_a_step_and_one_step_is_counted(tmp_path):
    done, events, facts = child(tmp_path, LOOP + "for _ in range(15): train_step()\nprint('trained')\n")
    assert done.returncode == 0 and done.stdout == "trained\n" and "gpubench" not in done.stderr, done.stderr
    assert facts["hook"] == "on" and steps_of(events) == 15
    assert all(e.clock == "host" and e.stream.pid > 0 for e in events)  # no CUDA here: the host stamps them
    lines = [e for e in events if isinstance(e, markreader.Steps)]
    counted = [e for e in lines if e.origin == "counted"]
    assert len(counted) == 1 and counted[0].n == 1
    assert sum(e.n for e in lines if e.t_first < counted[0].t_first) == COUNT_AFTER  # counted after warm-up
    flops = expected_flops()
    assert counted[0].flops == pytest.approx(flops, rel=0.01) and counted[0].hw_flops == pytest.approx(flops.hardware)
    # the steps after it carry its count; the summary gives it to the ones before
    after = [e for e in lines if e.t_first > counted[0].t_first]
    assert after and all(e.counted == e.n and e.flops == pytest.approx(flops * e.n, rel=0.01) for e in after)
    assert all(e.counted == e.n for e in provenance.resolve(events))
    (gap,) = provenance.holes(events)
    assert gap[1] == counted[0].t_first and gap[0] < gap[1]


def test_a_users_sitecustomize_still_runs_after_the_bootstrap(tmp_path):
    own = tmp_path / "own"
    own.mkdir()
    (own / "sitecustomize.py").write_text("import os\nos.environ['USER_SITECUSTOMIZE'] = 'ran'\n")
    body = (
        LOOP
        + """
import os, sitecustomize
for _ in range(3): train_step()
print(os.environ.get('USER_SITECUSTOMIZE'), sitecustomize.__file__)
"""
    )
    done, events, _ = child(tmp_path, body, pythonpath=[own])
    assert done.returncode == 0, done.stderr
    said, path = done.stdout.split()
    assert said == "ran" and Path(path) == own / "sitecustomize.py"
    assert steps_of(events) == 3


def test_a_failing_sitecustomize_of_the_users_is_reported_by_python_as_without_the_bootstrap(tmp_path):
    own = tmp_path / "own"
    own.mkdir()
    (own / "sitecustomize.py").write_text("raise RuntimeError('the user breaks their own start-up')\n")
    done, events, _ = child(tmp_path, LOOP + "for _ in range(2): train_step()\n", pythonpath=[own])
    assert done.returncode == 0
    assert "Error in sitecustomize" in done.stderr and "the user breaks their own start-up" in done.stderr
    assert steps_of(events) == 2  # the hook went in before it


def test_a_process_that_never_imports_torch_is_left_alone(tmp_path):
    body = """
import sys
print('torch' in sys.modules, 'gpubench' in sys.modules, '_gpubench_inside.autohook' in sys.modules)
"""
    done, events, _ = child(tmp_path, body)
    assert done.returncode == 0 and done.stdout.split() == ["False", "False", "True"] and not done.stderr
    assert events == []


def test_a_job_without_torch_installed_runs_as_it_would(tmp_path):
    body = """
import importlib.abc, sys
class NoTorch(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split('.')[0] == 'torch':
            raise ImportError(f'No module named {name!r}')
sys.meta_path.insert(0, NoTorch())
try:
    import torch
except ImportError as err:
    print('no torch:', err)
"""
    done, events, _ = child(tmp_path, body)
    assert done.returncode == 0 and done.stdout.startswith("no torch:") and not done.stderr
    assert events == []


def test_a_job_that_calls_step_itself_is_never_counted_twice(tmp_path):
    body = (
        LOOP
        + """
import gpubench
for _ in range(14):
    train_step()
    gpubench.step(flops=1000)
"""
    )
    done, events, _ = child(tmp_path, body)
    assert done.returncode == 0 and not done.stderr, done.stderr
    assert steps_of(events, ("step",)) == 14
    assert steps_of(events) <= 1  # at most the optimizer step before its first step(), never a count
    kept = provenance.resolve(events)
    assert {e.origin for e in kept if isinstance(e, markreader.Steps)} == {"step"}
    assert sum(e.n for e in kept) == 14


WRAPPED = (
    LOOP
    + """
class Wrapper(torch.optim.Optimizer):
    '''An optimizer that is an Optimizer itself and steps another: both run the global hooks.'''
    def __init__(self, inner):
        self.inner = inner
        super().__init__(inner.param_groups, {})
    def step(self, closure=None):
        return self.inner.step(closure)
opt = Wrapper(opt)
for _ in range(13): train_step()
"""
)


def test_an_optimizer_wrapped_twice_counts_one_step_per_real_step(tmp_path):
    done, events, _ = child(tmp_path, WRAPPED)
    assert done.returncode == 0 and not done.stderr, done.stderr
    assert steps_of(events) == 13
    assert steps_of(events, ("counted",)) == 1


def test_accelerates_optimizer_counts_one_step_per_real_step(tmp_path):
    pytest.importorskip("accelerate")
    body = (
        LOOP
        + """
from accelerate import Accelerator
acc = Accelerator(cpu=True)
model, opt = acc.prepare(model, opt)
for _ in range(12): train_step()
print(type(opt).__name__)
"""
    )
    done, events, _ = child(tmp_path, body)
    assert done.returncode == 0 and done.stdout.split()[-1] == "AcceleratedOptimizer", done.stderr
    assert steps_of(events) == 12


def test_of_two_optimizers_stepping_in_turn_each_iteration_is_one_step(tmp_path):
    body = (
        LOOP
        + """
critic = torch.optim.SGD(model.parameters(), lr=0.01)
for _ in range(12):
    train_step()
    model(x).sum().backward()
    critic.step()
    critic.zero_grad()
"""
    )
    done, events, _ = child(tmp_path, body)
    assert done.returncode == 0 and not done.stderr, done.stderr
    # iterations, not optimizer steps: the first SGD step, written before the second stepped, is taken back
    assert steps_of(provenance.resolve(events)) == 12
    assert {e.pattern for e in provenance.resolve(events)} == {"1 × SGD #1, 1 × SGD #2"}


def test_no_auto_and_the_environment_variable_turn_the_hook_off(tmp_path):
    done, events, facts = child(tmp_path, LOOP + "for _ in range(3): train_step()\n", on=False)
    assert done.returncode == 0 and events == [] and facts == {"hook": "off", "why": "--no-auto"}
    done, events, facts = child(tmp_path, LOOP + "for _ in range(3): train_step()\n", steps_env={"GPUBENCH_AUTO": "0"})
    assert done.returncode == 0 and events == [] and facts["hook"] == "off" and "GPUBENCH_AUTO=0" in facts["why"]
    done, events, facts = child(
        tmp_path, LOOP + "for _ in range(14): train_step()\n", steps_env={"GPUBENCH_AUTO": "steps"}
    )
    assert steps_of(events) == 14 and steps_of(events, ("counted",)) == 0 and facts["flops"] == "not counted"


def test_a_marks_file_that_cannot_be_written_is_one_line_and_the_job_runs_on(tmp_path):
    done, events, _ = child(tmp_path, LOOP + "for _ in range(12): train_step()\nprint('trained')\n", marks=tmp_path)
    assert done.returncode == 0 and done.stdout == "trained\n"
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("gpubench:") and "Traceback" not in done.stderr


def test_a_hook_that_fails_says_so_once_and_leaves_the_job_alone(monkeypatch, capsys):
    monkeypatch.setattr(markwriter, "own_steps", False)  # other tests step in this process
    monkeypatch.setattr(autohook, "_on", True)
    monkeypatch.setattr(autohook, "_steps", None)
    autohook._register(SimpleNamespace())  # a torch whose optimizer module has no global hooks
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "could not be registered" in err[0] and autohook._on is False and autohook._steps is None
    steps = autohook.Steps()
    monkeypatch.setattr(autohook, "_on", True)
    monkeypatch.setattr(markwriter, "_path", "/nonexistent/marks.tsv")
    monkeypatch.setattr(autohook.Steps, "_leads", lambda self, opt: 1 / 0)
    opt = object.__new__(torch.optim.SGD)
    steps.pre(opt, (), {})
    steps.post(opt, (), {})  # raises inside: said, never raised
    steps.post(opt, (), {})  # and then off: nothing more is said
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "ZeroDivisionError" in err[0] and autohook._on is False


def test_the_bootstrap_is_installed_with_the_package(monkeypatch):
    from setup import MappedPackages  # the package list as the build derives it (pyproject.toml and setup.py)

    monkeypatch.chdir(ROOT)
    dist = MappedPackages({"script_name": "setup.py"})
    dist.parse_config_files()
    assert "gpubench.inside.bootstrap" in dist.packages
    assert (Path(BOOTSTRAP) / "sitecustomize.py").is_file()
    assert sorted(p.name for p in Path(BOOTSTRAP).glob("*.py")) == ["__init__.py", "sitecustomize.py"]


def test_a_count_under_way_when_the_job_starts_stepping_itself_is_left(monkeypatch):
    from torch.utils._python_dispatch import _get_current_dispatch_mode_stack

    from gpubench.inside.onestep import OneStep

    monkeypatch.setattr(autohook, "_on", True)
    monkeypatch.setattr(markwriter, "own_steps", False)
    monkeypatch.setattr(markwriter, "_path", "/nonexistent/marks.tsv")
    steps = autohook.Steps()
    steps.count = OneStep(after=1)
    steps.count.at_step()  # counting
    assert len(_get_current_dispatch_mode_stack()) == 2
    monkeypatch.setattr(markwriter, "own_steps", True)
    opt = object.__new__(torch.optim.SGD)
    steps.pre(opt, (), {})
    steps.post(opt, (), {})
    assert _get_current_dispatch_mode_stack() == [] and steps.count.flops is None
