"""Contractions as one init statement and one `+=` product statement: the loop shape of every
matrix product, einsum and `dot_general` (torch's linalg family, JAX's dot_general)."""

from __future__ import annotations

from collections.abc import Sequence

from solar_compiler.loopir.affine import AffExpr
from solar_compiler.loopir.ast import SExpr, TensorDecl

from .exprs import c, cast, mul, scale
from .index_maps import bcast_index
from .translator import Translator
from .values import Loop, Val, stored

Operand = tuple[Val, Sequence[str]]  # a value and the loop variable of each of its dims


def contract(tr: Translator, out: TensorDecl, out_vars: Sequence[str], extents: dict[str, int],
             operands: Sequence[Operand], init: Val | None = None, beta: float = 1.0,
             alpha: float = 1.0) -> Val:
    """out[out_vars] = beta * init (broadcast) or 0; out[out_vars] += alpha * prod(operands)."""
    dt = out.dtype
    red = [v for v in dict.fromkeys(v for _, vs in operands for v in vs) if v not in out_vars]
    o_lps = [Loop(v, 0, extents[v]) for v in out_vars]
    r_lps = [Loop(v, 0, extents[v]) for v in red]
    oidx = [AffExpr.var(v) for v in out_vars]
    prod: SExpr | None = None
    for v, vs in operands:
        e = cast(v.read([AffExpr.var(n) if v.shape[d] != 1 or extents[n] == 1 else AffExpr.lit(0)
                         for d, n in enumerate(vs)]), dt)
        prod = e if prod is None else mul(prod, e)
    assert prod is not None
    if init is None and not r_lps:  # a pure product (outer product, transposition): no init
        tr.emit(out, oidx, "=", scale(prod, alpha), o_lps)
        return stored(out)
    if init is not None:
        iv = cast(init.read(bcast_index(oidx, init.shape, out.shape)), dt)
        tr.emit(out, oidx, "=", scale(iv, beta) if beta != 0 else c(0, dt), o_lps)
    else:
        tr.emit(out, oidx, "=", c(0, dt), o_lps)
    tr.emit(out, oidx, "+=", scale(prod, alpha), o_lps + r_lps)
    return stored(out)
