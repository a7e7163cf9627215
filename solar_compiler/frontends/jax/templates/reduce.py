"""Reductions over `axes`: `reduce_sum/max/min/prod/and/or` (the shared init + accumulate), and
`argmax/argmin` (the extreme value, then the shared index pass: the first index holding it)."""

from __future__ import annotations

from solar_compiler.frontends.builder.exprs import c, cast
from solar_compiler.frontends.builder.index_maps import kept_shape
from solar_compiler.frontends.builder.statements import accumulate, arg_index, reduce_into
from solar_compiler.frontends.builder.values import Val, stored
from solar_compiler.frontends.captured_program import AtenNode
from solar_compiler.loopir.ast import Read

from ..registry import template
from ..translator import JaxTranslator


def _axes(node: AtenNode, ndim: int) -> list[int]:
    return sorted(int(d) % max(ndim, 1) for d in node.kwargs["axes"])


@template("jax.reduce_sum", kind="+=")
@template("jax.reduce_prod", kind="*=")
@template("jax.reduce_max", kind="max=")
@template("jax.reduce_min", kind="min=")
@template("jax.reduce_or", kind="max=")
@template("jax.reduce_and", kind="min=")
def _reduce(tr: JaxTranslator, node: AtenNode, kind: str) -> Val:
    x = tr.val(node.args[0])
    dims = _axes(node, x.ndim)
    meta = tr.out_meta()
    if meta.dtype == "bool":  # any / all: max / min of 0/1 in an i8 local, read back as bool
        acc = tr.declare(meta.name, meta.shape, "i8")
        reduce_into(tr, acc, x.shape, dims, False, kind, c(kind == "min=", "i8"),
                    lambda full: cast(x.read(full), "i8"))
        return Val(acc.shape, "bool", lambda idx: cast(Read(acc.name, tuple(idx), "i8"), "bool"))
    target = tr.result()
    accumulate(tr, target, x, dims, False, kind)
    return stored(target)


@template("jax.argmax", kind="max=")
@template("jax.argmin", kind="min=")
def _argext(tr: JaxTranslator, node: AtenNode, kind: str) -> Val:
    x = tr.val(node.args[0])
    dims = _axes(node, x.ndim)
    meta = tr.out_meta()
    values = tr.declare(f"{meta.name}_val", kept_shape(x.shape, dims, False), x.dtype)
    accumulate(tr, values, x, dims, False, kind)
    return arg_index(tr, tr.result(), values, x, dims, False)
