"""Whether two kernels are the same program at other sizes.

A frontend that validates a size-reduced instance of a program (because the full size is too
large to execute) must show that the full-size kernel is the reduced one with only sizes changed;
`same_program` is that check, on the kernels alone.
"""

from __future__ import annotations

from collections.abc import Callable

from solar_compiler.loopir.affine import AffExpr, FloorDiv
from solar_compiler.loopir.ast import (
    Binary,
    Bitcast,
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
    def loc(text: str | None) -> str | None:
        if rename is not None and text is not None and text.startswith(rename[0] + ":"):
            return rename[1] + text[len(rename[0]):]
        return text

    return [node_form(n, str, loc=loc) for n in nodes]


def node_form(n: Node, name: Callable[[str], object], exact: bool = False,
              loc: Callable[[str | None], object] = lambda text: text) -> tuple:
    """A node as a comparable value: its loops, guards, index expressions and ops, each tensor as
    `name(tensor)` (called in the order the statements read, then write), each statement's location
    as `loc(its loc)`. Without `exact`, integer coefficients, constants and literal values (the
    size-derived parts) are left out."""
    if isinstance(n, For):
        return ("for", n.iv, n.sequential, n.step, _aff(n.lb, exact), _aff(n.ub, exact),
                tuple(node_form(c, name, exact, loc) for c in n.body))
    if isinstance(n, If):
        return ("if", tuple((c.op, _aff(c.expr, exact)) for c in n.conds),
                tuple(node_form(c, name, exact, loc) for c in n.body))
    value = _expr(n.value, name, exact)
    indices = tuple(_index(i, name, exact) for i in n.indices)
    return ("stmt", name(n.target), n.kind, indices, value, loc(n.loc))


def _aff(e: AffExpr, exact: bool) -> object:
    return repr(e) if exact else _aff_shape(e)


def _index(i, name: Callable[[str], object], exact: bool) -> object:
    return _expr(i, name, exact) if isinstance(i, SExpr) else _aff(i, exact)


def _aff_shape(e: AffExpr) -> object:
    atoms = []
    for a, _ in e.terms:
        if isinstance(a, str):
            atoms.append(a)
        else:
            atoms.append(("//" if isinstance(a, FloorDiv) else "%", _aff_shape(a.num)))
    return tuple(sorted(atoms, key=repr))


def _expr(e: SExpr, name: Callable[[str], object], exact: bool) -> object:
    if isinstance(e, Read):
        return ("read", name(e.tensor), tuple(_index(i, name, exact) for i in e.indices))
    if isinstance(e, Const):
        return ("const", e.dtype, repr(e.value) if exact else None)
    if isinstance(e, IndexValue):
        return ("index", _aff(e.expr, exact))
    if isinstance(e, Unary):
        return ("unary", e.fn, e.dtype, _expr(e.x, name, exact))
    if isinstance(e, Binary):
        return ("binary", e.fn, e.dtype, _expr(e.a, name, exact), _expr(e.b, name, exact))
    if isinstance(e, Cmp):
        return ("cmp", e.pred, _expr(e.a, name, exact), _expr(e.b, name, exact))
    if isinstance(e, Select):
        return ("select", e.dtype, _expr(e.cond, name, exact), _expr(e.a, name, exact),
                _expr(e.b, name, exact))
    if isinstance(e, Cast):
        return ("cast", e.dtype, _expr(e.x, name, exact))
    if isinstance(e, Bitcast):
        return ("bitcast", e.dtype, _expr(e.x, name, exact))
    raise TypeError(f"unknown expression {e!r}")
