"""A statement as an extended einsum equation, for reports and diagnostics:
`n c (2*p + r - 1) (2*q + s - 1), o c r s -> n o p q`.

Operands are separated by `,`, indices by spaces; an index is a loop variable, an affine expression
in parentheses, or a loaded index in brackets (`[idx[i]]`: a gather on the left, a scatter on the
right, as in `v k d, token k -> [token[k]] d`).
"""

from __future__ import annotations

from solar_compiler.loopir.affine import AffExpr
from solar_compiler.loopir.ast import Assign, Kernel, LoopIRError, Read, SExpr, StmtContext, reads
from solar_compiler.text.printer import expr_str, print_assign


def _token(kernel: Kernel, i: AffExpr | SExpr) -> str:
    if isinstance(i, AffExpr):
        return str(i) if i.is_var() else f"({i})"
    return f"[{expr_str(kernel, i, 'i64')}]"


def operand_reads(value: SExpr, *indices: SExpr) -> list[Read]:
    """Distinct reads of a value, then of the dynamic target indices of an indirect write, in
    first-occurrence order: the equation's operands."""
    seen: dict[tuple, Read] = {}
    for r in reads(value) + [r for i in indices for r in reads(i)]:
        seen.setdefault((r.tensor, r.indices), r)
    return list(seen.values())


def equation(kernel: Kernel, ctx: StmtContext) -> str:
    return assign_equation(kernel, ctx.stmt)


def assign_equation(kernel: Kernel, stmt: Assign) -> str:
    """The statement's extended einsum equation: its operands' indices `->` its target's."""
    ops = operand_reads(stmt.value, *stmt.dynamic_indices)
    lhs = ", ".join(" ".join(_token(kernel, i) for i in r.indices) for r in ops)
    rhs = " ".join(_token(kernel, i) for i in stmt.indices)
    return f"{lhs} -> {rhs}".strip()


def where(kernel: Kernel, ctx: StmtContext) -> str:
    """`loc: statement` for diagnostics."""
    try:
        text = print_assign(kernel, ctx.stmt)
    except LoopIRError:  # a statement too broken to print: name its target
        text = f"{ctx.stmt.target}[...] {ctx.stmt.kind} ..."
    return f"{ctx.stmt.loc}: statement '{text}'" if ctx.stmt.loc else \
        f"kernel '{kernel.name}', statement S{ctx.index} '{text}'"
