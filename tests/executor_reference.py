"""A point-by-point loop-IR interpreter: slow, obviously faithful, the executor's oracle in tests.

It follows the program literally: every loop in order, every statement per point, each store
rounded to the tensor's dtype. Only small kernels are practical (~1e5 points). With `exact=True`
f32 values are held in float64, which tells an executor error from the program's own f32 rounding
(an ill-conditioned program differs between two valid f32 evaluation orders).
"""

from __future__ import annotations

import math
import struct
from collections.abc import Mapping

import numpy as np

from solar_compiler.executor.numeric import STORAGE, USER, erf, fill_value, quantize
from solar_compiler.loopir.affine import AffExpr
from solar_compiler.loopir.ast import (
    Assign,
    Binary,
    Bitcast,
    Cast,
    Cmp,
    Const,
    For,
    IndexValue,
    Kernel,
    LoopIRError,
    Node,
    Read,
    Select,
    SExpr,
    Unary,
    typecheck,
)

UNARY = {"neg": np.negative, "exp": np.exp, "log": np.log, "sqrt": np.sqrt, "rsqrt": lambda x: 1 / np.sqrt(x),
         "tanh": np.tanh, "sigmoid": lambda x: 1 / (1 + np.exp(-x)), "erf": erf, "abs": np.abs,
         "floor": np.floor, "ceil": np.ceil, "round": np.rint, "sign": np.sign, "not": np.logical_not,
         "sin": np.sin, "cos": np.cos, "log1p": np.log1p, "expm1": np.expm1, "reciprocal": np.reciprocal,
         "isnan": np.isnan}
BINARY = {"add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.true_divide,
          "floordiv": np.floor_divide, "mod": np.mod, "max": np.maximum, "min": np.minimum, "pow": np.power,
          "and": np.logical_and, "or": np.logical_or, "xor": np.logical_xor}
CMP = {"eq": np.equal, "ne": np.not_equal, "lt": np.less, "le": np.less_equal, "gt": np.greater,
       "ge": np.greater_equal}
ACC = {"+=": np.add, "*=": np.multiply, "max=": np.maximum, "min=": np.minimum}


def interpret(kernel: Kernel, inputs: Mapping[str, np.ndarray], exact: bool = False) -> dict[str, np.ndarray]:
    kernel = typecheck(kernel)
    storage = {**STORAGE, "f32": np.dtype(np.float64)} if exact else STORAGE
    tensors = {t.name: np.full(t.shape, fill_value(t.dtype), dtype=storage[t.dtype]) for t in kernel.tensors}
    for t in kernel.by_role("input", "weight"):
        tensors[t.name] = quantize(np.asarray(inputs[t.name], dtype=STORAGE[t.dtype]), t.dtype) \
            .astype(storage[t.dtype])
    dtypes = {t.name: t.dtype for t in kernel.tensors}
    with np.errstate(all="ignore"):
        _run(kernel.body, {}, tensors, dtypes, storage)
    return {t.name: tensors[t.name] if exact else tensors[t.name].astype(USER[t.dtype])
            for t in kernel.by_role("output")}


def _run(nodes: list[Node], env: dict[str, int], tensors: dict, dtypes: dict, storage: dict) -> None:
    for n in nodes:
        if isinstance(n, Assign):
            value = _eval(n.value, env, tensors, storage)
            idx = _index(n.target, n.indices, env, tensors, storage)
            arr = tensors[n.target]
            new = value if n.kind == "=" else ACC[n.kind](arr[idx], value)
            arr[idx] = quantize(np.asarray(new, dtype=arr.dtype), dtypes[n.target])
        elif isinstance(n, For):
            for v in range(n.lb.evaluate(env), n.ub.evaluate(env), n.step):
                _run(n.body, {**env, n.iv: v}, tensors, dtypes, storage)
        elif all(c.evaluate(env) for c in n.conds):
            _run(n.body, env, tensors, dtypes, storage)


def _index(tensor: str, indices: tuple, env: dict[str, int], tensors: dict, storage: dict) \
        -> tuple[int, ...]:
    out = []
    for d, e in enumerate(indices):
        v = int(e.evaluate(env) if isinstance(e, AffExpr) else _eval(e, env, tensors, storage))
        if not 0 <= v < tensors[tensor].shape[d]:
            raise LoopIRError(f"index {d} of '{tensor}' is {v}")
        out.append(v)
    return tuple(out)


def _eval(e: SExpr, env: dict[str, int], tensors: dict, storage: dict) -> np.generic:
    st = storage[e.dtype]
    if isinstance(e, Const):
        return st.type(e.value)
    if isinstance(e, IndexValue):
        return np.int64(e.expr.evaluate(env))
    if isinstance(e, Read):
        return tensors[e.tensor][_index(e.tensor, e.indices, env, tensors, storage)]
    if isinstance(e, Unary):
        return st.type(UNARY[e.fn](_eval(e.x, env, tensors, storage)))
    if isinstance(e, Binary):
        a, b = _eval(e.a, env, tensors, storage), _eval(e.b, env, tensors, storage)
        if e.fn == "div" and st.kind == "i":
            return st.type(math.trunc(int(a) / int(b)) if b != 0 else 0)
        if e.fn in ("and", "or", "xor") and st.kind == "i":
            return st.type({"and": a & b, "or": a | b, "xor": a ^ b}[e.fn])
        return st.type(BINARY[e.fn](a, b))
    if isinstance(e, Cmp):
        return np.bool_(CMP[e.pred](_eval(e.a, env, tensors, storage), _eval(e.b, env, tensors, storage)))
    if isinstance(e, Select):
        c, a, b = (_eval(x, env, tensors, storage) for x in (e.cond, e.a, e.b))
        return a if c else b
    if isinstance(e, Cast):
        x = _eval(e.x, env, tensors, storage)
        if e.dtype == "bool":
            return np.bool_(x != 0)
        if st.kind == "f":
            return quantize(np.asarray(x, dtype=st), e.dtype)[()]
        return st.type(math.trunc(x) if isinstance(x, np.floating) and math.isfinite(x) else x)
    if isinstance(e, Bitcast):
        return st.type(_from_bytes(_to_bytes(_eval(e.x, env, tensors, storage), e.x.dtype), e.dtype))
    raise LoopIRError(f"unknown node {e!r}")


# ---- bit casts: the bytes of one value, little-endian, through `struct` -----------------------------
_STRUCT = {"f64": "<d", "f32": "<f", "f16": "<e", "i64": "<q", "i32": "<i", "i16": "<h", "u16": "<H",
           "i8": "<b", "u8": "<B"}


def _e4m3(code: int) -> float:
    """The value of an e4m3fn code, from its fields: 1 sign, 4 exponent (bias 7), 3 mantissa bits."""
    e, m = (code >> 3) & 15, code & 7
    if e == 15 and m == 7:
        return math.nan
    mag = m / 8 * 2.0 ** -6 if e == 0 else (1 + m / 8) * 2.0 ** (e - 7)
    return -mag if code & 128 else mag


def _to_bytes(x: float | int, dtype: str) -> bytes:
    if dtype == "bf16":  # the top half of the f32 pattern
        return struct.pack("<f", x)[2:]
    if dtype == "f8e5m2":  # the top half of the f16 pattern
        return struct.pack("<e", x)[1:]
    if dtype == "f8e4m3":  # the code whose value (and sign, for zero) is x
        same = [c for c in range(256) if math.isnan(x) and math.isnan(_e4m3(c))
                or _e4m3(c) == x and math.copysign(1, _e4m3(c)) == math.copysign(1, x)]
        return bytes([same[0]])
    return struct.pack(_STRUCT[dtype], x if dtype[0] == "f" else int(x))


def _from_bytes(b: bytes, dtype: str) -> float | int:
    if dtype == "bf16":
        return struct.unpack("<f", b"\0\0" + b)[0]
    if dtype == "f8e5m2":
        return struct.unpack("<e", b"\0" + b)[0]
    if dtype == "f8e4m3":
        return _e4m3(b[0])
    return struct.unpack(_STRUCT[dtype], b)[0]
