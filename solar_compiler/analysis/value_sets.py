"""The finite set of values a body value can take, when it is small: how arithmetic on codes is seen
to produce values of a narrow dtype.

A reference that decodes packed fp4 without a table computes each value from its code's bits
(`sign = (c >> 3) & 1`, `e = (c >> 1) & 3`, `m = c & 1`, `(1 + m / 2) * 2 ** (e - 1)`, `v * (1 - 2 *
sign)`): every operation is arithmetic, so the dtype analysis (`value_dtypes.py`) sees f32 values,
yet each result is one of the sixteen e2m1 values. Here each value is evaluated over every
combination of its operands' possible values: a byte read has 256, a bool 2, a literal 1, a mask
`c & 15` 16 after it; a local's values are the union of what its writers store. The result is a
superset of the values the program can take (operands are combined independently, and a select
takes both branches), so a dtype that holds every value of the set holds every value of the
program: the look-through stays sound. Sets larger than `LIMIT`, operand combinations beyond
`WORK`, and transcendental functions give None (unknown).

Where the set is unknown, the value may still be an integer in a known range (`Range`): rounding
(`round`, `floor`, `ceil`) makes any float an integer, `sign` gives -1, 0 or 1, an integer dtype
its own range, and `max`/`min` with literals, sums, differences and products carry ranges. A
fake-quantised operand `clamp(round(x / s), -128, 127)` is thus one of 256 integers, which every
int8 value holds: its contraction may run on the int8 unit, as a kernel writer who stores the codes
would run it. NaN is the one value such an operand can take beyond its range (`round(nan)`); a
contraction's result is NaN exactly where a row or column of an operand holds one, so a kernel
carries NaN as a flag per row and column of each operand (found while it reads them) and the
integer codes stay exact.

A bit cast (`loop.bitcast`) keeps no value: its set is the patterns of an integer operand's values
read as the new dtype, and every value of that dtype otherwise (a float operand's set cannot tell
-0.0 from 0.0); its range, the range of an integer dtype.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable

import numpy as np
from xdsl.dialects.builtin import FloatAttr
from xdsl.ir import BlockArgument, SSAValue

from solar_compiler.dialects.einsum import GatherOp, NodeOp
from solar_compiler.dialects.loop import (
    BinaryOp,
    BitcastOp,
    CastOp,
    CmpOp,
    ConstOp,
    SelectOp,
    UnaryOp,
    type_dtype,
)
from solar_compiler.executor.bits import bitcast
from solar_compiler.executor.numeric import STORAGE, quantize
from solar_compiler.loopir.rules import E2M1_VALUES, FLOAT_DTYPES, INT_DTYPES, int_range

LIMIT = 256        # the most values a set may hold
WORK = 4096        # the most operand combinations one operation may evaluate
Values = frozenset[float] | None
Range = tuple[float, float] | None   # the least and greatest value of an integer-valued value
_ROUNDING = ("round", "floor", "ceil")

_BINARY: dict[str, Callable[[float, float], float]] = {
    "add": lambda a, b: a + b, "sub": lambda a, b: a - b, "mul": lambda a, b: a * b,
    "div": lambda a, b: a / b if b else math.copysign(math.inf, a) * math.copysign(1.0, b) if a else math.nan,
    "floordiv": lambda a, b: a // b if b else math.nan, "mod": lambda a, b: a % b if b else math.nan,
    "max": max, "min": min, "pow": lambda a, b: _pow(a, b),
    "and": lambda a, b: float(int(a) & int(b)), "or": lambda a, b: float(int(a) | int(b)),
    "xor": lambda a, b: float(int(a) ^ int(b)),
}
_UNARY: dict[str, Callable[[float], float]] = {
    "neg": lambda x: -x, "abs": abs, "floor": math.floor, "ceil": math.ceil,
    "sign": lambda x: float(np.sign(x)), "round": lambda x: float(np.round(x)), "not": lambda x: float(not x),
    "isnan": lambda x: float(math.isnan(x)),
    "reciprocal": lambda x: 1.0 / x if x else math.copysign(math.inf, x),
}
_CMP: dict[str, Callable[[float, float], bool]] = {
    "eq": lambda a, b: a == b, "ne": lambda a, b: a != b, "lt": lambda a, b: a < b,
    "le": lambda a, b: a <= b, "gt": lambda a, b: a > b, "ge": lambda a, b: a >= b,
}


def _pow(a: float, b: float) -> float:
    try:
        return float(a ** b) if not (a < 0 and b != int(b)) else math.nan
    except (OverflowError, ZeroDivisionError):
        return math.inf


def _in_dtype(values: Iterable[float], dtype: str) -> Values:
    """The values as `dtype` holds them: integers wrapped to its width, floats rounded to it (None
    when an operation has no finite value to wrap, or raises)."""
    try:
        return _held(values, dtype)
    except (ArithmeticError, ValueError):
        return None


def _held(values: Iterable[float], dtype: str) -> Values:
    out = set()
    for v in values:
        if dtype == "bool":
            out.add(float(bool(v)))
        elif dtype in INT_DTYPES:
            if not math.isfinite(v):
                return None
            lo, hi = int_range(dtype)
            out.add(float((int(v) - lo) % (hi - lo + 1) + lo))
        else:
            out.add(float(quantize(np.array([v], dtype=np.float32), dtype)[0]) if dtype != "f64" else v)
    return frozenset(out) if len(out) <= LIMIT else None


def dtype_values(dtype: str) -> Values:
    """Every value of a narrow dtype (bool, 8-bit integers, fp4), else None."""
    if dtype == "bool":
        return frozenset({0.0, 1.0})
    if dtype in ("u8", "i8"):
        lo, hi = int_range(dtype)
        return frozenset(float(v) for v in range(lo, hi + 1))
    if dtype == "f4e2m1":
        return frozenset(E2M1_VALUES)
    return None


Writer = tuple[NodeOp, "SSAValue | float"]  # a writer of a local and the body value (or literal) it stores


class ValueSets:
    """`of(node, v)`: the values of body value `v` of `node`, or None; `writers(node, index)` gives the
    body values stored into the local that input `index` of `node` reads, one writer at a time (None:
    not a local; an item None: a writer that accumulates)."""

    def __init__(self, writers: Callable[[NodeOp, int], Iterable[Writer | None] | None]):
        self.writers = writers
        self._memo: dict[tuple[int, SSAValue], Values] = {}
        self._active: set[tuple[int, SSAValue]] = set()
        self._ranges: dict[tuple[int, SSAValue], Range] = {}

    def of(self, node: NodeOp, v: SSAValue) -> Values:
        key = (id(node), v)
        if key in self._memo:
            return self._memo[key]
        if key in self._active:  # a value fed back through a scan: unknown
            return None
        self._active.add(key)
        try:
            out = self._eval(node, v)
        finally:
            self._active.discard(key)
        if out is None:
            out = _integers(self.integral(node, v), type_dtype(v.type))
        self._memo[key] = out
        return out

    def integral(self, node: NodeOp, v: SSAValue) -> Range:
        """The range of `v` when each of its values is an integer (bounds may be infinite), else None."""
        key = (id(node), v)
        if key in self._ranges:
            return self._ranges[key]
        self._ranges[key] = None  # a value fed back through a scan: unknown
        out = self._range(node, v)
        self._ranges[key] = out
        return out

    def _range(self, node: NodeOp, v: SSAValue) -> Range:
        dt = type_dtype(v.type)
        if dt == "bool":
            return (0.0, 1.0)
        if isinstance(v, BlockArgument):
            stored = self.writers(node, v.index)
            if stored is None:
                return dtype_range(dt)
            out: Range = None
            for item in stored:
                if item is None:
                    return dtype_range(dt)
                w, s = item
                got = _literal_range(float(s)) if isinstance(s, (int, float)) else self.integral(w, s)
                if got is None:
                    return dtype_range(dt)
                out = got if out is None else (min(out[0], got[0]), max(out[1], got[1]))
            return _held_range(out, dt) if out is not None else dtype_range(dt)
        o = v.owner
        if isinstance(o, ConstOp):
            a = o.value
            return _literal_range(float(a.value.data if isinstance(a, FloatAttr) else int(a.value.data)))
        if isinstance(o, BitcastOp):  # new values: the bits of any operand may be any pattern
            return dtype_range(dt)
        if isinstance(o, CastOp):
            x = self.integral(node, o.x)
            if dt in INT_DTYPES:  # a float truncates to an integer
                return _held_range(x, dt) or dtype_range(dt)
            return _held_range(x, dt)
        if isinstance(o, UnaryOp):
            fn = o.fn.data
            if fn == "sign":
                return (-1.0, 1.0)
            x = self.integral(node, o.x)
            if fn in _ROUNDING:
                return x or (-math.inf, math.inf)
            if x is None:
                return None
            if fn == "neg":
                return (-x[1], -x[0])
            if fn == "abs":
                return (0.0 if x[0] <= 0 <= x[1] else min(abs(x[0]), abs(x[1])), max(abs(x[0]), abs(x[1])))
            return None
        if isinstance(o, SelectOp):
            a, b = self.integral(node, o.a), self.integral(node, o.b)
            return None if a is None or b is None else _held_range((min(a[0], b[0]), max(a[1], b[1])), dt)
        if isinstance(o, BinaryOp) and o.fn.data in ("max", "min", "add", "sub", "mul"):
            a, b = self.integral(node, o.lhs), self.integral(node, o.rhs)
            if a is None or b is None:
                return None
            fn = o.fn.data
            if fn in ("max", "min"):
                f = max if fn == "max" else min
                return _held_range((f(a[0], b[0]), f(a[1], b[1])), dt)
            if fn == "add":
                return _held_range((a[0] + b[0], a[1] + b[1]), dt)
            if fn == "sub":
                return _held_range((a[0] - b[1], a[1] - b[0]), dt)
            ends = [_times(x, y) for x in a for y in b]
            return _held_range((min(ends), max(ends)), dt)
        return None

    def _eval(self, node: NodeOp, v: SSAValue) -> Values:
        dt = type_dtype(v.type)
        if isinstance(v, BlockArgument):
            stored = self.writers(node, v.index)
            if stored is None:
                return dtype_values(dt)
            out: set[float] = set()
            any_writer = False
            for item in stored:  # lazily: the first writer of unknown values settles it
                if item is None:
                    return dtype_values(dt)
                any_writer = True
                w, s = item
                got = frozenset({float(s)}) if isinstance(s, (int, float)) else self.of(w, s)
                if got is None:
                    return dtype_values(dt)
                out |= got
            return _in_dtype(out, dt) if any_writer else dtype_values(dt)
        o = v.owner
        if isinstance(o, ConstOp):
            a = o.value
            return frozenset({float(a.value.data)}) if isinstance(a, FloatAttr) else \
                frozenset({float(int(a.value.data))})
        if isinstance(o, GatherOp):
            return dtype_values(dt)
        if isinstance(o, CastOp):
            x = self.of(node, o.x)
            if x is None:
                return dtype_values(dt)
            if dt in INT_DTYPES and type_dtype(o.x.type) in FLOAT_DTYPES:
                x = frozenset(float(math.trunc(e)) if math.isfinite(e) else e for e in x)
            return _in_dtype(x, dt)
        if isinstance(o, BitcastOp):
            return _bitcast_values(self.of(node, o.x), type_dtype(o.x.type), dt)
        if isinstance(o, SelectOp):
            return _union(self.of(node, o.a), self.of(node, o.b), dt)
        if isinstance(o, CmpOp):
            a, b = self.of(node, o.lhs), self.of(node, o.rhs)
            if a is None or b is None or len(a) * len(b) > WORK:
                return frozenset({0.0, 1.0})
            f = _CMP[o.pred.data]
            return frozenset(float(f(x, y)) for x in a for y in b)
        if isinstance(o, UnaryOp) and o.fn.data in _UNARY:
            x = self.of(node, o.x)
            return None if x is None else _in_dtype((_UNARY[o.fn.data](e) for e in x), dt)
        if isinstance(o, BinaryOp) and o.fn.data in _BINARY:
            a, b = self.of(node, o.lhs), self.of(node, o.rhs)
            if a is None or b is None or len(a) * len(b) > WORK:
                return dtype_values(dt)
            f = _BINARY[o.fn.data]
            return _in_dtype((f(x, y) for x in a for y in b), dt)
        return dtype_values(dt)


def _bitcast_values(x: Values, src: str, dst: str) -> Values:
    """The values a bit cast gives: not its operand's (a bit cast keeps no value), but the patterns
    of integer operands read as `dst`. A set of floats cannot say which of its zeros are negative
    (0.0 == -0.0) nor which NaN payloads it holds, so a float operand gives every value of `dst`."""
    if x is None or src in FLOAT_DTYPES:
        return dtype_values(dst)
    return frozenset(float(v) for v in bitcast(np.array(sorted(x), dtype=STORAGE[src]), src, dst))


def _times(x: float, y: float) -> float:
    """A product of two range ends, where 0 times an unbounded end is 0 (the ends are integers)."""
    return 0.0 if x == 0 or y == 0 else x * y


def _literal_range(v: float) -> Range:
    return (v, v) if math.isfinite(v) and v == int(v) else None


def dtype_range(dtype: str) -> Range:
    if dtype == "bool":
        return (0.0, 1.0)
    if dtype in INT_DTYPES:
        lo, hi = int_range(dtype)
        return (float(lo), float(hi))
    return None


def _held_range(r: Range, dtype: str) -> Range:
    """Range `r` of integers as `dtype` holds them: an integer dtype must hold each (else it wraps:
    None); a binary float rounds an integer to an integer (its spacing is a power of two, at least 1
    wherever it cannot hold every integer), monotonically, so the ends round with it; fp8 and fp4
    are left out (their overflow is no integer)."""
    if r is None:
        return None
    if dtype == "bool":
        return r if r[0] >= 0 and r[1] <= 1 else None
    if dtype in INT_DTYPES:
        lo, hi = int_range(dtype)
        return r if lo <= r[0] and r[1] <= hi else None
    if dtype not in ("f16", "bf16", "f32", "f64"):
        return None
    return tuple(_round_end(e, dtype) for e in r)  # type: ignore[return-value]


def _round_end(e: float, dtype: str) -> float:
    if not math.isfinite(e) or dtype == "f64":
        return e
    with np.errstate(over="ignore"):
        return float(quantize(np.array([e], dtype=np.float32), dtype)[0])


def _integers(r: Range, dtype: str) -> Values:
    """The integers of a bounded range, as a set no larger than LIMIT (else None)."""
    if r is None or not all(math.isfinite(e) for e in r) or r[1] - r[0] + 1 > LIMIT:
        return None
    return _in_dtype((float(i) for i in range(int(r[0]), int(r[1]) + 1)), dtype)


def _union(a: Values, b: Values, dtype: str) -> Values:
    if a is None or b is None:
        return dtype_values(dtype)
    return a | b if len(a | b) <= LIMIT else None


def product_values(sets: Iterable[Values], dtype: str) -> Values:
    """Every product of one value from each of `sets`, as `dtype` computes it (None when one is unknown
    or a step exceeds WORK or LIMIT): the values of an operand that multiplies several factors."""
    out: Values = frozenset({1.0})
    for s in sets:
        if s is None or out is None or len(out) * len(s) > WORK:
            return None
        out = _in_dtype((a * b for a in out for b in s), dtype)
    return out


def product_range(ranges: Iterable[Range], dtype: str) -> Range:
    """The range of a product of integer-valued factors as `dtype` computes it (None when one is
    unknown, or the product wraps in an integer `dtype`)."""
    out: Range = (1.0, 1.0)
    for r in ranges:
        if r is None or out is None:
            return None
        ends = [_times(x, y) for x in out for y in r]
        out = _held_range((min(ends), max(ends)), dtype)
    return out


#: The greatest integer up to which each float dtype holds every integer exactly.
_EXACT_INTEGERS = {"f4e2m1": 4, "f8e5m2": 8, "f8e4m3": 16, "bf16": 256, "f16": 2048,
                   "f32": 2 ** 24, "f64": 2 ** 53}


def holds_range(dtype: str, r: tuple[float, float]) -> bool:
    """Whether `dtype` holds every integer of the (finite) range `r`."""
    if dtype == "bool" or dtype in INT_DTYPES:
        lo, hi = dtype_range(dtype)  # type: ignore[misc]
        return lo <= r[0] and r[1] <= hi
    top = _EXACT_INTEGERS.get(dtype)
    return top is not None and -top <= r[0] and r[1] <= top


def narrowest_range(r: Range, order: Iterable[str]) -> str | None:
    """The first dtype of `order` that holds every integer of range `r` (None: unknown, unbounded or
    none)."""
    if r is None or not all(math.isfinite(e) for e in r):
        return None
    return next((d for d in order if holds_range(d, r)), None)


def narrowest(values: Values, order: Iterable[str], represents: Callable[[str, float], bool]) -> str | None:
    """The first dtype of `order` that represents every one of `values` (None: unknown or none)."""
    if values is None:
        return None
    for d in order:
        if all(represents(d, v) for v in values):
            return d
    return None
