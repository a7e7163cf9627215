"""The one rule table for the closed scalar-op set: which operand dtypes each op accepts and the
dtype it gives.

The loop AST's type checker (`ast.check_expr`) and every dialect verifier (`loop.unary`,
`loop.binary`, `loop.cmp`, `loop.select`, and the einsum node bodies that reuse them) call these
functions, so a program that the text form rejects is also rejected as MLIR, with the same
message. Each function returns the result dtype or raises `RuleError`.
"""

from __future__ import annotations

import math

from solar_compiler.errors import LoopIRError, SolarError

#: name -> bytes per element. `f4e2m1` (fp4: 1 sign, 2 exponent, 1 mantissa bit; values 0, 0.5, 1, 1.5,
#: 2, 3, 4, 6 and their negatives) is half a byte: two values share a byte, as in torch's
#: float4_e2m1fn_x2 and NVFP4 / MXFP4 storage. `u8` is unsigned (a packed-fp4 byte is read as one).
DTYPES: dict[str, int | float] = {
    "f64": 8, "f32": 4, "bf16": 2, "f16": 2, "f8e4m3": 1, "f8e5m2": 1, "f4e2m1": 0.5,
    "i64": 8, "i32": 4, "i16": 2, "u16": 2, "i8": 1, "u8": 1, "bool": 1,
}
#: The value of each e2m1 (fp4) code 0..15: bit 3 the sign, bits 2-1 the exponent, bit 0 the mantissa.
E2M1_VALUES = (0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0)
FLOAT_DTYPES = ("f64", "f32", "bf16", "f16", "f8e4m3", "f8e5m2", "f4e2m1")
INT_DTYPES = ("i64", "i32", "i16", "u16", "i8", "u8")
UNSIGNED_DTYPES = ("u8", "u16")
UNARY_FNS = ("neg", "exp", "log", "sqrt", "rsqrt", "tanh", "sigmoid", "erf", "abs", "floor", "ceil",
             "round", "sign", "not", "sin", "cos", "log1p", "expm1", "reciprocal", "isnan",
             "atan", "asin", "acos", "sinh", "cosh", "asinh", "acosh", "atanh")
BINARY_FNS = ("add", "sub", "mul", "div", "floordiv", "mod", "max", "min", "pow", "and", "or", "xor", "atan2")
CMP_PREDS = ("eq", "ne", "lt", "le", "gt", "ge")
#: One special-function evaluation each (a libm / SFU routine), priced apart from the FMA lanes'
#: arithmetic. The inverse trigonometric and hyperbolic functions are libm routines too: one each.
TRANSCENDENTAL = frozenset({"exp", "log", "sqrt", "rsqrt", "tanh", "sigmoid", "erf", "sin", "cos", "log1p",
                            "expm1", "pow", "atan", "asin", "acos", "sinh", "cosh", "asinh", "acosh",
                            "atanh", "atan2"})
LOGICAL_FNS = ("and", "or", "xor")   # bool or integer operands
BOOL_RESULT_UNARY = ("not", "isnan")


REDUCTION_IDENTITY = {"+=": 0.0, "*=": 1.0, "max=": -math.inf, "min=": math.inf}


def nbytes(dtype: str, elements: int) -> int:
    """Bytes of `elements` values of `dtype`: sub-byte values packed, the last byte counted whole."""
    return math.ceil(elements * DTYPES[dtype]) if DTYPES[dtype] < 1 else elements * int(DTYPES[dtype])


def int_range(dtype: str) -> tuple[int, int]:
    """The smallest and largest value of an integer dtype."""
    bits = int(DTYPES[dtype] * 8)
    if dtype in UNSIGNED_DTYPES:
        return 0, 2 ** bits - 1
    return -(2 ** (bits - 1)), 2 ** (bits - 1) - 1


def reduction_identity(kind: str, dtype: str) -> float | int | None:
    """The identity of a reduction kind in a dtype (None for `=`): what a masked-out iteration
    contributes, and the init that folds into a reduction."""
    if kind == "=":
        return None
    if dtype in FLOAT_DTYPES:
        return REDUCTION_IDENTITY[kind]
    lo, hi = int_range(dtype)
    return {"+=": 0, "*=": 1, "max=": lo, "min=": hi}[kind]


class RuleError(SolarError):
    """A scalar operation applied to operand types it does not accept."""


def unary_result(fn: str, x: str) -> str:
    if fn not in UNARY_FNS:
        raise RuleError(f"unknown scalar operation '{fn}' (known: {', '.join(UNARY_FNS)})")
    if fn == "not" and x != "bool":
        raise RuleError(f"'not' needs a bool operand, got {x}")
    if fn in TRANSCENDENTAL and x not in FLOAT_DTYPES:
        raise RuleError(f"'{fn}' needs a floating-point operand, got {x}")
    return "bool" if fn in BOOL_RESULT_UNARY else x


def binary_result(fn: str, a: str, b: str) -> str:
    if fn not in BINARY_FNS:
        raise RuleError(f"unknown scalar operation '{fn}' (known: {', '.join(BINARY_FNS)})")
    if a != b:
        raise RuleError(f"type mismatch in '{fn}': {a} vs {b}")
    if fn in LOGICAL_FNS and a not in ("bool", *INT_DTYPES):
        raise RuleError(f"'{fn}' needs bool or integer operands, got {a}")
    if fn not in LOGICAL_FNS and a == "bool":
        raise RuleError(f"'{fn}' on bool operands (cast them first)")
    if fn == "atan2" and a not in FLOAT_DTYPES:
        raise RuleError(f"'atan2' needs floating-point operands, got {a}")
    return a


def cmp_result(pred: str, a: str, b: str) -> str:
    if pred not in CMP_PREDS:
        raise RuleError(f"unknown comparison '{pred}' (known: {', '.join(CMP_PREDS)})")
    if a != b:
        raise RuleError(f"type mismatch in comparison '{pred}': {a} vs {b}")
    return "bool"


def select_result(cond: str, a: str, b: str) -> str:
    if cond != "bool":
        raise RuleError(f"select condition must be bool, got {cond}")
    if a != b:
        raise RuleError(f"type mismatch in select: {a} vs {b}")
    return a


def cast_result(x: str, to: str) -> str:
    for d in (x, to):
        if d not in DTYPES:
            raise RuleError(f"unknown dtype {d}")
    return to


def bitcast_result(x: str, to: str) -> str:
    """A bit cast reads a value's bits as another dtype: defined only where both dtypes have the same
    width (f32 <-> i32, bf16 / f16 <-> i16 / u16, f64 <-> i64, fp8 <-> i8 / u8), as `arith.bitcast`
    and torch's `x.view(dtype)` of an element size it keeps. bool has no bit pattern of its own
    (any nonzero byte is True), so it takes part in none."""
    for d in (x, to):
        if d not in DTYPES:
            raise RuleError(f"unknown dtype {d}")
    if "bool" in (x, to) or DTYPES[x] != DTYPES[to]:
        raise RuleError(f"bit cast from {x} to {to}: a bit cast needs two non-bool dtypes of one width")
    return to


def index_dtype(tensor: str, dt: str) -> None:
    """A loaded (indirect) index must be an integer."""
    if dt not in INT_DTYPES:
        raise RuleError(f"indirect index into '{tensor}' must be an integer, got {dt}")


def coerce_literal(value: float | int | bool, dtype: str) -> float | int | bool:
    """A literal's value in `dtype` (the loop IR's type checker and the einsum builder type literals so)."""
    if dtype == "bool":
        return bool(value)
    if dtype in INT_DTYPES:
        lo, hi = int_range(dtype)
        if isinstance(value, float) and (math.isinf(value) or math.isnan(value) or value != int(value)) \
                or not lo <= int(value) <= hi:
            raise LoopIRError(f"literal {value} does not fit integer type {dtype}")
        return int(value)
    return float(value)
