"""Whether two kernels are the same program at other sizes.

A frontend that validates a size-reduced instance of a program (because the full size is too
large to execute) must show that the full-size kernel is the reduced one with only sizes changed;
`same_program` is that check, on the kernels alone.
"""

from __future__ import annotations

from solar_compiler.loopir.affine import AffExpr, FloorDiv
from solar_compiler.loopir.ast import (
    Binary,
    Cast,
    Cmp,
    Const,
    For,
    If,
    IndexValue,
    Kernel,
    Node,
    Read,
    Select,
    SExpr,
    Unary,
)


def same_program(a: Kernel, b: Kernel, source_b_as_a: tuple[str, str] | None = None) -> str | None:
    """None when `b` is `a` with only sizes changed: the same tensors (name, dtype, role, rank),
    the same statements in the same order with the same loops, guards, index expressions and
    ops, where only integer coefficients, constants and literal values (all size-derived) may
    differ. Otherwise the first difference, in words. `source_b_as_a` = (file of b, file of a):
    b's statement locations in its file count as the same lines of a's (two generated files of
    one program, such as the workloads of a SOL-ExecBench problem)."""
    ta = [(t.name, t.dtype, t.role, len(t.shape)) for t in a.tensors]
    tb = [(t.name, t.dtype, t.role, len(t.shape)) for t in b.tensors]
    if ta != tb:
        diff = next((x, y) for x, y in zip(ta + [None], tb + [None], strict=False) if x != y)
        return f"tensors differ: {diff[0]} vs {diff[1]}"
    sa, sb = _shape(a.body), _shape(b.body, source_b_as_a)
    if sa == sb:
        return None
    for k, (x, y) in enumerate(zip(sa, sb, strict=False)):
        if x != y:
            return f"statement structure differs at node {k}"
    return f"{len(sa)} vs {len(sb)} nodes"


def _shape(nodes: list[Node], rename: tuple[str, str] | None = None) -> list[object]:
    out: list[object] = []
    for n in nodes:
        if isinstance(n, For):
            out.append(("for", n.iv, n.sequential, _aff_shape(n.lb), _aff_shape(n.ub),
                        tuple(_shape(n.body, rename))))
        elif isinstance(n, If):
            out.append(("if", tuple((c.op, _aff_shape(c.expr)) for c in n.conds),
                        tuple(_shape(n.body, rename))))
        else:
            idx = tuple(_aff_shape(i) if isinstance(i, AffExpr) else _expr_shape(i) for i in n.indices)
            loc = n.loc
            if rename is not None and loc is not None and loc.startswith(rename[0] + ":"):
                loc = rename[1] + loc[len(rename[0]):]
            out.append(("stmt", n.target, n.kind, idx, _expr_shape(n.value), loc))
    return out


def _aff_shape(e: AffExpr) -> object:
    atoms = []
    for a, _ in e.terms:
        if isinstance(a, str):
            atoms.append(a)
        else:
            atoms.append(("//" if isinstance(a, FloorDiv) else "%", _aff_shape(a.num)))
    return tuple(sorted(atoms, key=repr))


def _expr_shape(e: SExpr) -> object:
    if isinstance(e, Read):
        return ("read", e.tensor, tuple(_aff_shape(i) if isinstance(i, AffExpr) else _expr_shape(i)
                                        for i in e.indices))
    if isinstance(e, Const):
        return ("const", e.dtype)
    if isinstance(e, IndexValue):
        return ("index", _aff_shape(e.expr))
    if isinstance(e, Unary):
        return ("unary", e.fn, e.dtype, _expr_shape(e.x))
    if isinstance(e, Binary):
        return ("binary", e.fn, e.dtype, _expr_shape(e.a), _expr_shape(e.b))
    if isinstance(e, Cmp):
        return ("cmp", e.pred, _expr_shape(e.a), _expr_shape(e.b))
    if isinstance(e, Select):
        return ("select", e.dtype, _expr_shape(e.cond), _expr_shape(e.a), _expr_shape(e.b))
    if isinstance(e, Cast):
        return ("cast", e.dtype, _expr_shape(e.x))
    raise TypeError(f"unknown expression {e!r}")
