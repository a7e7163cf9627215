"""`dot_general`: any contracting and batch dimensions, through the shared `contract` (an init
statement and one `+=` product statement, reduction loops innermost). The result's dims are the
batch dims, then the lhs free dims, then the rhs free dims (XLA's order)."""

from __future__ import annotations

from solar_compiler.frontends.builder.contract import contract
from solar_compiler.frontends.builder.values import Val
from solar_compiler.frontends.captured_program import AtenNode

from ..registry import template
from ..translator import JaxTranslator


@template("jax.dot_general")
def _dot_general(tr: JaxTranslator, node: AtenNode) -> Val:
    a, b = tr.val(node.args[0]), tr.val(node.args[1])
    (lc, rc), (lb, rb) = node.kwargs["dimension_numbers"]
    lc, rc, lb, rb = ([int(d) for d in ds] for ds in (lc, rc, lb, rb))
    av: list[str] = [""] * a.ndim
    bv: list[str] = [""] * b.ndim
    ext: dict[str, int] = {}
    out_vars: list[str] = []
    for k, (i, j) in enumerate(zip(lb, rb, strict=True)):
        av[i] = bv[j] = f"b{k}"
        ext[f"b{k}"] = a.shape[i]
        out_vars.append(f"b{k}")
    for k, (i, j) in enumerate(zip(lc, rc, strict=True)):
        av[i] = bv[j] = f"k{k}"
        ext[f"k{k}"] = a.shape[i]
    for prefix, v, names in (("i", a, av), ("j", b, bv)):
        free = [d for d in range(v.ndim) if not names[d]]
        for k, d in enumerate(free):
            names[d] = f"{prefix}{k}"
            ext[names[d]] = v.shape[d]
            out_vars.append(names[d])
    return contract(tr, tr.result(), out_vars, ext, [(a, av), (b, bv)])
