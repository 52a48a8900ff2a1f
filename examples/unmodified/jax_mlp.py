"""A JAX job that knows nothing of gpubench (nor of PyTorch): a deep MLP of large bf16 matrix products
trained with plain SGD under jax.jit, on synthetic data.

    gpubench watch -- python examples/unmodified/jax_mlp.py --seconds 10

Watched, it has no optimizer step for gpubench to count: its phases come from what its GPU did, and only
the tensor pipes' activity bounds its work. It prints its own count for comparison: the FLOPs XLA's cost
analysis gives one compiled step, at its steady rate on the host clock (the last half of its steps, each
waited for).
"""

import argparse
import statistics
import time

import jax
import jax.numpy as jnp


def main():
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--seconds", type=float, default=10.0)
    p.add_argument("--width", type=int, default=8192)
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--batch", type=int, default=8192)
    p.add_argument("--tiny", action="store_true", help="small enough for a CPU (a smoke test)")
    args = p.parse_args()
    width, batch = (128, 64) if args.tiny else (args.width, args.batch)
    keys = jax.random.split(jax.random.PRNGKey(0), args.layers + 1)
    params = [jax.random.normal(k, (width, width), jnp.bfloat16) * width ** -0.5 for k in keys[1:]]
    x = jax.random.normal(keys[0], (batch, width), jnp.bfloat16)

    def loss(params, x):
        for w in params:
            x = jax.nn.gelu(x @ w)
        return jnp.mean(jnp.square(x.astype(jnp.float32)))

    @jax.jit
    def step(params, x):
        grads = jax.grad(loss)(params, x)
        return [w - 1e-3 * g for w, g in zip(params, grads)]

    compiled = step.lower(params, x).compile()
    cost = compiled.cost_analysis()
    cost = cost[0] if isinstance(cost, (list, tuple)) else cost
    flops = float(cost.get("flops", float("nan")))
    ends, t0 = [], time.perf_counter()
    while time.perf_counter() - t0 < args.seconds:
        params = compiled(params, x)
        jax.block_until_ready(params)
        ends.append(time.perf_counter())
    half = ends[len(ends) // 2:]
    rate = 1.0 / statistics.median(b - a for a, b in zip(half, half[1:])) if len(half) > 2 else float("nan")
    print(f"own count: {flops:.6g} FLOPs a step by XLA's cost analysis; {rate:.6g} steps/s on the host clock over "
          f"the last half of its {len(ends)} steps", flush=True)


if __name__ == "__main__":
    main()
