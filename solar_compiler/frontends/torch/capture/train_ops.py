"""How a training step is traced where torch's defaults would leave single opaque ops: dropout as a
plain draw, attention on its math path, backward ops decomposed unless a template keeps them whole
(docs/training.md)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import torch


@contextlib.contextmanager
def dropout_as_draw(draws: list[torch.Tensor] | None = None) -> Iterator[None]:
    """`F.dropout` as ``rand_like(x) > p`` times ``x / (1 - p)`` (torch's `native_dropout`
    decomposition, which forward captures use too), so that the draw is one plain `rand_like` node
    of the step, the mask multiplies in backward, and the eager reference (which passes `draws`)
    records each draw in order for validation to feed."""
    saved = torch.nn.functional.dropout

    def dropout(x, p=0.5, training=True, inplace=False):
        if not training or p == 0:
            return x
        u = torch.rand_like(x)
        if draws is not None:
            draws.append(u.detach().clone())
        return (u > p) * x * (1.0 / (1.0 - p))

    torch.nn.functional.dropout = dropout
    try:
        yield
    finally:
        torch.nn.functional.dropout = saved


def attention_backend():
    """`scaled_dot_product_attention` of a training step on torch's math path (matmuls and a
    softmax, each with a template), not the fused CPU variant, though both have templates: the fused
    backward saves only the row log-sum-exps and recomputes the scores (five contractions of the
    forward's size), while the math path's backward reads the saved probabilities (four: dV, dP, dQ,
    dK). The fused bound keeps intermediates on chip, so the four-contraction step is the lower
    bound on every implementation's arithmetic; the recomputation is a choice of the flash kernels
    that trades FLOPs for traffic (docs/training.md)."""
    from torch.nn.attention import SDPBackend, sdpa_kernel

    return sdpa_kernel(SDPBackend.MATH)


def _convolution_backward(grad_out, x, weight, bias_sizes, stride, padding, dilation, transposed,
                          output_padding, groups, output_mask):
    """``aten.convolution_backward`` of an ungrouped, untransposed convolution in terms of
    convolutions, for as long as the op has no template (torch has no decomposition of it): the
    input gradient is the transposed convolution of the output gradient with the weight; the weight
    gradient is a convolution of the input (channels as batch) with the output gradient (batch as
    input channels), stride and dilation swapped, cut to the kernel's extent (narrow-needed prunes
    what the cut leaves unused); the bias gradient sums the output gradient. Each is the eager
    kernel's product, so the matrix FLOPs are those of the forward convolution."""
    if transposed or groups != 1:
        return NotImplemented
    conv = torch.ops.aten.convolution.default
    nd = weight.dim() - 2
    gi = gw = gb = None
    if output_mask[0]:
        out_pad = [x.shape[2 + d] - ((grad_out.shape[2 + d] - 1) * stride[d] - 2 * padding[d]
                                     + dilation[d] * (weight.shape[2 + d] - 1) + 1) for d in range(nd)]
        gi = conv(grad_out, weight, None, stride, padding, dilation, True, out_pad, 1)
    if output_mask[1]:
        perm = [1, 0, *range(2, 2 + nd)]
        full = conv(x.permute(perm), grad_out.permute(perm), None, dilation, padding, stride, False,
                    [0] * nd, 1)  # [C_in, C_out, k'...], k' >= k
        for d in range(nd):
            full = torch.ops.aten.slice.Tensor(full, 2 + d, 0, weight.shape[2 + d])
        gw = full.permute(perm)
    if output_mask[2]:
        gb = grad_out.sum([0, *range(2, 2 + nd)])
    return gi, gw, gb


def backward_table() -> dict:
    """torch's own decompositions of backward ops that export's table leaves out
    (`max_pool2d_with_indices_backward`, ...): a training step decomposes every backward op that
    has no template."""
    from torch._decomp import decomposition_table

    return {op: fn for op, fn in decomposition_table.items() if "backward" in str(op)}


#: Decompositions of backward ops torch leaves whole, used while no template keeps them whole.
BACKWARD_DECOMPOSITIONS = {torch.ops.aten.convolution_backward.default: _convolution_backward}


def kept_backward(op) -> bool:
    """Whether `op` is a backward op with a template, kept whole rather than decomposed."""
    from solar_compiler.frontends.torch.registry import lookup

    name = str(op)
    return "backward" in name and lookup(name) is not None
