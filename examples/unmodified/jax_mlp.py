"""A JAX job that knows nothing of gpubench (nor of PyTorch): a deep MLP of large bf16 matrix products
trained with plain SGD under jax.jit, on synthetic data.

    gpubench watch -- python examples/unmodified/jax_mlp.py --seconds 10

Watched, each call of its jitted step is a step and carries the FLOPs of XLA's cost analysis of that
function, found with no help from it (docs/watch.md, "A JAX job"). It runs as training loops do: it never
waits for a step it dispatched but every --sync-every steps, as a loop that logs its loss waits for the
loss. It prints its own count for comparison: the FLOPs of its matrix products in one step (step_flops),
every call of its step (the first, which compiles, included), and its rate from one wait for the device to
another over the last half of its run, on the host clock. Beside them it prints XLA's cost analysis of the
compiled executable: on a CPU it adds the elementwise work to the products (2.61e7 against 2.31e7 with
--tiny); on a GPU it leaves the products out (they run as cuBLAS calls): on an H200, 6.98e9 FLOPs a step,
0.06% of the 1.21e13 its products do.
"""

import argparse
import time


def parse(argv=None):
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--seconds", type=float, default=10.0)
    p.add_argument("--width", type=int, default=8192)
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--batch", type=int, default=8192)
    p.add_argument("--sync-every", type=int, default=10, help="steps between two waits for the device")
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
    params = [jax.random.normal(k, (width, width), jnp.bfloat16) * width**-0.5 for k in keys[1:]]
    x = jax.random.normal(keys[0], (batch, width), jnp.bfloat16)

    def loss(params, x):
        for w in params:
            x = jax.nn.gelu(x @ w)
        return jnp.mean(jnp.square(x.astype(jnp.float32)))

    @jax.jit
    def step(params, x):
        grads = jax.grad(loss)(params, x)
        return [w - 1e-3 * g for w, g in zip(params, grads)]

    params = step(params, x)  # the first call compiles
    calls = 1
    jax.block_until_ready(params)
    waits, t0 = [], time.perf_counter()
    while time.perf_counter() - t0 < args.seconds:
        params = step(params, x)
        calls += 1
        if calls % args.sync_every == 0:
            jax.block_until_ready(params)  # as a loop that logs its loss waits for it, now and then
            waits.append((time.perf_counter(), calls))
    jax.block_until_ready(params)
    half = waits[len(waits) // 2 :]
    rate = (half[-1][1] - half[0][1]) / (half[-1][0] - half[0][0]) if len(half) > 1 else float("nan")
    cost = step.lower(params, x).compile().cost_analysis()  # jax's caches answer: nothing is compiled again
    cost = cost[0] if isinstance(cost, (list, tuple)) else cost
    xla = float((cost or {}).get("flops", float("nan")))
    print(
        f"own count: {step_flops(args):.6g} FLOPs a step in its matrix products (XLA's cost analysis of the "
        f"compiled step: {xla:.6g}); {rate:.6g} steps/s on the host clock between waits for the device over the "
        f"last half of its {calls} steps",
        flush=True,
    )


if __name__ == "__main__":
    main()
