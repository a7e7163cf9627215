"""Kernel AST <-> `loop` dialect operations. Both directions are exact inverses on typed kernels.

An SSA value used twice in a statement's region (hand-written MLIR) becomes one expression object
referenced twice in the AST; analyses count common subexpressions once (`analysis/costs.py`)."""

from __future__ import annotations

from collections.abc import Callable

from xdsl.dialects.builtin import FloatAttr, ModuleOp
from xdsl.ir import Operation, SSAValue

from solar_compiler.dialects.loop import (
    BinaryOp,
    BitcastOp,
    CastOp,
    CmpOp,
    ConstOp,
    ForOp,
    IfOp,
    IndexOp,
    KernelOp,
    ReadOp,
    SelectOp,
    StmtOp,
    TensorOp,
    UnaryOp,
    YieldOp,
    location_text,
    map_exprs,
    traced_of,
    type_dtype,
)
from solar_compiler.loopir.affine import AffExpr
from solar_compiler.loopir.ast import (
    Assign,
    Binary,
    Bitcast,
    Cast,
    Cmp,
    Const,
    For,
    If,
    IndexValue,
    Kernel,
    LoopIRError,
    Node,
    Read,
    Select,
    SExpr,
    TensorDecl,
    Unary,
    typecheck,
)


# ---- AST -> ops ---------------------------------------------------------------------------------
def kernel_to_op(kernel: Kernel) -> KernelOp:
    k = typecheck(kernel)
    ops: list[Operation] = [TensorOp(t.name, t.shape, t.dtype, t.role) for t in k.tensors]
    ops += [_node_op(n, ()) for n in k.body]
    return KernelOp(k.name, ops)


def kernels_to_module(kernels: list[Kernel]) -> ModuleOp:
    return ModuleOp([kernel_to_op(k) for k in kernels])


def _node_op(n: Node, dims: tuple[str, ...]) -> Operation:
    """The op of `n`, whose affine attributes are maps over the enclosing loop variables `dims`."""
    if isinstance(n, For):
        inner = (*dims, n.iv)
        return ForOp(n.iv, n.lb, n.ub, n.step, n.sequential, [_node_op(c, inner) for c in n.body], dims=dims)
    if isinstance(n, If):
        return IfOp(n.conds, [_node_op(c, dims) for c in n.body], dims=dims)
    ops: list[Operation] = []
    memo: dict[int, SSAValue] = {}
    v = expr_ops(n.value, ops, memo=memo, dims=dims)
    dyn = {p: expr_ops(i, ops, memo=memo, dims=dims) for p, i in enumerate(n.indices) if isinstance(i, SExpr)}
    ops.append(YieldOp(v, [dyn[p] for p in sorted(dyn)]))
    idx = [i if isinstance(i, AffExpr) else AffExpr.lit(0) for i in n.indices]
    return StmtOp(n.target, idx, n.kind, ops, n.loc, sorted(dyn), n.origin, n.traced, dims=dims)


def expr_ops(e: SExpr, ops: list[Operation], leaf: ExprLeaf | None = None,
             memo: dict[int, SSAValue] | None = None, dims: tuple[str, ...] = ()) -> SSAValue:
    """Append the scalar ops computing `e` to `ops`; the same expression object used twice is one
    SSA value (`memo`, by identity). `leaf` builds the values of reads and index values where the
    region is not a loop statement's (an einsum node's); `dims` are the enclosing loop variables of a
    loop statement, the dimensions of its reads' and index values' maps."""
    memo = {} if memo is None else memo
    key = id(e)
    if key not in memo:
        memo[key] = _expr_ops(e, ops, leaf, memo, dims)
    return memo[key]


def _expr_ops(e: SExpr, ops: list[Operation], leaf: ExprLeaf | None, memo: dict[int, SSAValue],
              dims: tuple[str, ...]) -> SSAValue:
    def sub(x: SExpr) -> SSAValue:
        return expr_ops(x, ops, leaf, memo, dims)

    if leaf is not None:
        got = leaf(e, sub, ops)
        if got is not None:
            return got
    op: Operation
    if isinstance(e, Read):
        dyn = {p: sub(i) for p, i in enumerate(e.indices) if isinstance(i, SExpr)}
        idx = [i if isinstance(i, AffExpr) else AffExpr.lit(0) for i in e.indices]
        op = ReadOp(e.tensor, idx, dyn, e.typed(), dims=dims)
    elif isinstance(e, Const):
        op = ConstOp(e.value, e.typed())
    elif isinstance(e, IndexValue):
        op = IndexOp(e.expr, dims=dims)
    elif isinstance(e, Unary):
        op = UnaryOp(e.fn, sub(e.x), e.typed())
    elif isinstance(e, Binary):
        a = sub(e.a)
        op = BinaryOp(e.fn, a, sub(e.b))
    elif isinstance(e, Cmp):
        a = sub(e.a)
        op = CmpOp(e.pred, a, sub(e.b))
    elif isinstance(e, Select):
        c = sub(e.cond)
        a = sub(e.a)
        op = SelectOp(c, a, sub(e.b))
    elif isinstance(e, Cast):
        op = CastOp(sub(e.x), e.typed())
    elif isinstance(e, Bitcast):
        op = BitcastOp(sub(e.x), e.typed())
    else:
        raise LoopIRError(f"unknown expression node {e!r}")
    ops.append(op)
    return op.results[0]


# ---- ops -> AST ---------------------------------------------------------------------------------
def op_to_kernel(op: KernelOp) -> Kernel:
    tensors = [TensorDecl(t.sym_name.data, t.dims, t.dtype, t.role.data)
               for t in op.body.block.ops if isinstance(t, TensorOp)]
    body = [_op_node(o, ()) for o in op.body.block.ops if not isinstance(o, TensorOp)]
    return Kernel(op.sym_name.data, tensors, body)


def module_kernels(module: ModuleOp) -> list[Kernel]:
    """The module's top-level kernels (not those kept in a `solar.as_written` snapshot)."""
    return [op_to_kernel(o) for o in module.body.block.ops if isinstance(o, KernelOp)]


def _op_node(o: Operation, dims: tuple[str, ...]) -> Node:
    """The AST node of `o`, whose maps are over the enclosing loop variables `dims`."""
    if isinstance(o, ForOp):
        inner = (*dims, o.iv.data)
        return For(o.iv.data, *o.bounds(dims), o.step.value.data, o.sequential is not None,
                   [_op_node(c, inner) for c in o.body.block.ops])
    if isinstance(o, IfOp):
        return If(o.constraints(dims), [_op_node(c, dims) for c in o.body.block.ops])
    if isinstance(o, StmtOp):
        y = o.body.block.last_op
        assert isinstance(y, YieldOp)
        dyn = dict(zip(o.dynamic_positions, y.dyn_indices, strict=True))
        memo: dict[SSAValue, SExpr] = {}
        idx = tuple(value_expr(dyn[p], memo, dims=dims) if p in dyn else a
                    for p, a in enumerate(map_exprs(o.indices, dims)))
        return Assign(o.target.data, idx, o.kind.data, value_expr(y.value, memo, dims=dims),
                      location_text(o.location),
                      origin=o.origin.origin if o.origin is not None else None, traced=traced_of(o.traced))
    raise LoopIRError(f"unexpected operation '{o.name}' in a kernel body")


ValueLeaf = Callable[[SSAValue, Callable[[SSAValue], SExpr]], "SExpr | None"]
ExprLeaf = Callable[[SExpr, Callable[[SExpr], SSAValue], list[Operation]], "SSAValue | None"]


def value_expr(v: SSAValue, memo: dict[SSAValue, SExpr] | None = None,
               leaf: ValueLeaf | None = None, dims: tuple[str, ...] = ()) -> SExpr:
    """The expression an SSA value of a scalar region computes; a value used twice is one object
    (`memo`, one per region), so a DAG stays a DAG. `leaf` reads the values that are not loop
    scalar ops (an einsum node's block arguments and gathers); it gets a converter for operands.
    `dims`: the enclosing loop variables of a loop statement, the dimensions of its reads' maps."""
    memo = {} if memo is None else memo
    if v not in memo:
        memo[v] = _value_expr(v, memo, leaf, dims)
    return memo[v]


def _value_expr(v: SSAValue, memo: dict[SSAValue, SExpr], leaf: ValueLeaf | None,
                dims: tuple[str, ...]) -> SExpr:
    if leaf is not None:
        got = leaf(v, lambda x: value_expr(x, memo, leaf, dims))
        if got is not None:
            return got
    o = v.owner
    dt = type_dtype(v.type)

    def sub(x: SSAValue) -> SExpr:
        return value_expr(x, memo, leaf, dims)

    if isinstance(o, ReadOp):
        dyn = dict(zip(o.dynamic_positions, o.dyn_indices, strict=True))
        idx = tuple(sub(dyn[p]) if p in dyn else a for p, a in enumerate(map_exprs(o.indices, dims)))
        return Read(o.tensor.data, idx, dt)
    if isinstance(o, ConstOp):
        val = o.value.value.data
        return Const(float(val) if isinstance(o.value, FloatAttr) else
                     (bool(val) if dt == "bool" else int(val)), dt)
    if isinstance(o, IndexOp):
        (e,) = map_exprs(o.expr, dims)
        return IndexValue(e)
    if isinstance(o, UnaryOp):
        return Unary(o.fn.data, sub(o.x), dt)
    if isinstance(o, BinaryOp):
        return Binary(o.fn.data, sub(o.lhs), sub(o.rhs), dt)
    if isinstance(o, CmpOp):
        return Cmp(o.pred.data, sub(o.lhs), sub(o.rhs), dt)
    if isinstance(o, SelectOp):
        return Select(sub(o.cond), sub(o.a), sub(o.b), dt)
    if isinstance(o, CastOp):
        return Cast(sub(o.x), dt)
    if isinstance(o, BitcastOp):
        return Bitcast(sub(o.x), dt)
    raise LoopIRError(f"value not produced by a loop scalar op: {o}")
