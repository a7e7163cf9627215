"""Constant buffers whose values are computed from their indices, or a table of fewer dimensions.

A buffer whose every value is an affine function of its indices with integer coefficients (a
position-id buffer `torch.arange(T)`, the `(1, T)` `position_ids` transformers models register, a
`j - i` distance matrix) is computed from the indices and never read (`AffineValues`): a mask
built from it in `forward` (`pos[:, None] >= pos[None, :]`) is then a comparison of indices, which
narrowing sees as causal, and a gather through it (`emb(position_ids)`) is a direct read.

A constant buffer (the same for every construction seed, `masks.py`) of many values may still be a
function of fewer numbers than it holds. Two shapes of that are common, and each is exact:

* **constant along a dimension**: a broadcast stored in full (`pe[None, :].repeat(T, 1)`): every
  value is the one at index 0 of that dimension;
* **constant along a diagonal of two dimensions** (a Toeplitz buffer: the value depends on `j - i`
  only): a relative-position bias `|j - i|`, ALiBi's `slope[h] * (j - i)` registered per head as an
  H x T x T buffer. FlashAttention takes ALiBi as its H slopes (`alibi_slopes`) and computes the
  bias from the indices; a kernel writer stores such a buffer as its first row and column.

The buffer is then read as its table, `t[..., j - i + (n_i - 1), ...]` without the constant
dimensions: the priced kernel moves the table (ALiBi at T = 2048, 16 heads: 16 x 4,095 values for
16 x 2048 x 2048), never the buffer. The table is a weight of the priced kernel; the validation
kernel computes it from the buffer it is fed (the first row and column of each diagonal pair, index
0 of each constant dimension), so a buffer that is not such a table for the fed values fails
validation instead of being priced wrong. Masks of two values (`masks.AffineMask`) come first: they
are computed from indices, with no table at all.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from solar_compiler.frontends.builder.translator import Translator
from solar_compiler.frontends.builder.values import Loop
from solar_compiler.loopir.affine import AffExpr
from solar_compiler.loopir.ast import Cast, Cmp, Index, IndexValue, Read, Select, SExpr
from solar_compiler.loopir.simplify import literal

from .constant_buffers import Buffer

#: a table is used only when it holds at most this share of the buffer's elements
MAX_SHARE = 0.25


@dataclass(frozen=True)
class AffineValues(Buffer):
    """A buffer whose value at `idx` is `const + sum_d coeffs[d] idx[d]`."""

    coeffs: tuple[int, ...]
    const: int

    def read_with(self, buffer: Callable[[Sequence[Index]], SExpr]) -> Callable[[Sequence[Index]], SExpr]:
        """A reader that computes the value from the indices; a read at a loaded position reads the
        buffer itself (`buffer`)."""
        def read(idx: Sequence[Index]) -> SExpr:
            if not all(isinstance(i, AffExpr) for i in idx):
                return buffer(idx)
            e = AffExpr.lit(self.const)
            for a, i in zip(self.coeffs, idx, strict=True):
                if a:
                    e = e + i * a  # type: ignore[operator]
            value = IndexValue(e)
            return value if self.dtype == "i64" else Cast(value, self.dtype)
        return read

    def text(self) -> str:
        terms = [(f"{a} * " if a != 1 else "") + f"i{d}" for d, a in enumerate(self.coeffs) if a]
        return " + ".join(terms + ([str(self.const)] if self.const or not terms else []))

    def note(self) -> str:
        return (f"constant buffer '{self.source}' {list(self.shape)} holds {self.text()} at [i0, ..]: "
                "computed from indices, not read")


def recognise_affine(values: np.ndarray) -> tuple[tuple[int, ...], int] | None:
    """(coefficients, constant) when every value of `values` (8 elements or more, some two of them
    different) is exactly `const + sum_d coeffs[d] idx[d]` with integer coefficients, else None."""
    if values.size < 8 or values.dtype.kind not in "iuf":
        return None
    corner = tuple(0 for _ in values.shape)
    first = values[corner].item()
    if not float(first).is_integer():
        return None
    coeffs = []
    for d, n in enumerate(values.shape):  # the step along each dim, from the first corner
        nxt = tuple(1 if e == d else 0 for e in range(values.ndim))
        step = float(values[nxt].item() - first) if n > 1 else 0.0
        if not step.is_integer():
            return None
        coeffs.append(int(step))
    if not any(coeffs):
        return None  # one value (or none of the steps from the corner): not affine, or a literal
    # affine exactly when every first difference along every dim is its step (then each value is the
    # corner's plus the steps summed along any path to it); checked dim by dim, no index grid
    for d, (n, step) in enumerate(zip(values.shape, coeffs, strict=True)):
        if n > 1 and not (np.diff(values, axis=d) == step).all():
            return None
    return tuple(coeffs), int(first)


@dataclass(frozen=True)
class TableBuffer(Buffer):
    """A buffer whose values do not depend on the dims `constant`, nor on the dims `diagonal` = (a,
    b) except through `idx[b] - idx[a]`."""

    constant: tuple[int, ...]
    diagonal: tuple[int, int] | None
    #: (e, value): every diagonal `j - i <= e` holds `value` (in every table row); None: no such run
    below: tuple[int, float] | None = None
    #: (s, value): every diagonal `j - i >= s` holds `value`
    above: tuple[int, float] | None = None

    @property
    def table_shape(self) -> tuple[int, ...]:
        out = []
        for d, n in enumerate(self.shape):
            if d in self.constant or (self.diagonal and d == self.diagonal[1]):
                continue
            out.append(n + self.shape[self.diagonal[1]] - 1 if self.diagonal and d == self.diagonal[0] else n)
        return tuple(out)

    def table_index(self, idx: Sequence[Index]) -> tuple[Index, ...] | None:
        """The table position of buffer position `idx` (None: a loaded index on the diagonal)."""
        out: list[Index] = []
        for d, i in enumerate(idx):
            if d in self.constant or (self.diagonal and d == self.diagonal[1]):
                continue
            if self.diagonal and d == self.diagonal[0]:
                j = idx[self.diagonal[1]]
                if not (isinstance(i, AffExpr) and isinstance(j, AffExpr)):
                    return None
                out.append(j - i + (self.shape[d] - 1))
            else:
                out.append(i)
        return tuple(out)

    def read_with(self, table: str, buffer: Callable[[Sequence[Index]], SExpr]) \
            -> Callable[[Sequence[Index]], SExpr]:
        """A reader of the buffer through `table`; a read at a loaded position on the diagonal
        reads the buffer itself (`buffer`)."""
        def read(idx: Sequence[Index]) -> SExpr:
            at = self.table_index(idx)
            if at is None:
                return buffer(idx)
            value: SExpr = Read(table, at, self.dtype)
            if self.diagonal is not None:  # a run of one value at either end: selected by the indices
                i, j = idx[self.diagonal[0]], idx[self.diagonal[1]]
                assert isinstance(i, AffExpr) and isinstance(j, AffExpr)
                if self.above is not None:
                    s, v = self.above
                    value = Select(Cmp("le", IndexValue(i), IndexValue(j - s), "bool"),
                                   literal(v, self.dtype), value, self.dtype)
                if self.below is not None:
                    e, v = self.below
                    value = Select(Cmp("ge", IndexValue(i), IndexValue(j - e), "bool"),
                                   literal(v, self.dtype), value, self.dtype)
            return value
        return read

    def note(self, table: str) -> str:
        parts = []
        if self.constant:
            parts.append(f"constant along dim(s) {', '.join(map(str, self.constant))}")
        if self.diagonal:
            a, b = self.diagonal
            parts.append(f"constant along the diagonals of dims {a}, {b} (a function of idx[{b}] - idx[{a}])")
            runs = ((">=", self.above), ("<=", self.below))
            ends = [f"{_text(run[1])} where idx[{b}] - idx[{a}] {op} {run[0]}"
                    for op, run in runs if run is not None]
            if ends:
                parts[-1] += f", {' and '.join(ends)} (computed from indices)"
        size = int(np.prod(self.table_shape))
        return (f"constant buffer '{self.source}' {list(self.shape)} is {' and '.join(parts)}: read as its "
                f"table '{table}' {list(self.table_shape)} ({size:,} of {int(np.prod(self.shape)):,} values)")


def recognise_table(values: np.ndarray) -> tuple[tuple[int, ...], tuple[int, int] | None] | None:
    """(constant dims, diagonal pair) of an array that is a table of at most `MAX_SHARE` of its
    elements (see the module doc), else None. NaN-free arrays only (NaN equals nothing)."""
    if values.ndim < 2 or values.size < 16 or (values.dtype.kind == "f" and np.isnan(values).any()):
        return None
    constant = tuple(d for d, n in enumerate(values.shape) if n > 1 and
                     np.array_equal(values, np.broadcast_to(values.take([0], axis=d), values.shape)))
    rest = values[tuple(slice(0, 1) if d in constant else slice(None) for d in range(values.ndim))]
    free = [d for d, n in enumerate(values.shape) if n > 1 and d not in constant]
    diagonal = None
    for b in reversed(free):
        for a in reversed([d for d in free if d < b]):
            m = np.moveaxis(rest, (a, b), (-2, -1))
            if np.array_equal(m[..., 1:, 1:], m[..., :-1, :-1]):
                diagonal = (a, b)
                break
        if diagonal:
            break
    if not constant and diagonal is None:
        return None
    tb = TableBuffer("", "", tuple(values.shape), "", constant, diagonal)
    if np.prod(tb.table_shape) > MAX_SHARE * values.size:
        return None
    return constant, diagonal


def constant_ends(values: np.ndarray, diagonal: tuple[int, int]) \
        -> tuple[tuple[int, float] | None, tuple[int, float] | None]:
    """(below, above) of a Toeplitz array along `diagonal`: the runs of diagonals at either end that
    hold one value in every slice (a causal ALiBi buffer is -inf on every `j - i >= 1`), as
    `TableBuffer.below` and `.above`. A run is kept only where it spans a quarter of the diagonals at
    least, so that the selects its reads take save work (narrowing drops what a -inf or 0 masks)."""
    a, b = diagonal
    m = np.moveaxis(values, (a, b), (-2, -1))
    na, nb = m.shape[-2], m.shape[-1]
    # diagonal d = j - i, from -(na - 1) to nb - 1: column 0 of the rows, then row 0 of the columns
    diag = np.concatenate([m[..., ::-1, 0], m[..., 0, 1:]], axis=-1).reshape(-1, na + nb - 1)
    same = (diag == diag[:1]).all(axis=0)
    quarter = (na + nb - 1) / 4

    def run(order: np.ndarray) -> int:
        first = diag[0, order[0]]
        k = 0
        while k < len(order) and same[order[k]] and diag[0, order[k]] == first:
            k += 1
        return k

    lo, hi = run(np.arange(na + nb - 1)), run(np.arange(na + nb - 1)[::-1])
    below = (lo - 1 - (na - 1), diag[0, 0].item()) if lo >= quarter else None
    above = (na + nb - 1 - hi - (na - 1), diag[0, -1].item()) if hi >= quarter else None
    return below, above


def _text(v: float) -> str:
    return str(v) if not isinstance(v, float) or not v.is_integer() else str(int(v))


def bind_table(tr: Translator, tb: TableBuffer, buffer: Callable[[Sequence[Index]], SExpr]) -> str:
    """Declare the table of `tb` as a weight of the priced kernel, and emit into the validation
    prologue the statements that copy it out of the buffer (`buffer` reads it): index 0 along each
    constant dim; along the diagonal the first column (`j = 0`) and the first row (`i = 0`), which
    meet at `t[n_i - 1]`. Returns the table's name."""
    table = tr.declare(f"{tb.weight}_table", tb.table_shape, tb.dtype, role="weight")
    first, count, loc = len(tr.body), tr.n_statements, tr.loc
    tr.loc = tb.source
    pieces = [None] if tb.diagonal is None else ["column", "row"]
    for piece in pieces:
        lps: list[Loop] = []
        src: list[Index] = []
        dst: list[Index] = []
        for d, n in enumerate(tb.shape):
            if d in tb.constant:
                src.append(AffExpr.lit(0))
                continue
            if tb.diagonal and d in tb.diagonal:
                a, b = tb.diagonal
                k = AffExpr.var(f"k{d}")
                if d == a:
                    na = tb.shape[a]
                    along = na if piece == "column" else tb.shape[b]
                    lps.append(Loop(f"k{d}", 0, along))
                    src.append(AffExpr.lit(na - 1) - k if piece == "column" else AffExpr.lit(0))
                    dst.append(k if piece == "column" else k + (na - 1))
                else:
                    src.append(AffExpr.lit(0) if piece == "column" else AffExpr.var(f"k{a}"))
                continue
            lps.append(Loop(f"k{d}", 0, n))
            src.append(AffExpr.var(f"k{d}"))
            dst.append(AffExpr.var(f"k{d}"))
        tr.emit(table, dst, "=", buffer(src), lps)
    tr.validation_prologue.extend(tr.body[first:])
    del tr.body[first:]
    tr.n_statements, tr.loc = count, loc
    return table.name
