"""The narrowest dtype that holds every value an expression takes: how a contraction is priced.

A contraction `C += A * B` on operands that only carry values of a narrower dtype (`a.float() @
b.float()` on bf16 tensors, fp8 tensors `.to(bf16)`, int8 tensors `.to(int32)`) can run on that
narrower dtype's unit: the values convert back losslessly, so an implementation may keep (or
stream) them in the narrow format and multiply there, accumulating at the contraction's own
precision. A bound must assume it may. So an operand's dtype is looked through any chain of *pure
widening* casts (every value of the source dtype is exact in the destination, `HOLDS`), wherever
the cast is:

* in the contraction's own statement (`cast(A[i, k]) * cast(B[k, j])`);
* in earlier statements that write a local the contraction reads: the program's dataflow is
  followed back through every statement that can have written the elements the contraction reads
  (writers before it, and writers inside a scan loop that encloses it; a writer whose footprint
  misses the read footprint is left out). The local holds narrow values when every such writer
  stores one (`=`, or a `max=`/`min=` that picks one of its operands).

Exact operations keep a value's dtype: negation and absolute value, selects, max and min pick or
flip operands; a literal holds in the narrowest dtype that represents it (0 and 1 in any). Every
other operation (arithmetic, `+=` accumulation, transcendental functions, a narrowing or lossy
cast, an index value) produces values of its own declared dtype.

Getting this wrong in the narrow direction only lowers a bound; in the wide direction it prices a
contraction at a slower unit than a legal implementation uses, which is the error a bound must
never make (issue 9, item 1). The rules are exact in both directions for the cases above.
"""

from __future__ import annotations

import math
import struct
from collections.abc import Iterable

import islpy as isl
import numpy as np

from solar_compiler.analysis.polyhedral import access_map
from solar_compiler.loopir.affine import AffExpr, FloorDiv
from solar_compiler.loopir.ast import (
    DTYPES,
    Binary,
    Cast,
    Const,
    Kernel,
    Read,
    Select,
    SExpr,
    StmtContext,
    Unary,
    reads,
    statements,
)

#: dtype -> the dtypes that represent EVERY value of it exactly (itself included). bf16 and f16 hold
#: every f8 value (e4m3: 4-bit exponent, 3-bit mantissa; e5m2 is a truncated f16); f16 holds integers
#: up to 2048 and bf16 up to 256, so both hold every i8; f64 holds every i32; bool (0, 1) fits all.
HOLDS: dict[str, frozenset[str]] = {
    "bool": frozenset(DTYPES),
    "i8": frozenset({"i8", "i32", "i64", "f16", "bf16", "f32", "f64"}),
    "i32": frozenset({"i32", "i64", "f64"}),
    "i64": frozenset({"i64"}),
    "f8e4m3": frozenset({"f8e4m3", "f16", "bf16", "f32", "f64"}),
    "f8e5m2": frozenset({"f8e5m2", "f16", "bf16", "f32", "f64"}),
    "f16": frozenset({"f16", "f32", "f64"}),
    "bf16": frozenset({"bf16", "f32", "f64"}),
    "f32": frozenset({"f32", "f64"}),
    "f64": frozenset({"f64"}),
}
# Narrowest first; among equal widths integer before float (an exact i8 product is the cheapest).
_ORDER = ("bool", "i8", "f8e4m3", "f8e5m2", "bf16", "f16", "i32", "f32", "i64", "f64")
_EXACT_OPS_UNARY = ("neg", "abs")
_EXACT_OPS_BINARY = ("max", "min")
_PICKING_KINDS = ("=", "max=", "min=")   # a reduction whose result is one of its operands' values
#: The shortest run of consecutive reduced-index values a scale must stay constant over to be applied
#: outside the matrix unit: the K of the smallest MMA instruction (m16n8k16 on 16-bit operands).
MIN_SCALE_BLOCK = 16


def operand_factors(e: SExpr) -> list[SExpr]:
    """The factors a product multiplies (through multiplication, negation, the numerator of a
    division, and casts of a product), each with the casts applied to it: `cast(A[i, k]) *
    B[k, j]` gives `cast(A[i, k])` and `B[k, j]` (so `ValueDtypes.of` sees what the cast does)."""
    if isinstance(e, Cast) and _is_product(e.x):
        return operand_factors(e.x)
    if isinstance(e, Unary) and e.fn == "neg":
        return operand_factors(e.x)
    if isinstance(e, Binary) and e.fn == "mul":
        return operand_factors(e.a) + operand_factors(e.b)
    if isinstance(e, Binary) and e.fn == "div":
        return operand_factors(e.a)
    return [e]


def _is_product(e: SExpr) -> bool:
    while isinstance(e, Cast):
        e = e.x
    return (isinstance(e, Unary) and e.fn == "neg") or (isinstance(e, Binary) and e.fn in ("mul", "div"))


def widens(src: str, dst: str) -> bool:
    """Whether casting `src` to `dst` keeps every value (a pure widening cast)."""
    return dst in HOLDS[src]


def join(dtypes: Iterable[str]) -> str:
    """The narrowest dtype that holds every value of each of `dtypes` (bool for none)."""
    ds = set(dtypes)
    for d in _ORDER:
        if all(d in HOLDS[x] for x in ds):
            return d
    return "f64" if all("f64" in HOLDS[x] for x in ds) else max(ds, key=lambda x: DTYPES[x])


def const_dtype(value: float | int | bool, declared: str) -> str:
    """The narrowest dtype (no wider than `declared`) that represents the literal exactly."""
    v = float(value)
    if math.isnan(v):
        return declared
    for d in _ORDER:
        if declared in HOLDS[d] and _represents(d, v):
            return d
    return declared


def _represents(d: str, v: float) -> bool:
    if d == "bool":
        return v in (0.0, 1.0) and not (v == 0.0 and math.copysign(1.0, v) < 0)
    if d in ("i8", "i32", "i64"):
        bits = DTYPES[d] * 8
        return math.isfinite(v) and v == int(v) and -(2 ** (bits - 1)) <= v < 2 ** (bits - 1)
    if d in ("f16", "bf16", "f32"):
        if math.isinf(v):
            return True
        with np.errstate(over="ignore"):
            f = np.float32(v)
        if float(f) != v:
            return False
        if d == "f16":
            with np.errstate(over="ignore"):
                return float(np.float16(f)) == v
        return d == "f32" or struct.unpack("<I", struct.pack("<f", f))[0] & 0xFFFF == 0
    if d == "f64":
        return True
    return False  # f8: literals are never assumed to fit (no reference rounding here)


class ValueDtypes:
    """Per kernel: `of(ctx, e)` is the narrowest dtype holding every value `e` takes in statement
    `ctx` (module doc). Results are memoised per (statement, tensor) read. Without a kernel, a
    local reads as its declared dtype (the statement alone is looked through)."""

    def __init__(self, kernel: Kernel | None):
        self.kernel = kernel
        self.ctxs = statements(kernel) if kernel is not None else []
        self.writers: dict[str, list[StmtContext]] = {}
        for c in self.ctxs:
            self.writers.setdefault(c.stmt.target, []).append(c)
        self.roles = {t.name: t.role for t in kernel.tensors} if kernel is not None else {}
        self._memo: dict[tuple[int, str, tuple], str] = {}
        self._active: set[tuple[int, str, tuple]] = set()

    def of(self, ctx: StmtContext, e: SExpr) -> str:
        if isinstance(e, Cast):
            inner = self.of(ctx, e.x)
            return inner if widens(inner, e.typed()) else e.typed()
        if isinstance(e, Unary) and e.fn in _EXACT_OPS_UNARY:
            return self.of(ctx, e.x)
        if isinstance(e, Binary) and e.fn in _EXACT_OPS_BINARY:
            return join((self.of(ctx, e.a), self.of(ctx, e.b)))
        if isinstance(e, Select):
            return join((self.of(ctx, e.a), self.of(ctx, e.b)))
        if isinstance(e, Const):
            return const_dtype(e.value, e.typed())
        if isinstance(e, Read) and self.roles.get(e.tensor) == "local":
            return self._read(ctx, e)
        return e.typed()

    def stored(self, ctx: StmtContext, e: SExpr, reduced: frozenset[str]) -> str:
        """The dtype a contraction factor `e` of statement `ctx` may be priced at: `of`, looking also
        through block scales (`is_block_scale`) applied in the statements that wrote a local it
        reads, as `(a.float() * 2.0) @ b.float()` and dequantised fp8 operands are written."""
        if isinstance(e, Read) and self.roles.get(e.tensor) == "local" and not e.indirect:
            found = self._scaled_writers(ctx, e, reduced)
            if found is not None:
                return found
        return self.of(ctx, e)

    def _scaled_writers(self, ctx: StmtContext, r: Read, reduced: frozenset[str]) -> str | None:
        """The join over the writers that can reach read `r` of the dtype of their one data factor,
        when each stores (`=`) a product of it with block scales; else None."""
        if not reduced & set().union(*(i.vars() for i in r.indices if isinstance(i, AffExpr))):
            return None
        seen = _read_region(ctx, r)
        out: list[str] = []
        for w in self.writers.get(r.tensor, []):
            if not _may_precede(w, ctx) or (seen is not None and not _meets(w, seen)):
                continue
            s = w.stmt
            names = [i.terms[0][0] for i in s.indices if isinstance(i, AffExpr) and i.is_var()]
            if s.kind != "=" or len(names) != len(s.indices) or len(set(names)) != len(names):
                return None
            env = {str(v): i for v, i in zip(names, r.indices, strict=True) if isinstance(i, AffExpr)}
            if len(env) != len(names):
                return None
            parts = scale_factors(s.value)
            data = [(f, divides) for f, divides in parts if not is_block_scale(f, reduced, env)]
            if len(data) != 1 or data[0][1]:
                return None
            out.append(self.of(w, data[0][0]))
        return join(out) if out else None

    def _read(self, ctx: StmtContext, r: Read) -> str:
        declared = r.typed()
        key = (ctx.index, r.tensor, tuple(str(i) for i in r.indices))
        if key in self._memo:
            return self._memo[key]
        if key in self._active:  # a cycle (a value fed back through a scan): its declared dtype
            return declared
        self._active.add(key)
        try:
            found = self._writers_dtype(ctx, r)
        finally:
            self._active.discard(key)
        out = declared if found is None or not widens(found, declared) else found
        self._memo[key] = out
        return out

    def _writers_dtype(self, ctx: StmtContext, r: Read) -> str | None:
        """The join of what every writer that can reach the read stores, or None when one of them
        stores computed (non-exact) values or none can reach it."""
        reach = [w for w in self.writers.get(r.tensor, []) if _may_precede(w, ctx)]
        seen = _read_region(ctx, r)
        out: list[str] = []
        for w in reach:
            if seen is not None and not _meets(w, seen):
                continue
            if w.stmt.kind not in _PICKING_KINDS:
                return None
            out.append(self.of(w, w.stmt.value))
        return join(out) if out else None


def _may_precede(w: StmtContext, ctx: StmtContext) -> bool:
    """Whether writer `w` can run before statement `ctx` reads: earlier in program order, or in a
    scan loop around both (an earlier step)."""
    if w.index < ctx.index:
        return True
    return any(f.sequential and any(g is f for g in w.loops) for f in ctx.loops)


def _read_region(ctx: StmtContext, r: Read) -> isl.Set | None:
    """The elements an affine read touches (None for a gather: it may touch any)."""
    if r.indirect or any(i.is_quasi() for i in r.indices if isinstance(i, AffExpr)):
        return None
    return access_map(ctx, r.tensor, [i for i in r.indices if isinstance(i, AffExpr)]).range()


def _meets(w: StmtContext, region: isl.Set) -> bool:
    s = w.stmt
    if s.indirect or any(i.is_quasi() for i in s.indices if isinstance(i, AffExpr)):
        return True
    written = access_map(w, s.target, [i for i in s.indices if isinstance(i, AffExpr)]).range()
    return not written.intersect(region).is_empty()


def scale_factors(e: SExpr) -> list[tuple[SExpr, bool]]:
    """The factors of a product (`a * b`, `a / b`, `-a`), each with whether it divides."""
    if isinstance(e, Unary) and e.fn == "neg":
        return scale_factors(e.x)
    if isinstance(e, Binary) and e.fn == "mul":
        return scale_factors(e.a) + scale_factors(e.b)
    if isinstance(e, Binary) and e.fn == "div":
        return scale_factors(e.a) + [(e.b, True)]
    return [(e, False)]


def is_block_scale(f: SExpr, reduced: frozenset[str], env: dict[str, AffExpr] | None = None) -> bool:
    """Whether factor `f` of a contraction's operand is constant along each reduced variable over runs
    of at least MIN_SCALE_BLOCK consecutive values: a literal, or reads whose indices use a reduced
    variable only as `k // B` (B >= MIN_SCALE_BLOCK). Then `sum_k s(k // B) a_k b_k` is `sum_kb s(kb)
    * (sum_{k in kb} a_k b_k)`: the inner sums run on the operands' own dtype, the scale is applied
    per block in the accumulator (block-scaled fp8 GEMMs; `(a.float() * 2.0) @ b.float()`). `env`
    maps a writer's loop variables to the reader's index expressions (a scale applied in the
    statement that wrote the operand local); a variable it does not map makes `f` no scale."""
    for r in reads(f):
        if r.indirect:
            return False
        for i in r.indices:
            assert isinstance(i, AffExpr)
            if env is not None:
                if not i.vars() <= set(env):
                    return False
                i = i.substitute(env)
            if not _blockwise(i, reduced):
                return False
    return True


def _blockwise(i: AffExpr, reduced: frozenset[str]) -> bool:
    for atom, _ in i.terms:
        if isinstance(atom, str):
            if atom in reduced:
                return False
            continue
        hit = atom.num.vars() & reduced
        if not hit:
            continue
        if not isinstance(atom, FloorDiv) or atom.num.is_quasi():
            return False
        if any(atom.den < MIN_SCALE_BLOCK * abs(atom.num.coeff(v)) for v in hit):
            return False
    return True
