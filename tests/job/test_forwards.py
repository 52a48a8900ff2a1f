"""Steps of what steps no optimizer (gpubench.inside.forwards), in a child Python as `gpubench watch` starts it:
the outermost module with the most parameters is the model (nested modules, a loss module beside it, several
threads); a forward is a step where no optimizer stepped in it; the first of each
input shape is counted; a failure is one line and the job runs on."""

import pytest
import torch
from test_autohook import child

from gpubench.inside.flops import count_flops
from gpubench.job import markreader

MODEL = """
import sys, threading, torch
from torch import nn
torch.manual_seed(0)
class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.inner = nn.Sequential(nn.Linear(16, 32), nn.GELU(), nn.Linear(32, 16))
    def forward(self, x):
        return x + self.inner(x)
model = nn.Sequential(Block(), Block(), nn.Linear(16, 8))
loss_fn = nn.MSELoss()
opt = torch.optim.SGD(model.parameters(), lr=0.01)
x, y = torch.randn(4, 16), torch.randn(4, 8)
def train_step():
    loss_fn(model(x), y).backward()
    opt.step()
    opt.zero_grad()
"""
DISCOVER = 8  # gpubench.inside.forwards.DISCOVER: calls seen before the model's own hooks
# fast forwards are written in groups (gpubench.inside.forwards.STAMP_S): a pause and one more call write the last
LAST = "import time\ntime.sleep(0.05)\nwith torch.no_grad(): model(x)\n"


def steps(events, origins=("forward", "forward counted")):
    return [e for e in events if isinstance(e, markreader.Steps) and e.origin in origins]


def forward_flops(batch=4):
    """The FLOPs of one forward of MODEL's model, built here as the child builds it."""
    space: dict = {}
    exec(MODEL, space)
    return count_flops(space["model"], torch.randn(batch, 16))


def test_inference_calls_of_the_outermost_model_are_steps_and_each_shape_is_counted_once(tmp_path):
    body = (
        MODEL
        + """
with torch.no_grad():
    for _ in range(40): loss_fn(model(x), y)
    for _ in range(10): model(torch.randn(8, 16))
"""
        + LAST
        + """print('ran')
"""
    )
    done, events, _ = child(tmp_path, body)
    assert done.returncode == 0 and done.stdout == "ran\n" and "gpubench" not in done.stderr, done.stderr
    got = steps(events)
    # 51 calls of the model; while it was being found, DISCOVER outermost calls, the loss module's half of
    # them; the last call never ended
    assert sum(e.n for e in got) == 51 - DISCOVER // 2 - 1
    counted = [e for e in got if e.origin == "forward counted"]
    assert [e.n for e in counted] == [1, 1]  # one count for each of the two shapes
    assert counted[0].flops == pytest.approx(forward_flops(4)) and counted[1].flops == pytest.approx(forward_flops(8))
    assert all(e.counted == e.n for e in got)  # every later step of a shape carries its count
    weights = (
        sum(p.numel() * 4 for p in torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.Linear(32, 16)).parameters())
        * 2
        + (16 * 8 + 8) * 4
    )
    assert all(e.bytes == pytest.approx(weights * e.n) for e in got) and all(e.tokens == 0 for e in got)


def test_training_writes_no_forward_and_the_evaluation_after_it_does(tmp_path):
    body = (
        MODEL
        + """
for _ in range(30): train_step()
with torch.no_grad():
    for _ in range(20): model(x)
for _ in range(5): train_step()
"""
        + LAST
        + """print('ran')
"""
    )
    done, events, _ = child(tmp_path, body)
    assert done.returncode == 0 and "gpubench" not in done.stderr, done.stderr
    opt = [e for e in events if isinstance(e, markreader.Steps) and e.origin in ("optimizer", "counted")]
    got = steps(events)
    assert sum(e.n for e in opt) == 35
    # the twenty evaluation forwards, the last ending where training's next forward began; none of training's
    # (the last call, after training, never ended)
    assert sum(e.n for e in got) == 20
    first_eval = min(e.t_first for e in got)
    assert sum(e.n for e in opt if e.t_first < first_eval) == 30


def test_the_model_called_from_several_threads_counts_each_call_once(tmp_path):
    body = (
        MODEL
        + """
import time
def work():
    with torch.no_grad():
        for _ in range(30): model(x)
with torch.no_grad():
    for _ in range(10): model(x)
threads = [threading.Thread(target=work) for _ in range(3)]
for t in threads: t.start()
for t in threads: t.join()
time.sleep(0.05)
with torch.no_grad(): model(x)
print('ran')
"""
    )
    done, events, _ = child(tmp_path, body)
    assert done.returncode == 0 and "gpubench" not in done.stderr, done.stderr
    # the first DISCOVER calls find the model; the last one never ended
    assert sum(e.n for e in steps(events)) == 10 + 3 * 30 + 1 - DISCOVER - 1


def test_a_failing_hook_is_one_line_and_the_job_runs_on(tmp_path):
    body = (
        MODEL
        + """
import importlib
f = importlib.import_module('_gpubench_inside.forwards')
f._shape = lambda *a: 1 / 0
with torch.no_grad():
    out = [model(x).sum().item() for _ in range(30)]
print('ran', len(out))
"""
    )
    done, events, _ = child(tmp_path, body)
    assert done.returncode == 0 and done.stdout == "ran 30\n"
    assert done.stderr.count("gpubench: the forward hook failed (ZeroDivisionError") == 1, done.stderr
    assert not steps(events)


def test_steps_alone_counts_no_flops_and_the_job_own_steps_silence_the_forwards(tmp_path):
    body = (
        MODEL
        + """
with torch.no_grad():
    for _ in range(20): model(x)
"""
        + LAST
        + """print('ran')
"""
    )
    done, events, _ = child(tmp_path, body, steps_env={"GPUBENCH_AUTO": "steps"})
    got = steps(events)
    assert done.returncode == 0 and sum(e.n for e in got) == 21 - DISCOVER - 1
    assert all(e.counted == 0 and e.origin == "forward" for e in got)
    own = (
        MODEL
        + """
import gpubench
with torch.no_grad():
    for _ in range(20):
        model(x)
        gpubench.step()
print('ran')
"""
    )
    (tmp_path / "own").mkdir()
    done, events, _ = child(tmp_path / "own", own)
    assert done.returncode == 0 and not steps(events) and len(steps(events, ("step",))) > 0


def test_a_model_let_go_is_followed_by_the_next_and_modules_without_parameters_are_passed_over(tmp_path):
    """Scoring one checkpoint after another: the next model is found once the last is let go; a module with
    no parameters called first (a preprocessing step) is no model, and looking goes on past it."""
    body = (
        MODEL
        + """
import gc, time
prep = nn.Identity()
with torch.no_grad():
    for _ in range(DISCOVER): prep(x)  # a whole round of outermost calls, none with parameters
    for _ in range(20): model(x)
del model, opt
gc.collect()
second = nn.Sequential(nn.Linear(16, 4))
with torch.no_grad():
    for _ in range(20): second(x)
    time.sleep(0.05)
    second(x)
print('ran')
""".replace("DISCOVER", str(DISCOVER))
    )
    done, events, _ = child(tmp_path, body)
    assert done.returncode == 0 and "gpubench" not in done.stderr, done.stderr
    got = steps(events)
    first = [e for e in got if e.bytes / e.n > 4000]  # MODEL's weights: 9,120 bytes ...
    second = [e for e in got if e.bytes / e.n < 400]  # ... against the second model's 272
    assert sum(e.n for e in second) == 21 - DISCOVER - 1 and sum(e.n for e in first) > 0


def test_a_count_ends_as_the_counted_call_returns_and_nothing_after_it_is_counted(tmp_path):
    """A last batch of a new shape, then the job's own work: the FLOP counter is gone as the model returns, so
    what the job runs after its last forward (post-processing, many small ops) runs at full speed."""
    body = (
        MODEL
        + """
from torch.utils._python_dispatch import _get_current_dispatch_mode
with torch.no_grad():
    for _ in range(20): model(x)
    out = model(torch.randn(3, 16))  # a short last batch: a shape never seen before, counted
    inside = [_get_current_dispatch_mode() for _ in range(3) if (out * 2).sum() is not None]
print('ran', inside)
"""
    )
    done, events, _ = child(tmp_path, body)
    assert done.returncode == 0 and done.stdout == "ran [None, None, None]\n", (done.stdout, done.stderr)
    assert "gpubench" not in done.stderr, done.stderr


@pytest.mark.parametrize("refusing", [False, True], ids=["", "a-node-refuses-its-pre-hook"])
def test_a_model_trained_by_hand_gives_its_forward_steps_no_count(tmp_path, refusing):
    """No optimizer, a backward and an update by hand: its calls are steps, but no forward's count is theirs
    (each ran a backward too); a call under no_grad of another shape is still counted. A grad node that refuses
    a pre-hook is left without one: the hook stays on and the others see the backward."""
    refuse = """
import importlib
f = importlib.import_module('_gpubench_inside.forwards')
class Refuses:
    def register_prehook(self, fn):
        raise RuntimeError('no pre-hook here')
real = f._grad_nodes
f._grad_nodes = lambda torch, out: [Refuses(), *real(torch, out)]
"""
    body = (
        MODEL
        + (refuse if refusing else "")
        + """
for _ in range(30):
    loss_fn(model(x), y).backward()
    with torch.no_grad():
        for p in model.parameters():
            p -= 0.01 * p.grad
            p.grad = None
with torch.no_grad():
    for _ in range(5): model(torch.randn(8, 16))
"""
        + LAST
        + """print('ran')
"""
    )
    done, events, _ = child(tmp_path, body)
    assert done.returncode == 0 and "gpubench" not in done.stderr, done.stderr
    got = steps(events)
    by_hand = [e for e in got if e.bytes and e.t_first < min(g.t_first for g in got if g.origin == "forward counted")]
    assert sum(e.n for e in by_hand) > 10 and all(e.counted == 0 for e in by_hand)
    counted = [e for e in got if e.origin == "forward counted"]
    assert len(counted) == 1 and counted[0].flops == pytest.approx(forward_flops(8))


def test_a_model_that_calls_itself_makes_a_step_of_each_call_once_found(tmp_path):
    """Re-entrant calls: a model whose forward calls itself again is found by its outermost calls, then each of
    its calls is a step (its own hook sees every one), as the module's docstring says."""
    body = """
import time, torch
from torch import nn
class Again(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(16, 16)
    def forward(self, x, again=True):
        y = self.lin(x)
        return self(y, again=False) if again else y
model = Again()
x = torch.randn(4, 16)
with torch.no_grad():
    for _ in range(40): model(x)
    time.sleep(0.05)
    model(x, again=False)  # past STAMP_S: writes every step before it, however slow the machine
print('ran')
"""
    done, events, _ = child(tmp_path, body)
    assert done.returncode == 0 and done.stdout == "ran\n" and "gpubench" not in done.stderr, done.stderr
    got = steps(events)
    # the first DISCOVER outermost calls find the model; then each call of it is a step, but for the last one,
    # which never ends: two calls for each of the other outer calls
    assert sum(e.n for e in got) == 2 * (40 - DISCOVER)
    counted = [e for e in got if e.origin == "forward counted"]  # the count ends where the inner call begins:
    assert len(counted) == 1 and counted[0].flops == 2 * 4 * 16 * 16  # the outer call's own work, one product
