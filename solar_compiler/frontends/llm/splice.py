"""Splicing an accepted per-op kernel into the program being translated: tensor renaming.

The op kernel's parameters become the program's tensors (its inputs the values the op reads, its
outputs fresh locals named after the op's results), its locals become fresh locals of the
program, and every statement takes the source location of the op. Loop variables stay as written:
each loop is scoped to the spliced nest.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

from solar_compiler.loopir.affine import AffExpr
from solar_compiler.loopir.ast import Assign, For, If, Index, Node, Read, SExpr


def rename_nodes(nodes: list[Node], names: Mapping[str, str], loc: str | None) -> list[Node]:
    """A copy of `nodes` with every tensor name mapped through `names` and every statement at `loc`."""
    out: list[Node] = []
    for n in nodes:
        if isinstance(n, For):
            out.append(For(n.iv, n.lb, n.ub, n.step, n.sequential, rename_nodes(n.body, names, loc)))
        elif isinstance(n, If):
            out.append(If(n.conds, rename_nodes(n.body, names, loc)))
        else:
            out.append(Assign(names[n.target], tuple(_index(i, names) for i in n.indices), n.kind,
                              rename_expr(n.value, names), loc))
    return out


def _index(i: Index, names: Mapping[str, str]) -> Index:
    return i if isinstance(i, AffExpr) else rename_expr(i, names)


def rename_expr(e: SExpr, names: Mapping[str, str]) -> SExpr:
    if isinstance(e, Read):
        return replace(e, tensor=names[e.tensor], indices=tuple(_index(i, names) for i in e.indices))
    kids = e.children
    if not kids:
        return e
    fields = {"Unary": ("x",), "Binary": ("a", "b"), "Cmp": ("a", "b"), "Select": ("cond", "a", "b"),
              "Cast": ("x",), "Bitcast": ("x",)}[type(e).__name__]
    return replace(e, **{f: rename_expr(k, names) for f, k in zip(fields, kids, strict=True)})
