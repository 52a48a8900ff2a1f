"""count_flops: the FLOPs one call of a function does, as PyTorch's FLOP counter sees them."""

from __future__ import annotations


def count_flops(fn, *args, **kwargs) -> int:
    """Run `fn(*args, **kwargs)` once under torch.utils.flop_counter.FlopCounterMode; return its FLOPs.

    Counted (a multiply-add is 2 FLOPs): matrix products (mm, addmm, bmm, baddbmm, linear), convolutions
    and scaled_dot_product_attention, forward and, where `fn` calls backward(), backward; on the CPU the
    attention kernel PyTorch's counter leaves out is counted here. Not counted: elementwise operations
    (activations, residual adds, dropout), normalisations, softmax and reductions outside attention, the
    loss, optimizer updates, communication. For a transformer these are a few percent of the total.

    What runs is what is counted: attention counts its whole score matrix even where a causal mask
    skips half, its backward counts the scores flash attention recomputes, and activation
    checkpointing's recomputed forward counts again. PaLM's model FLOPs count none of these, so for a
    GPT-2-small step of 1024 tokens this count is about 2% above 6 x parameters x tokens + attention.

    The call is real: its side effects happen (gradients accumulate; an optimizer step inside `fn` updates
    the weights), so count once, before training, and zero the gradients after. A function compiled with
    torch.compile is not seen by the counter: count the eager module.
    """
    import torch
    from torch.utils import flop_counter

    aten = torch.ops.aten
    cpu_attention = {
        aten._scaled_dot_product_flash_attention_for_cpu:
            lambda q, k, v, *_, **__: flop_counter.sdpa_flop_count(q, k, v),
        aten._scaled_dot_product_flash_attention_for_cpu_backward:
            lambda grad, q, k, v, *_, **__: flop_counter.sdpa_backward_flop_count(grad, q, k, v),
    }
    with flop_counter.FlopCounterMode(display=False, custom_mapping=cpu_attention) as counter:
        fn(*args, **kwargs)
    return int(counter.get_total_flops())
