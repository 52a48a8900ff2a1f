"""FLOP formulas of gpubench's own, for the operators torch.utils.flop_counter counts wrong or not at all.

Each takes the operator's arguments with tensors replaced by their shapes (the counter's shape_wrapper) and
returns FLOPs, a multiply-add being 2. What PyTorch 2.13 does with them, measured on the CPU:
- convolution_backward: the weight gradient is counted as if the convolution had no groups, `groups`
  times too many; a 7x7 depthwise convolution over 96 channels read 97 times its forward, not 2 times.
  A transposed convolution's weight gradient has the same fault. Here each gradient the backward computes
  (input, weight) costs exactly its forward: every multiply of the forward (one output, one tap, one input
  channel of the group) appears once in each.
- mv, addmv, dot, vdot, addbmm, _grouped_mm (mixture-of-experts layers), _scaled_grouped_mm: no formula, so
  counted as 0.
The forward convolution, transposed or not, grouped or not, torch counts right (its weight's shape holds
C/groups), and its formula is reused for the backward.
"""

from __future__ import annotations

from math import prod


def conv_backward(
    grad_out,
    x,
    w,
    _bias,
    _stride,
    _padding,
    _dilation,
    transposed,
    _output_padding,
    _groups,
    output_mask,
    *args,
    out_shape=None,
    **kwargs,
) -> int:
    """Input gradient and weight gradient, each what the forward did (whichever of them was asked for)."""
    from torch.utils.flop_counter import conv_flop_count

    forward = conv_flop_count(list(x), list(w), list(grad_out), transposed=bool(transposed))
    return forward * (int(bool(output_mask[0])) + int(bool(output_mask[1])))


def mv(mat, vec, *args, out_shape=None, **kwargs) -> int:
    return 2 * mat[0] * mat[1]


def addmv(_self, mat, vec, *args, out_shape=None, **kwargs) -> int:
    return 2 * mat[0] * mat[1]


def dot(a, b, *args, out_shape=None, **kwargs) -> int:
    return 2 * a[0]


def addbmm(_self, batch1, batch2, *args, out_shape=None, **kwargs) -> int:
    """A batch of products summed into one matrix: the products' work (the sum over the batch is adds that
    the multiply-adds already carry)."""
    b, m, k = batch1
    return 2 * b * m * k * batch2[-1]


def grouped_mm(a, b, *args, out_shape=None, **kwargs) -> int:
    """torch._grouped_mm and its scaled form: products of groups split by `offs` (or a batch, with none).

    Two 2-D operands split the contraction (each group a slice of K): every multiply of a 2-D product over
    the whole K runs once. Otherwise each output element is one product over K, the last dimension of `a`.
    The groups are counted as the shapes give them: rows that `offs` leaves to no group count too (reading
    offs would wait for the GPU).
    """
    if len(a) == 2 and len(b) == 2:
        return 2 * a[0] * a[1] * b[1]
    return 2 * prod(out_shape) * a[-1]


def corrected() -> dict:
    """The operators and gpubench's formulas for them, for FlopCounterMode's custom_mapping; operators this
    PyTorch lacks are left out."""
    import torch

    aten = torch.ops.aten
    table = {
        "convolution_backward": conv_backward,
        "mv": mv,
        "addmv": addmv,
        "dot": dot,
        "vdot": dot,
        "addbmm": addbmm,
        "_grouped_mm": grouped_mm,
        "_scaled_grouped_mm": grouped_mm,
    }
    return {getattr(aten, name): f for name, f in table.items() if hasattr(aten, name)}
