"""A JAX job that knows nothing of gpubench (nor of PyTorch): a deep MLP of large bf16 matrix products
trained with plain SGD under jax.jit, on synthetic data.

    gpubench watch -- python examples/unmodified/jax_mlp.py --seconds 10

Watched, it has no optimizer step for gpubench to count: its phases come from what its GPU did, and only
the tensor pipes' activity bounds its work. It prints its own count for comparison: the FLOPs of its
matrix products in one step (step_flops), at its steady rate on the host clock (the last half of its
steps, each waited for), and XLA's cost analysis of the compiled step beside it. On a CPU the two agree
(the analysis adds the elementwise work: 2.61e7 against 2.31e7 with --tiny); on a GPU the analysis leaves
the matrix products out (they run as library calls): on an H200 it gave 6.98e9 FLOPs a step, 0.06% of the
1.21e13 its products do.
"""

import argparse
import statistics
import time


def parse(argv=None):
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--seconds", type=float, default=10.0)
    p.add_argument("--width", type=int, default=8192)
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--batch", type=int, default=8192)
    p.add_argument("--tiny", action="store_true", help="small enough for a CPU (a smoke test)")
    return p.parse_args(argv)


def sizes(args) -> tuple[int, int]:
    return (128, 64) if args.tiny else (args.width, args.batch)


def step_flops(args) -> float:
    """One step's matrix products: `layers` forward, as many weight gradients and one input gradient fewer
    (the data needs none), each batch x width by width x width: 2 * batch * width^2 FLOPs. The GELUs, the
    loss and the update are left out, as PaLM's convention leaves them out (at the default sizes, less than
    the 6.98e9 that XLA's cost analysis counted on a GPU: 0.06%)."""
    width, batch = sizes(args)
    return (3 * args.layers - 1) * 2.0 * batch * width * width


def main(argv=None):
    import jax
    import jax.numpy as jnp

    args = parse(argv)
    width, batch = sizes(args)
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
    xla = float((cost or {}).get("flops", float("nan")))
    ends, t0 = [], time.perf_counter()
    while time.perf_counter() - t0 < args.seconds:
        params = compiled(params, x)
        jax.block_until_ready(params)
        ends.append(time.perf_counter())
    half = ends[len(ends) // 2:]
    rate = 1.0 / statistics.median(b - a for a, b in zip(half, half[1:])) if len(half) > 2 else float("nan")
    print(f"own count: {step_flops(args):.6g} FLOPs a step in its matrix products (XLA's cost analysis: {xla:.6g}); "
          f"{rate:.6g} steps/s on the host clock over the last half of its {len(ends)} steps", flush=True)


if __name__ == "__main__":
    main()
