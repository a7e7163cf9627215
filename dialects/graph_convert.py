"""Loop-IR kernel (AST) <-> einsum graph (`dialects/einsum.py`).

`kernel_to_graph` is what `lift-einsum` does: one structured node per statement group
(`grouping.group_statements`). `graph_to_kernel` lowers a graph back to a kernel and the node
grouping: it is how the transforms and the executor run a graph (`transforms/kernels.py`); the
analyses read the graph itself (`analysis/graphs.py`).
Nodes that shared a loop or an `if` in the loop nest (same scope numbers) share it again, so a
lifted kernel lowers to the same kernel: `graph_to_kernel(kernel_to_graph(k)) == k` for a typed k.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

from xdsl.dialects.builtin import (
    AffineMapAttr,
    AffineSetAttr,
    Float64Type,
    FloatAttr,
    FusedLoc,
    IntegerAttr,
    LocationAttr,
    NoneAttr,
    i64,
)
from xdsl.ir import Attribute, Block, BlockArgument, Operation, Region, SSAValue

from solar_compiler.dialects.convert import expr_ops, op_to_kernel, value_expr
from solar_compiler.dialects.einsum import GatherOp, GraphOp, IndexOp, NodeOp, TensorOp, YieldOp, link_edges
from solar_compiler.dialects.loop import KernelOp, dtype_type, location_of, location_text, traced_of
from solar_compiler.loopir.affine import AffCond, AffExpr
from solar_compiler.loopir.affine_map import from_map, from_set, to_map, to_set
from solar_compiler.loopir.ast import (
    FLOAT_DTYPES,
    Assign,
    Const,
    For,
    If,
    IndexValue,
    Kernel,
    Read,
    SExpr,
    TensorDecl,
    statements,
    typecheck,
)
from solar_compiler.loopir.grouping import NodeGroup, Scope, group_statements, scope_paths
from solar_compiler.text.equation import assign_equation
from solar_compiler.text.printer import print_assign

REDUCE_OF_KIND = {"=": "none", "+=": "add", "*=": "mul", "max=": "max", "min=": "min"}
KIND_OF_REDUCE = {v: k for k, v in REDUCE_OF_KIND.items()}


# ---- kernel -> graph ---------------------------------------------------------------------------------
def kernel_to_graph(kernel: Kernel) -> GraphOp:
    """The einsum graph of a kernel (typed here); node `S<i>` is named after its main statement."""
    k = typecheck(kernel)
    paths = scope_paths(k)
    numbers: dict[int, int] = {}

    def number(scope: Scope) -> int:
        return numbers.setdefault(id(scope), len(numbers))

    graph = GraphOp(k.name, [TensorOp(t.name, t.shape, t.dtype, t.role) for t in k.tensors])
    for g in group_statements(k):
        init_path = paths[g.init.index] if g.init is not None else ()
        graph.body.block.add_op(_node(k, g, paths[g.main.index], number, init_path))
    return link_edges(graph)


def _guards(path: tuple[Scope, ...],
            number: Callable[[Scope], int]) -> tuple[list[AffCond], list[int], list[int]]:
    """The guard constraints on a statement's path, with the number of their `if` and their depth
    (how many loops enclose them)."""
    conds: list[AffCond] = []
    scopes: list[int] = []
    depths: list[int] = []
    depth = 0
    for sc in path:
        if isinstance(sc, For):
            depth += 1
        else:
            conds += sc.conds
            scopes += [number(sc)] * len(sc.conds)
            depths += [depth] * len(sc.conds)
    return conds, scopes, depths


def _node(k: Kernel, g: NodeGroup, path: tuple[Scope, ...], number: Callable[[Scope], int],
          paths_init: tuple[Scope, ...] = ()) -> NodeOp:
    ctx = g.main
    s = ctx.stmt
    ivs = list(ctx.ivs)
    out_vars = s.target_vars
    conds, gscopes, gdepths = _guards(path, number)
    inputs: dict[tuple, int] = {}
    for r in _direct_reads(s):
        inputs.setdefault((r.tensor, r.indices), len(inputs))
    block = Block(arg_types=[dtype_type(k.tensor(t).dtype) for t, _ in inputs])
    ops: list[Operation] = []

    def leaf(e: SExpr, sub: Callable[[SExpr], SSAValue], ops_: list[Operation]) -> SSAValue | None:
        if isinstance(e, Read) and not e.indirect:
            return block.args[inputs[(e.tensor, e.indices)]]
        if isinstance(e, Read):
            syms = [f"_s{p}" for p, i in enumerate(e.indices) if isinstance(i, SExpr)]
            exprs = [i if isinstance(i, AffExpr) else AffExpr.var(f"_s{p}") for p, i in enumerate(e.indices)]
            dyn = [sub(i) for i in e.indices if isinstance(i, SExpr)]
            op: Operation = GatherOp(e.tensor, AffineMapAttr(to_map(exprs, ivs, syms)), dyn, e.typed())
        elif isinstance(e, IndexValue):
            op = IndexOp(AffineMapAttr(to_map([e.expr], ivs)))
        else:
            return None
        ops_.append(op)
        return op.results[0]

    memo: dict[int, SSAValue] = {}
    value = expr_ops(s.value, ops, leaf, memo)
    dyn = [expr_ops(i, ops, leaf, memo) for i in s.dynamic_indices]
    ops.append(YieldOp(value, dyn))
    block.add_ops(ops)
    dyn_pos = [p for p, i in enumerate(s.indices) if isinstance(i, SExpr)]
    syms = [f"_s{p}" for p in dyn_pos]
    out_exprs = [i if isinstance(i, AffExpr) else AffExpr.var(f"_s{p}") for p, i in enumerate(s.indices)]
    maps = [AffineMapAttr(to_map(idx, ivs)) for _, idx in inputs]
    maps.append(AffineMapAttr(to_map(out_exprs, ivs, syms)))
    init = init_depth = None
    init_guards: tuple[list[int], list[int]] = ([], [])
    if g.init is not None:
        c = g.init.stmt.value
        assert isinstance(c, Const)
        init = _literal(c.value, k.tensor(s.target).dtype)
        init_depth = (len(g.init.loops), len(g.init.guards))
        _, iscopes, idepths = _guards(paths_init, number)
        init_guards = (iscopes, idepths)
    return NodeOp(
        name=g.name, inputs=[t for t, _ in inputs], output=s.target, reduce=REDUCE_OF_KIND[s.kind],
        ivs=ivs, iterator_types=["sequential" if f.sequential else "parallel" if f.iv in out_vars else
                                 "reduction" for f in ctx.loops],
        lower_bounds=AffineMapAttr(to_map([f.lb for f in ctx.loops], ivs)),
        upper_bounds=AffineMapAttr(to_map([f.ub for f in ctx.loops], ivs)),
        steps=[f.step for f in ctx.loops], indexing_maps=maps, body=Region(block),
        scopes=[number(f) for f in ctx.loops],
        guards=AffineSetAttr(to_set(conds, ivs)) if conds else None, guard_scopes=gscopes,
        guard_depths=gdepths, output_dynamic=dyn_pos, init=init, init_depth=init_depth,
        init_guard_scopes=init_guards[0], init_guard_depths=init_guards[1],
        origin=s.origin, init_origin=g.init.stmt.origin if g.init is not None else None,
        location=_location(g), traced=s.traced)


def _direct_reads(s: Assign) -> list[Read]:
    """Affine reads of a statement (its value's and its dynamic indices'), in first-occurrence
    order: the node's inputs, one block argument each."""
    out = []
    for e in (s.value, *s.dynamic_indices):
        out += [r for r in e.walk() if isinstance(r, Read) and not r.indirect]
    return out


def _literal(value: float | int | bool, dtype: str) -> Attribute:
    return FloatAttr(float(value), Float64Type()) if dtype in FLOAT_DTYPES else IntegerAttr(int(value), i64)


def _location(g: NodeGroup) -> LocationAttr:
    """The main statement's position; with a folded init, a fused (init, main) pair."""
    main = location_of(g.main.stmt.loc)
    if g.init is None:
        return main
    return FusedLoc((location_of(g.init.stmt.loc), main), NoneAttr())


# ---- graph -> kernel ---------------------------------------------------------------------------------
@dataclass(frozen=True)
class _Entry:
    """One scope on a node's path: a loop or an `if` block, with its scope number."""

    number: int
    loop: tuple[str, AffExpr, AffExpr, int, bool] | None = None
    conds: tuple[AffCond, ...] = ()

    def make(self) -> Scope:
        if self.loop is not None:
            iv, lb, ub, step, seq = self.loop
            return For(iv, lb, ub, step, seq)
        return If(self.conds)


def graph_to_kernel(graph: GraphOp) -> tuple[Kernel, list[NodeGroup]]:
    """The kernel a graph describes, and its nodes as statement groups (named after the nodes)."""
    decls = graph.tensor_ops()
    tensors = [TensorDecl(t.sym_name.data, t.dims, t.dtype, t.role.data) for t in decls.values()]
    kernel = Kernel(graph.kernel_name, tensors)
    open_: list[tuple[int, Scope]] = []
    sizes: list[tuple[str, int]] = []

    def place(stmt: Assign, path: list[_Entry]) -> None:
        level = 0
        while level < min(len(path), len(open_)) and open_[level][0] == path[level].number:
            level += 1
        del open_[level:]
        for e in path[level:]:
            scope = e.make()
            (open_[-1][1].body if open_ else kernel.body).append(scope)
            open_.append((e.number, scope))
        (open_[-1][1].body if open_ else kernel.body).append(stmt)

    for n in graph.nodes():
        path = _path(n)
        main = _main_assign(n, decls)
        if n.init is not None:
            place(_init_assign(n, main), _init_path(n))
        place(main, path)
        sizes.append((n.sym_name.data, 2 if n.init is not None else 1))
    ctxs = statements(kernel)
    groups, at = [], 0
    for name, size in sizes:
        groups.append(NodeGroup(tuple(ctxs[at:at + size]), name))
        at += size
    return kernel, groups


class NodeText:
    """The text form of a graph's nodes, for reports: each node's statements (its folded init, then
    its main statement) as `graph_to_kernel` gives them, printed by the text form's printer. An
    explicit conversion, so that the analyses that label their records read only einsum ops."""

    def __init__(self, graph: GraphOp):
        self.decls = graph.tensor_ops()
        tensors = [TensorDecl(t.sym_name.data, t.dims, t.dtype, t.role.data) for t in self.decls.values()]
        self.kernel = Kernel(graph.kernel_name, tensors)  # the tensors' dtypes, for the printer

    def statements(self, n: NodeOp) -> list[Assign]:
        main = _main_assign(n, self.decls)
        return [_init_assign(n, main), main] if n.init is not None else [main]

    def describe(self, n: NodeOp) -> tuple[str, str, str | None]:
        """(label, equation, source position): the statements in text form without their
        positions, the main statement's extended einsum equation, and the main statement's position
        (else the init's)."""
        stmts = self.statements(n)
        label = "; ".join(print_assign(self.kernel, replace(a, loc=None)) for a in stmts)
        locs = [a.loc for a in reversed(stmts) if a.loc]
        return label, assign_equation(self.kernel, stmts[-1]), locs[0] if locs else None


def _path(n: NodeOp) -> list[_Entry]:
    return _entries(n, len(n.ivs.data), NodeOp.ints(n.guard_scopes), NodeOp.ints(n.guard_depths))


def _init_path(n: NodeOp) -> list[_Entry]:
    """The folded init's own scopes: the outer `loops` loops of the node and its first guards, in
    the `if` blocks and at the depths recorded for the init (they may differ from the reduction's)."""
    loops, _ = NodeOp.ints(n.init_depth)
    return _entries(n, loops, NodeOp.ints(n.init_guard_scopes), NodeOp.ints(n.init_guard_depths))


def _entries(n: NodeOp, nloops: int, gscopes: tuple[int, ...], gdepths: tuple[int, ...]) -> list[_Entry]:
    """The scopes of a statement of node `n`: its first `nloops` loops and its first len(gscopes)
    guard constraints, each `if` block placed after the loops that enclose it."""
    ivs = n.iv_names
    lbs = from_map(n.lower_bounds.data, ivs)
    ubs = from_map(n.upper_bounds.data, ivs)
    steps = NodeOp.ints(n.steps)
    kinds = [k.data for k in n.iterator_types.data]
    scopes = NodeOp.ints(n.scopes)
    conds = from_set(n.guards.data, ivs)[:len(gscopes)] if n.guards is not None else ()
    out: list[_Entry] = []
    gi = 0
    for d in range(nloops + 1):
        while gi < len(conds) and gdepths[gi] == d:
            j = gi
            while j < len(conds) and gscopes[j] == gscopes[gi] and gdepths[j] == d:
                j += 1
            out.append(_Entry(gscopes[gi], conds=tuple(conds[gi:j])))
            gi = j
        if d < nloops:
            out.append(_Entry(scopes[d], loop=(ivs[d], lbs[d], ubs[d], steps[d], kinds[d] == "sequential")))
    return out


def _main_assign(n: NodeOp, decls: dict[str, TensorOp]) -> Assign:
    ivs = n.iv_names
    maps = n.indexing_maps.data
    inputs = n.input_names
    block = n.body.block

    def leaf(v: SSAValue, conv: Callable[[SSAValue], SExpr]) -> SExpr | None:
        if isinstance(v, BlockArgument):
            t = inputs[v.index]
            return Read(t, from_map(maps[v.index].data, ivs), decls[t].dtype)
        o = v.owner
        if isinstance(o, GatherOp):
            syms = [f"_s{k}" for k in range(len(o.indices))]
            vals = {f"_s{k}": conv(x) for k, x in enumerate(o.indices)}
            idx = tuple(vals[str(e)] if str(e) in vals else e for e in from_map(o.map.data, ivs, syms))
            return Read(o.tensor_name, idx, decls[o.tensor_name].dtype)
        if isinstance(o, IndexOp):
            (e,) = from_map(o.map.data, ivs)
            return IndexValue(e)
        return None

    y = block.last_op
    assert isinstance(y, YieldOp)
    memo: dict[SSAValue, SExpr] = {}
    value = value_expr(y.stored, memo, leaf)
    dyn = [value_expr(d, memo, leaf) for d in y.dyn_indices]
    pos = n.dynamic_positions
    syms = [f"_s{k}" for k in range(len(pos))]
    exprs = from_map(maps[-1].data, ivs, syms)
    idx = tuple(dyn[pos.index(p)] if p in pos else e for p, e in enumerate(exprs))
    locs = _locs(n.location)
    return Assign(n.output_name, idx, KIND_OF_REDUCE[n.reduce.data], value, locs[-1],
                  origin=n.origin.origin if n.origin is not None else None, traced=traced_of(n.traced))


def _init_assign(n: NodeOp, main: Assign) -> Assign:
    init = n.init
    assert init is not None
    dt = main.value.typed()
    v = init.value.data
    lit = float(v) if isinstance(init, FloatAttr) else int(v)
    return Assign(main.target, main.indices, "=", Const(lit, dt), _locs(n.location)[0],
                  origin=n.init_origin.origin if n.init_origin is not None else None)


def _locs(loc: Attribute) -> list[str | None]:
    """(init, main) positions of a fused node location, or the one position of a plain node."""
    if isinstance(loc, FusedLoc) and len(loc.locations.data) == 2:
        return [location_text(x) for x in loc.locations.data]
    return [location_text(loc)]


def fresh_scope_number(graph: GraphOp) -> int:
    """A scope number no node of `graph` uses (for nodes a rewrite adds in their own loops)."""
    used = [x for n in graph.nodes() for x in (*NodeOp.ints(n.scopes), *NodeOp.ints(n.guard_scopes))]
    return max(used, default=-1) + 1


def lift_kernel_op(op: KernelOp) -> GraphOp:
    """The einsum graph of a `loop.kernel` op, not yet lifted in its module (`lift_kernel` of its
    AST): how the analyses read a program before `lift-einsum`, or one kept as written."""
    return lift_kernel(op_to_kernel(op))


def lift_kernel(kernel: Kernel) -> GraphOp:
    """`kernel_to_graph`, verified, with a statement that cannot be lifted reported as a one-line
    SolarError naming its source position."""
    from xdsl.utils.exceptions import VerifyException

    from solar_compiler.errors import SolarError
    from solar_compiler.loopir.ast import LoopIRError
    from solar_compiler.text.equation import where

    k = typecheck(kernel)
    try:
        graph = kernel_to_graph(k)
        graph.verify()
    except (LoopIRError, VerifyException) as e:
        op = getattr(e, "op", None)
        msg = e.message if isinstance(e, LoopIRError) else str(e).split("\n")[0]
        name = op.sym_name.data if isinstance(op, NodeOp) else None
        ctx = next((g.main for g in group_statements(k) if g.name == name), None)
        at = where(k, ctx) if ctx is not None else f"kernel '{k.name}'"
        raise SolarError(f"{at}: cannot lift to an einsum node: {msg}") from None
    return graph
