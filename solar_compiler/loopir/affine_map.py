"""Named affine expressions (`AffExpr`, `AffCond`) <-> xDSL's positional `AffineExpr`, `AffineMap`
and `AffineSet`.

The loop IR names its induction variables (`2*p + r - 1`); MLIR attributes number them (`d0 * 2 +
d3 - 1`). A conversion takes the list of names that gives each dimension (and symbol) its position.
Both directions are exact: floor division and modulo by a positive constant exist on both sides,
and `from_affine_expr` rebuilds the canonical form through `AffExpr` arithmetic.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache

from xdsl.ir.affine import (
    AffineBinaryOpExpr,
    AffineBinaryOpKind,
    AffineConstantExpr,
    AffineDimExpr,
    AffineExpr,
    AffineMap,
    AffineSet,
    AffineSymExpr,
)
from xdsl.ir.affine.affine_set import AffineConstraintExpr, AffineConstraintKind

from solar_compiler.loopir.affine import AffCond, AffExpr, AffineError, FloorDiv


@lru_cache(maxsize=4096)
def _positions(dims: tuple[str, ...], syms: tuple[str, ...]) -> dict[str, AffineExpr]:
    """Each name's dimension (or symbol) expression, once per list of names (read only)."""
    pos = {v: AffineExpr.dimension(i) for i, v in enumerate(dims)}
    pos.update({v: AffineExpr.symbol(i) for i, v in enumerate(syms)})
    return pos


def to_affine_expr(e: AffExpr, dims: Sequence[str], syms: Sequence[str] = ()) -> AffineExpr:
    """`e` with each variable replaced by its dimension (or symbol) position."""
    pos = _positions(tuple(dims), tuple(syms))

    def atom(a: object) -> AffineExpr:
        if isinstance(a, str):
            if a not in pos:
                raise AffineError(f"variable '{a}' is not a dimension of the map ({', '.join(dims)})")
            return pos[a]
        num = to_affine_expr(a.num, dims, syms)  # type: ignore[union-attr]
        return num // a.den if isinstance(a, FloorDiv) else num % a.den  # type: ignore[union-attr]

    out: AffineExpr | None = None
    for a, c in e.terms:
        t = atom(a) if c == 1 else atom(a) * c
        out = t if out is None else out + t
    if out is None:
        return AffineExpr.constant(e.const)
    return out + e.const if e.const else out


def from_affine_expr(a: AffineExpr, dims: Sequence[str], syms: Sequence[str] = ()) -> AffExpr:
    """The canonical named expression of a positional one."""
    if isinstance(a, AffineDimExpr):
        return AffExpr.var(dims[a.position])
    if isinstance(a, AffineSymExpr):
        return AffExpr.var(syms[a.position])
    if isinstance(a, AffineConstantExpr):
        return AffExpr.lit(a.value)
    assert isinstance(a, AffineBinaryOpExpr)
    lhs = from_affine_expr(a.lhs, dims, syms)
    rhs = from_affine_expr(a.rhs, dims, syms)
    if a.kind == AffineBinaryOpKind.Add:
        return lhs + rhs
    if a.kind == AffineBinaryOpKind.Mul:
        return lhs * rhs
    if not rhs.is_const():
        raise AffineError(f"'{a}': division by a non-constant")
    if a.kind == AffineBinaryOpKind.FloorDiv:
        return lhs // rhs.const
    if a.kind == AffineBinaryOpKind.Mod:
        return lhs % rhs.const
    return -((-lhs) // rhs.const)  # CeilDiv


def to_map(exprs: Sequence[AffExpr], dims: Sequence[str], syms: Sequence[str] = ()) -> AffineMap:
    return AffineMap(len(dims), len(syms), tuple(to_affine_expr(e, dims, syms) for e in exprs))


# from_map's results by the map's identity and the names: maps are immutable and shared by the
# attributes that hold them (a cloned op's among them), and an analysis of a large network converts
# the same map tens of thousands of times. An entry keeps its map alive, so its id is not reused
# while it stands; the table is emptied when it outgrows `_FROM_MAP_MAX`.
FROM_MAP_TABLE: dict[tuple[int, tuple[str, ...], tuple[str, ...]], tuple[AffineMap, tuple[AffExpr, ...]]] = {}
_FROM_MAP = FROM_MAP_TABLE  # emptied with the analyses (`analysis.manager.invalidate_analyses`)
_FROM_MAP_MAX = 1 << 16


def from_map(m: AffineMap, dims: Sequence[str], syms: Sequence[str] = ()) -> tuple[AffExpr, ...]:
    key = (id(m), tuple(dims), tuple(syms))
    hit = _FROM_MAP.get(key)
    if hit is not None and hit[0] is m:
        return hit[1]
    out = _from_map(m, dims, syms)
    if len(_FROM_MAP) >= _FROM_MAP_MAX:
        _FROM_MAP.clear()
    _FROM_MAP[key] = (m, out)
    return out


def _from_map(m: AffineMap, dims: Sequence[str], syms: Sequence[str]) -> tuple[AffExpr, ...]:
    if m.num_dims != len(dims) or m.num_symbols != len(syms):
        raise AffineError(f"affine map {m} has {m.num_dims} dims and {m.num_symbols} symbols, expected "
                          f"{len(dims)} and {len(syms)}")
    return tuple(from_affine_expr(r, dims, syms) for r in m.results)


def to_set(conds: Sequence[AffCond], dims: Sequence[str]) -> AffineSet:
    zero = AffineExpr.constant(0)
    return AffineSet(len(dims), 0, tuple(
        AffineConstraintExpr(AffineConstraintKind.ge if c.op == ">=" else AffineConstraintKind.eq,
                             to_affine_expr(c.expr, dims), zero, canonicalize=False) for c in conds))


def from_set(s: AffineSet, dims: Sequence[str]) -> tuple[AffCond, ...]:
    if s.num_dims != len(dims) or s.num_symbols:
        raise AffineError(f"affine set {s} must have {len(dims)} dims and no symbols")
    out = []
    for c in s.constraints:
        e = from_affine_expr(c.lhs, dims) - from_affine_expr(c.rhs, dims)
        if c.kind == AffineConstraintKind.ge:
            out.append(AffCond(e, ">="))
        elif c.kind == AffineConstraintKind.le:
            out.append(AffCond(-e, ">="))
        else:
            out.append(AffCond(e, "=="))
    return tuple(out)
