"""The work of a step, counted: count_flops, the FLOPs one call of a function does, by PaLM's convention
(model FLOPs) and as the kernels run them (hardware FLOPs), from PyTorch's FLOP counter; weight_bytes, the
bytes of a model's weights that a decode step reads."""

from __future__ import annotations

from contextlib import contextmanager

# Which count a watch's marks carry as hardware FLOPs, recorded in its manifest (flop_count_version): 1, or
# no field at all, count_flops as it was before it counted what the kernels run: its .hardware took causal
# attention's whole T x T score matrix, of which the kernels run the lower half (and marks older still carry
# only that count); 2, what the kernels run (count_flops below); 3, the same with gpubench's own formulas
# where PyTorch's counter is wrong or silent (gpubench.inside.formulas): version 2 counted a grouped or
# depthwise convolution's backward `groups` times too large and matrix-vector products, addbmm and grouped
# products as 0. The model count (PaLM's) is the same in 1 and 2. A summary gives HFU, and holds it to the
# tensor ceiling, for marks of version 2 and later: version 2 differs from 3 only for jobs with grouped
# convolutions or those products (no committed run has any), and its HFU is kept for the rest.
FLOP_COUNT_VERSION = 3
HARDWARE_SINCE = 2


def hardware_known(manifest: dict) -> bool:
    """Whether a watch's marks carry hardware FLOPs as the kernels run them (HFU may be given)."""
    version = manifest.get("flop_count_version", 1)
    return isinstance(version, int) and not isinstance(version, bool) and version >= HARDWARE_SINCE


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

    Counted (a multiply-add is 2 FLOPs): matrix products (mm, addmm, bmm, baddbmm, addbmm, linear, mv,
    grouped products), convolutions (grouped, depthwise and transposed) and scaled_dot_product_attention
    (grouped KV heads too), forward and, where `fn` calls backward(), backward; where PyTorch's counter is
    wrong or silent gpubench's own formulas count (gpubench.inside.formulas: a grouped convolution's
    backward, the products it leaves out, and on the CPU the attention kernel). Not counted: elementwise operations
    (activations, residual adds, dropout), normalisations, softmax and reductions outside attention, the
    loss, optimizer updates, communication. For a transformer these are a few percent of the total.

    Two conventions come back. The value itself is the model FLOPs as PaLM defines them (Chowdhery et al.
    2022, appendix B): the forward pass's FLOPs, and twice them again where a backward pass ran (a product's
    gradients with respect to its input and its weights each cost what the product did); attention counts
    its whole score matrix, T x T, even where a causal mask lets a kernel skip half of it, as PaLM's
    12·L·H·Q·T does. `.hardware` is what the kernels run: causal attention over the scores the mask keeps
    (the lower triangle, T(T+1)/2 of T x T; the masked half of the tiles on the diagonal, which a kernel
    computes and throws away, is not counted), forward and backward alike, with the scores flash attention
    recomputes in backward and activation checkpointing's second forward counted again. Causal attention
    therefore runs fewer FLOPs than PaLM's convention counts: HFU can be below MFU. A backward over layers
    whose weights are frozen does less than twice the forward: there the model count is the forward plus
    what ran in backward, never more than what ran.

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
    left on top): gpubench.inside.onestep counts a training step from one optimizer step to the next so.
    """
    import torch
    from torch.utils import flop_counter
    from torch.utils._python_dispatch import TorchDispatchMode

    from .formulas import corrected

    aten = torch.ops.aten

    def heads(kv, q):  # grouped KV heads: attention's arithmetic runs over every query head
        return (*kv[:1], q[1], *kv[2:])

    skipped = [0]  # FLOPs the model count has and the kernels skip: the masked half of causal attention

    def causal(args, kwargs, at: int | None, q, k) -> float:
        """The share of the score matrix a causal kernel computes (1 without the mask)."""
        on = kwargs.get("is_causal", args[at] if at is not None and at < len(args) else False)
        if on is not True:
            return 1.0
        lq, lk = q[-2], k[-2]  # PyTorch's causal mask is the lower triangle from the top left
        kept = lq * (lq + 1) / 2 if lq <= lk else lk * (lk + 1) / 2 + (lq - lk) * lk
        return kept / (lq * lk) if lq * lk else 1.0

    def formulas(at: int | None, backward: bool):
        def count(*args, **kwargs):
            q, k, v = args[1:4] if backward else args[:3]
            full = (
                flop_counter.sdpa_backward_flop_count(args[0], q, heads(k, q), heads(v, q))
                if backward
                else flop_counter.sdpa_flop_count(q, heads(k, q), heads(v, q))
            )
            skipped[0] += full * (1.0 - causal(args, kwargs, at, q, k))
            return full

        return count

    # every attention kernel PyTorch may pick, by the same formulas, so that grouped KV heads count on any
    # PyTorch release; on the CPU, the kernel PyTorch's counter leaves out is counted too
    kernels = (
        "_scaled_dot_product_flash_attention",
        "_scaled_dot_product_efficient_attention",
        "_scaled_dot_product_cudnn_attention",
        "_scaled_dot_product_flash_attention_for_cpu",
    )
    attention = corrected()  # PyTorch's faults, set right first; attention's formulas below
    for name in kernels:
        for op, backward in ((getattr(aten, name, None), False), (getattr(aten, f"{name}_backward", None), True)):
            if op is not None:
                names = [a.name for a in op.default._schema.arguments]
                attention[op] = formulas(names.index("is_causal") if "is_causal" in names else None, backward)
    split = {"forward": 0, "backward": 0}

    class Passes(TorchDispatchMode):
        """Which pass each counted FLOP came from: the autograd engine runs backward, and in it alone
        torch._C._current_graph_task_id() names a graph task."""

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            before = counter.get_total_flops()
            out = func(*args, **(kwargs or {}))
            split["backward" if torch._C._current_graph_task_id() != -1 else "forward"] += (
                counter.get_total_flops() - before
            )
            return out

    def result() -> FlopCount:
        hardware = int(round(counter.get_total_flops() - skipped[0]))
        forward, backward = split["forward"], split["backward"]
        model = forward + min(backward, 2 * forward)
        return FlopCount(model, hardware)

    with flop_counter.FlopCounterMode(display=False, custom_mapping=attention) as counter, Passes():
        result.counter, result.split = counter, split
        yield result


def weight_bytes(model, tokens: int | None = None) -> int:
    """The bytes of a module's weights that one step over `tokens` tokens reads, each tensor counted once
    (tied weights too), as they lie in memory.

    A decode step reads every weight of its matrix products once, so they are most of what it must move:
    its bytes for gpubench.step(bytes=...) are these, plus the KV cache it reads (the positions written so
    far), plus what it writes (the new keys and values, the logits); at batch 1 the step can go no faster
    than these bytes over the memory bandwidth. An embedding table that is only looked up is read one row a
    token: `tokens` rows of it count (the whole table where tokens is None); one tied to the output layer is
    a matrix product's weight, read whole.
    """
    import torch

    owners: dict[int, list] = {}  # each tensor, and the modules that hold it as their own parameter
    for module in model.modules():
        for p in module.parameters(recurse=False):
            owners.setdefault(id(p), []).append(module)
    total = 0
    for p in {id(p): p for p in model.parameters()}.values():
        full = p.numel() * p.element_size()
        gathered = all(isinstance(m, (torch.nn.Embedding, torch.nn.EmbeddingBag)) for m in owners.get(id(p), []))
        if tokens is not None and gathered and owners.get(id(p)) and p.dim() == 2:
            total += min(int(tokens), p.shape[0]) * p.shape[1] * p.element_size()
        else:
            total += full
    return total
