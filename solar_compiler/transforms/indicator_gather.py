"""Contractions with an indicator factor, rewritten as gathers: an entry of the catalogue of the
default model of computation (docs/bounds.md, section 0).

An *indicator* of a reduced variable `k` is a tensor whose element is 1 where `k` equals a key
computed from the other indices, and 0 elsewhere: `F.one_hot(idx, V).float()`,
`(idx[:, None] == arange(V)).float()`, a zero tensor after `scatter_(1, idx[:, None], 1.0)`. A
contraction with such a factor sums exactly one term per point of its other variables,

    sum_k [key(i) == k] * A(i, k, j) = A(i, key(i), j)     (no term when key(i) misses k's range),

so an implementation reads the elements the keys select (a gather, as an embedding lookup does) and
neither builds the indicator nor runs the products. The rewrite removes `k` from the node, turns
every read that used `k` into an `einsum.gather` at the key, computes the key in the node (the
comparison's, or the scatter's index, through the maps that placed it), drops the indicator from the
product, and erases the nodes that built the indicator once nothing reads them. The gather's rows are
counted at their fewest (`--indirect min`'s rule: one row per loaded index), since the trace never ran
this gather: the bound errs low. Exact arithmetic: a product by 1.0 or 0.0 is exact, and the sum of
one nonzero term is that term (an inf or nan in a row the keys do not select is the one difference,
which no kernel writer preserves).

The indicator is followed through the nodes that built it (use-def chains): copies and casts that
write their whole tensor in place (any permutation of the positions), down to a node that stores a
comparison `key == k` (a cast of the bool, or a select of 1 and 0 on it), or to a scatter of 1 into
a zero fill, one write per row. An indicator may also be computed in the contraction's own body
(`_inline`): `x[i, k] * select(k == key[j], 1, 0)`, how a selection buffer is read against its table
of keys (`frontends/torch/masks.py`); then no node is erased. Anything else is left as written.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from xdsl.dialects.builtin import (
    AffineMapAttr,
    AffineSetAttr,
    ArrayAttr,
    FlatSymbolRefAttr,
    TensorType,
)
from xdsl.ir import Block, BlockArgument, Operation, Region, SSAValue
from xdsl.ir.affine import AffineConstantExpr, AffineDimExpr, AffineExpr, AffineMap, AffineSet

from solar_compiler.analysis import structured as st
from solar_compiler.dialects.einsum import GatherOp, GraphOp, IndexOp, NodeOp, YieldOp, link_edges
from solar_compiler.dialects.loop import BinaryOp, CastOp, CmpOp, ConstOp, SelectOp, i64_array, type_dtype
from solar_compiler.loopir.rules import INT_DTYPES

GATHERED = "one-hot contraction as a gather"


@dataclass(frozen=True)
class Match:
    """A contraction (`node`) whose input `operand` is an indicator of its reduced dim `dim`; the key
    is `key`, a value of `base`'s body, and `to_base` maps the node's dims to `base`'s."""

    node: NodeOp
    operand: int
    dim: int
    base: NodeOp
    key: SSAValue
    to_base: AffineMap
    chain: tuple[NodeOp, ...]   # the nodes that built the indicator, the contraction's producer first
    factor: SSAValue | None = None  # an indicator computed in the node's body (`_inline`), else None


Allowed = Callable[[Sequence[NodeOp]], bool]


def indicator_matches(graph: GraphOp, allowed: Allowed | None = None) -> list[Match]:
    """Every contraction of `graph` with an indicator factor (the first such factor of each node);
    `allowed(nodes)` may refuse a match by the nodes it involves (the unfused fidelity keeps each
    source op's rewrites inside it)."""
    out = []
    for n in graph.nodes():
        m = _match(graph, n)
        if m is not None and (allowed is None or allowed((n, *m.chain))):
            out.append(m)
    return out


def rewrite_indicator(graph: GraphOp, m: Match) -> tuple[NodeOp, list[str]]:
    """Replace the contraction by its gather (same name, origin and position) and erase the
    indicator's nodes that nothing reads any more; returns the new node and the gathered tensors.
    The graph's edges are relinked."""
    new, gathered = _gather_node(m)
    old = m.node
    block = graph.body.block
    block.insert_op_before(new, old)
    old.result.replace_all_uses_with(new.result)
    block.detach_op(old)
    old.erase(safe_erase=False)
    link_edges(graph)
    erase_dead(graph, m.chain)
    new.verify()
    graph.verify_()
    return new, gathered


# ---- matching ------------------------------------------------------------------------------------
def _match(graph: GraphOp, n: NodeOp) -> Match | None:
    if n.reduce.data != "add" or n.dynamic_positions:
        return None
    red = st.reduced_dims(n)
    if not red:
        return None
    for f in st.operand_factors(st.stored_value(n)):
        arg = _peel_casts(f)
        if _entering_mul(arg) is None:
            continue
        if not isinstance(arg, BlockArgument):
            inline = _inline(graph, n, arg, red)
            if inline is not None:
                return inline
            continue
        found = _indicator(n, arg.index, n.indexing_maps.data[arg.index].data)
        if found is None:
            continue
        base, key, to_base, dim, chain = found
        if dim in red and _removable(n, dim) and _key_ok(graph, n, base, key, to_base, dim):
            return Match(n, arg.index, dim, base, key, to_base, chain)
    return None


def _inline(graph: GraphOp, n: NodeOp, factor: SSAValue, red: frozenset[int]) -> Match | None:
    """A factor computed in the node's own body that is an indicator of a reduced dim: `[k == key]`
    as a bool, its cast, or a select of 1 and 0 on it, the key read from tensors at positions that
    do not use `k` (a selection buffer's keys, masks.py). The match's `base` is the node itself and
    `operand` is -1 (no input of the node holds the indicator)."""
    cmp = _truth(factor).owner
    if not isinstance(cmp, CmpOp) or cmp.pred.data != "eq":
        return None
    own = AffineMap.identity(n.get_num_loops())
    for a, b in ((cmp.lhs, cmp.rhs), (cmp.rhs, cmp.lhs)):
        if not isinstance(a.owner, IndexOp):
            continue
        e = a.owner.map.data.results[0]
        if not isinstance(e, AffineDimExpr) or e.position not in red:
            continue
        k = e.position
        if _removable(n, k, _indicator_ops(factor, b)) and _key_ok(graph, n, n, b, own, k):
            return Match(n, -1, k, n, b, own, (), _peel_casts(factor))
    return None


def _indicator_ops(factor: SSAValue, key: SSAValue) -> set[Operation]:
    """The ops of an inline indicator that only it needs: those `factor` reaches, less its key's and
    literals (a literal may be shared)."""
    return {o for o in st.reachable((factor,)) if not isinstance(o, ConstOp)} - set(st.reachable((key,)))


def _peel_casts(v: SSAValue) -> SSAValue:
    while isinstance(v.owner, CastOp):
        v = v.owner.x
    return v


def _entering_mul(arg: SSAValue) -> BinaryOp | None:
    """The multiplication the factor enters, through casts that have no other use."""
    v = arg
    while True:
        uses = list(v.uses)
        if len(uses) != 1:
            return None
        op = uses[0].operation
        if isinstance(op, CastOp):
            v = op.result
            continue
        return op if isinstance(op, BinaryOp) and op.fn.data == "mul" else None


def _indicator(n: NodeOp, i: int, m: AffineMap) \
        -> tuple[NodeOp, SSAValue, AffineMap, int, tuple[NodeOp, ...]] | None:
    """(base node, key value, map from `n`'s dims to the base's, the indicated dim of `n`, the chain)
    when input `i` of `n`, read at `m`, is an indicator; else None."""
    chain: list[NodeOp] = []
    node = st.producer(n, i)
    while node is not None and len(chain) < 16:
        chain.append(node)
        if node.reduce.data != "none" or node.guards is not None:
            return None
        value = _truth(_peel_casts(st.stored_value(node)))
        if node.dynamic_positions:
            return _scatter(node, value, m, chain)
        to_node = _inverse(node, m, None)
        if to_node is None:
            return None
        if isinstance(value, BlockArgument):  # a copy or a cast: follow it to the node that wrote it
            m = node.indexing_maps.data[value.index].data.compose(to_node)
            node = st.producer(node, value.index)
            continue
        cmp = value.owner
        if not isinstance(cmp, CmpOp) or cmp.pred.data != "eq":
            return None
        for a, b in ((cmp.lhs, cmp.rhs), (cmp.rhs, cmp.lhs)):
            if isinstance(a.owner, IndexOp):
                e = a.owner.map.data.compose(to_node).results[0]
                if isinstance(e, AffineDimExpr):
                    return node, b, to_node, e.position, tuple(chain)
        return None
    return None


def _truth(v: SSAValue) -> SSAValue:
    """The condition whose truth `v` is as 1 and 0: through a select of 1 and 0 (and casts)."""
    o = v.owner
    if isinstance(o, SelectOp) and _literal(o.a) == 1 and _literal(o.b) == 0:
        return _peel_casts(o.cond)
    return v


def _literal(v: SSAValue) -> float | None:
    o = _peel_casts(v).owner
    return float(o.value.value.data) if isinstance(o, ConstOp) else None


def _scatter(node: NodeOp, value: SSAValue, m: AffineMap, chain: list[NodeOp]) \
        -> tuple[NodeOp, SSAValue, AffineMap, int, tuple[NodeOp, ...]] | None:
    """A scatter of 1 (one write per row) into a whole zero fill: an indicator of its loaded position."""
    pos = node.dynamic_positions
    if len(pos) != 1 or _literal(value) != 1:
        return None
    j = pos[0]
    to_node = _inverse(node, m, j)
    fill = st.init_producer(node)
    e = m.results[j]
    if to_node is None or fill is None or not isinstance(e, AffineDimExpr) or not st.whole_fill(fill, 0):
        return None
    y = node.body.block.last_op
    assert isinstance(y, YieldOp)
    return node, y.dyn_indices[0], to_node, e.position, (*chain, fill)


def _inverse(node: NodeOp, m: AffineMap, symbol_at: int | None) -> AffineMap | None:
    """The map from the reader's dims to `node`'s dims, when `node` writes every element of its
    tensor once (its output map a permutation of its dims over the whole box, except the scatter's
    loaded position `symbol_at`; any other loop has one point) and the reader reads its tensor at
    `m`; else None."""
    out = node.indexing_maps.data[-1].data
    nd = node.get_num_loops()
    shape = _shape(node)
    dim_at: dict[int, int] = {}
    for r, e in enumerate(out.results):
        if r == symbol_at:
            continue
        if not isinstance(e, AffineDimExpr) or e.position in dim_at:
            return None
        dim_at[e.position] = r
    if shape is None:
        return None
    lows, ups = node.lower_bounds.data.results, node.upper_bounds.data.results
    results = []
    for d in range(nd):
        lo, hi = _const(lows[d]), _const(ups[d])
        if d not in dim_at:  # a loop of one point (a scatter's index column): its value
            if lo is None or hi != lo + 1:
                return None
            results.append(AffineExpr.constant(lo))
        elif lo == 0 and hi == shape[dim_at[d]] and NodeOp.ints(node.steps)[d] == 1:
            results.append(m.results[dim_at[d]])
        else:
            return None
    return AffineMap(m.num_dims, m.num_symbols, tuple(results))


def _shape(node: NodeOp) -> tuple[int, ...] | None:
    """The shape of the tensor the node writes (its result's type: no walk over the declarations)."""
    t = node.result.type
    return tuple(t.get_shape()) if isinstance(t, TensorType) else None


def _const(e: AffineExpr) -> int | None:
    return e.value if isinstance(e, AffineConstantExpr) else None


def _removable(n: NodeOp, k: int, dropped: set[Operation] | frozenset[Operation] = frozenset()) -> bool:
    """Whether dim `k` can leave the node: no other bound, no guard, no index value and no gather of
    its body uses it (a read that uses it becomes a gather), outside the ops `dropped` with the
    indicator."""
    for i, (lb, ub) in enumerate(zip(n.lower_bounds.data.results, n.upper_bounds.data.results, strict=True)):
        if i != k and k in (st.dims_of(lb) | st.dims_of(ub)):
            return False
    if n.guards is not None and any(k in (st.dims_of(c.lhs) | st.dims_of(c.rhs))
                                    for c in n.guards.data.constraints):
        return False
    return not any(isinstance(o, IndexOp | GatherOp) and any(k in st.dims_of(r) for r in o.map.data.results)
                   for o in st.body_ops(n) if o not in dropped)


def _key_ok(graph: GraphOp, n: NodeOp, base: NodeOp, key: SSAValue, to_base: AffineMap, k: int) -> bool:
    """The key is an integer computed from reads, index values and literals that do not use `k`, and
    every tensor it reads holds the same value at `n` as at `base` (no node between writes it)."""
    if type_dtype(key.type) not in INT_DTYPES:
        return False
    reads = []
    for o in st.reachable((key,)):
        if isinstance(o, GatherOp):
            return False
        if isinstance(o, IndexOp) and k in o.map.data.compose(to_base).used_dims():
            return False
    for v in st.block_args(key):
        if k in base.indexing_maps.data[v.index].data.compose(to_base).used_dims():
            return False
        reads.append(base.input_names[v.index])
    nodes = graph.nodes()
    between = nodes[nodes.index(base) + 1:nodes.index(n)]
    return not any(x.output_name in reads for x in between)


# ---- the rewritten node ----------------------------------------------------------------------------
def _gather_node(m: Match) -> tuple[NodeOp, list[str]]:
    n, k = m.node, m.dim
    nd = n.get_num_loops()
    dims = [AffineExpr.dimension(d - (d > k)) if d != k else AffineExpr.symbol(0) for d in range(nd)]

    def shifted(e: AffineExpr, symbols: int = 0) -> AffineExpr:
        return e.replace_dims_and_symbols(dims, [AffineExpr.symbol(s) for s in range(symbols)])

    def amap(results: Sequence[AffineExpr], symbols: int = 0) -> AffineMapAttr:
        """A map of the node without `k` (a gather's loaded positions keep their symbols; `k` itself,
        where a read used it, becomes the key's symbol s0)."""
        return AffineMapAttr(AffineMap(nd - 1, symbols, tuple(shifted(r, symbols) for r in results)))

    maps = [x.data for x in n.indexing_maps.data]
    block = Block()
    values: dict[SSAValue, SSAValue] = {}
    inputs: list[str] = []
    in_maps: list[AffineMapAttr] = []

    def add_input(tensor: str, mp: AffineMap, dtype_of: SSAValue) -> BlockArgument:
        inputs.append(tensor)
        in_maps.append(amap(mp.results))
        return block.insert_arg(dtype_of.type, len(block.args))

    # the key first: its reads as inputs of the node, its ops cloned (index values through the maps)
    for a in st.block_args(m.key):
        read_at = m.base.indexing_maps.data[a.index].data.compose(m.to_base)
        values[a] = add_input(m.base.input_names[a.index], read_at, a)
    key_ops = set(st.reachable((m.key,)))
    factor = m.factor
    skip = _indicator_uses(n.body.block.args[m.operand]) if factor is None else _indicator_ops(factor, m.key)
    for o in m.base.body.block.ops:
        if o in key_ops:
            if isinstance(o, IndexOp):
                c = IndexOp(AffineMapAttr(AffineMap(nd - 1, 0, tuple(
                    shifted(r) for r in o.map.data.compose(m.to_base).results))))
            else:
                c = o.clone(value_mapper=values)
            block.add_op(c)
            values.update(zip(o.results, c.results, strict=True))
    key = values[m.key]
    gathered: list[str] = []
    for a in n.body.block.args:
        t, mp = n.input_names[a.index], maps[a.index]
        if a.index == m.operand or a in values:  # the indicator, or a read of the key already added
            continue
        if k in mp.used_dims():
            g = GatherOp(t, amap(mp.results, 1), [key], type_dtype(a.type))
            block.add_op(g)
            values[a] = g.result
            gathered.append(t)
        else:
            values[a] = add_input(t, mp, a)
    indicator = n.body.block.args[m.operand] if factor is None else factor
    mul = _entering_mul(indicator)
    for o in n.body.block.ops:
        if o in skip or (factor is not None and o in key_ops):
            continue
        if o is mul:
            other = mul.rhs if _peel_casts(mul.lhs) is indicator else mul.lhs
            v = values[other]
            if v.type != mul.result.type:
                cast = CastOp(v, type_dtype(mul.result.type))
                block.add_op(cast)
                v = cast.result
            values[mul.result] = v
            continue
        if isinstance(o, IndexOp):
            c = IndexOp(amap(o.map.data.results))
        elif isinstance(o, GatherOp):
            c = GatherOp(o.tensor_name, amap(o.map.data.results, o.map.data.num_symbols),
                         [values.get(v, v) for v in o.indices], type_dtype(o.result.type))
        else:
            c = o.clone(value_mapper=values)
        block.add_op(c)
        values.update(zip(o.results, c.results, strict=True))
    props = dict(n.properties)
    keep = [d for d in range(nd) if d != k]
    props["ivs"] = ArrayAttr([n.ivs.data[d] for d in keep])
    props["iterator_types"] = ArrayAttr([n.iterator_types.data[d] for d in keep])
    props["lower_bounds"] = amap([n.lower_bounds.data.results[d] for d in keep])
    props["upper_bounds"] = amap([n.upper_bounds.data.results[d] for d in keep])
    props["steps"] = i64_array(tuple(NodeOp.ints(n.steps)[d] for d in keep))
    props["scopes"] = i64_array(tuple(NodeOp.ints(n.scopes)[d] for d in keep))
    props["inputs"] = ArrayAttr([FlatSymbolRefAttr(t) for t in inputs])
    props["indexing_maps"] = ArrayAttr([*in_maps, amap(maps[-1].results)])
    props.pop("traced", None)  # the trace's footprint was taken on the domain as written
    if n.guards is not None:
        g = n.guards.data
        props["guards"] = AffineSetAttr(_shift_set(g, shifted, nd - 1))
        props["guard_depths"] = i64_array(tuple(x - (x > k) for x in NodeOp.ints(n.guard_depths)))
    if n.init is not None:
        loops, guards = NodeOp.ints(n.init_depth)
        props["init_depth"] = i64_array((loops - (loops > k), guards))
        if n.init_guard_depths is not None:
            depths = NodeOp.ints(n.init_guard_depths)
            props["init_guard_depths"] = i64_array(tuple(x - (x > k) for x in depths))
    new = NodeOp.create(properties=props, regions=[Region(block)], result_types=[n.result.type])
    new.location = n.location
    return new, gathered


def _shift_set(s: AffineSet, shifted: Callable[[AffineExpr], AffineExpr], num_dims: int) -> AffineSet:
    return AffineSet(num_dims, 0, tuple(shifted(c) for c in s.constraints), s.eq_flags)


def _indicator_uses(arg: BlockArgument) -> set[Operation]:
    """The casts between the indicator's block argument and the multiplication it enters."""
    out: set[Operation] = set()
    v: SSAValue = arg
    while True:
        op = next(iter(v.uses)).operation
        if not isinstance(op, CastOp):
            return out
        out.add(op)
        v = op.result


def erase_dead(graph: GraphOp, chain: Sequence[NodeOp]) -> None:
    """Erase the nodes whose result nothing uses (locals only, readers first: the walk stops at the
    first one still used), then the declarations no node names any more; the edges are relinked.
    Shared by the rewrites that leave the nodes they replaced without readers."""
    changed = False
    for node in chain:
        decl = graph.tensor_ops().get(node.output_name)
        if node.result.uses or decl is None or decl.role.data != "local":
            break
        node.detach()
        node.erase(safe_erase=False)
        changed = True
        link_edges(graph)
    if not changed:
        return
    drop_unnamed(graph)
    link_edges(graph)


def drop_unnamed(graph: GraphOp) -> None:
    """Erase the declarations of locals no node names any more."""
    named = {t for x in graph.nodes()
             for t in (*x.input_names, x.output_name, *(g.tensor_name for g in x.gathers()))}
    for t, decl in graph.tensor_ops().items():
        if t not in named and decl.role.data == "local":
            decl.detach()
            decl.erase(safe_erase=False)
