"""Constant buffers that are Hadamard matrices: their products are fast Walsh-Hadamard transforms.

A Sylvester-ordered Hadamard matrix of order n = 2^m, `H[i, j] = c (-1)^popcount(i & j)` (`H_2n =
[[H_n, H_n], [H_n, -H_n]]`, scaled by any c: QuaRot's and SpinQuant's rotations use c = n^-1/2),
registered as a constant buffer, is never read: its value at (i, j) is computed from the indices'
bits, c or -c by the parity of the bits `i & j` shares, which the validation kernel evaluates too (a buffer
that is no such matrix for the fed values fails validation). A product with it, `x @ H`, is what a
fast Walsh-Hadamard transform computes in n log2(n) additions per vector (Fino and Algazi, "Unified
Matrix Treatment of the Fast Walsh-Hadamard Transform", IEEE Trans. Computers, 1976; Dao AI Lab's
`fast-hadamard-transform` CUDA kernels, which QuaRot and SpinQuant call), so the product is a
stand-in (`Origin.by`): no compute term (the transform's additions are not counted: errs low), its
traffic counted, the buffer's not.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from solar_compiler.loopir.affine import AffExpr
from solar_compiler.loopir.ast import Binary, Cmp, Const, Index, IndexValue, Select, SExpr
from solar_compiler.loopir.simplify import literal

from .constant_buffers import ConstantBuffer

MIN_ORDER = 8          # smaller Hadamard matrices save nothing worth a stand-in
MAX_ORDER = 1 << 14    # the sign pattern is checked in full: n^2 elements


@dataclass(frozen=True)
class HadamardBuffer(ConstantBuffer):
    """A buffer over dims `row`, `col` (the others of extent 1) that is `scale` times the Sylvester
    Hadamard matrix of order `shape[row]`."""

    scale: float

    def read_with(self, buffer: Callable[[Sequence[Index]], SExpr]) -> Callable[[Sequence[Index]], SExpr]:
        """A reader that computes the entry from the indices' bits; a read at a loaded position reads
        the buffer itself (`buffer`)."""
        bits = int(self.shape[self.row]).bit_length() - 1

        def read(idx: Sequence[Index]) -> SExpr:
            i, j = idx[self.row], idx[self.col]
            if not (isinstance(i, AffExpr) and isinstance(j, AffExpr)):
                return buffer(idx)
            both = Binary("and", IndexValue(i), IndexValue(j), "i64")  # the bits i and j share
            parity: SExpr | None = None
            for b in range(bits):  # the parity of their count: the xor of the bits
                shifted = Binary("floordiv", both, Const(1 << b, "i64"), "i64")
                bit = Binary("mod", shifted, Const(2, "i64"), "i64")
                parity = bit if parity is None else Binary("xor", parity, bit, "i64")
            assert parity is not None
            even = Cmp("eq", parity, Const(0, "i64"), "bool")
            # one select of the two values: the entry is one factor of a product, not one per bit
            return Select(even, literal(self.scale, self.dtype), literal(-self.scale, self.dtype), self.dtype)
        return read

    def note(self) -> str:
        n = self.shape[self.row]
        return (f"constant buffer '{self.source}' {list(self.shape)} is {self.scale:g} x the Hadamard matrix "
                f"of order {n}: computed from the indices' bits, not read; its products are fast Walsh-"
                f"Hadamard transforms ({n} x {n.bit_length() - 1} additions per vector), priced as stand-ins")


def recognise_hadamard(values: np.ndarray) -> float | None:
    """The scale c when the square 2-D array `values` (order a power of two from `MIN_ORDER` to
    `MAX_ORDER`) is c times the Sylvester Hadamard matrix, else None."""
    if values.ndim != 2 or values.shape[0] != values.shape[1] or values.dtype.kind not in "iuf":
        return None
    n = values.shape[0]
    if n < MIN_ORDER or n > MAX_ORDER or n & (n - 1):
        return None
    c = values[0, 0].item()
    if not c or (values.dtype.kind == "f" and not np.isfinite(c)):
        return None
    ar = np.arange(n, dtype=np.int64)
    parity = np.zeros((n, n), dtype=np.int64)
    for b in range(n.bit_length() - 1):
        parity ^= ((ar[:, None] >> b) & 1) & ((ar[None, :] >> b) & 1)
    expected = np.where(parity == 1, -c, c)
    return float(c) if np.array_equal(values, expected.astype(values.dtype)) else None

