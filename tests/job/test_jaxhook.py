"""Steps of a JAX job with no code change (gpubench.inside.jaxhook): a small training loop on the CPU in a child
Python started as `gpubench watch` starts a command, beside the same job unwatched. Its steps are the calls
of its jitted step, each carrying XLA's count of that function; an init called once, a jitted function
inside the step and a small helper are not steps; the job's outputs and its jitted functions behave as they
do unwatched; and a failure in the hook is one line on stderr."""

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

jax = pytest.importorskip("jax")

from gpubench.inside import jaxhook, markwriter  # noqa: E402
from gpubench.inside.bootstrap import BOOTSTRAP  # noqa: E402
from gpubench.job import hookenv, provenance  # noqa: E402
from gpubench.job.markfile import read_all  # noqa: E402
from gpubench.job.markreader import Steps  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]

# an init called once (the costliest single call), a jitted layer called inside the step's trace, the step
DEFS = """
import hashlib, sys
from functools import partial
import numpy as np
import jax, jax.numpy as jnp

traces = []

@jax.jit
def init(key):
    big = jax.random.normal(key, (256, 256))
    return (big @ big @ big)[:32, :16] * 1e-3

@jax.jit
def layer(w, x):
    return jnp.tanh(x @ w)

@partial(jax.jit, donate_argnums=0)
def step(w, x):
    traces.append(1)
    return w - 0.1 * jax.grad(lambda w: jnp.mean(layer(w, x) ** 2))(w)

def digest(a):
    return hashlib.sha256(np.asarray(a).tobytes()).hexdigest()[:16]
"""
BODY = """
w = init(jax.random.PRNGKey(0))
x = jax.random.normal(jax.random.PRNGKey(1), (8, 32))
for _ in range(30):
    w = step(w, x)
print("own count: 30 steps; traced", len(traces), "; weights", digest(w))
"""
LOOP = DEFS + BODY


def child(tmp_path, body: str, watched=True, **env_extra):
    """Run body in a child Python, watched as `gpubench watch` runs a command or not; (process, J steps)."""
    marks = tmp_path / "marks.tsv"
    marks.unlink(missing_ok=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith("GPUBENCH_")}
    env.update(PYTHONPATH=str(ROOT), JAX_PLATFORMS="cpu", **env_extra)
    hook = None
    if watched:
        env[markwriter.ENV] = str(marks)
        hook = hookenv.prepare(env)
        if BOOTSTRAP not in env["PYTHONPATH"]:  # GPUBENCH_AUTO=0 set by hand: the bootstrap runs all the same
            env["PYTHONPATH"] = os.pathsep.join([BOOTSTRAP, env["PYTHONPATH"]])
    script = tmp_path / "job.py"
    script.write_text(textwrap.dedent(body))
    try:
        done = subprocess.run(
            [sys.executable, str(script)], env=env, capture_output=True, text=True, timeout=300, cwd=tmp_path
        )
    finally:
        hookenv.release(hook)
    events = read_all(marks) if marks.is_file() else []
    return done, [e for e in events if isinstance(e, Steps)]


def expected_flops(x_rows=8):
    """XLA's count of LOOP's step, unwatched in this process: what each of its steps must carry."""
    ns = {}
    exec(DEFS, ns)
    w = jax.ShapeDtypeStruct((32, 16), jax.numpy.float32)
    x = jax.ShapeDtypeStruct((x_rows, 32), jax.numpy.float32)
    return ns["step"].lower(w, x).cost_analysis()["flops"]


def test_each_call_of_the_step_is_a_step_carrying_xlas_count_and_the_job_is_unchanged(tmp_path):
    plain, none = child(tmp_path, LOOP, watched=False)
    done, steps = child(tmp_path, LOOP)
    assert plain.returncode == done.returncode == 0 and not none
    assert done.stdout == plain.stdout and "traced 1 ;" in done.stdout  # bit-identical; never traced again
    assert done.stderr == plain.stderr == ""
    assert {s.origin for s in steps} == {"jit"} and {s.clock for s in steps} == {"host"}
    # the init (called once) and the layer (inside the step's trace) are no steps: 30, not 31 or 60
    assert sum(s.n for s in steps) == 30 and all(s.counted == s.n for s in steps)
    flops = expected_flops()
    assert flops > 2 * 8 * 32 * 16  # the layer's product forward and back, at least
    assert all(s.flops == pytest.approx(flops * s.n, rel=1e-5) for s in steps)


HELPER = (
    DEFS
    + """
@jax.jit
def augment(x):  # a small jitted helper called before the step in every iteration: not the step
    return x * 1.01

w = init(jax.random.PRNGKey(0))
for epoch in range(3):
    for rows in (8, 8, 8, 5):  # three full batches, then a short one: each compiled once, counted apart
        w = step(w, augment(jnp.ones((rows, 32))))
print("own count: 12 steps; traced", len(traces), "; weights", digest(w))
"""
)


def test_a_helper_before_the_step_and_a_short_last_batch_each_step_is_one_iteration_with_its_own_count(tmp_path):
    plain, _ = child(tmp_path, HELPER, watched=False)
    done, steps = child(tmp_path, HELPER)
    assert done.stdout == plain.stdout and "traced 2 ;" in done.stdout and done.stderr == "", done.stderr
    assert sum(s.n for s in steps) == 12
    full, short = expected_flops(8), expected_flops(5)
    # the helper led for its first two calls (the first two iterations), the step from its third call on
    assert sum(s.flops for s in steps) == pytest.approx(9 * full + 3 * short - 2 * full + 2 * 8 * 32 * 1.0, rel=1e-5)


FIDELITY = (
    DEFS
    + """
import copy, inspect, pickle
import jax.stages

@partial(jax.jit, static_argnames="n")
def power(x, n):
    return x ** n

@jax.jit(static_argnums=1)  # the decorator jax.jit returns when given no function
def scale(x, k):
    return x * k

class Model:
    def __init__(self, k):
        self.k = k
    @partial(jax.jit, static_argnums=0)
    def apply(self, x):
        return x * self.k
    def __hash__(self):
        return hash(self.k)
    def __eq__(self, other):
        return self.k == other.k

x = jnp.arange(4.0)
print("pjit", isinstance(step, type(sys.modules["jax._src.api"].jit(lambda a: a))))
print("wrapped protocol", isinstance(step, jax.stages.Wrapped), callable(step))
print("names", step.__name__, step.__qualname__, step.__module__, step.__wrapped__.__name__, step.__doc__)
print("signature", inspect.signature(step), inspect.signature(jax.jit).parameters["fun"].kind)
print("static", power(x, n=3).tolist(), scale(x, 2.0).tolist(), Model(3.0).apply(x).tolist())
print("lower", power.lower(x, n=2).cost_analysis()["flops"], step.trace(jnp.ones((32, 16)), jnp.ones((8, 32)))
      .out_info.shape)
print("eval_shape", jax.eval_shape(layer, jnp.ones((32, 16)), jnp.ones((8, 32))).shape)
print("jit of jit", jax.jit(layer)(jnp.ones((32, 16)), jnp.ones((2, 32))).shape)
for attempt in (pickle.dumps, copy.deepcopy):
    try:
        attempt(step)
        print(attempt.__name__, "works")
    except Exception as err:
        print(attempt.__name__, type(err).__name__)
w = jnp.ones((32, 16))
w2 = step(w, jnp.ones((8, 32)))
print("donated", w.is_deleted(), w2.shape)
layer.note = "set"
print("attribute", layer.note, layer._fun.__name__, hasattr(layer, "clear_cache"))
def double(a):
    return a * 2
for i in range(5):
    w2 = jax.jit(double)(w2)  # a jit made anew at every call, as some loops do
print("loop jit", digest(w2))
"""
)


def test_the_jobs_jitted_functions_work_as_jaxs_own(tmp_path):
    plain, _ = child(tmp_path, FIDELITY, watched=False)
    done, steps = child(tmp_path, FIDELITY)
    assert plain.returncode == 0, plain.stderr
    assert done.returncode == 0 and done.stderr == plain.stderr, done.stderr
    assert done.stdout == plain.stdout
    said = dict(line.split(" ", 1) for line in done.stdout.splitlines())
    assert said["pjit"] == "True" and said["wrapped"] == "protocol True True" and said["donated"].startswith("True")
    assert said["static"] == "[0.0, 1.0, 8.0, 27.0] [0.0, 2.0, 4.0, 6.0] [0.0, 3.0, 6.0, 9.0]"
    assert sum(s.n for s in steps) == 5  # the only function called twice: every jit of it made anew, one function


FAIL = (
    DEFS
    + """
hook = sys.modules.get("_gpubench_inside.jaxhook")
if hook is not None:  # watched: the hook's own code fails at its first use
    def boom(*args, **kwargs):
        raise RuntimeError("planted")
    setattr(hook, WHERE, boom)
"""
    + BODY
    + """
print("jax's jit", jax.jit is sys.modules["jax._src.api"].jit)
"""
)


@pytest.mark.parametrize("where", ["_called", "_top"])
def test_a_failure_in_the_hook_is_one_line_and_the_job_runs_on_as_unwatched(tmp_path, where):
    plain, _ = child(tmp_path, FAIL.replace("WHERE", repr(where)), watched=False)
    done, steps = child(tmp_path, FAIL.replace("WHERE", repr(where)))
    assert done.returncode == 0 and done.stdout == plain.stdout and "jax's jit True" in done.stdout
    (line,) = done.stderr.splitlines()
    assert line == (
        "gpubench: the JAX hook failed (RuntimeError: planted); this process runs on unwatched by the JAX hook"
    )
    assert sum(s.n for s in steps) <= 2  # at most what came before the failure


def test_the_switches_of_the_optimizer_hook_hold_for_this_one(tmp_path):
    body = LOOP + "print(type(step).__name__)\n"
    off, none = child(tmp_path, body, GPUBENCH_AUTO="0")
    assert off.returncode == 0 and off.stdout.split()[-1] == "PjitFunction" and not none and not off.stderr
    done, steps = child(tmp_path, body, GPUBENCH_AUTO="steps")
    assert done.returncode == 0 and not done.stderr, done.stderr
    assert sum(s.n for s in steps) == 30 and not any(s.counted for s in steps)  # steps, no FLOPs


def test_a_job_that_calls_step_itself_gets_no_jit_steps(tmp_path):
    body = LOOP + "import gpubench\nfor _ in range(4):\n    w = step(w, x)\n    gpubench.step(flops=1.0)\n"
    done, steps = child(tmp_path, body)
    assert done.returncode == 0 and not done.stderr, done.stderr
    own = [s for s in steps if s.origin == "step"]
    # the jitted step before the job's first step() is written; none after it
    assert sum(s.n for s in own) == 4 and sum(s.n for s in steps if s.origin == "jit") == 31
    assert provenance.resolve(steps) == own  # the summary keeps the job's own steps alone


def test_xla_counts_a_product_as_two_flops_a_multiply_add_and_the_cpu_client_counts_what_a_plugin_would(monkeypatch):
    jnp = jax.numpy
    f = jax.jit(lambda a, b: a @ b)
    lowered = f.lower(jnp.ones((64, 48)), jnp.ones((48, 40)))
    assert jaxhook._cost(jax, lowered) == 2 * 64 * 48 * 40  # PaLM's count of a product, nothing else
    g = jax.jit(lambda w, x: jnp.tanh(x @ w).sum())
    lowered = g.lower(jnp.ones((32, 16)), jnp.ones((8, 32)))
    direct = jaxhook._cost(jax, lowered)
    assert direct == 2 * 8 * 32 * 16 + 8 * 16 - 1  # tanh is a transcendental, apart; the sum adds 127
    monkeypatch.setattr(type(lowered), "cost_analysis", lambda self: None)  # as with the CUDA plugin
    assert jaxhook._cost(jax, lowered) == direct


class _Fn:
    """Stands for a jitted function whose one signature is compiled and counted."""

    def _cache_size(self):
        return 1


def test_the_step_is_the_function_that_did_the_most_work_and_the_choice_cannot_flap(monkeypatch):
    written = []
    writer = type("W", (), {"step": lambda self, flops, nbytes, tokens, origin: written.append((flops, origin))})()
    monkeypatch.setattr(
        jaxhook,
        "_markwriter",
        type("M", (), {"own_steps": False, "_path": "marks", "_Off": OSError, "_writer": staticmethod(lambda: writer)}),
    )
    monkeypatch.setattr(jaxhook, "_leader", None)
    monkeypatch.setattr(jaxhook, "_written", 0)
    funcs = {}
    for name, flops in (("init", 1e9), ("train", 10.0), ("eval", 3.0), ("metric", 1.0)):
        funcs[name] = jaxhook._Stats(seen=1)
        funcs[name].flops = flops
    leaders = [None]

    def call(name, times=1):
        for _ in range(times):
            jaxhook._called(funcs[name], _Fn(), (), {})
            if leaders[-1] is not jaxhook._leader:
                leaders.append(jaxhook._leader)

    call("init")  # once, the most FLOPs of any call: never the step
    for _ in range(5):  # epochs: training with a small metric after each step, then an evaluation
        for _ in range(20):
            call("train")
            call("metric")
        call("eval", 30)
    assert leaders[1:] == [funcs["train"]] and written == [(10.0, "J")] * 100
    call("eval", 700)  # an evaluation that does more than twice the training's work takes the step, once
    call("train", 50)
    call("eval", 10)
    assert leaders[1:] == [funcs["train"], funcs["eval"]]
    # the evaluation is the step from its 667th call on (3 x 667 > 2 x 1000): no training step came since its 666th
    assert len(written) == 100 + (850 - 667 + 1) + 10 and written[-1] == (3.0, "J")


@pytest.fixture
def fresh(monkeypatch):
    """This process's jax and hook as they were after the test: install() here patches jax.jit in place."""
    monkeypatch.setenv(markwriter.ENV, "marks-nobody-writes.tsv")
    monkeypatch.setattr(jax, "jit", jax.jit)
    for name, value in (
        ("_on", True),
        ("_original", None),
        ("_module", None),
        ("_top", None),
        ("_leader", None),
        ("_written", 0),
        ("_markwriter", None),
    ):
        monkeypatch.setattr(jaxhook, name, value)
    return monkeypatch


def test_a_process_that_imported_jax_before_the_hook_gets_it_at_once_and_its_earlier_jits_stay_jaxs(fresh):
    before = jax.jit(lambda a: a + 1)
    assert jaxhook.install() and type(jax.jit(lambda a: a * 2)) is jaxhook._Jitted
    assert type(before) is not jaxhook._Jitted and before(1.0) == 2.0


def test_a_jax_without_the_trace_context_the_hook_reads_is_one_line_and_keeps_its_jit(fresh, capsys):
    jit = jax.jit
    fresh.setitem(sys.modules, "jax._src.core", object())
    assert jaxhook.install() and jax.jit is jit and not jaxhook._on
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith("gpubench: jax.jit could not be watched in this JAX (AttributeError: ")
    assert line.endswith("; this process runs on unwatched by the JAX hook")
