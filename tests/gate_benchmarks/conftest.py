"""The gate set's own option: --slowdown=KIND changes how its calls do the same work, the regressions whose
verdict line must name the counter that moved (tools/gate/effort.py runs them on a GPU)."""

SLOWDOWNS = {
    "fp32": "the bf16 matmuls run in fp32, on the FP32 pipes instead of the tensor cores",
    "grid": "the FMA chains of about 1 ms run on half the blocks, each doing twice the steps",
}


def pytest_addoption(parser):
    parser.addoption(
        "--slowdown",
        choices=sorted(SLOWDOWNS),
        default=None,
        help="gate benchmarks: " + "; ".join(f"{k}: {v}" for k, v in SLOWDOWNS.items()),
    )
