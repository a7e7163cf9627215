"""Kernel rewrites that do not depend on where the kernel came from."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import replace

from solar_compiler.loopir.affine import AffExpr
from solar_compiler.loopir.ast import Assign, For, If, Kernel, Node, Read, SExpr, TensorDecl
from solar_compiler.loopir.simplify import with_children


def writes_as_inputs(kernel: Kernel, tensors: Collection[str]) -> Kernel:
    """`kernel` with every statement writing one of `tensors` removed and those tensors made inputs
    (loops and guards left empty are removed too). Validation uses it to feed values the kernel
    computes differently from the source program, such as random draws."""
    if not tensors:
        return kernel

    def strip(nodes: list[Node]) -> list[Node]:
        out: list[Node] = []
        for n in nodes:
            if isinstance(n, Assign):
                if n.target not in tensors:
                    out.append(n)
                continue
            body = strip(n.body)
            if body:
                out.append(For(n.iv, n.lb, n.ub, n.step, n.sequential, body) if isinstance(n, For)
                           else If(n.conds, body))
        return out

    decls = [TensorDecl(t.name, t.shape, t.dtype, "input") if t.name in tensors else t
             for t in kernel.tensors]
    return Kernel(kernel.name, decls, strip(kernel.body))


def retarget(nodes: list[Node], old: str, new: str, lead: Sequence[AffExpr]) -> list[Node]:
    """`nodes` with every write and read of tensor `old` made one of tensor `new` at the same
    element with the indices `lead` in front (`T[i, j]` -> `C[s + 1, i, j]`): a value computed in
    a loop step written straight into its row of a per-step buffer, instead of copied there."""

    def index(i):
        return i if isinstance(i, AffExpr) else expr(i)

    def expr(e: SExpr) -> SExpr:
        if isinstance(e, Read):
            idx = tuple(index(i) for i in e.indices)
            return Read(new, (*lead, *idx), e.dtype) if e.tensor == old else Read(e.tensor, idx, e.dtype)
        kids = e.children
        return with_children(e, [expr(k) for k in kids]) if kids else e

    out: list[Node] = []
    for n in nodes:
        if isinstance(n, Assign):
            idx = tuple(index(i) for i in n.indices)
            target, idx = (new, (*lead, *idx)) if n.target == old else (n.target, idx)
            out.append(replace(n, target=target, indices=idx, value=expr(n.value)))
        else:
            out.append(replace(n, body=retarget(n.body, old, new, lead)))
    return out
