"""The broad kernel set of python -m tools.truth.gpu --broad: every kind of tensor-core work a training job runs, so
that the tensor ceiling's rate per active cycle is the highest any of them reaches, not a typical GEMM's.

cuBLAS products of many shapes (square, skinny, small, long K, batched, with a bias), SDPA forward and backward
(causal and not), cuDNN convolutions (dense, 1x1, grouped, depthwise; forward and forward with backward), FP8
through torch._scaled_mm and TF32, each dtype apart. Each kernel's FLOPs are gpubench.count_flops' hardware
count of one call, so that the ceiling is measured in the unit HFU is held to (causal attention counts the
triangle its kernel runs; a convolution's backward gpubench's own formula).

The dry run (tools/truth/fake.py) builds the same set on the CPU with every size divided by `shrink` (16), so
that each kernel's making, counting and timing is exercised where no GPU is; its points measure nothing.
"""

from __future__ import annotations


def _products(torch, dtype, dev="cuda", s=lambda n: n):
    """(label, make) of cuBLAS products; make() returns the call."""

    def mm(m, n, k, bias=False):
        def make():
            m_, n_, k_ = s(m), s(n), s(k)
            a = torch.randn(m_, k_, device=dev, dtype=dtype)
            b = torch.randn(k_, n_, device=dev, dtype=dtype)
            if bias:
                c = torch.randn(n_, device=dev, dtype=dtype)
                return lambda: torch.addmm(c, a, b)
            return lambda: a @ b

        return f"mm {m}x{n}x{k}" + (" +bias" if bias else ""), make

    def bmm(batch, m, n, k):
        def make():
            a = torch.randn(s(batch), s(m), s(k), device=dev, dtype=dtype)
            b = torch.randn(s(batch), s(k), s(n), device=dev, dtype=dtype)
            return lambda: torch.bmm(a, b)

        return f"bmm {batch}x{m}x{n}x{k}", make

    return [
        mm(8192, 8192, 8192),
        mm(4096, 4096, 4096),
        mm(2048, 2048, 2048),
        mm(1024, 1024, 1024),
        mm(512, 512, 512),
        mm(16, 8192, 8192),
        mm(128, 8192, 8192),
        mm(8192, 8192, 128),
        mm(1024, 1024, 65536),
        mm(16384, 14336, 4096),
        mm(16384, 4096, 4096, bias=True),
        bmm(64, 1024, 1024, 1024),
        bmm(256, 512, 512, 64),
        bmm(16, 4096, 4096, 128),
    ]


def _attention(torch, dtype, dev="cuda", s=lambda n: n):
    F = torch.nn.functional

    def sdpa(b, h, t, d, causal, backward):
        def make():
            q, k, v = (
                torch.randn(s(b), s(h), s(t), s(d), device=dev, dtype=dtype, requires_grad=backward) for _ in range(3)
            )
            if not backward:
                return lambda: F.scaled_dot_product_attention(q, k, v, is_causal=causal)
            out = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
            g = torch.randn_like(out)
            return lambda: torch.autograd.grad(out, (q, k, v), g, retain_graph=True)

        return f"sdpa {b}x{h}x{t}x{d}{' causal' if causal else ''} {'backward' if backward else 'forward'}", make

    return [sdpa(4, 32, 4096, 128, c, bw) for bw in (False, True) for c in (False, True)] + [
        sdpa(16, 16, 2048, 64, False, False),
        sdpa(16, 16, 2048, 64, True, True),
    ]


def _convolutions(torch, dtype, dev="cuda", s=lambda n: n):
    F = torch.nn.functional

    def conv(n, cin, cout, hw, k, groups, backward):
        def make():
            # shrunk, a grouped convolution keeps its channels per group (cin // groups), a depthwise one its one
            n_, ci, co, side = s(n), s(cin), s(cout), s(hw)
            g = ci if groups == cin else max(1, ci // (cin // groups))
            x = torch.randn(n_, ci, side, side, device=dev, dtype=dtype).to(memory_format=torch.channels_last)
            w = torch.randn(co, ci // g, k, k, device=dev, dtype=dtype).to(memory_format=torch.channels_last)
            x.requires_grad_(backward)
            w.requires_grad_(backward)
            if not backward:
                return lambda: F.conv2d(x, w, padding=k // 2, groups=g)
            dy = torch.randn(n_, co, side, side, device=dev, dtype=dtype).to(memory_format=torch.channels_last)
            return lambda: torch.autograd.grad(F.conv2d(x, w, padding=k // 2, groups=g), (x, w), dy)

        kind = "depthwise" if groups == cin == cout else f"groups {groups}" if groups > 1 else "dense"
        return (
            f"conv {kind} {k}x{k} {n}x{cin}->{cout}x{hw}x{hw} {'forward+backward' if backward else 'forward'}",
            make,
        )

    return [
        conv(128, 256, 256, 56, 3, 1, False),
        conv(128, 256, 256, 56, 3, 1, True),
        conv(128, 1024, 256, 14, 1, 1, True),
        conv(128, 256, 256, 56, 3, 32, True),
        conv(128, 384, 384, 56, 7, 384, False),
        conv(128, 384, 384, 56, 7, 384, True),
    ]


def _fp8(torch, dev="cuda", s=lambda n: n):
    def scaled(m, n, k):
        def make():
            a = torch.randn(s(m), s(k), device=dev).to(torch.float8_e4m3fn)
            b = torch.randn(s(n), s(k), device=dev).to(torch.float8_e4m3fn).t()  # column-major, as cuBLAS wants
            one = torch.ones((), device=dev)
            return lambda: torch._scaled_mm(a, b, scale_a=one, scale_b=one, out_dtype=torch.bfloat16)

        return f"_scaled_mm e4m3 {m}x{n}x{k}", make

    return [
        scaled(8192, 8192, 8192),
        scaled(4096, 4096, 4096),
        scaled(2048, 2048, 2048),
        scaled(128, 8192, 8192),
        scaled(16384, 14336, 4096),
    ]


def kernels(torch, device: str = "cuda", shrink: int = 1):
    """(label, gpubench dtype, make) of the whole set, in the order they run; labels name the full sizes."""
    on = {"dev": device, "s": lambda n: max(1, n // shrink)}
    out = [
        (f"{label} bf16", "bf16", make)
        for label, make in _products(torch, torch.bfloat16, **on)
        + _attention(torch, torch.bfloat16, **on)
        + _convolutions(torch, torch.bfloat16, **on)
    ]
    fp16 = _products(torch, torch.float16, **on)
    out += [(f"{label} fp16", "fp16", make) for label, make in (fp16[0], fp16[5], fp16[11])]
    out += [(label, "fp8", make) for label, make in _fp8(torch, **on)]
    tf32 = _products(torch, torch.float32, **on)
    out += [(f"{label} tf32", "tf32", make) for label, make in (tf32[0], tf32[2])]
    return out


def broad(dev, say):
    """(label, dtype, (run, FLOPs a call)) of each kernel, its FLOPs counted once by gpubench.count_flops."""
    import gpubench

    torch = dev.torch
    for label, dtype, make in kernels(torch, getattr(dev, "device", "cuda"), getattr(dev, "shrink", 1)):
        torch.backends.cuda.matmul.allow_tf32 = dtype == "tf32"
        try:
            run = make()
            flops = gpubench.count_flops(run).hardware
            dev.release()
        except Exception as err:  # a shape or dtype this GPU or build refuses: said, and the others go on
            say(f"(a) {label} skipped: {type(err).__name__}: {err}")
            continue
        if flops <= 0:
            say(f"(a) {label} skipped: gpubench.count_flops counted no FLOPs")
            continue
        yield label, dtype, (run, float(flops))
        del run
    torch.backends.cuda.matmul.allow_tf32 = False
