"""Tensor values and loops of the statements being built.

Every ATen value is a `Val`: `read(indices)` gives the scalar expression of one element. A stored
value reads its own kernel tensor; a view (reshape, permute, slice, expand, ...) is an index map
composed into its consumers' reads, so a tensor reached through `.T` or through two views is still
one kernel tensor, counted once; constant fills and `arange` are generators with no tensor at all.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import KW_ONLY, dataclass

from solar_compiler.loopir.affine import AffExpr
from solar_compiler.loopir.ast import Index, Read, SExpr, TensorDecl
from solar_compiler.loopir.simplify import literal


@dataclass(frozen=True)
class Val:
    """A tensor value: `read(indices)` is the scalar expression of one element.

    `stored` names the kernel tensor that holds exactly this value (same shape, identity map);
    views and generators have none and are only ever inlined into their consumers' reads."""

    shape: tuple[int, ...]
    dtype: str
    reader: Callable[[tuple[Index, ...]], SExpr]
    stored: str | None = None

    def read(self, idx: Sequence[Index]) -> SExpr:
        if len(idx) != len(self.shape):
            raise ValueError(f"{len(idx)} indices for a rank-{len(self.shape)} value")
        return self.reader(tuple(idx))

    @property
    def ndim(self) -> int:
        return len(self.shape)


def stored(decl: TensorDecl) -> Val:
    name, dtype = decl.name, decl.dtype
    return Val(decl.shape, dtype, lambda idx: Read(name, idx, dtype), name)


def view(v: Val, shape: Sequence[int], index_map: Callable[[tuple[Index, ...]], Sequence[Index]]) -> Val:
    """A view of `v` with `shape`: element `idx` of the view is element `index_map(idx)` of `v`."""
    return Val(tuple(int(s) for s in shape), v.dtype, lambda idx: v.reader(tuple(index_map(idx))))


def generator(shape: Sequence[int], dtype: str, fn: Callable[[tuple[Index, ...]], SExpr]) -> Val:
    return Val(tuple(int(s) for s in shape), dtype, fn)


def fill(shape: Sequence[int], dtype: str, value: float | int | bool) -> Val:
    return generator(shape, dtype, lambda idx: literal(value, dtype))


@dataclass(frozen=True)
class Loop:
    """`for iv in range(lb, ub, step)` around a statement being built, in the loop AST's own order
    (`For(iv, lb, ub, ...)`): `Loop("i", 0, n)`. `step` and `sequential` (a `scan` loop whose
    iterations run in order) are keyword-only."""

    iv: str
    lb: AffExpr | int
    ub: AffExpr | int
    _: KW_ONLY
    step: int = 1
    sequential: bool = False


def loops(prefix: str, shape: Sequence[int]) -> list[Loop]:
    """One parallel loop per dimension: `prefix0 < shape[0]`, `prefix1 < shape[1]`, ..."""
    return [Loop(f"{prefix}{d}", 0, int(n)) for d, n in enumerate(shape)]


def ivars(lps: Sequence[Loop]) -> list[AffExpr]:
    return [AffExpr.var(lp.iv) for lp in lps]
