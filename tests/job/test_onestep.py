"""FLOPs with no code change: one optimizer step counted from the end of the step before it to its own end,
against gpubench.count_flops over the same step, for an eager and a torch.compile'd model; and the count
given up, never raised, where the step runs too long, another dispatch mode sits on the counter's, or no
step comes again."""

import importlib.util
import time
from pathlib import Path

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode, _get_current_dispatch_mode_stack

import gpubench
from gpubench.inside import onestep
from gpubench.inside.onestep import OneStep

ROOT = Path(__file__).resolve().parents[2]


def tiny_gpt(layers=1):
    spec = importlib.util.spec_from_file_location("train_gpt", ROOT / "examples" / "train_gpt.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    torch.manual_seed(0)
    return module.GPT(vocab=256, seq=32, layers=layers, width=64, heads=4)


def train(net, params, x, steps: int, count: OneStep):
    """`steps` optimizer steps, with the hook's call at the end of each; what it handed out."""
    opt = torch.optim.AdamW(params, lr=1e-4)
    out = []
    for _ in range(steps):
        with torch.autocast("cpu", dtype=torch.bfloat16):
            loss = net(x, x)
        loss.backward()
        opt.step()
        opt.zero_grad()
        out.append(count.at_step())
    return out


def counted(handed):
    (flops,) = [f for f, letter in handed if letter == "C"]
    return flops


def one_step_of(model, x):
    def step():
        with torch.autocast("cpu", dtype=torch.bfloat16):
            loss = model(x, x)
        loss.backward()

    found = gpubench.count_flops(step)
    model.zero_grad()
    return found


def test_one_eager_step_counts_what_count_flops_counts():
    model = tiny_gpt(layers=2)
    x = torch.randint(256, (2, 32))
    expected = one_step_of(model, x)
    handed = train(model, model.parameters(), x, 6, OneStep(after=3))
    assert [letter for _, letter in handed] == ["A", "A", "A", "C", "A", "A"]
    flops = counted(handed)
    assert flops == pytest.approx(expected, rel=0.01) and flops.hardware == pytest.approx(expected.hardware, rel=0.01)
    assert [f for f, _ in handed[:3]] == [None] * 3 and all(f is flops for f, _ in handed[4:])
    assert _get_current_dispatch_mode_stack() == []  # nothing left behind


def test_one_compiled_step_counts_what_count_flops_counts_on_the_eager_model():
    model = tiny_gpt(layers=1)
    x = torch.randint(256, (2, 32))
    expected = one_step_of(model, x)
    handed = train(torch.compile(model), model.parameters(), x, 4, OneStep(after=2))
    assert counted(handed) == pytest.approx(expected, rel=0.01)
    assert _get_current_dispatch_mode_stack() == []


def test_counting_off_counts_nothing():
    model = tiny_gpt()
    handed = train(model, model.parameters(), torch.randint(256, (2, 32)), 4, OneStep(after=1, on=False))
    assert handed == [(None, "A")] * 4


def test_a_counted_step_that_runs_too_long_gives_no_flops(monkeypatch, capsys):
    monkeypatch.setattr(onestep, "MIN_LIMIT_S", 0.05)
    monkeypatch.setattr(onestep, "SLOWER", 1.0)
    count = OneStep(after=2)
    for _ in range(2):
        count.at_step()
    time.sleep(0.2)  # an evaluation, a checkpoint: more than a step
    flops, letter = count.at_step()
    assert letter == "C" and flops is None and "took" in count.problem
    assert "no FLOPs from the counted step" in capsys.readouterr().err
    assert _get_current_dispatch_mode_stack() == []


def test_a_mode_the_job_leaves_on_top_is_never_popped_by_the_count(capsys):
    class JobsOwn(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            return func(*args, **(kwargs or {}))

    count = OneStep(after=1)
    count.at_step()
    mode = JobsOwn()
    mode.__enter__()
    try:
        flops, letter = count.at_step()
        assert letter == "C" and flops is None and "still on top" in count.problem
        assert _get_current_dispatch_mode_stack()[-1] is mode
    finally:
        mode.__exit__(None, None, None)
    count.at_step()  # the job's mode is gone: the count leaves now
    assert _get_current_dispatch_mode_stack() == []
    assert "no FLOPs from the counted step" in capsys.readouterr().err


def test_with_no_step_after_it_the_count_ends_at_the_first_module_call_past_the_limit(monkeypatch):
    monkeypatch.setattr(onestep, "MIN_LIMIT_S", 0.05)
    monkeypatch.setattr(onestep, "SLOWER", 1.0)
    count = OneStep(after=1)
    count.at_step()
    assert len(_get_current_dispatch_mode_stack()) == 2
    layer = torch.nn.Linear(4, 4)
    layer(torch.randn(2, 4))  # inside the limit: still counting
    assert len(_get_current_dispatch_mode_stack()) == 2
    time.sleep(0.1)
    layer(torch.randn(2, 4))  # an evaluation after the last step: the count ends here
    assert _get_current_dispatch_mode_stack() == [] and "no step ended" in count.problem
    flops, letter = count.at_step()
    assert (flops, letter) == (None, "C")


def test_a_flop_formula_that_fails_is_no_error_in_the_job(monkeypatch):
    count = OneStep(after=1)
    count.at_step()
    registry = count._result.counter.flop_registry
    mm = torch.ops.aten.mm
    monkeypatch.setitem(registry, mm, onestep._guarded(lambda *a, **k: 1 / 0, count._failed))
    torch.randn(3, 3) @ torch.randn(3, 3)  # the job's product runs
    flops, letter = count.at_step()
    assert letter == "C" and flops is None and "ZeroDivisionError" in count.problem


def test_counting_that_fails_after_the_operation_ran_hands_the_job_its_output(monkeypatch):
    count = OneStep(after=1)
    count.at_step()
    counter = count._result.counter
    monkeypatch.setattr(counter.mod_tracker, "parents", None)  # counting itself breaks, not a formula
    a, b = torch.randn(3, 3), torch.randn(3, 3)
    assert torch.equal(a @ b, torch.mm(a, b))  # the job's product comes back whole
    flops, letter = count.at_step()
    assert letter == "C" and flops is None and "TypeError" in count.problem
    assert _get_current_dispatch_mode_stack() == []


def test_a_counted_step_with_no_counted_operation_says_so_without_naming_a_graph_it_never_saw(capsys):
    count = OneStep(after=1)
    count.at_step()  # the count begins here
    torch.ones(3).add_(1)  # no operation with a FLOP formula runs in the counted step
    flops, letter = count.at_step()
    said = capsys.readouterr().err
    assert letter == "C" and flops is None
    assert "no operation with a FLOP formula ran" in said and "graph replays" not in said
