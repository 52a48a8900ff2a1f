"""The work of a step, counted: count_flops, the FLOPs one call of a function does, by PaLM's convention
(model FLOPs) and as they ran (hardware FLOPs), from PyTorch's FLOP counter; weight_bytes, the bytes of a
model's weights, which every decode step reads once."""

from __future__ import annotations

from contextlib import contextmanager


class FlopCount(int):
    """Model FLOPs of one step, as an int (what gpubench.step(flops=...) takes), with `.hardware` beside it:
    every FLOP that ran, recomputation included. MFU divides the first by the peak, HFU the second."""

    hardware: int

    def __new__(cls, model: int, hardware: int):
        self = super().__new__(cls, model)
        self.hardware = hardware
        return self

    @property
    def model(self) -> int:
        return int(self)

    def __repr__(self) -> str:
        return f"FlopCount(model={int(self)}, hardware={self.hardware})"


def count_flops(fn, *args, **kwargs) -> FlopCount:
    """Run `fn(*args, **kwargs)` once under torch.utils.flop_counter.FlopCounterMode; return its FLOPs.

    Counted (a multiply-add is 2 FLOPs): matrix products (mm, addmm, bmm, baddbmm, linear), convolutions
    and scaled_dot_product_attention (grouped KV heads too), forward and, where `fn` calls backward(),
    backward; on the CPU the attention kernel PyTorch's counter leaves out is counted here. Not counted: elementwise operations
    (activations, residual adds, dropout), normalisations, softmax and reductions outside attention, the
    loss, optimizer updates, communication. For a transformer these are a few percent of the total.

    Two conventions come back. The value itself is the model FLOPs as PaLM defines them (Chowdhery et al.
    2022, appendix B): the forward pass's FLOPs, and twice them again where a backward pass ran (a product's
    gradients with respect to its input and its weights each cost what the product did); attention counts
    its whole score matrix, T x T, even where a causal mask lets a kernel skip half of it, as PaLM's
    12·L·H·Q·T does. `.hardware` is everything that ran: the scores flash attention recomputes in backward,
    activation checkpointing's second forward, each counted again. A step with neither has the two equal.
    A backward over layers whose weights are frozen does less than twice the forward: there the model count
    is the forward plus what ran in backward, never more than what ran.

    The call is real: its side effects happen (gradients accumulate; an optimizer step inside `fn` updates
    the weights), so count once, before training, and zero the gradients after. A model compiled with
    torch.compile is counted as its eager module is.
    """
    with counting() as result:
        fn(*args, **kwargs)
    return result()


@contextmanager
def counting():
    """Count what runs inside the block as count_flops counts a call: `with counting() as result: ...`, then
    result() is the FlopCount, and result.counter PyTorch's FlopCounterMode.

    Its modes live on this thread's stack of dispatch modes, so the block may be entered in one call and left
    in another (the context manager's __enter__ and __exit__, by the same thread, with no mode pushed since
    left on top): gpubench.job.onestep counts a training step from one optimizer step to the next so.
    """
    import torch
    from torch.utils import flop_counter
    from torch.utils._python_dispatch import TorchDispatchMode

    aten = torch.ops.aten

    def heads(kv, q):  # grouped KV heads: attention's arithmetic runs over every query head
        return (*kv[:1], q[1], *kv[2:])

    def forward_fn(q, k, v, *_, **__):
        return flop_counter.sdpa_flop_count(q, heads(k, q), heads(v, q))

    def backward_fn(grad, q, k, v, *_, **__):
        return flop_counter.sdpa_backward_flop_count(grad, q, heads(k, q), heads(v, q))

    # every attention kernel PyTorch may pick, by the same formulas, so that grouped KV heads count on any
    # PyTorch release; on the CPU, the kernel PyTorch's counter leaves out is counted too
    kernels = ("_scaled_dot_product_flash_attention", "_scaled_dot_product_efficient_attention",
               "_scaled_dot_product_cudnn_attention", "_scaled_dot_product_flash_attention_for_cpu")
    attention = {}
    for name in kernels:
        for op, formula in ((getattr(aten, name, None), forward_fn), (getattr(aten, f"{name}_backward", None), backward_fn)):
            if op is not None:
                attention[op] = formula
    split = {"forward": 0, "backward": 0}

    class Passes(TorchDispatchMode):
        """Which pass each counted FLOP came from: the autograd engine runs backward, and in it alone
        torch._C._current_graph_task_id() names a graph task."""

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            before = counter.get_total_flops()
            out = func(*args, **(kwargs or {}))
            split["backward" if torch._C._current_graph_task_id() != -1 else "forward"] += (
                counter.get_total_flops() - before)
            return out

    def result() -> FlopCount:
        hardware = int(counter.get_total_flops())
        forward, backward = split["forward"], split["backward"]
        model = forward + min(backward, 2 * forward)
        return FlopCount(model, hardware)

    with flop_counter.FlopCounterMode(display=False, custom_mapping=attention) as counter, Passes():
        result.counter = counter
        yield result


def weight_bytes(model) -> int:
    """The bytes of a module's parameters, each counted once (tied weights too), as they lie in memory.

    A decode step reads them all once, so they are most of what it must move: its bytes for
    gpubench.step(bytes=...) are these, plus the KV cache it reads (the positions written so far), plus
    what it writes (the new keys and values, the logits); at batch 1 the step can go no faster than these
    bytes over the memory bandwidth.
    """
    return sum(p.numel() * p.element_size() for p in model.parameters())
