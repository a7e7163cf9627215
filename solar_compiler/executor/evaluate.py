"""Elementwise evaluation of a scalar expression over a statement's grid.

Every value is a NumPy array with one axis per grid axis (size 1 where it does not depend on that
loop variable) or a 0-d value, in the storage dtype of its loop-IR type. An affine read becomes a
strided view of the tensor (no gather): element address = base + sum over loop variables of
k_v * stride_v, which covers shifted, strided and sliding-window (conv) accesses alike. Indices that
leave the tensor on masked-out points (padding guards) read from a zero-padded copy; indices that
leave it on an in-domain point are an error. Quasi-affine (// %) and indirect indices gather.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import numpy as np
from numpy.lib.stride_tricks import as_strided

from solar_compiler.executor.bits import bitcast
from solar_compiler.executor.grid import Grid
from solar_compiler.executor.numeric import STORAGE, erf, quantize
from solar_compiler.executor.trace import StatementTrace
from solar_compiler.loopir.affine import AffExpr
from solar_compiler.loopir.ast import (
    Assign,
    Binary,
    Bitcast,
    Cast,
    Cmp,
    Const,
    IndexValue,
    LoopIRError,
    Read,
    Select,
    SExpr,
    TensorDecl,
    Unary,
)

Value = np.ndarray
PAD_LIMIT = 4  # a padded copy may be at most this many times the tensor (plus 16M elements)


def _trunc_div(a: Value, b: Value) -> Value:
    """Integer division rounding toward zero (C, MLIR arith.divsi)."""
    q = np.floor_divide(a, b)
    return q + ((np.mod(a, b) != 0) & ((a < 0) != (b < 0)))


UNARY: dict[str, Callable[[Value], Value]] = {
    "neg": np.negative, "exp": np.exp, "log": np.log, "sqrt": np.sqrt, "rsqrt": lambda x: 1 / np.sqrt(x),
    "tanh": np.tanh, "sigmoid": lambda x: 1 / (1 + np.exp(-x)), "erf": erf, "abs": np.abs,
    "floor": np.floor, "ceil": np.ceil, "round": np.rint, "sign": np.sign, "not": np.logical_not,
    "sin": np.sin, "cos": np.cos, "log1p": np.log1p, "expm1": np.expm1, "reciprocal": np.reciprocal,
    "isnan": np.isnan, "atan": np.arctan, "asin": np.arcsin, "acos": np.arccos, "sinh": np.sinh,
    "cosh": np.cosh, "asinh": np.arcsinh, "acosh": np.arccosh, "atanh": np.arctanh,
}
BINARY: dict[str, Callable[[Value, Value], Value]] = {
    "add": np.add, "sub": np.subtract, "mul": np.multiply, "floordiv": np.floor_divide, "mod": np.mod,
    "max": np.maximum, "min": np.minimum, "pow": np.power, "atan2": np.arctan2,
}
LOGICAL = {"and": (np.logical_and, np.bitwise_and), "or": (np.logical_or, np.bitwise_or),
           "xor": (np.logical_xor, np.bitwise_xor)}
CMP: dict[str, Callable[[Value, Value], Value]] = {
    "eq": np.equal, "ne": np.not_equal, "lt": np.less, "le": np.less_equal, "gt": np.greater,
    "ge": np.greater_equal,
}


def where(stmt: Assign) -> str:
    """` in the statement writing 'y' (model.py:12)`: names the user's code where it is known."""
    return f" in the statement writing '{stmt.target}'" + (f" ({stmt.loc})" if stmt.loc else "")


class Evaluator:
    """Evaluates the expressions of one statement over one grid."""

    def __init__(self, grid: Grid, tensors: dict[str, np.ndarray], decls: dict[str, TensorDecl],
                 stmt: Assign):
        self.grid, self.tensors, self.decls, self.stmt = grid, tensors, decls, stmt
        # id(view) -> (view, the array it views, where it reads padding); holding the view keeps
        # its id from being reused
        self.sources: dict[int, tuple[np.ndarray, np.ndarray, list[np.ndarray]]] = {}
        self.tracer: StatementTrace | None = None  # records what gathers touch (executor/trace.py)
        self._branch = 0  # > 0 while evaluating a select branch

    def __call__(self, e: SExpr) -> Value:
        out = self._eval(e)
        st = STORAGE[e.dtype]
        return out if out.dtype == st else out.astype(st)

    def _eval(self, e: SExpr) -> Value:
        if isinstance(e, Const):
            return np.asarray(e.value, dtype=STORAGE[e.dtype])
        if isinstance(e, IndexValue):
            return np.asarray(e.expr.evaluate(self.grid.env), dtype=np.int64)
        if isinstance(e, Read):
            return self.read(e)
        if isinstance(e, Unary):
            return np.asarray(UNARY[e.fn](self(e.x)))
        if isinstance(e, Binary):
            a, b = self(e.a), self(e.b)
            if e.fn in LOGICAL:
                return np.asarray(LOGICAL[e.fn][0 if e.dtype == "bool" else 1](a, b))
            if a.dtype.kind != "f" and e.fn in ("div", "floordiv", "mod", "pow"):
                b = self.integer_operand(e.fn, b)
            if e.fn == "div":
                return np.asarray(np.true_divide(a, b) if a.dtype.kind == "f" else _trunc_div(a, b))
            return np.asarray(BINARY[e.fn](a, b))
        if isinstance(e, Cmp):
            return np.asarray(CMP[e.pred](self(e.a), self(e.b)))
        if isinstance(e, Select):
            cond = self(e.cond)
            self._branch += 1
            try:
                a, b = self(e.a), self(e.b)
            finally:
                self._branch -= 1
            return np.asarray(np.where(cond, a, b))
        if isinstance(e, Cast):
            return self.cast(self(e.x), e.dtype)
        if isinstance(e, Bitcast):
            return bitcast(self(e.x), e.x.typed(), e.typed())
        raise LoopIRError(f"the executor does not know expression node {type(e).__name__}{where(self.stmt)}",
                          self.stmt.pos)

    def integer_operand(self, fn: str, b: Value) -> Value:
        """An integer divisor of 0 or a negative integer exponent is an error on an in-domain point
        (NumPy would give 0, or raise without a location); elsewhere it is replaced by 1."""
        bad = (b < 0) if fn == "pow" else (b == 0)
        if not bad.any():
            return b
        hit = self.grid.in_domain(bad)
        if hit.any():
            what = "a negative exponent in an integer power" if fn == "pow" else f"integer '{fn}' by zero"
            raise LoopIRError(f"{what} at {self.grid.point(hit)}{where(self.stmt)}", self.stmt.pos)
        return np.where(bad, 1, b).astype(b.dtype)

    @staticmethod
    def cast(x: Value, dtype: str) -> Value:
        if dtype == "bool":
            return np.asarray(x != 0)
        if STORAGE[dtype].kind == "f":
            return quantize(np.asarray(x, dtype=STORAGE[dtype]), dtype)
        if x.dtype.kind == "f":
            x = np.trunc(x)
        return np.asarray(x).astype(STORAGE[dtype])

    # ---- reads -------------------------------------------------------------------------------
    def read(self, r: Read) -> Value:
        arr = self.tensors[r.tensor]
        if not r.indirect:
            view = self.strided(r.tensor, arr, r.indices, writeable=False)
            if view is not None:
                return view
        idx = [self.index_values(r.tensor, d, i) for d, i in enumerate(r.indices)]
        if self.tracer is not None and r.indirect:
            self.tracer.gather(r.tensor, idx, self.grid.mask(), self._branch > 0)
        return np.asarray(arr[tuple(idx)])

    def index_values(self, tensor: str, d: int, e: AffExpr | SExpr) -> Value:
        """Values of index `d` of `tensor`; out-of-range values on masked-out points are clipped."""
        v = np.asarray(e.evaluate(self.grid.env) if isinstance(e, AffExpr) else self(e))
        n = self.tensors[tensor].shape[d]
        bad = (v < 0) | (v >= n)
        if bad.any():
            self.check_in_domain(bad, tensor, d, v)
            v = np.clip(v, 0, n - 1)
        return v

    def check_in_domain(self, bad: Value, tensor: str, d: int, v: Value) -> None:
        hit = self.grid.in_domain(bad)
        if hit.any():
            shape = np.broadcast_shapes(v.shape, hit.shape)
            first = tuple(np.argwhere(np.broadcast_to(hit, shape))[0])
            val = int(np.broadcast_to(v, shape)[first])
            n = self.tensors[tensor].shape[d]
            raise LoopIRError(f"index {d} of '{tensor}' is {val}, outside [0, {n}), at "
                              f"{self.grid.point(hit)}{where(self.stmt)}", self.stmt.pos)

    def strided(self, tensor: str, arr: np.ndarray, indices: Sequence[AffExpr], writeable: bool) \
            -> np.ndarray | None:
        """`arr[indices]` over the grid as a strided view, or None when it needs a gather (reads
        whose padded copy would be too large) or leaves the tensor on the hull (writes). A read
        records which grid points fall in the zero padding (see `sources`)."""
        g = self.grid
        if any(e.is_quasi() for e in indices):
            return None
        pads = []
        outside: list[np.ndarray] = []
        for d, e in enumerate(indices):
            lo, hi = e.bounds(g.ranges)
            n = arr.shape[d]
            if lo < 0 or hi >= n:
                if writeable:
                    return None
                v = np.asarray(e.evaluate(g.env))
                bad = (v < 0) | (v >= n)
                if bad.any():
                    self.check_in_domain(bad, tensor, d, v)
                    outside.append(bad)
            pads.append((max(0, -lo), max(0, hi - n + 1)))
        src = arr
        if any(p != (0, 0) for p in pads):
            padded = [n + a + b for n, (a, b) in zip(arr.shape, pads, strict=True)]
            if math.prod(padded) > PAD_LIMIT * arr.size + (1 << 24):
                return None
            src = np.pad(arr, pads)
        item = src.itemsize
        offset = 0
        strides = [0] * len(g.axes)
        shape = [1] * len(g.axes)
        for d, e in enumerate(indices):
            st = src.strides[d] // item
            const = e.const + pads[d][0]
            for v, c in e.terms:
                assert isinstance(v, str)
                if v in g.pos:
                    k = g.pos[v]
                    ax = g.axes[k]
                    const += c * ax.start
                    strides[k] += c * ax.step * st
                    shape[k] = ax.count
                else:
                    const += c * g.scalars[v]
            offset += const * st
        flat = src.reshape(-1)
        view = as_strided(flat[offset:], shape=shape, strides=[s * item for s in strides],
                          writeable=writeable)
        self.sources[id(view)] = (view, src, outside)
        return view
