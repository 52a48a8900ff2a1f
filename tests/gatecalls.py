"""The gate set's calls (tests/gate_benchmarks/test_gate_set.py times them): each built at a size grown by
--more-work's PCT, checked once against a float64 reference, with its work model for gpu_benchmark; bursts of
--slow-share's calls that do more work; and the FMA chains, in Triton and CuPy, whose float32 steps stay exact.
"""

import functools
import itertools
import time

BURST = 16  # calls in a burst of --slow-share: shorter than a round of the calls timed back to back
PERIOD = 10  # bursts in a cycle: --slow-share=0.4 makes 4 bursts of every 10 do more work
STALL_EVERY, STALL_S = 50, 0.0006  # test_sum_outliers: the host held up longer than a round's lead
HEAVY_EVERY, HEAVY_TIMES = 97, 8  # test_sum_outliers: a call that does 8 times the work now and then
FMA_CHAINS = 4  # independent chains per thread: the FP32 pipes stay busy while each FMA waits on the last
# One block of 256 threads on every other SM: each busy SM's FP32 pipes are full (8 warps of 4 chains), and
# the other half of the GPU idles, so the calls stay clear of the power limit that sways a GEMM's clock.
# 256 threads x 4 chains x ITERS FMAs at 128 a cycle and 1980 MHz: about 1 ms on an H100 or an H200.
FMA_1MS_ITERS = 250_000
FMA_50MS_ITERS = 50 * FMA_1MS_ITERS


class Call:
    """One call of a benchmark at one size: run() launches it, check() compares it with a float64 reference,
    and its work model (FLOPs, useful bytes) for gpu_benchmark."""

    def __init__(self, run, check, flops: float, nbytes: float, unit: str, bound: str, **facts):
        self.run, self.check, self.flops, self.bytes, self.unit, self.bound = run, check, flops, nbytes, unit, bound
        self.facts = facts


def grown(n: int, pct: float, multiple: int = 1) -> int:
    """A size with pct% more work, on a multiple of `multiple`."""
    return max(multiple, round(n * (1 + pct / 100) / multiple) * multiple)


def close(name: str, got, ref, tol: float) -> None:
    import torch

    got, ref = torch.as_tensor(got).double().cpu(), torch.as_tensor(ref).double().cpu()
    err = float((got - ref).norm() / ref.norm())
    assert err <= tol, f"{name}: relative error {err:.3g} > {tol:g}"


def bursts(base, more, share: float):
    """base(), or more() on the calls a share of every PERIOD bursts of BURST calls picks."""
    slow, calls = round(share * PERIOD), itertools.count()

    def call():
        (more if next(calls) // BURST % PERIOD < slow else base)()

    return call


# --- torch -----------------------------------------------------------------------------------------------


def matmul(n: int, pct: float, fp32: bool = False) -> Call:
    from gpubench.kernels import gemm

    m = grown(n, pct, 16)  # more rows: more work in proportion, on sizes the tiles take
    if fp32:
        return matmul_fp32(m, n)
    p = gemm.prepare("torch", m=m, n=n, k=n, dtype="bfloat16")
    return Call(p.run, p.check, p.work.flops, p.work.bytes, p.unit, p.bound, size=f"{m}x{n}x{n} bf16")


def matmul_fp32(m: int, n: int) -> Call:
    """The same product in fp32, TF32 off: cuBLAS runs it on the FP32 pipes, not the tensor cores."""
    import torch

    torch.backends.cuda.matmul.allow_tf32 = False
    g = torch.Generator(device="cuda").manual_seed(0)
    a, b = torch.randn(m, n, device="cuda", generator=g), torch.randn(n, n, device="cuda", generator=g)
    c = torch.full((m, n), float("nan"), device="cuda")
    run = lambda: torch.matmul(a, b, out=c)  # noqa: E731

    def check():
        c.fill_(float("nan"))
        run()
        close("fp32 matmul", c, a.double() @ b.double(), 1e-4)

    return Call(run, check, 2.0 * m * n * n, 4.0 * (m * n + n * n + m * n), "fp32", "compute", size=f"{m}x{n}x{n} fp32")


def torch_sum(n: int, pct: float) -> Call:
    import torch

    n = grown(n, pct, 1024)
    g = torch.Generator(device="cuda").manual_seed(0)
    x = torch.rand(n, device="cuda", generator=g)
    out = torch.full((), float("nan"), device="cuda")
    run = lambda: torch.sum(x, dim=0, out=out)  # noqa: E731

    def check():
        out.fill_(float("nan"))
        run()
        close("torch sum", out, x.double().sum(), 1e-4)

    # one add per element; read n floats, write one
    return Call(run, check, float(n), 4.0 * n + 4, "fp32", "dram", size=f"{n} fp32")


# --- CuPy ------------------------------------------------------------------------------------------------


def cupy_sum(n: int, pct: float, outliers: bool = False) -> Call:
    import cupy as cp

    n = grown(n, pct, 1024)
    x = cp.random.default_rng(0).random(n, dtype=cp.float32)
    out = cp.full((), cp.nan, dtype=cp.float32)
    calls = itertools.count(1)

    def run():
        k = next(calls)
        if outliers and k % STALL_EVERY == 0:
            time.sleep(STALL_S)  # the host held up (a thread holding the GIL, the OS): a round the GPU waits in
        for _ in range(HEAVY_TIMES if outliers and k % HEAVY_EVERY == 0 else 1):
            cp.sum(x, out=out)

    def check():
        out.fill(cp.nan)
        cp.sum(x, out=out)
        # float32 sums of up to 2^27 floats, as CuPy blocks them: a few 1e-6 off the float64 sum
        close("cupy sum", cp.asnumpy(out), float(x.astype(cp.float64).sum()), 1e-4)

    facts = {"size": f"{n} fp32"}
    if outliers:
        facts["outliers"] = (
            f"the host held up {STALL_S * 1e3:g} ms every {STALL_EVERY}th call; {HEAVY_TIMES}x the "
            f"work every {HEAVY_EVERY}th"
        )
    return Call(run, check, float(n), 4.0 * n + 4, "fp32", "dram", **facts)


def saxpy(n: int, pct: float) -> Call:
    import cupy as cp

    n = grown(n, pct, 1024)
    kernel = cp.ElementwiseKernel("float32 a, float32 x, float32 y", "float32 z", "z = a * x + y", "gate_saxpy")
    rng = cp.random.default_rng(0)
    x, y = rng.random(n, dtype=cp.float32), rng.random(n, dtype=cp.float32)
    z = cp.full(n, cp.nan, dtype=cp.float32)
    a = cp.float32(1.5)
    run = lambda: kernel(a, x, y, z)  # noqa: E731

    def check():
        z.fill(cp.nan)
        run()
        sample = slice(0, n, 4099)  # a float64 reference of a strided sample: all of it would be 1 GiB more
        ref = 1.5 * cp.asnumpy(x[sample]).astype("float64") + cp.asnumpy(y[sample]).astype("float64")
        close("saxpy", cp.asnumpy(z[sample]), ref, 1e-6)

    # two FLOPs per element; read x and y, write z
    return Call(run, check, 2.0 * n, 12.0 * n, "fp32", "dram", size=f"{n} fp32")


# --- FMA chains: compute-bound, Triton and CuPy ----------------------------------------------------------

# a -> a * 1 + 2^-16 from inputs that are multiples of 2^-16 in (0, 1]: every value the chains reach is a multiple
# of 2^-16 below 2^8, which float32's 24 bits hold exactly, so the kernel's float32 chain is the float64 one
# (tests/gate/test_bench_baseline_script.py runs it in float32 to show it) and the reference is a0 + iters * 2^-16; a
# kernel that ran another number of steps ends elsewhere, and the check fails it. A chain that approaches a fixed
# point does not serve: in float32 it stops moving once a step is under half a unit in the last place (a -> a (1 -
# 2^-19) + 10 * 2^-19 stopped at 9.75 of its 10 on the H100), and a fixed point closer than the check's tolerance
# is reached in a few thousand steps, after which any number of steps passes.
FMA_B, FMA_C = 1.0, 2.0**-16
FMA_MAX_ITERS = 2**24 - 2**16  # the most steps that stay exact from an input of 1: 1 + steps * 2^-16 <= 2^8


def fma_inputs(n: int, device):
    """n seeded inputs, multiples of FMA_C in (0, 1] (never zero)."""
    import torch

    g = torch.Generator(device=device).manual_seed(0)
    steps = torch.randint(1, int(1 / FMA_C) + 1, (n,), device=device, generator=g)
    return steps.float() * FMA_C


def fma_reference(a0, iters: int):
    """a after `iters` steps of a * FMA_B + FMA_C, in float64 (with FMA_B = 1: a0 + iters * FMA_C)."""
    return a0 * FMA_B**iters + FMA_C * iters


def fma_work(threads: int, iters: int) -> tuple[float, float]:
    # two FLOPs per FMA, FMA_CHAINS chains of `iters` per thread; read one float and write one per chain
    return 2.0 * FMA_CHAINS * iters * threads, 8.0 * FMA_CHAINS * threads


CUDA_FMA = r"""
extern "C" __global__ void gate_fma(const float* x, float* out, long long iters, float b, float c) {
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    float a0 = x[4 * i], a1 = x[4 * i + 1], a2 = x[4 * i + 2], a3 = x[4 * i + 3];
    for (long long k = 0; k < iters; ++k) {
        a0 = fmaf(a0, b, c); a1 = fmaf(a1, b, c); a2 = fmaf(a2, b, c); a3 = fmaf(a3, b, c);
    }
    out[4 * i] = a0; out[4 * i + 1] = a1; out[4 * i + 2] = a2; out[4 * i + 3] = a3;
}
"""


@functools.cache
def triton_fma_kernel():
    import triton
    import triton.language as tl

    @triton.jit
    def gate_fma(x_ptr, out_ptr, iters, b, c, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK * 4 + tl.arange(0, BLOCK) * 4
        a0, a1 = tl.load(x_ptr + offs), tl.load(x_ptr + offs + 1)
        a2, a3 = tl.load(x_ptr + offs + 2), tl.load(x_ptr + offs + 3)
        for _ in range(iters):
            a0, a1, a2, a3 = a0 * b + c, a1 * b + c, a2 * b + c, a3 * b + c
        tl.store(out_ptr + offs, a0)
        tl.store(out_ptr + offs + 1, a1)
        tl.store(out_ptr + offs + 2, a2)
        tl.store(out_ptr + offs + 3, a3)

    return gate_fma


def fma(
    impl: str,
    iters: int,
    pct: float,
    blocks: int | None = None,
    block: int = 256,
    device="cuda",
    steps: int | None = None,
) -> Call:
    """FMA chains of `iters` steps, 4 per thread, on blocks of `block` threads (one on every other SM by
    default). steps: what the kernel is told to run instead, a deliberately wrong kernel for the check to catch."""
    import torch

    from gpubench.kernels.common import sm_count

    iters = grown(iters, pct)
    if iters > FMA_MAX_ITERS:
        raise ValueError(f"FMA chains of {iters} steps leave float32's exact range (at most {FMA_MAX_ITERS})")
    ran = iters if steps is None else steps
    blocks = blocks or max(1, sm_count() // 2)
    threads = blocks * block
    x = fma_inputs(FMA_CHAINS * threads, device)
    out = torch.full_like(x, float("nan"))
    if impl == "triton":
        kernel = triton_fma_kernel()
        run = lambda: kernel[(blocks,)](x, out, ran, FMA_B, FMA_C, BLOCK=block, num_warps=block // 32)  # noqa: E731
    else:
        from gpubench.kernels.common import cupy, raw_kernel

        cp = cupy()
        xc, oc = cp.from_dlpack(x), cp.from_dlpack(out)
        kernel = raw_kernel(CUDA_FMA, "gate_fma")
        args = (xc, oc, cp.int64(ran), cp.float32(FMA_B), cp.float32(FMA_C))
        run = lambda: kernel((blocks,), (block,), args)  # noqa: E731

    def check():
        out.fill_(float("nan"))
        run()
        close(f"{impl} fma", out, fma_reference(x.double(), iters), 1e-3)

    flops, nbytes = fma_work(threads, iters)
    return Call(
        run, check, flops, nbytes, "fp32", "compute", size=f"{threads} threads x {FMA_CHAINS} chains x {iters} FMAs"
    )


# --- Triton ----------------------------------------------------------------------------------------------


def softmax(m: int, n: int, pct: float) -> Call:
    from gpubench.kernels import softmax as family

    m = grown(m, pct)
    p = family.prepare("triton-fused", m=m, n=n)
    return Call(p.run, p.check, p.work.flops, p.work.bytes, p.unit, p.bound, size=f"{m}x{n} fp32")
