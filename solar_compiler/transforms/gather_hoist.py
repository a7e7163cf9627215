"""Gathers of a computed tensor, hoisted into the node that computes it: an entry of the catalogue of
the default model of computation (docs/bounds.md, section 0).

`(x @ w)[idx]` reads 16 rows of a 2048 x 2048 product; an implementation computes those rows,
`x[idx] @ w`, not the whole product. In the einsum graph: a node C reads a local T through a gather
(`T[idx[i], j]`: one loaded position, the others affine in C's loop variables), and T is computed by
one node P that writes each of its elements once (a permutation of P's output variables over the
whole box, P's other variables reduced; an accumulation from zeros: a folded zero init or a zero
fill before it) and that nothing else reads. The rewrite builds P', which computes T' = the gathered
elements only: its loops are C's loop variables that the gather's positions and key use (their
box), then P's reduced variables; P's output variable at the loaded position becomes the key (so
P's reads through it become gathers, and the key's reads and arithmetic are copied from C), its
others the gather's affine positions. C reads T' directly; P (and its fill) are erased. Repeated,
the gather climbs through element-wise nodes to the contraction (`relu(x @ w)[idx]`).

Exact: T' holds the same values T does at the gathered positions (the same arithmetic on the same
operands). Taken only when the gathered box has fewer elements than T. The new gathers have no
traced footprint, so their rows count at their fewest (one per loaded index): the bound errs low.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from xdsl.dialects.builtin import (
    AffineMapAttr,
    ArrayAttr,
    FlatSymbolRefAttr,
    Float64Type,
    FloatAttr,
    IntegerAttr,
    StringAttr,
    i64,
)
from xdsl.ir import Attribute, Block, Region, SSAValue
from xdsl.ir.affine import AffineConstantExpr, AffineDimExpr, AffineExpr, AffineMap, AffineSymExpr

from solar_compiler.analysis import structured as st
from solar_compiler.dialects.einsum import GatherOp, GraphOp, IndexOp, NodeOp, TensorOp, link_edges
from solar_compiler.dialects.graph_convert import fresh_scope_number
from solar_compiler.dialects.loop import CastOp, i64_array, type_dtype
from solar_compiler.loopir.rules import FLOAT_DTYPES
from solar_compiler.transforms.indicator_gather import Allowed, erase_dead

HOISTED = "gathered rows computed alone"


@dataclass(frozen=True)
class Hoist:
    consumer: NodeOp
    gather: GatherOp
    producer: NodeOp
    fill: NodeOp | None       # the zero fill an accumulating producer starts from, when not folded
    used: tuple[int, ...]     # the consumer's loop variables the gather uses, in order
    loaded: int               # the tensor position the key gives


def hoist_matches(graph: GraphOp, allowed: Allowed | None = None) -> list[Hoist]:
    """Every gather of a local that one node computes for it alone, fewer elements than the local."""
    out = []
    decls = graph.tensor_ops()
    for c in graph.nodes():
        for g in c.gathers():
            h = _match(graph, decls, c, g)
            if h is not None and (allowed is None or allowed(tuple(x for x in (c, h.producer, h.fill) if x))):
                out.append(h)
    return out


def hoist_gather(graph: GraphOp, h: Hoist) -> NodeOp:
    """Rewrite one match (module docstring); returns P'. The graph's edges are relinked."""
    decls = graph.tensor_ops()
    taken = set(decls) | {n.sym_name.data for n in graph.nodes()}
    name = fresh_name(f"{h.gather.tensor_name}_rows", taken)
    node_name = fresh_name(f"{h.producer.sym_name.data}_rows", taken | {name})
    t = decls[h.gather.tensor_name]
    ranges = h.consumer.get_static_loop_intervals()
    shape = tuple(ranges[u][1] + 1 for u in h.used)
    graph.body.block.insert_op_after(TensorOp(name, shape, t.dtype, "local"), list(decls.values())[-1])
    new = _producer(graph, h, name, node_name)
    graph.body.block.insert_op_before(new, h.consumer)
    _read_directly(h, name)
    link_edges(graph)
    erase_dead(graph, [n for n in (h.producer, h.fill) if n is not None])
    new.verify()
    h.consumer.verify()
    graph.verify_()
    return new


# ---- matching ------------------------------------------------------------------------------------
def _match(graph: GraphOp, decls: dict[str, TensorOp], c: NodeOp, g: GatherOp) -> Hoist | None:
    decl = decls.get(g.tensor_name)
    m = g.map.data
    if decl is None or decl.role.data != "local" or m.num_symbols != 1 or len(g.indices) != 1:
        return None
    loaded = [r for r, e in enumerate(m.results) if isinstance(e, AffineSymExpr)]
    if len(loaded) != 1 or any(_has_symbol(e) for r, e in enumerate(m.results) if r != loaded[0]):
        return None
    p = g.source.owner if g.source is not None else None
    if not isinstance(p, NodeOp) or p.dynamic_positions or p.guards is not None or \
            p.reduce.data not in ("none", "add"):
        return None
    if any(k.data == "sequential" for n in (c, p) for k in n.iterator_types.data):
        return None  # P' runs in loops of its own: never inside a scan, whose steps interleave
    if [u.operation for u in p.result.uses] != [g] or c.input_names.count(g.tensor_name):
        return None  # P computes T for this gather alone
    key = g.indices[0]
    if any(isinstance(o, GatherOp) for o in st.reachable((key,))):
        return None
    used = sorted({d for r, e in enumerate(m.results) if r != loaded[0] for d in st.dims_of(e)}
                  | c.value_dims(key))
    ranges = c.get_static_loop_intervals()
    lows, ups = c.lower_bounds.data.results, c.upper_bounds.data.results
    if any(not (isinstance(lows[u], AffineConstantExpr) and lows[u].value == 0 and
                isinstance(ups[u], AffineConstantExpr) and NodeOp.ints(c.steps)[u] == 1) for u in used):
        return None
    if math.prod(ranges[u][1] + 1 for u in used) >= math.prod(decl.dims):
        return None  # no fewer elements than the whole tensor
    out = p.get_indexing_maps().data[-1].data.results
    if not all(isinstance(e, AffineDimExpr) for e in out) or len({e.position for e in out}) != len(out):
        return None
    pl, pu = p.lower_bounds.data.results, p.upper_bounds.data.results
    for r, e in enumerate(out):
        d = e.position
        if not (isinstance(pl[d], AffineConstantExpr) and pl[d].value == 0 and
                isinstance(pu[d], AffineConstantExpr) and pu[d].value == decl.dims[r] and
                NodeOp.ints(p.steps)[d] == 1):
            return None
    outs = [e.position for e in out]
    if outs != list(range(len(outs))):
        return None  # the output variables first (then an init runs at their depth)
    dl = outs[loaded[0]]
    for i, (lb, ub) in enumerate(zip(pl, pu, strict=True)):
        if i not in outs and dl in (st.dims_of(lb) | st.dims_of(ub)):
            return None
    for o in p.body.block.ops:  # a gather of its own along the loaded variable, an index value of it
        if isinstance(o, GatherOp) and any(dl in st.dims_of(r) for r in o.map.data.results):
            return None
        if isinstance(o, IndexOp) and dl in st.dims_of(o.map.data.results[0]) and \
                o.map.data.results[0] != AffineExpr.dimension(dl):
            return None
    nodes = graph.nodes()
    reads = {*p.input_names, *(x.tensor_name for x in p.gathers())}
    if any(n.output_name in reads for n in nodes[nodes.index(p) + 1:nodes.index(c)]):
        return None  # P' runs where C does: what P reads must hold the same values there
    fill = None
    if p.reduce.data == "add":
        start = st.zero_start(p, len(outs))
        if start is None:
            return None
        fill = start[0]
    return Hoist(c, g, p, fill, tuple(used), loaded[0])


def _has_symbol(e: AffineExpr) -> bool:
    return any(isinstance(x, AffineSymExpr) for x in e.dfs())


# ---- the rewrite ---------------------------------------------------------------------------------------
def _producer(graph: GraphOp, h: Hoist, name: str, node_name: str) -> NodeOp:
    c, p, g = h.consumer, h.producer, h.gather
    out = [e.position for e in p.get_indexing_maps().data[-1].data.results]
    nu, np_ = len(h.used), p.get_num_loops()
    reduced = [d for d in range(np_) if d not in out]
    nd = nu + len(reduced)
    # the consumer's dims and the producer's, as expressions over the new node's dims
    from_c: list[AffineExpr] = [AffineExpr.constant(0)] * c.get_num_loops()
    for i, u in enumerate(h.used):
        from_c[u] = AffineExpr.dimension(i)
    gmap = g.map.data.results
    from_p: list[AffineExpr] = [AffineExpr.constant(0)] * np_
    for r, d in enumerate(out):
        from_p[d] = AffineExpr.symbol(0) if r == h.loaded else gmap[r].replace_dims_and_symbols(from_c, [])
    for i, d in enumerate(reduced):
        from_p[d] = AffineExpr.dimension(nu + i)

    def over_c(results: Sequence[AffineExpr]) -> AffineMapAttr:
        return AffineMapAttr(AffineMap(nd, 0, tuple(e.replace_dims_and_symbols(from_c, []) for e in results)))

    def over_p(results: Sequence[AffineExpr], symbols: int = 0) -> AffineMapAttr:
        syms = [AffineExpr.symbol(s) for s in range(symbols)]
        return AffineMapAttr(AffineMap(nd, symbols, tuple(e.replace_dims_and_symbols(from_p, syms)
                                                          for e in results)))

    block = Block()
    values: dict[SSAValue, SSAValue] = {}
    inputs: list[str] = []
    maps: list[AffineMapAttr] = []
    key_ops = st.reachable((g.indices[0],))
    for a in st.block_args(g.indices[0]):
        inputs.append(c.input_names[a.index])
        maps.append(over_c(c.get_indexing_maps().data[a.index].data.results))
        values[a] = block.insert_arg(a.type, len(block.args))
    for o in key_ops:
        if isinstance(o, IndexOp):
            k = IndexOp(over_c(o.map.data.results))
        else:
            k = o.clone(value_mapper=values)
        block.add_op(k)
        values.update(zip(o.results, k.results, strict=True))
    key = values[g.indices[0]]
    dl = out[h.loaded]
    pmaps = p.get_indexing_maps().data
    for a in p.body.block.args:
        mp = pmaps[a.index].data
        if dl in mp.used_dims():
            gat = GatherOp(p.input_names[a.index], over_p(mp.results, 1), [key], type_dtype(a.type))
            block.add_op(gat)
            values[a] = gat.result
        else:
            inputs.append(p.input_names[a.index])
            maps.append(over_p(mp.results))
            values[a] = block.insert_arg(a.type, len(block.args))
    for o in p.body.block.ops:
        if isinstance(o, IndexOp):
            r = o.map.data.results[0]
            if dl in st.dims_of(r):  # the variable itself (`_match`): the key
                v = key if type_dtype(key.type) == "i64" else _cast(block, key, "i64")
                values[o.result] = v
                continue
            k = IndexOp(over_p(o.map.data.results))
        elif isinstance(o, GatherOp):
            k = GatherOp(o.tensor_name, over_p(o.map.data.results, o.map.data.num_symbols),
                         [values[v] for v in o.indices], type_dtype(o.result.type))
        else:
            k = o.clone(value_mapper=values)
        block.add_op(k)
        values.update(zip(o.results, k.results, strict=True))
    ranges = c.get_static_loop_intervals()
    base = fresh_scope_number(graph)
    lbs = [AffineExpr.constant(0)] * nu + [p.lower_bounds.data.results[d].replace_dims_and_symbols(from_p, [])
                                           for d in reduced]
    ubs = [AffineExpr.constant(ranges[u][1] + 1) for u in h.used] + \
        [p.upper_bounds.data.results[d].replace_dims_and_symbols(from_p, []) for d in reduced]
    types = [StringAttr("parallel")] * nu + [p.iterator_types.data[d] for d in reduced]
    names = [c.iv_names[u] for u in h.used]
    names += [fresh_name(p.iv_names[d], set(names)) for d in reduced]
    props = {
        "sym_name": StringAttr(node_name), "inputs": ArrayAttr([FlatSymbolRefAttr(t) for t in inputs]),
        "output": FlatSymbolRefAttr(name), "reduce": p.reduce,
        "ivs": ArrayAttr([StringAttr(v) for v in names]), "iterator_types": ArrayAttr(types),
        "lower_bounds": AffineMapAttr(AffineMap(nd, 0, tuple(lbs))),
        "upper_bounds": AffineMapAttr(AffineMap(nd, 0, tuple(ubs))),
        "steps": i64_array((1,) * nu + tuple(NodeOp.ints(p.steps)[d] for d in reduced)),
        "indexing_maps": ArrayAttr([*maps, AffineMapAttr(AffineMap(nd, 0, tuple(
            AffineExpr.dimension(i) for i in range(nu))))]),
        "scopes": i64_array(tuple(range(base, base + nd)))}
    return producer_node(p, h.fill, nu, props, block)


def producer_node(p: NodeOp, fill: NodeOp | None, outs: int, props: dict[str, Attribute],
                  block: Block) -> NodeOp:
    """A node computing part of producer `p`'s elements (`props`: its loops and maps, its output
    variables the first `outs`), with `p`'s origin and, for a reduction, a folded zero init at that
    depth (`p`'s own, or its zero `fill`'s origin): shared by the rewrites that rebuild a producer."""
    if p.origin is not None:
        props["origin"] = p.origin
    if p.reduce.data == "add":
        dtype = type_dtype(p.result.type.element_type)
        props["init"] = p.init if p.init is not None else \
            (FloatAttr(0.0, Float64Type()) if dtype in FLOAT_DTYPES else IntegerAttr(0, i64))
        props["init_depth"] = i64_array((outs, 0))
        init_origin = p.init_origin if p.init is not None else (fill.origin if fill else None)
        if init_origin is not None:
            props["init_origin"] = init_origin
    new = NodeOp.create(properties=props, regions=[Region(block)], result_types=[p.result.type])
    new.location = p.location
    return new


def _read_directly(h: Hoist, tensor: str) -> None:
    """The consumer reads T' at its own loop variables in place of the gather."""
    c, g = h.consumer, h.gather
    nd = c.get_num_loops()
    m = AffineMapAttr(AffineMap(nd, 0, tuple(AffineExpr.dimension(u) for u in h.used)))
    maps = list(c.indexing_maps.data)
    c.properties["inputs"] = ArrayAttr([*c.inputs.data, FlatSymbolRefAttr(tensor)])
    c.properties["indexing_maps"] = ArrayAttr([*maps[:-1], m, maps[-1]])
    c.properties.pop("traced", None)
    arg = c.body.block.insert_arg(g.result.type, len(c.body.block.args))
    g.result.replace_all_uses_with(arg)
    g.detach()
    g.erase(safe_erase=False)


def _cast(block: Block, v: SSAValue, dtype: str) -> SSAValue:
    op = CastOp(v, dtype)
    block.add_op(op)
    return op.result


def fresh_name(base: str, taken: set[str]) -> str:
    """`base`, or `base_k` with the first k not taken."""
    if base not in taken:
        return base
    k = 1
    while f"{base}_{k}" in taken:
        k += 1
    return f"{base}_{k}"
