"""Kernel AST <-> `loop` dialect operations. Both directions are exact inverses on typed kernels."""

from __future__ import annotations

from xdsl.dialects.builtin import FloatAttr, ModuleOp
from xdsl.ir import Operation, SSAValue

from solar_compiler.dialects.loop import (
    BinaryOp,
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
    type_dtype,
)
from solar_compiler.loopir.affine import AffExpr
from solar_compiler.loopir.ast import (
    Assign,
    Binary,
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
    ops += [_node_op(n) for n in k.body]
    return KernelOp(k.name, ops)


def kernels_to_module(kernels: list[Kernel]) -> ModuleOp:
    return ModuleOp([kernel_to_op(k) for k in kernels])


def _node_op(n: Node) -> Operation:
    if isinstance(n, For):
        return ForOp(n.iv, n.lb, n.ub, n.step, n.sequential, [_node_op(c) for c in n.body])
    if isinstance(n, If):
        return IfOp(n.conds, [_node_op(c) for c in n.body])
    ops: list[Operation] = []
    v = _expr_ops(n.value, ops)
    dyn = {p: _expr_ops(i, ops) for p, i in enumerate(n.indices) if isinstance(i, SExpr)}
    ops.append(YieldOp(v, [dyn[p] for p in sorted(dyn)]))
    idx = [i if isinstance(i, AffExpr) else AffExpr.lit(0) for i in n.indices]
    return StmtOp(n.target, idx, n.kind, ops, n.loc, sorted(dyn))


def _expr_ops(e: SExpr, ops: list[Operation]) -> SSAValue:
    op: Operation
    if isinstance(e, Read):
        dyn = {p: _expr_ops(i, ops) for p, i in enumerate(e.indices) if isinstance(i, SExpr)}
        idx = [i if isinstance(i, AffExpr) else AffExpr.lit(0) for i in e.indices]
        op = ReadOp(e.tensor, idx, dyn, e.typed())
    elif isinstance(e, Const):
        op = ConstOp(e.value, e.typed())
    elif isinstance(e, IndexValue):
        op = IndexOp(e.expr)
    elif isinstance(e, Unary):
        op = UnaryOp(e.fn, _expr_ops(e.x, ops), e.typed())
    elif isinstance(e, Binary):
        a = _expr_ops(e.a, ops)
        op = BinaryOp(e.fn, a, _expr_ops(e.b, ops))
    elif isinstance(e, Cmp):
        a = _expr_ops(e.a, ops)
        op = CmpOp(e.pred, a, _expr_ops(e.b, ops))
    elif isinstance(e, Select):
        c = _expr_ops(e.cond, ops)
        a = _expr_ops(e.a, ops)
        op = SelectOp(c, a, _expr_ops(e.b, ops))
    elif isinstance(e, Cast):
        op = CastOp(_expr_ops(e.x, ops), e.typed())
    else:
        raise LoopIRError(f"unknown expression node {e!r}")
    ops.append(op)
    return op.results[0]


# ---- ops -> AST ---------------------------------------------------------------------------------
def op_to_kernel(op: KernelOp) -> Kernel:
    tensors = [TensorDecl(t.sym_name.data, t.dims, t.dtype, t.role.data)
               for t in op.body.block.ops if isinstance(t, TensorOp)]
    body = [_op_node(o) for o in op.body.block.ops if not isinstance(o, TensorOp)]
    return Kernel(op.sym_name.data, tensors, body)


def module_kernels(module: ModuleOp) -> list[Kernel]:
    return [op_to_kernel(o) for o in module.walk() if isinstance(o, KernelOp)]


def _op_node(o: Operation) -> Node:
    if isinstance(o, ForOp):
        return For(o.iv.data, o.lb.expr, o.ub.expr, o.step.value.data, o.sequential is not None,
                   [_op_node(c) for c in o.body.block.ops])
    if isinstance(o, IfOp):
        return If(tuple(c.cond for c in o.conds.data), [_op_node(c) for c in o.body.block.ops])
    if isinstance(o, StmtOp):
        y = o.body.block.last_op
        assert isinstance(y, YieldOp)
        dyn = dict(zip(o.dynamic_positions, y.dyn_indices, strict=True))
        idx = tuple(_value_expr(dyn[p]) if p in dyn else a.expr for p, a in enumerate(o.indices.data))
        return Assign(o.target.data, idx, o.kind.data, _value_expr(y.value), o.loc.data if o.loc else None)
    raise LoopIRError(f"unexpected operation '{o.name}' in a kernel body")


def _value_expr(v: SSAValue) -> SExpr:
    o = v.owner
    dt = type_dtype(v.type)
    if isinstance(o, ReadOp):
        dyn = dict(zip(o.dynamic_positions, o.dyn_indices, strict=True))
        idx = tuple(_value_expr(dyn[p]) if p in dyn else a.expr for p, a in enumerate(o.indices.data))
        return Read(o.tensor.data, idx, dt)
    if isinstance(o, ConstOp):
        val = o.value.value.data
        return Const(float(val) if isinstance(o.value, FloatAttr) else
                     (bool(val) if dt == "bool" else int(val)), dt)
    if isinstance(o, IndexOp):
        return IndexValue(o.expr.expr)
    if isinstance(o, UnaryOp):
        return Unary(o.fn.data, _value_expr(o.x), dt)
    if isinstance(o, BinaryOp):
        return Binary(o.fn.data, _value_expr(o.lhs), _value_expr(o.rhs), dt)
    if isinstance(o, CmpOp):
        return Cmp(o.pred.data, _value_expr(o.lhs), _value_expr(o.rhs), dt)
    if isinstance(o, SelectOp):
        return Select(_value_expr(o.cond), _value_expr(o.a), _value_expr(o.b), dt)
    if isinstance(o, CastOp):
        return Cast(_value_expr(o.x), dt)
    raise LoopIRError(f"value not produced by a loop scalar op: {o}")
