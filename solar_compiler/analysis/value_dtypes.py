"""The narrowest dtype that holds every value an expression takes: how a contraction is priced.

A contraction `C += A * B` on operands that only carry values of a narrower dtype (`a.float() @
b.float()` on bf16 tensors, fp8 tensors `.to(bf16)`, int8 tensors `.to(int32)`) can run on that
narrower dtype's unit: the values convert back losslessly, so an implementation may keep (or
stream) them in the narrow format and multiply there, accumulating at the contraction's own
precision. A bound must assume it may. So an operand's dtype is looked through any chain of *pure
widening* casts (every value of the source dtype is exact in the destination, `HOLDS`), wherever
the cast is:

* in the contraction node's own body (`cast(A[i, k]) * cast(B[k, j])`);
* in the nodes that write a local the contraction reads: the graph's dataflow is followed back
  through every writer that can have written the elements the contraction reads (a node's folded
  init and its yielded value): the node that produced the SSA operand read and, through each
  writer's init operand (`dest`), every earlier one; and writers inside a scan loop that encloses
  the reader (a loop of the same `scopes` number whose iterator is `sequential`), whose values a
  later step reads back. A writer whose written range misses the read range is left out. The
  local holds narrow values when every such writer stores one (`=`, or a `max=`/`min=` that picks
  one of its operands).

Everything is read from `einsum.node` ops: the body's scalar ops (casts' result types, literals),
the inputs' indexing maps and the nodes' domains (`structured.py`), the tensors' roles and dtypes
from the graph's `einsum.tensor` ops.

Exact operations keep a value's dtype: negation and absolute value, selects, max and min pick or
flip operands; a literal holds in the narrowest dtype that represents it (0 and 1 in any). Every
other operation (arithmetic, `+=` accumulation, transcendental functions, a narrowing or lossy
cast, a bit cast, an index value) produces values of its own declared dtype. A bit cast
(`loop.bitcast`) is never looked through as a cast is: it keeps bits, not values (`f32` bits read
as `i32` are integers up to 2^31 whatever the float was), so its values are its own dtype's, or
the patterns `value_sets.py` finds for integer codes.

A contraction factor may also be priced through block scales (`is_block_scale`, `ValueDtypes.stored`):
a writer that stores `code * scale[k // 16]` holds the codes' dtype for the contraction, and so does
a rounding cast of such a product to a 16-bit or wider float (`rounding_cast`: vLLM's dequantised
NVFP4 operands, `(values * scale).to(torch.bfloat16)`), followed through copies and reshapes.

Getting this wrong in the narrow direction only lowers a bound; in the wide direction it prices a
contraction at a slower unit than a legal implementation uses, which is the error a bound must
never make (issue 9, item 1). The rules are exact in both directions for the cases above.
"""

from __future__ import annotations

import math
import struct
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass

import islpy as isl
import numpy as np
from xdsl.dialects.builtin import FloatAttr
from xdsl.ir import BlockArgument, SSAValue
from xdsl.ir.affine import (
    AffineBinaryOpExpr,
    AffineBinaryOpKind,
    AffineConstantExpr,
    AffineDimExpr,
    AffineExpr,
)

from solar_compiler.analysis import structured as st
from solar_compiler.analysis.value_sets import ValueSets, narrowest, narrowest_range
from solar_compiler.dialects.einsum import GatherOp, GraphOp, NodeOp
from solar_compiler.dialects.loop import BinaryOp, CastOp, ConstOp, SelectOp, UnaryOp, type_dtype
from solar_compiler.loopir.rules import DTYPES, E2M1_VALUES, FLOAT_DTYPES, INT_DTYPES, int_range

#: dtype -> the dtypes that represent EVERY value of it exactly (itself included). bf16 and f16 hold
#: every f8 value (e4m3: 4-bit exponent, 3-bit mantissa; e5m2 is a truncated f16); f16 holds integers
#: up to 2048 and bf16 up to 256, so both hold every i8; f64 holds every i32; bool (0, 1) fits all.
HOLDS: dict[str, frozenset[str]] = {
    "bool": frozenset(DTYPES),
    "i8": frozenset({"i8", "i16", "i32", "i64", "f16", "bf16", "f32", "f64"}),
    "u8": frozenset({"u8", "i16", "u16", "i32", "i64", "f16", "bf16", "f32", "f64"}),
    "i16": frozenset({"i16", "i32", "i64", "f32", "f64"}),
    "u16": frozenset({"u16", "i32", "i64", "f32", "f64"}),
    "i32": frozenset({"i32", "i64", "f64"}),
    "i64": frozenset({"i64"}),
    "f8e4m3": frozenset({"f8e4m3", "f16", "bf16", "f32", "f64"}),
    "f8e5m2": frozenset({"f8e5m2", "f16", "bf16", "f32", "f64"}),
    "f4e2m1": frozenset({"f4e2m1", "f8e4m3", "f8e5m2", "f16", "bf16", "f32", "f64"}),
    "f16": frozenset({"f16", "f32", "f64"}),
    "bf16": frozenset({"bf16", "f32", "f64"}),
    "f32": frozenset({"f32", "f64"}),
    "f64": frozenset({"f64"}),
}
# Narrowest first; among equal widths integer before float (an exact i8 product is the cheapest). fp4
# comes after the 8-bit integers so that a literal such as 2.0 stays i8 (joined with an i8 operand, an
# integer product), as before fp4 existed; an e2m1 value that is no integer (0.5) is fp4.
ORDER = ("bool", "i8", "u8", "f4e2m1", "f8e4m3", "f8e5m2", "bf16", "f16", "i16", "u16", "i32", "f32", "i64",
          "f64")

_NARROW = frozenset({"bool", "i8", "u8", "f4e2m1", "f8e4m3", "f8e5m2"})  # no value analysis can narrow these
_EXACT_OPS_UNARY = ("neg", "abs")
_EXACT_OPS_BINARY = ("max", "min")
_PICKING_KINDS = ("=", "max=", "min=")   # a reduction whose result is one of its operands' values
#: The shortest run of consecutive reduced-index values a scale must stay constant over to be applied
#: outside the matrix unit: the K of the smallest MMA instruction (m16n8k16 on 16-bit operands).
MIN_SCALE_BLOCK = 16


def widens(src: str, dst: str) -> bool:
    """Whether casting `src` to `dst` keeps every value (a pure widening cast)."""
    return dst in HOLDS[src]


def join(dtypes: Iterable[str]) -> str:
    """The narrowest dtype that holds every value of each of `dtypes` (bool for none)."""
    ds = set(dtypes)
    for d in ORDER:
        if all(d in HOLDS[x] for x in ds):
            return d
    return "f64" if all("f64" in HOLDS[x] for x in ds) else max(ds, key=lambda x: DTYPES[x])


def const_dtype(value: float | int | bool, declared: str) -> str:
    """The narrowest dtype (no wider than `declared`) that represents the literal exactly."""
    v = float(value)
    if math.isnan(v):
        return declared
    for d in ORDER:
        if declared in HOLDS[d] and represents(d, v):
            return d
    return declared


def represents(d: str, v: float) -> bool:
    if d == "bool":
        return v in (0.0, 1.0) and not (v == 0.0 and math.copysign(1.0, v) < 0)
    if d in INT_DTYPES:
        lo, hi = int_range(d)
        return math.isfinite(v) and v == int(v) and lo <= v <= hi
    if d == "f4e2m1":
        return v in E2M1_VALUES
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


@dataclass(frozen=True)
class _Writer:
    """One statement that writes a tensor: a node's folded init (`init`) or its main statement."""

    node: NodeOp
    position: int  # the node's position in the graph
    init: bool

    @property
    def order(self) -> int:
        """Program order of the statement (a folded init runs just before its node's main one)."""
        return 2 * self.position + (0 if self.init else 1)

    @property
    def kind(self) -> str:
        return "=" if self.init else _KIND_OF_REDUCE[self.node.reduce.data]


_KIND_OF_REDUCE = {"none": "=", "add": "+=", "mul": "*=", "max": "max=", "min": "min="}


class ValueDtypes:
    """Per einsum graph: `of(node, v)` is the narrowest dtype holding every value the body value `v`
    takes in `node` (module doc). Results are memoised per (node, tensor, access) read. Without a
    graph, a local reads as its declared dtype (the node alone is looked through)."""

    def __init__(self, graph: GraphOp | None):
        nodes = graph.nodes() if graph is not None else []
        self.position = {n: i for i, n in enumerate(nodes)}
        self.writers: dict[str, list[_Writer]] = {}
        for i, n in enumerate(nodes):
            ws = self.writers.setdefault(n.output_name, [])
            if n.init is not None:
                ws.append(_Writer(n, i, True))
            ws.append(_Writer(n, i, False))
        self.roles = {t: d.role.data for t, d in graph.tensor_ops().items()} if graph is not None else {}
        self._memo: dict[tuple, str] = {}
        self._active: set[tuple] = set()
        self.sets = ValueSets(self._stored_values)

    def of(self, node: NodeOp, v: SSAValue) -> str:
        if isinstance(v, BlockArgument):
            t = node.input_names[v.index]
            if self.roles.get(t) == "local":
                return self._read(node, t, node.ins[v.index], node.get_indexing_maps().data[v.index].data,
                                  type_dtype(v.type))
            return type_dtype(v.type)
        o = v.owner
        if isinstance(o, CastOp):
            inner = self.of(node, o.x)
            out = type_dtype(v.type)
            return inner if widens(inner, out) else out
        if isinstance(o, UnaryOp) and o.fn.data in _EXACT_OPS_UNARY:
            return self._narrower(node, v, self.of(node, o.x))
        if isinstance(o, BinaryOp) and o.fn.data in _EXACT_OPS_BINARY:
            return self._narrower(node, v, join((self.of(node, o.lhs), self.of(node, o.rhs))))
        if isinstance(o, SelectOp):
            return self._narrower(node, v, join((self.of(node, o.a), self.of(node, o.b))))
        if isinstance(o, ConstOp):
            return const_dtype(_literal(o), type_dtype(v.type))
        if isinstance(o, GatherOp) and self.roles.get(o.tensor_name) == "local":
            return self._read(node, o.tensor_name, o.source, None, type_dtype(v.type), o)
        return self._from_values(node, v)

    def _narrower(self, node: NodeOp, v: SSAValue, picked: str) -> str:
        """The dtype of an exact operation's result: what its operands' dtypes give (`picked`), or the
        narrower dtype its values fit when those are known (`clamp(round(x), -128, 127)` of floats:
        the clamp picks float values, yet each is an 8-bit integer)."""
        if picked in _NARROW:
            return picked
        found = self._from_values(node, v)
        return found if widens(found, picked) else picked

    def _from_values(self, node: NodeOp, v: SSAValue) -> str:
        """The declared dtype of a computed value, or a narrower one that holds each value it can take
        (`value_sets.py`: arithmetic on codes, such as an fp4 decode from bits)."""
        declared = type_dtype(v.type)
        if declared == "bool":
            return declared
        order = [d for d in ORDER if widens(d, declared)]
        found = narrowest(self.sets.of(node, v), order, represents) or \
            narrowest_range(self.sets.integral(node, v), order)
        return found or declared

    def _stored_values(self, node: NodeOp, index: int) \
            -> Iterator[tuple[NodeOp, SSAValue | float] | None] | None:
        """What the writers that can reach input `index` of `node` store, one at a time (None: not a
        local); an item None for a writer that does not store (`=`) or pick (max/min) a value
        (value_sets.ValueSets). Lazy: a local with many writers (a DenseNet concatenation) is
        settled by the first whose values are unknown, without testing every writer's region."""
        t = node.input_names[index]
        if self.roles.get(t) != "local":
            return None
        return self._stored_iter(node, t, index)

    def _stored_iter(self, node: NodeOp, t: str, index: int) \
            -> Iterator[tuple[NodeOp, SSAValue | float] | None]:
        seen = _read_region(node, t, node.get_indexing_maps().data[index].data)
        for w in self._reaching(node, t, node.ins[index]):
            if seen is not None and not _meets(w, seen):
                continue
            if w.kind not in _PICKING_KINDS:
                yield None
                return
            yield (w.node, _literal_attr(w.node.init)) if w.init else (w.node, st.stored_value(w.node))

    def stored(self, node: NodeOp, v: SSAValue, reduced: frozenset[int]) -> str:
        """The dtype a contraction factor `v` of `node` may be priced at: `of`, looking also through
        block scales (`is_block_scale`) applied in the nodes that wrote a local it reads, as
        `(a.float() * 2.0) @ b.float()` and dequantised fp8 operands are written, and through a
        rounding cast of such a product (`rounding_cast`)."""
        x = _uncast(v)
        if isinstance(x, BlockArgument) and self.roles.get(node.input_names[x.index]) == "local":
            rmap = node.get_indexing_maps().data[x.index].data
            if reduced & set().union(*(st.dims_of(r) for r in rmap.results)):
                found = self._scaled_local(node, x.index, tuple(rmap.results), reduced,
                                           node.get_static_loop_ranges(), 0)
                if found is not None and x is v:
                    return found[0]
                if found is not None and found[1]:
                    return _capped(found[0], self.of(node, v))
        return self.of(node, v)

    def _scaled_local(self, reader: NodeOp, arg: int, at: tuple[AffineExpr, ...], reduced: frozenset[int],
                      extents: Sequence[int], depth: int) -> tuple[str, bool] | None:
        """What input `arg` of `reader` (a local, read at `at` in the contraction's dims) holds once
        block scales are set aside: the join over the writers that can reach the read of their one
        data factor's dtype, each a product of it with block scales (`=`), possibly under rounding
        casts, or a copy of such a product (followed through locals up to `_DEPTH` writers deep);
        with whether every writer's value had a scale set aside. None when a writer stores anything
        else."""
        t = reader.input_names[arg]
        seen = _read_region(reader, t, reader.get_indexing_maps().data[arg].data)
        out: list[str] = []
        scaled = True
        for w in self._reaching(reader, t, reader.ins[arg]):
            if seen is not None and not _meets(w, seen):
                continue
            if w.init:  # a literal stored: no data factor
                return None
            wmap = w.node.get_indexing_maps().data[-1].data
            names = [r.position for r in wmap.results if isinstance(r, AffineDimExpr)]
            if w.kind != "=" or w.node.dynamic_positions or len(names) != len(wmap.results) \
                    or len(set(names)) != len(names):
                return None
            got = self._scaled_value(w.node, dict(zip(names, at, strict=True)), reduced, extents, depth)
            if got is None:
                return None
            out.append(got[0])
            scaled = scaled and got[1]
        return (join(out), scaled) if out else None

    def _scaled_value(self, w: NodeOp, env: dict[int, AffineExpr], reduced: frozenset[int],
                      extents: Sequence[int], depth: int) -> tuple[str, bool] | None:
        """`_scaled_local` for one writer `w` whose dims map to the contraction's by `env`: its stored
        value, through rounding casts where a block scale is set aside beneath them (capped at the
        cast's dtype, `_capped`), else as written."""
        v = st.stored_value(w)
        x = _uncast(v)
        got = self._scaled_product(w, x, env, reduced, extents, depth)
        if x is v:
            return got
        if got is not None and got[1]:
            return _capped(got[0], self.of(w, v)), True
        return self.of(w, v), False

    def _scaled_product(self, w: NodeOp, x: SSAValue, env: dict[int, AffineExpr], reduced: frozenset[int],
                        extents: Sequence[int], depth: int) -> tuple[str, bool] | None:
        """The dtype of the one data factor of product `x` in writer `w`, and whether a block scale was
        set aside; a factor that reads a local is followed to its writers when they set one aside."""
        parts = scale_factors(x)
        data = [(f, divides) for f, divides in parts if not is_block_scale(w, f, reduced, env, extents)]
        if len(data) != 1 or data[0][1]:
            return None
        f = data[0][0]
        n = w.get_num_loops()
        if isinstance(f, BlockArgument) and self.roles.get(w.input_names[f.index]) == "local" \
                and depth < _DEPTH and all(d in env for d in range(n)):
            subs = [env[d] for d in range(n)]
            fmap = w.get_indexing_maps().data[f.index].data
            at = tuple(r.replace_dims_and_symbols(subs, []) for r in fmap.results)
            deeper = self._scaled_local(w, f.index, at, reduced, extents, depth + 1)
            if deeper is not None and deeper[1]:
                return deeper
        if len(data) < len(parts):
            return self.of(w, f), True
        return self.of(w, x), False

    def _read(self, node: NodeOp, tensor: str, value: SSAValue | None, amap: object, declared: str,
              gather: object = None) -> str:
        """A read of local `tensor` (its SSA `value`) by `node` at `amap` (None: a gather, which may touch
        any element)."""
        key = (self.position.get(node, id(node)), tensor, amap if gather is None else id(gather))
        if key in self._memo:
            return self._memo[key]
        if key in self._active:  # a cycle (a value fed back through a scan): its declared dtype
            return declared
        self._active.add(key)
        try:
            found = self._writers_dtype(node, tensor, value, amap)
        finally:
            self._active.discard(key)
        out = declared if found is None or not widens(found, declared) else found
        self._memo[key] = out
        return out

    def _writers_dtype(self, node: NodeOp, tensor: str, value: SSAValue | None, amap: object) -> str | None:
        """The join of what every writer that can reach the read stores, or None when one of them
        stores computed (non-exact) values or none can reach it."""
        reach = self._reaching(node, tensor, value)
        seen = _read_region(node, tensor, amap) if amap is not None else None
        out: list[str] = []
        for w in reach:
            if seen is not None and not _meets(w, seen):
                continue
            if w.kind not in _PICKING_KINDS:
                return None
            if w.init:
                out.append(const_dtype(_literal_attr(w.node.init), type_dtype(st.stored_value(w.node).type)))
            else:
                out.append(self.of(w.node, st.stored_value(w.node)))
        return join(out) if out else None

    def _reaching(self, node: NodeOp, tensor: str, value: SSAValue | None) -> list[_Writer]:
        """The writers of `tensor` whose values a read of its SSA `value` by `node` can see: the node
        that produced `value` and, through each one's init (`dest`: the tensor's value before it ran),
        every earlier writer (their folded inits included); then, from the graph, the reader's own
        folded init and the writers at or after it in a scan loop around both (a value fed back to a
        later step, which no SSA operand of the reader shows)."""
        out: list[_Writer] = []
        while value is not None and isinstance(value.owner, NodeOp):
            w = value.owner
            if w.init is not None:
                out.append(_Writer(w, self.position.get(w, -1), True))
            out.append(_Writer(w, self.position.get(w, -1), False))
            value = w.dest
        here = self.position.get(node, -1)
        out += [w for w in self.writers.get(tensor, []) if w.position >= here and self._may_precede(w, node)]
        return out

    def _may_precede(self, w: _Writer, node: NodeOp) -> bool:
        """Whether writer `w` can run before `node`'s main statement reads: earlier in program order,
        or in a scan loop around both (an earlier step)."""
        if w.order < 2 * self.position.get(node, -1) + 1:
            return True
        kinds = [k.data for k in node.get_iterator_types().data]
        around = {sc for d, sc in enumerate(NodeOp.ints(node.scopes)) if kinds[d] == "sequential"}
        wscopes = NodeOp.ints(w.node.scopes)
        if w.init:
            wscopes = wscopes[:NodeOp.ints(w.node.init_depth)[0]]
        return bool(around & set(wscopes))


def _literal(o: ConstOp) -> float | int | bool:
    return _literal_attr(o.value)


def _literal_attr(a: object) -> float | int:
    v = a.value.data  # type: ignore[attr-defined]
    return float(v) if isinstance(a, FloatAttr) else int(v)


#: How many writers deep a block-scaled product is followed through copies and rounding casts.
_DEPTH = 4
#: The destinations of a rounding cast a block-scaled product is looked through (`rounding_cast`).
_ROUNDED_TO = ("bf16", "f16", "f32", "f64")


def rounding_cast(v: SSAValue) -> bool:
    """Whether `v` is a float-to-float cast to a 16-bit or wider float, the cast a block-scaled product
    of narrow values may be looked through (`vLLM`'s `(values * scale).to(torch.bfloat16)`).

    The reference rounds each dequantised value `c * s` (an e2m1 code value times its block's scale)
    and multiplies the rounded values, accumulating in f32. A kernel that multiplies the codes on the
    matrix unit and applies `s` per block in the accumulator computes the same sum without that
    rounding: its error is the accumulation's alone, so it is at least as accurate as the reference
    against the exact sum the reference approximates, and within the contract of the destination
    format (one rounding of relative size 2**-9 for bf16, per operand value). It is exactly the
    reference when the rounding is the identity: an e2m1 value has at most 2 significant bits and an
    e4m3 scale at most 4, so their product has at most 6, exact in bf16 (8) and f16 (11) wherever the
    exponent fits (bf16: f32's range; f16: 2**-24 to 65504, which holds every e2m1 x e4m3 product,
    2**-10 to 2688). A global f32 scale folded into `s` (`sf.float() / global_scale`) makes the
    rounding real, and the kernel skips it. A cast to fp8 or fp4 is a requantisation, not looked
    through: those formats hold fewer bits than such a product (e4m3: 4)."""
    o = v.owner
    return isinstance(o, CastOp) and type_dtype(o.x.type) in FLOAT_DTYPES and \
        type_dtype(v.type) in _ROUNDED_TO


def _uncast(v: SSAValue) -> SSAValue:
    """`v` with its rounding casts (`rounding_cast`) stripped."""
    while rounding_cast(v):
        v = v.owner.x  # type: ignore[union-attr]
    return v


def _capped(through: str, plain: str) -> str:
    """The dtype seen through a rounding cast where it is no wider than the cast's own (`plain`): a
    product looked through whose data factor is wider (f32 values times a scale, cast to bf16) keeps
    the cast's dtype, so the look-through never prices above the value as written."""
    return through if widens(through, plain) else plain


def _quasi(m: object) -> bool:
    return any(st.linear_form(r) is None for r in m.results)  # type: ignore[attr-defined]


def _read_region(node: NodeOp, tensor: str, amap: object) -> isl.Set | None:
    """The elements an affine read touches (None for a quasi-affine one: it is not narrowed)."""
    if _quasi(amap):
        return None
    return st.access_map(node, st.Access(tensor, amap, False, False, "input")).range()  # type: ignore[arg-type]


def _meets(w: _Writer, region: isl.Set) -> bool:
    n = w.node
    wmap = n.get_indexing_maps().data[-1].data
    if n.dynamic_positions or _quasi(wmap):
        return True
    acc = st.Access(n.output_name, wmap, True, False, "output")
    written = (st.init_access_map(n, acc) if w.init else st.access_map(n, acc)).range()
    return not written.intersect(region).is_empty()


def scale_factors(v: SSAValue) -> list[tuple[SSAValue, bool]]:
    """The factors of a product (`a * b`, `a / b`, `-a`), each with whether it divides."""
    o = v.owner
    if isinstance(o, UnaryOp) and o.fn.data == "neg":
        return scale_factors(o.x)
    if isinstance(o, BinaryOp) and o.fn.data == "mul":
        return scale_factors(o.lhs) + scale_factors(o.rhs)
    if isinstance(o, BinaryOp) and o.fn.data == "div":
        return scale_factors(o.lhs) + [(o.rhs, True)]
    return [(v, False)]


def _reads(v: SSAValue) -> list[SSAValue]:
    """The tensor reads `v` is computed from: block arguments (direct) and gathers (indirect)."""
    out: list[SSAValue] = []
    seen: set[SSAValue] = set()
    stack = [v]
    while stack:
        x = stack.pop()
        if x in seen:
            continue
        seen.add(x)
        if isinstance(x, BlockArgument) or isinstance(x.owner, GatherOp):
            out.append(x)
            continue
        stack.extend(x.owner.operands)  # type: ignore[union-attr]
    return out


def is_block_scale(node: NodeOp, f: SSAValue, reduced: frozenset[int],
                   env: Mapping[int, AffineExpr] | None = None, extents: Sequence[int] | None = None) -> bool:
    """Whether factor `f` (a value of `node`'s body) of a contraction's operand is constant along the
    reduction over runs of at least MIN_SCALE_BLOCK values: a literal; reads whose indices use a
    reduced dim only as `d // B` (B >= MIN_SCALE_BLOCK); or reads that leave reduced dims of
    combined extent >= MIN_SCALE_BLOCK unused (a reduction split as `k = 16 * kb + kl`, which the
    catalogue's reordered trees write, with the scale read at `kb`). Then `sum_k s(k // B) a_k b_k`
    is `sum_kb s(kb) * (sum_{k in kb} a_k b_k)`: the inner sums run on the operands' own dtype, the
    scale is applied per block in the accumulator (block-scaled fp8 and NVFP4 GEMMs; `(a.float() *
    2.0) @ b.float()`). `reduced` are dims of the contraction node and `extents` its loop extents
    (`node`'s own when None and there is no `env`); `env` maps the dims of `node` (a writer of the
    operand local) to the contraction's index expressions, and a dim it does not map makes `f` no
    scale."""
    maps = node.get_indexing_maps().data
    if extents is None and env is None:
        extents = node.get_static_loop_ranges()
    used: set[int] = set()
    blockwise = True
    for r in _reads(f):
        if not isinstance(r, BlockArgument):
            return False  # a gather: loaded positions
        for i in maps[r.index].data.results:
            if env is not None:
                if not st.dims_of(i) <= set(env):
                    return False
                n = node.get_num_loops()
                i = i.replace_dims_and_symbols([env.get(d, AffineExpr.dimension(d)) for d in range(n)], [])
            used |= st.dims_of(i) & reduced
            blockwise = blockwise and _blockwise(i, reduced)
    if blockwise:
        return True
    free = [extents[d] for d in reduced - used] if extents is not None else []
    return bool(free) and math.prod(free) >= MIN_SCALE_BLOCK


def _terms(e: AffineExpr, coeff: int = 1) -> list[tuple[AffineExpr, int]]:
    """`e` as a sum of atoms (dims, floordiv/mod/ceildiv expressions) with their coefficients."""
    if isinstance(e, AffineConstantExpr):
        return []
    if isinstance(e, AffineBinaryOpExpr) and e.kind == AffineBinaryOpKind.Add:
        return _terms(e.lhs, coeff) + _terms(e.rhs, coeff)
    if isinstance(e, AffineBinaryOpExpr) and e.kind == AffineBinaryOpKind.Mul:
        if isinstance(e.rhs, AffineConstantExpr):
            return _terms(e.lhs, coeff * e.rhs.value)
        if isinstance(e.lhs, AffineConstantExpr):
            return _terms(e.rhs, coeff * e.lhs.value)
    return [(e, coeff)]


def _blockwise(i: AffineExpr, reduced: frozenset[int]) -> bool:
    for atom, _ in _terms(i):
        if isinstance(atom, AffineDimExpr):
            if atom.position in reduced:
                return False
            continue
        if not isinstance(atom, AffineBinaryOpExpr):
            continue  # a symbol
        hit = st.dims_of(atom.lhs) & reduced
        if not hit:
            continue
        form = st.linear_form(atom.lhs)
        if atom.kind != AffineBinaryOpKind.FloorDiv or form is None or \
                not isinstance(atom.rhs, AffineConstantExpr):
            return False
        if any(atom.rhs.value < MIN_SCALE_BLOCK * abs(form[0].get(v, 0)) for v in hit):
            return False
    return True
