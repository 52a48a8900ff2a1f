"""A JAX training loop nobody changed, run on the CPU under the real `gpubench watch` path with a stand-in for the
GPU's counters: its rows get steps from its jitted step function, as many as the loop's own count, and FLOPs
from XLA's cost analysis of that function, and say so."""

import os
import sys
import textwrap
from pathlib import Path

import pytest

jax = pytest.importorskip("jax")

from fakes import GPU, FakeSource  # noqa: E402

from gpubench.job import watchcmd as watch  # noqa: E402
from gpubench.job.watcher import WatchOptions  # noqa: E402
from gpubench.record.config import RecordingConfig  # noqa: E402
from gpubench.record.rundir import load_run  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
STEPS = 80
DEFS = """
import time
import jax, jax.numpy as jnp

@jax.jit
def init(key):
    k1, k2 = jax.random.split(key)
    return jax.random.normal(k1, (64, 128)) * 0.1, jax.random.normal(k2, (128, 10)) * 0.1

@jax.jit
def step(params, x, y):
    def loss(params):
        w1, w2 = params
        return jnp.mean((jnp.tanh(x @ w1) @ w2 - y) ** 2)
    grads = jax.grad(loss)(params)
    return tuple(p - 0.05 * g for p, g in zip(params, grads))
"""
JOB = (
    DEFS
    + f"""
params = init(jax.random.PRNGKey(0))
x, y = jnp.ones((32, 64)), jnp.zeros((32, 10))
for _ in range({STEPS}):
    params = step(params, x, y)
    time.sleep(0.03)  # a GPU's step time: long enough for the watch's rows
jax.block_until_ready(params)
print("own count: {STEPS} steps")
"""
)


def busy(n):
    return {"gpu_util_pct": 100.0, "sm_active_pct": 60.0, "tensor_active_pct": 20.0, "power_w": 300.0}


@pytest.fixture(scope="module")
def watched(tmp_path_factory):
    out = tmp_path_factory.mktemp("jax") / "run"
    script = out.parent / "job.py"
    script.write_text(textwrap.dedent(JOB))
    saved = {k: os.environ.get(k) for k in ("PYTHONPATH", "JAX_PLATFORMS")}
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), saved["PYTHONPATH"]]))
    os.environ["JAX_PLATFORMS"] = "cpu"
    try:
        opts = WatchOptions(
            out, [GPU], {"name": GPU.name}, RecordingConfig(interval_s=0.05, sources=[FakeSource(busy)])
        )
        code, w = watch.run(opts, [sys.executable, str(script)])
    finally:
        for k, v in saved.items():
            os.environ.pop(k, None) if v is None else os.environ.__setitem__(k, v)
    return code, w, out


def expected_flops():
    ns = {}
    exec(DEFS, ns)

    def spec(*shape):
        return jax.ShapeDtypeStruct(shape, jax.numpy.float32)

    return ns["step"].lower((spec(64, 128), spec(128, 10)), spec(32, 64), spec(32, 10)).cost_analysis()["flops"]


def test_a_jax_loop_gets_its_steps_and_xlas_flops_with_no_code_change(watched):
    code, w, out = watched
    assert code == 0
    manifest, _, summary = load_run(out)
    (process,) = manifest["auto"]["processes"]
    assert process["steps"] == STEPS and process["kept"]  # the loop's own count: the init is no step
    stepped = [r for r in summary if r.get("kind") == "phase" and r.get("steps_source")]
    assert stepped and all(r["steps_source"] == "jit" and r["flops_source"] == "xla cost" for r in stepped)
    flops = expected_flops()
    assert flops > 2 * 32 * 64 * 128  # the first layer's product, forward alone
    assert all(r["step_clock"] == "host" for r in stepped)  # stamped at dispatch, and the row says so
    said = " ".join(r["provenance"] for r in stepped)
    assert "jitted step function" in said and "XLA's cost analysis" in said
    steady = [r for r in stepped if r["phase"] == "train"]
    assert steady and all(20 < r["steps_per_s"] < 34 for r in steady)  # about one step each 30 ms
    # each line of marks sums its steps' FLOPs to six digits
    assert all(r["flops_per_step"] == pytest.approx(flops, rel=1e-5) for r in steady)
