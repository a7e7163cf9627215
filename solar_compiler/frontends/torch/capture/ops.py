"""Which ATen ops the capture keeps whole, how it decomposes the others, and how it classifies an
op (random, view, in-place, identity), the same way for both capture methods."""

from __future__ import annotations

import functools

import torch
from torch._decomp import decomposition_table
from torch._export.utils import _special_op_to_preserve_cia
from torch.export.exported_program import _split_decomp_table_to_cia_and_python_decomp

aten = torch.ops.aten

#: High-level ops kept as one node (removed from the Core ATen decomposition table).  Ops that
#: are already Core ATen (convolution, _native_batch_norm_legit*, native_layer_norm,
#: native_group_norm, _softmax, _log_softmax, gelu, cumsum, embedding, avg_pool2d,
#: _adaptive_avg_pool2d, mm, bmm, addmm, ...) survive anyway.
KEEP_UNDECOMPOSED: tuple[str, ...] = (
    "scaled_dot_product_attention.default",
    "lstm.input",
    "lstm.data",
    "gru.input",
    "gru.data",
    "rnn_tanh.input",
    "rnn_tanh.data",
    "rnn_relu.input",
    "rnn_relu.data",
    "lstm_cell.default",
    "gru_cell.default",
    "rnn_tanh_cell.default",
    "rnn_relu_cell.default",
    "layer_norm.default",
    "group_norm.default",
    "softmax.int",
    "log_softmax.int",
    "silu.default",
    "mish.default",
    "hardswish.default",
    "hardsigmoid.default",
    "logsumexp.default",
    "max_pool1d.default",
    "max_pool2d.default",
    "max_pool3d.default",
    "avg_pool1d.default",
    "adaptive_avg_pool1d.default",
    "adaptive_avg_pool2d.default",
    "adaptive_avg_pool3d.default",
    "adaptive_max_pool1d.default",
    "upsample_nearest1d.vec",
    "upsample_nearest2d.vec",
    "upsample_nearest3d.vec",
    "upsample_linear1d.vec",
    "upsample_bilinear2d.vec",
    "upsample_bicubic2d.vec",
    "upsample_trilinear3d.vec",
    "_upsample_nearest_exact1d.vec",
    "_upsample_nearest_exact2d.vec",
    "_upsample_nearest_exact3d.vec",
    "im2col.default",
    "linear.default",
    "einsum.default",
    # an in-place write through a select (`x[0] = y`, `x[:, 0] = 0`): kept whole, so that an input's
    # update moves only the written elements (its decomposition is a `where` over every element)
    "select_scatter.default",
) + (
    # backward ops of a training step's joint graph (docs/torch-frontend.md, "Backward ops"): each
    # is one eager kernel whose contractions (convolution and SDPA gradients) stay contractions
    "threshold_backward.default",
    "gelu_backward.default",
    "sigmoid_backward.default",
    "tanh_backward.default",
    "silu_backward.default",
    "_softmax_backward_data.default",
    "_log_softmax_backward_data.default",
    "native_layer_norm_backward.default",
    "native_batch_norm_backward.default",
    "native_group_norm_backward.default",
    "embedding_dense_backward.default",
    "mse_loss_backward.default",
    "nll_loss_backward.default",
    "mish_backward.default",
    "hardtanh_backward.default",
    "leaky_relu_backward.default",
    "elu_backward.default",
    "softplus_backward.default",
    "hardswish_backward.default",
    "hardsigmoid_backward.default",
    "smooth_l1_loss_backward.default",
    "huber_loss_backward.default",
    "binary_cross_entropy_backward.default",
    # the forward SDPA of a CPU joint graph: output and the row log-sum-exp its backward reads
    "_scaled_dot_product_flash_attention_for_cpu.default",
)

#: The marker torch uses for a composite op that is preserved (not decomposed) in a table.
PRESERVE_CIA = _special_op_to_preserve_cia


def aten_op(qualname: str):
    """``"mm.default"`` -> ``torch.ops.aten.mm.default``."""
    packet, overload = qualname.split(".")
    return getattr(getattr(aten, packet), overload)


def dropout_decomp(x, p, train):
    """``aten.dropout`` in terms of the ``native_dropout`` decomposition (a ``rand_like`` draw)."""
    if not train or p == 0:
        return x.clone()
    return _native_dropout_decomp()(x, p, train)[0]


@functools.cache
def _native_dropout_decomp():
    return decomposition_table[aten.native_dropout.default]


@functools.cache
def tables():
    """(export decomposition table, CIA ops to preserve/override, python decompositions)."""
    cia, python = export_split()
    cia = dict(cia)
    # The dispatch recorder sees aten.dropout whole and decomposes it like export does.
    cia[aten.dropout.default] = PRESERVE_CIA
    return _export_table(), cia, python


@functools.cache
def _export_table():
    table = torch.export.default_decompositions()
    for q in KEEP_UNDECOMPOSED:
        op = aten_op(q)
        if op in table:
            del table[op]
    table[aten.native_dropout.default] = _native_dropout_decomp()
    return table


@functools.cache
def export_split() -> tuple[dict, dict]:
    """The export table split as `ExportedProgram.run_decompositions` splits it on every call (CIA ops
    to override or preserve, python decompositions), once per process: the split lists every CIA op
    torch has, 0.1 s of each capture's 0.45 s for a small model (`decompose`)."""
    return _split_decomp_table_to_cia_and_python_decomp(dict(_export_table().items()))


def decompose(ep):
    """`ep.run_decompositions(tables()[0])`, from the split made once (`export_split`). Its body in
    torch 2.13: the split, then `_decompose_exported_program` outside any fake mode; copies are handed
    over so that the cached split is never changed."""
    from torch._subclasses.fake_tensor import unset_fake_temporarily
    from torch.export.exported_program import _decompose_exported_program

    cia, python = export_split()
    with unset_fake_temporarily():
        return _decompose_exported_program(ep, cia_to_decomp=dict(cia), python_decomp_table=dict(python),
                                           joint_loss_index=None, decompose_custom_triton_ops=False)


# ---- op classification ----------------------------------------------------------------------------------
RANDOM_OPS = frozenset(
    {
        "rand",
        "randn",
        "rand_like",
        "randn_like",
        "randint",
        "randint_like",
        "randperm",
        "bernoulli",
        "bernoulli_",
        "normal",
        "normal_",
        "normal_functional",
        "uniform",
        "uniform_",
        "exponential",
        "exponential_",
        "geometric",
        "geometric_",
        "cauchy",
        "cauchy_",
        "log_normal",
        "log_normal_",
        "multinomial",
        "poisson",
        "binomial",
        "_standard_gamma",
        "native_dropout",
        "rrelu_with_noise",
        "rrelu_with_noise_functional",
    }
)

#: Ops whose result is their input: no node, the same name.
IDENTITY_OPS = frozenset({"detach", "alias", "lift_fresh", "lift_fresh_copy", "lift"})


def packet(op) -> str:
    """The op's packet name without namespace or overload (``aten.add_.Tensor`` -> ``add_``)."""
    name = op._schema.name
    return name.split("::", 1)[1] if "::" in name else name


#: Random ops that draw only in training mode (their fifth argument, `training`, default False): in
#: eval mode rrelu is a leaky ReLU with the mean slope, deterministic, so its call is no draw (the
#: reference records none, capture lists no random tensor for it) and validation compares its values.
DRAWS_IN_TRAINING_ONLY = frozenset({"rrelu_with_noise", "rrelu_with_noise_", "rrelu_with_noise_functional"})


def _draws(name: str, args, kwargs) -> bool:
    """Whether a call of the random op `name` with these arguments draws (None: not known, it does)."""
    if name not in DRAWS_IN_TRAINING_ONLY or args is None:
        return True
    kwargs = kwargs or {}
    return bool(kwargs.get("training", args[4] if len(args) > 4 else False))


def is_random(op, args=None, kwargs=None) -> bool:
    """Whether `op` draws random values (given its call's arguments: eval-mode rrelu does not)."""
    name = packet(op)
    return name in RANDOM_OPS and _draws(name, args, kwargs)


def is_random_name(op: str, args=None, kwargs=None) -> bool:
    """Whether the node op name (``aten.rand_like.default``) is a random op (given the node's
    arguments: eval-mode rrelu is not)."""
    parts = op.split(".")
    return len(parts) >= 2 and parts[1] in RANDOM_OPS and _draws(parts[1], args, kwargs)


def mutated_arg_indices(op) -> list[int]:
    return [
        i
        for i, a in enumerate(op._schema.arguments)
        if a.alias_info is not None and a.alias_info.is_write and not a.kwarg_only
    ]


_SPECIAL_FUNCTIONAL = {
    ("bernoulli_", "float"): ("bernoulli", "p"),
    ("bernoulli_", "Tensor"): ("bernoulli", "Tensor"),
    ("normal_", "default"): ("normal_functional", "default"),
    ("uniform_", "default"): ("uniform", "default"),
    ("exponential_", "default"): ("exponential", "default"),
    ("geometric_", "default"): ("geometric", "default"),
    ("cauchy_", "default"): ("cauchy", "default"),
    ("log_normal_", "default"): ("log_normal", "default"),
    ("fill_", "Scalar"): ("fill", "Scalar"),
    ("fill_", "Tensor"): ("fill", "Tensor"),
    ("zero_", "default"): ("zero", "default"),
}


def functional_name(op) -> str:
    """The functional counterpart of a mutating op (``add_.Tensor`` -> ``aten.add.Tensor``)."""
    pk, overload = packet(op), op._overloadname
    cands = []
    if (pk, overload) in _SPECIAL_FUNCTIONAL:
        cands.append(_SPECIAL_FUNCTIONAL[(pk, overload)])
    if pk.endswith("_") and not pk.endswith("__"):
        cands.append((pk[:-1], overload))
    cands.append((pk + "_functional", overload))
    for name, ov in cands:
        p = getattr(aten, name, None)
        if p is not None and ov in p.overloads():
            return f"aten.{name}.{ov}"
    return str(op)


def has_cia_kernel(op) -> bool:
    """Whether `op` has a CompositeImplicitAutograd kernel (it can be decomposed)."""
    try:
        return torch._C._dispatch_has_kernel_for_dispatch_key(op.name(), "CompositeImplicitAutograd")
    except (AttributeError, RuntimeError):
        return False


def view_results(op) -> bool:
    """True when ``op`` returns aliases of its first input without writing to it (a view op)."""
    rets = op._schema.returns
    return bool(rets) and all(r.alias_info is not None and not r.alias_info.is_write for r in rets)
