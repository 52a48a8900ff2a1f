"""count_flops against analytic counts, where PyTorch's own counter is wrong or silent (gpubench.inside.formulas):
grouped, depthwise and transposed convolutions forward and backward, causal attention's masked half, and the
products PyTorch counts as 0. Each count is held to a closed form and, where one exists, to the same work
done by operations PyTorch counts right (a grouped convolution as `groups` convolutions, a grouped product as
its groups' products)."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
F = torch.nn.functional

from gpubench import count_flops  # noqa: E402
from gpubench.inside.flops import FLOP_COUNT_VERSION, hardware_known  # noqa: E402


def grad(*shape):
    return torch.randn(*shape, requires_grad=True)


@pytest.mark.parametrize(
    "groups, cin, cout, k, stride",
    [(96, 96, 96, 7, 1), (4, 32, 64, 3, 2), (1, 8, 16, 3, 1)],
    ids=["depthwise", "grouped", "dense"],
)
def test_a_convolutions_backward_costs_twice_its_forward_whatever_its_groups(groups, cin, cout, k, stride):
    n, h = 2, 14
    x, w = grad(n, cin, h, h), grad(cout, cin // groups, k, k)
    out = (h + 2 * (k // 2) - k) // stride + 1
    forward = 2 * n * cout * out * out * k * k * (cin // groups)  # each output: k*k taps over its group's inputs
    counted = count_flops(lambda: F.conv2d(x, w, stride=stride, padding=k // 2, groups=groups).sum().backward())
    assert counted.hardware == counted == 3 * forward  # PyTorch 2.13 alone: (2 + groups) * forward
    frozen = count_flops(lambda: F.conv2d(x.detach(), w, stride=stride, padding=k // 2, groups=groups).sum().backward())
    assert frozen.hardware == 2 * forward  # no input gradient asked for: the weight gradient alone


def test_a_grouped_convolution_counts_what_its_groups_count_as_plain_convolutions():
    x, w = grad(2, 32, 10, 10), grad(64, 8, 3, 3)
    whole = count_flops(lambda: F.conv2d(x, w, padding=1, dilation=1, groups=4).sum().backward())
    xs, ws = x.detach().chunk(4, 1), w.detach().chunk(4, 0)
    parts = [
        count_flops(lambda a=a.requires_grad_(), b=b.requires_grad_(): F.conv2d(a, b, padding=1).sum().backward())
        for a, b in zip(xs, ws)
    ]
    assert whole.hardware == sum(p.hardware for p in parts) and whole == sum(parts)


@pytest.mark.parametrize("groups", [1, 4])
def test_a_transposed_convolution_counts_each_input_times_its_taps_forward_and_twice_that_backward(groups):
    n, cin, cout, h, k = 2, 32, 16, 8, 4
    x, w = grad(n, cin, h, h), grad(cin, cout // groups, k, k)  # a transposed convolution's weight: (in, out/groups)
    forward = 2 * n * h * h * k * k * cin * (cout // groups)  # the adjoint of a convolution from its output's shape
    counted = count_flops(lambda: F.conv_transpose2d(x, w, stride=2, padding=1, groups=groups).sum().backward())
    assert counted.hardware == counted == 3 * forward


def test_causal_attention_counts_the_kept_triangle_as_hardware_and_the_whole_square_as_model_flops():
    b, heads, t, d = 2, 3, 16, 8
    q, k, v = (grad(b, heads, t, d) for _ in range(3))
    full = count_flops(lambda: F.scaled_dot_product_attention(q, k, v).sum().backward())
    causal = count_flops(lambda: F.scaled_dot_product_attention(q, k, v, is_causal=True).sum().backward())
    forward = 2 * (2 * b * heads * t * t * d)  # scores and their product with V
    assert full == causal == 3 * forward  # PaLM's convention takes the mask whole
    # the kernels run the scores, V's product and the backward's five products, the scores recomputed once
    assert full.hardware == 3.5 * forward
    assert causal.hardware == round(3.5 * forward * (t * (t + 1) / 2) / (t * t))  # about half: T(T+1)/2 of T*T


def test_matrix_vector_products_and_addbmm_count_their_multiply_adds():
    a, v, m = torch.randn(8, 16), torch.randn(16), torch.randn(8)
    assert count_flops(torch.mv, a, v).hardware == 2 * 8 * 16
    assert count_flops(torch.addmv, m, a, v).hardware == 2 * 8 * 16
    assert count_flops(torch.dot, v, v).hardware == 2 * 16
    b1, b2 = torch.randn(3, 8, 16), torch.randn(3, 16, 4)
    assert count_flops(torch.addbmm, torch.zeros(8, 4), b1, b2).hardware == count_flops(torch.bmm, b1, b2).hardware


def test_a_grouped_product_counts_what_its_groups_products_count():
    bf = torch.bfloat16
    tokens, experts = torch.randn(64, 32, dtype=bf), torch.randn(4, 32, 16, dtype=bf)
    offs = torch.tensor([16, 32, 48, 64], dtype=torch.int32)
    moe = count_flops(torch.ops.aten._grouped_mm, tokens, experts, offs)
    assert (
        moe.hardware
        == sum(count_flops(torch.mm, tokens[16 * i : 16 * i + 16], experts[i]).hardware for i in range(4))
        == 2 * 64 * 32 * 16
    )
    batch = torch.randn(4, 16, 32, dtype=bf)
    assert (
        count_flops(torch.ops.aten._grouped_mm, batch, experts).hardware
        == count_flops(torch.bmm, batch, experts).hardware
    )
    a, b = torch.randn(16, 64, dtype=bf), torch.randn(64, 32, dtype=bf)  # groups along the contraction
    assert count_flops(torch.ops.aten._grouped_mm, a, b, offs).hardware == count_flops(torch.mm, a, b).hardware


def test_marks_of_the_count_before_these_formulas_still_give_hfu_and_older_ones_do_not():
    assert FLOP_COUNT_VERSION == 3 and hardware_known({"flop_count_version": FLOP_COUNT_VERSION})
    assert hardware_known({"flop_count_version": 2}) and not hardware_known({"flop_count_version": 1})
    assert not hardware_known({}) and not hardware_known({"flop_count_version": True})
