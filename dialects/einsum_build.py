"""Einsum nodes of products, built directly: no loop-IR kernel is written and lifted.

An analysis that composes a new program (`analysis/chain_order.py`: each association order of a
contraction tree) states it as `ProductNest`s: a product of affine reads and literals, divided by
others, over a box of loops (step 1) with `if` blocks of affine conditions, written with `=` or
`+=` into a target at affine indices, with an optional folded zero init. `product_graph` makes the
`einsum.graph` that `graph_convert.kernel_to_graph` makes of the loop nests that say the same thing
(each nest its own loops, in order): the same node names (`S<i>`, `i` the main statement's index),
attributes (ivs, iterator types, bounds, steps, guards with their scopes and depths, scopes,
init and its depth and guards, origin, location) and body ops in the same order, so the graph
prints, prices and lowers (`graph_to_kernel`) exactly as the lifted kernel does. That is what lets
the analyses build programs without the loop AST (issue 20): this module does not import it.

The literals are typed as the loop IR's type checker types them (`loopir/ast.infer`: a literal
takes the type of its partner operand, else the target's), and the same type errors are raised
with the same messages (a `LoopIRError`), so an order the loop IR cannot express is refused in the
same words.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from xdsl.dialects.builtin import (
    AffineMapAttr,
    AffineSetAttr,
    Float64Type,
    FloatAttr,
    FusedLoc,
    IntegerAttr,
    NoneAttr,
    i64,
)
from xdsl.ir import Attribute, Block, Operation, Region, SSAValue

from solar_compiler.dialects.einsum import GraphOp, NodeOp, TensorOp, YieldOp, link_edges
from solar_compiler.dialects.loop import BinaryOp, ConstOp, Origin, dtype_type, location_of
from solar_compiler.errors import LoopIRError
from solar_compiler.loopir.affine import AffCond, AffExpr
from solar_compiler.loopir.affine_map import to_map, to_set
from solar_compiler.loopir.rules import FLOAT_DTYPES, RuleError, binary_result, coerce_literal


class ProductFactor(Protocol):
    """A factor of the product (`analysis/chains.Factor` is one): an affine read of `tensor`, or the
    literal `value` (`tensor` None); a divisor (`divide`) divides the product."""

    @property
    def tensor(self) -> str | None: ...
    @property
    def indices(self) -> tuple[AffExpr, ...]: ...
    @property
    def value(self) -> float: ...
    @property
    def divide(self) -> bool: ...


@dataclass(frozen=True)
class IfBlock:
    """An `if` block of a nest: its conditions, inside the outer `depth` loops."""

    depth: int
    conds: tuple[AffCond, ...]


@dataclass(frozen=True)
class ProductNest:
    """One statement in its own loop nest: `target[index] kind product(factors)` inside `loops`
    ((variable, lower, upper exclusive), step 1, outermost first) and the `ifs` blocks (nest order).
    `init` = (loops, if blocks): a folded `target[index] = 0` inside the outer that many loops and
    leading `if` blocks, just before the reduction's inner loops. The product is the numerator
    factors in order (a literal 1 when there is none), then each divisor divides it."""

    target: str
    index: tuple[AffExpr, ...]
    kind: str                                   # "=" or "+="
    factors: tuple[ProductFactor, ...]
    loops: tuple[tuple[str, int, int], ...]
    ifs: tuple[IfBlock, ...] = ()
    init: tuple[int, int] | None = None
    loc: str | None = None
    origin: Origin | None = None
    init_origin: Origin | None = None

    def check(self) -> None:
        """The nest is one the builder states exactly (a programming error otherwise)."""
        if self.kind not in ("=", "+="):
            raise ValueError(f"a product nest writes with '=' or '+=', not '{self.kind}'")
        depths = [b.depth for b in self.ifs]
        if depths != sorted(depths) or any(not 0 <= d <= len(self.loops) for d in depths) \
                or any(not b.conds for b in self.ifs):
            raise ValueError("if blocks must be non-empty, in nest order, inside the nest's loops")
        if self.init is not None:
            loops, ifs = self.init
            if self.kind != "+=" or not 0 <= loops <= len(self.loops) or not 0 <= ifs <= len(self.ifs) \
                    or any(b.depth > loops for b in self.ifs[:ifs]) \
                    or any(b.depth < loops for b in self.ifs[ifs:]):
                raise ValueError("a folded init goes before a '+=' reduction's inner loops and if blocks")


def product_graph(kernel: str, tensors: Sequence[tuple[str, tuple[int, ...], str, str]],
                  nests: Sequence[ProductNest]) -> GraphOp:
    """The einsum graph of kernel `kernel` with `tensors` ((name, shape, dtype, role), declaration
    order) and one node per nest, in order, its edges linked (`link_edges`); not verified."""
    dtypes = {name: dtype for name, _, dtype, _ in tensors}
    graph = GraphOp(kernel, [TensorOp(n, s, d, r) for n, s, d, r in tensors])
    scopes = _Numbers()
    stmt = 0
    for nest in nests:
        nest.check()
        stmt += 2 if nest.init is not None else 1
        graph.body.block.add_op(_node(f"S{stmt - 1}", nest, dtypes, scopes))
    return link_edges(graph)


class _Numbers:
    """Scope numbers in the order `kernel_to_graph` gives them: per node its `if` blocks, then its
    loops (every nest here has loops and blocks of its own)."""

    def __init__(self) -> None:
        self.next = 0

    def take(self, n: int) -> list[int]:
        self.next += n
        return list(range(self.next - n, self.next))


def _node(name: str, nest: ProductNest, dtypes: Mapping[str, str], scopes: _Numbers) -> NodeOp:
    target_dt = _dtype(dtypes, nest.target)
    if nest.init is not None:
        _literal_dtype(0.0, target_dt)  # the init's `= 0.0`, type-checked before the reduction
    expr = _typed(_expression(nest.factors), target_dt, dtypes)
    _check(expr, nest, target_dt)
    ivs = [v for v, _, _ in nest.loops]
    inputs: dict[tuple[str, tuple[AffExpr, ...]], int] = {}
    for e in _preorder(expr):
        if e[0] == "read":
            inputs.setdefault((e[1], e[2]), len(inputs))
    block = Block(arg_types=[dtype_type(dtypes[t]) for t, _ in inputs])
    ops: list[Operation] = []
    value = _ops(expr, block, inputs, ops)
    ops.append(YieldOp(value, []))
    block.add_ops(ops)
    if_numbers = scopes.take(len(nest.ifs))
    conds = [c for b in nest.ifs for c in b.conds]
    gscopes = [k for k, b in zip(if_numbers, nest.ifs, strict=True) for _ in b.conds]
    gdepths = [b.depth for b in nest.ifs for _ in b.conds]
    out_vars = set().union(*(i.vars() for i in nest.index)) if nest.index else set()
    init: Attribute | None = None
    init_depth = None
    init_scopes: list[int] = []
    init_depths: list[int] = []
    if nest.init is not None:
        loops, ifs = nest.init
        init = FloatAttr(0.0, Float64Type()) if target_dt in FLOAT_DTYPES else IntegerAttr(0, i64)
        init_depth = (loops, sum(len(b.conds) for b in nest.ifs[:ifs]))
        init_scopes, init_depths = gscopes[:init_depth[1]], gdepths[:init_depth[1]]
    main = location_of(nest.loc)
    return NodeOp(
        name=name, inputs=[t for t, _ in inputs], output=nest.target,
        reduce="none" if nest.kind == "=" else "add", ivs=ivs,
        iterator_types=["parallel" if v in out_vars else "reduction" for v in ivs],
        lower_bounds=AffineMapAttr(to_map([AffExpr.lit(lo) for _, lo, _ in nest.loops], ivs)),
        upper_bounds=AffineMapAttr(to_map([AffExpr.lit(hi) for _, _, hi in nest.loops], ivs)),
        steps=[1] * len(ivs),
        indexing_maps=[*(AffineMapAttr(to_map(idx, ivs)) for _, idx in inputs),
                       AffineMapAttr(to_map(nest.index, ivs))],
        body=Region(block), scopes=scopes.take(len(ivs)),
        guards=AffineSetAttr(to_set(conds, ivs)) if conds else None, guard_scopes=gscopes,
        guard_depths=gdepths, init=init, init_depth=init_depth, init_guard_scopes=init_scopes,
        init_guard_depths=init_depths, origin=nest.origin,
        init_origin=nest.init_origin if nest.init is not None else None,
        location=main if nest.init is None else FusedLoc((location_of(nest.loc), main), NoneAttr()))


# ---- the scalar expression, as tuples: ("read", tensor, indices, dtype), ("lit", value, dtype),
# ("bin", fn, a, b, dtype); the dtype last, None until typed
Expr = tuple


def _expression(factors: Sequence[ProductFactor]) -> Expr:
    """The product as the loop IR states it: ((n0 * n1) * ...) / d0 / ..., left-nested."""
    def leaf(f: ProductFactor) -> Expr:
        return ("lit", f.value, None) if f.tensor is None else ("read", f.tensor, tuple(f.indices), None)

    num = [leaf(f) for f in factors if not f.divide]
    value = num[0] if num else ("lit", 1.0, None)
    for x in num[1:]:
        value = ("bin", "mul", value, x, None)
    for f in factors:
        if f.divide:
            value = ("bin", "div", value, leaf(f), None)
    return value


def _typed(e: Expr, expected: str, dtypes: Mapping[str, str]) -> Expr:
    """`e` with every node typed by the loop IR's rules (`loopir/ast.infer`)."""
    if e[0] == "lit":
        return e if e[2] is not None else ("lit", _literal_dtype(e[1], expected), expected)
    if e[0] == "read":
        return ("read", e[1], e[2], _dtype(dtypes, e[1]))
    _, fn, a, b, _ = e
    ea = eb = expected
    if _untyped_literal(a) and not _untyped_literal(b):
        ea = _typed(b, expected, dtypes)[-1]
    elif _untyped_literal(b) and not _untyped_literal(a):
        eb = _typed(a, expected, dtypes)[-1]
    ta, tb = _typed(a, ea, dtypes), _typed(b, eb, dtypes)
    return ("bin", fn, ta, tb, ta[-1])


def _untyped_literal(e: Expr) -> bool:
    return e[0] == "lit" and e[2] is None


def _literal_dtype(value: float, dtype: str) -> float | int | bool:
    """The literal's value in `dtype` (`rules.coerce_literal`, as the type checker types it), or the
    type checker's error."""
    if isinstance(value, float) and dtype not in FLOAT_DTYPES:
        raise LoopIRError(f"float literal {value} where {dtype} is expected (write an integer, or cast)")
    return coerce_literal(value, dtype)


def _check(e: Expr, nest: ProductNest, target_dt: str) -> None:
    """The type checker's rules on the typed product (outermost operation first) and the store."""
    for n in _preorder(e):
        if n[0] == "bin":
            try:
                got = binary_result(n[1], n[2][-1], n[3][-1])
            except RuleError as err:
                raise LoopIRError(str(err)) from None
            if got != n[-1]:
                raise LoopIRError(f"'{n[1]}' gives {got} but is typed {n[-1]}")
    if e[-1] != target_dt:
        raise LoopIRError(f"type mismatch: '{nest.target}' is {target_dt} but the value is {e[-1]}")
    if nest.kind == "+=" and target_dt == "bool":
        raise LoopIRError(f"'+=' reduction into bool tensor '{nest.target}'")


def _preorder(e: Expr) -> Iterator[Expr]:
    yield e
    if e[0] == "bin":
        yield from _preorder(e[2])
        yield from _preorder(e[3])


def _ops(e: Expr, block: Block, inputs: Mapping[tuple[str, tuple[AffExpr, ...]], int],
         ops: list[Operation]) -> SSAValue:
    """The body ops of `e` in `dialects/convert.expr_ops` order (operands first, left to right)."""
    if e[0] == "read":
        return block.args[inputs[(e[1], e[2])]]
    if e[0] == "lit":
        op: Operation = ConstOp(e[1], e[2])
    else:
        a = _ops(e[2], block, inputs, ops)
        op = BinaryOp(e[1], a, _ops(e[3], block, inputs, ops))
    ops.append(op)
    return op.results[0]


def _dtype(dtypes: Mapping[str, str], name: str) -> str:
    if name not in dtypes:
        raise LoopIRError(f"unknown tensor '{name}'")
    return dtypes[name]
