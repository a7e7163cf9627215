"""Gathers of a computed tensor, hoisted into the node that computes it: an entry of the catalogue of
the default model of computation (docs/bounds.md, section 0).

`(x @ w)[idx]` reads 16 rows of a 2048 x 2048 product; an implementation computes those rows,
`x[idx] @ w`, not the whole product. In the einsum graph: a local T is computed by one node P that
writes each of its elements once (a permutation of P's output variables over the whole box, P's
other variables reduced; an accumulation from zeros: a folded zero init or a zero fill before it),
and every reader of T reads it through a gather (`T[idx[i], j]`: one loaded position, the others
affine in the reader's loop variables). The rewrite builds, for each such gather of a reader C, a
node P' that computes T' = the elements that gather reads, alone: its loops are C's loop variables
that the gather's positions and key use (their box), then P's reduced variables; P's output
variable at the loaded position becomes the key (so P's reads through it become gathers, and the
key's reads and arithmetic are copied from C), its others the gather's affine positions. C reads T'
directly; P (and its fill) are erased. Repeated, the gather climbs through element-wise nodes to the
contraction (`relu(x @ w)[idx]`).

Several readers (MLA decode casts its whole latent cache to f32, then gathers each request's pages
in a Python loop) each get their own P': P's work and its input reads then count for the gathered
elements only. A reader that reads T otherwise (directly, or through a gather that does not match)
keeps P, and every reader then reads P's T as written.

Exact: T' holds the same values T does at the gathered positions (the same arithmetic on the same
operands). Taken only when the gathered boxes together have fewer elements than T, or when P does no
arithmetic (a cast, a copy: computing an element twice costs nothing) and each box has fewer.

Traced counts (`--indirect traced`, docs/bounds.md section 0.2): a reader's traced footprint of T
moves to the gather P' makes of an input that P reads at a one-to-one affine function of its output
variables (a cast, a copy, a transpose: one input element per element of T), since that gather
touches the images of the same elements, as many; the union the trace took of all T's gathers moves
with it, so the input's reads by all the P' count that union (`costs.traced_union`). Any other
gather of P' has no traced footprint, so its rows count at their fewest (one per loaded index): the
bound errs low.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace

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
from solar_compiler.dialects.loop import CastOp, TracedAttr, i64_array, traced_of, type_dtype
from solar_compiler.loopir.ast import Traced
from solar_compiler.loopir.rules import FLOAT_DTYPES
from solar_compiler.transforms.indicator_gather import Allowed, erase_dead

HOISTED = "gathered rows computed alone"


@dataclass(frozen=True)
class Reader:
    """One gather of the producer's local, by the node `consumer`."""

    consumer: NodeOp
    gather: GatherOp
    used: tuple[int, ...]     # the consumer's loop variables the gather uses, in order
    loaded: int               # the tensor position the key gives
    traced: Traced | None     # the consumer's traced footprint of the local, when this gather is all of it

    @property
    def box(self) -> int:
        ranges = self.consumer.get_static_loop_intervals()
        return math.prod(ranges[u][1] + 1 for u in self.used)


@dataclass(frozen=True)
class Hoist:
    producer: NodeOp
    fill: NodeOp | None       # the zero fill an accumulating producer starts from, when not folded
    readers: tuple[Reader, ...]

    def nodes(self) -> tuple[NodeOp, ...]:
        """The nodes the rewrite changes or erases."""
        own = (self.producer,) if self.fill is None else (self.producer, self.fill)
        return (*dict.fromkeys(r.consumer for r in self.readers), *own)


def hoist_matches(graph: GraphOp, allowed: Allowed | None = None) -> list[Hoist]:
    """Every local that one node computes and only gathers read, their boxes fewer elements than it."""
    out = []
    decls = graph.tensor_ops()
    nodes = graph.nodes()
    for p in nodes:
        h = _match(nodes, decls, p)
        if h is not None and (allowed is None or allowed(h.nodes())):
            out.append(h)
    return out


def hoist_gather(graph: GraphOp, h: Hoist) -> list[NodeOp]:
    """Rewrite one match (module docstring); returns each reader's P'. The graph's edges are relinked."""
    built = []
    for r in h.readers:
        decls = graph.tensor_ops()
        taken = set(decls) | {n.sym_name.data for n in graph.nodes()}
        name = fresh_name(f"{r.gather.tensor_name}_rows", taken)
        node_name = fresh_name(f"{h.producer.sym_name.data}_rows", taken | {name})
        t = decls[r.gather.tensor_name]
        ranges = r.consumer.get_static_loop_intervals()
        shape = tuple(ranges[u][1] + 1 for u in r.used)
        graph.body.block.insert_op_after(TensorOp(name, shape, t.dtype, "local"), list(decls.values())[-1])
        new = _producer(graph, h, r, name, node_name)
        graph.body.block.insert_op_before(new, r.consumer)
        _read_directly(r, name)
        built.append(new)
    link_edges(graph)
    erase_dead(graph, [n for n in (h.producer, h.fill) if n is not None])
    for new in built:
        new.verify()
    for c in dict.fromkeys(r.consumer for r in h.readers):
        c.verify()
    graph.verify_()
    return built


# ---- matching ------------------------------------------------------------------------------------
def _match(nodes: list[NodeOp], decls: dict[str, TensorOp], p: NodeOp) -> Hoist | None:
    decl = decls.get(p.output_name)
    uses = [u.operation for u in p.result.uses]
    if decl is None or decl.role.data != "local" or not uses or \
            not all(isinstance(o, GatherOp) for o in uses):
        return None  # only gathers read T (`link_edges`: a direct read or a later write uses it too)
    if p.dynamic_positions or p.guards is not None or p.reduce.data not in ("none", "add") or \
            any(k.data == "sequential" for k in p.iterator_types.data):
        return None  # P' runs in loops of its own: never inside a scan, whose steps interleave
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
    if [e.position for e in out] != list(range(len(out))):
        return None  # the output variables first (then an init runs at their depth)
    gathers: list[GatherOp] = list(dict.fromkeys(uses))  # type: ignore[arg-type]
    gathers.sort(key=lambda g: (nodes.index(_node_of(g)), _node_of(g).gathers().index(g)))
    readers = []
    for g in gathers:
        r = _reader(nodes, p, _node_of(g), g)
        if r is None:
            return None  # a reader that no P' can serve keeps P, for every reader
        readers.append(r)
    size = math.prod(decl.dims)
    if any(r.box >= size for r in readers):
        return None  # no fewer elements than the whole tensor
    if sum(r.box for r in readers) >= size and _arithmetic(p):
        return None  # P's work computed more than once in all
    fill = None
    if p.reduce.data == "add":
        start = st.zero_start(p, len(out))
        if start is None:
            return None
        fill = start[0]
    return Hoist(p, fill, tuple(readers))


def _node_of(g: GatherOp) -> NodeOp:
    n = g.parent_op()
    assert isinstance(n, NodeOp)
    return n


def _arithmetic(p: NodeOp) -> bool:
    c = st.node_counts(p)
    return c.flops_matrix + c.flops_vector_literal > 0


def _reader(nodes: list[NodeOp], p: NodeOp, c: NodeOp, g: GatherOp) -> Reader | None:
    """The reader of P's local that the gather `g` of node `c` is, when a P' can compute what it
    reads: the gather's loaded position, the variables it uses, where P' would run."""
    m = g.map.data
    if m.num_symbols != 1 or len(g.indices) != 1:
        return None
    loaded = [r for r, e in enumerate(m.results) if isinstance(e, AffineSymExpr)]
    if len(loaded) != 1 or any(_has_symbol(e) for r, e in enumerate(m.results) if r != loaded[0]):
        return None
    if any(k.data == "sequential" for k in c.iterator_types.data):
        return None  # P' runs in loops of its own: never inside a scan, whose steps interleave
    key = g.indices[0]
    if any(isinstance(o, GatherOp) for o in st.reachable((key,))):
        return None
    used = sorted({d for r, e in enumerate(m.results) if r != loaded[0] for d in st.dims_of(e)}
                  | c.value_dims(key))
    lows, ups = c.lower_bounds.data.results, c.upper_bounds.data.results
    if any(not (isinstance(lows[u], AffineConstantExpr) and lows[u].value == 0 and
                isinstance(ups[u], AffineConstantExpr) and NodeOp.ints(c.steps)[u] == 1) for u in used):
        return None
    outs = [e.position for e in p.get_indexing_maps().data[-1].data.results]
    dl = outs[loaded[0]]
    pl, pu = p.lower_bounds.data.results, p.upper_bounds.data.results
    for i, (lb, ub) in enumerate(zip(pl, pu, strict=True)):
        if i not in outs and dl in (st.dims_of(lb) | st.dims_of(ub)):
            return None
    for o in p.body.block.ops:  # a gather of its own along the loaded variable, an index value of it
        if isinstance(o, GatherOp) and any(dl in st.dims_of(r) for r in o.map.data.results):
            return None
        if isinstance(o, IndexOp) and dl in st.dims_of(o.map.data.results[0]) and \
                o.map.data.results[0] != AffineExpr.dimension(dl):
            return None
    reads = {*p.input_names, *(x.tensor_name for x in p.gathers())}
    if any(n.output_name in reads for n in nodes[nodes.index(p) + 1:nodes.index(c)]):
        return None  # P' runs where C does: what P reads must hold the same values there
    return Reader(c, g, tuple(used), loaded[0], _reader_trace(c, g))


def _reader_trace(c: NodeOp, g: GatherOp) -> Traced | None:
    """C's traced footprint of the local, while it still holds (`structured.traced_elements`) and
    `g` is C's only gather of it: then it is what `g` touched."""
    t = g.tensor_name
    if [x for x in c.gathers() if x.tensor_name == t] != [g] or st.traced_elements(c, t, False) is None:
        return None
    return next(x for x in traced_of(c.traced) if x.tensor == t and not x.write)


def _has_symbol(e: AffineExpr) -> bool:
    return any(isinstance(x, AffineSymExpr) for x in e.dfs())


# ---- the rewrite ---------------------------------------------------------------------------------------
def _producer(graph: GraphOp, h: Hoist, r: Reader, name: str, node_name: str) -> NodeOp:
    c, p, g = r.consumer, h.producer, r.gather
    out = [e.position for e in p.get_indexing_maps().data[-1].data.results]
    nu, np_ = len(r.used), p.get_num_loops()
    reduced = [d for d in range(np_) if d not in out]
    nd = nu + len(reduced)
    # the consumer's dims and the producer's, as expressions over the new node's dims
    from_c: list[AffineExpr] = [AffineExpr.constant(0)] * c.get_num_loops()
    for i, u in enumerate(r.used):
        from_c[u] = AffineExpr.dimension(i)
    gmap = g.map.data.results
    from_p: list[AffineExpr] = [AffineExpr.constant(0)] * np_
    for k, d in enumerate(out):
        from_p[d] = AffineExpr.symbol(0) if k == r.loaded else gmap[k].replace_dims_and_symbols(from_c, [])
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
    dl = out[r.loaded]
    pmaps = p.get_indexing_maps().data
    traced: list[Traced] = []
    for a in p.body.block.args:
        mp = pmaps[a.index].data
        if dl in mp.used_dims():
            gat = GatherOp(p.input_names[a.index], over_p(mp.results, 1), [key], type_dtype(a.type))
            block.add_op(gat)
            values[a] = gat.result
            if r.traced is not None and _one_to_one(mp, out):
                traced.append(replace(r.traced, tensor=p.input_names[a.index]))
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
    ubs = [AffineExpr.constant(ranges[u][1] + 1) for u in r.used] + \
        [p.upper_bounds.data.results[d].replace_dims_and_symbols(from_p, []) for d in reduced]
    types = [StringAttr("parallel")] * nu + [p.iterator_types.data[d] for d in reduced]
    names = [c.iv_names[u] for u in r.used]
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
    new = producer_node(p, h.fill, nu, props, block)
    _carry_traces(new, traced)
    return new


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


def _read_directly(r: Reader, tensor: str) -> None:
    """The consumer reads T' at its own loop variables in place of the gather; its traced footprint
    of T goes (its other footprints still hold: its domain and its other gathers are unchanged)."""
    c, g = r.consumer, r.gather
    nd = c.get_num_loops()
    m = AffineMapAttr(AffineMap(nd, 0, tuple(AffineExpr.dimension(u) for u in r.used)))
    maps = list(c.indexing_maps.data)
    c.properties["inputs"] = ArrayAttr([*c.inputs.data, FlatSymbolRefAttr(tensor)])
    c.properties["indexing_maps"] = ArrayAttr([*maps[:-1], m, maps[-1]])
    kept = [TracedAttr(t) for t in traced_of(c.traced) if t.tensor != g.tensor_name]
    if kept:
        c.properties["traced"] = ArrayAttr(kept)
    else:
        c.properties.pop("traced", None)
    arg = c.body.block.insert_arg(g.result.type, len(c.body.block.args))
    g.result.replace_all_uses_with(arg)
    g.detach()
    g.erase(safe_erase=False)


def _one_to_one(m: AffineMap, outs: Sequence[int]) -> bool:
    """Whether P's read at map `m` is a one-to-one function of its output variables `outs` (each
    result a constant or a multiple of one output variable plus a constant, every output variable
    in one): its elements then pair off with T's, so a gather of it touches as many as T's did."""
    seen: list[int] = []
    for e in m.results:
        form = st.linear_form(e)
        if form is None or len(form[0]) > 1 or not set(form[0]) <= set(outs):
            return False
        seen += list(form[0])
    return sorted(seen) == sorted(outs)


def _carry_traces(new: NodeOp, traced: Sequence[Traced]) -> None:
    """Put the reader's footprint on P' for each input it gathers one-to-one, with P''s points and
    its reads of that input (`structured.gather_count`), when that gather is P''s only one of it."""
    kept = []
    for t in traced:
        if [x.tensor_name for x in new.gathers()].count(t.tensor) == 1:
            kept.append(replace(t, points=st.points(new), accesses=st.gather_count(new, t.tensor)))
    if kept:
        new.properties["traced"] = ArrayAttr([TracedAttr(t) for t in kept])


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
