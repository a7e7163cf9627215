"""Deduplicated work: the catalogue entries of the default model of computation that price repeated
products once (docs/bounds.md, section 0). `costs.py` applies them when asked for `distinct` costs
(`--algorithms default`); the classical costs count every product as written.

* **Broadcast and repeated operands.** A contraction multiplies, at each point of its domain, one
  element of each operand. Two points that read the same elements compute the same product, and an
  output element whose products are all products of another output element's... is the same sum:
  an implementation computes each distinct product once and broadcasts the results (a batched
  matmul of an `expand`ed operand is one matmul; `x.repeat(8, 1) @ w` is `x @ w` written 8 times).
  So a contraction needs 2 FLOPs per distinct tuple of operand elements: the image of its domain
  under the joint access map (counted exactly, `polyhedral.footprint`), never more than 2 per point.
* **Symmetric products** (SYRK, cuBLAS `syrk`, `x @ x.t()`, `x.t() @ x`): two reads of one tensor
  whose indices swap under exchanging two output variables of equal range, over a box domain: the
  output is symmetric, and the pairs a <= b suffice: n (n + 1) / 2 of the n^2. So for any pure
  product whose reads along the reduced variables are the same multiset after the exchange, also
  through an operand an element-wise product computed (SYRKX, `(x * d) @ x.t()`; `_symmetric_share`).
* **Common subexpressions** (CSE, what every compiler does): a node identical to an earlier one
  (same statements, loops and guards, only its target differs; loops compared by position after a
  renaming, `_renamed_key`) whose operands and whose earlier twin's result no statement between
  them writes holds the same values: it needs no arithmetic. One that computes the same products
  into another layout (a transposed result) needs none either, but is not the same tensor.
* **A shared factor** (distributivity, `x @ w1 + x @ w2 = x @ (w1 + w2)`): an element-wise sum or
  difference of two locals that only it reads, each the sum of one contraction over the same domain,
  with one operand the same tensor read the same way and the other two read through the same map:
  one contraction suffices, after adding (subtracting) the two other operands element by element:
  the other contraction's products go, and the final sum's additions become the operands' additions.
* **An operand repeated along the reduced variables** (distributivity inside one contraction,
  `x.repeat(1, 2) @ w = x @ (w[:n] + w[n:])`): where one operand's reads of the reduced variables
  repeat (its indices there a many-to-one function of them, `x[i, k % n]`), the other operand's
  elements that meet one element of it are summed first, once per element of the result they
  enter, and the product runs over the distinct elements only (`presummed`).
* **Value-dependent selects** (`torch.where(m, x @ w1, x @ w2)`): an element-wise select whose
  condition reads tensor values, between two locals that only it reads, each the sum of one
  contraction (zero fills aside) of the same shape and cost: every output element is one of the two
  sums, so whatever the condition's values, one sum per element suffices (gather the rows of each
  branch, one product each): the work of one of the two contractions. A branch may reach its sum
  through element-wise nodes (`relu(x @ w1)`), each the only reader of the one local it maps
  element for element: each output element then needs one branch's whole chain, and the branch
  with the cheaper chain is the one counted (where neither chain is cheaper in every kind of work,
  neither chain's element-wise work is: errs low).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace

import islpy as isl
from xdsl.ir import BlockArgument, SSAValue
from xdsl.ir.affine import AffineConstantExpr, AffineDimExpr, AffineExpr, AffineMap

from solar_compiler.analysis import structured as st
from solar_compiler.analysis.chains import Factor, body_factors
from solar_compiler.analysis.manager import invalidate_op_analyses, op_analysis
from solar_compiler.analysis.polyhedral import contraction_reads, node_indices, node_loop_ranges, writes_whole
from solar_compiler.dialects.einsum import GatherOp, GraphOp, IndexOp, NodeOp
from solar_compiler.dialects.loop import BinaryOp, CastOp, ConstOp, SelectOp, UnaryOp, type_dtype
from solar_compiler.loopir.affine import AffExpr

#: `OpCost.algorithm` of a node priced by an entry here
BROADCAST, SYMMETRIC, CSE = "distinct products", "symmetric product", "common subexpression"
FACTORED = "shared factor"
PRESUMMED = "operand summed over a repeated operand's copies first"
SELECT = "value-dependent select computes one branch"


def distinct_matrix_flops(node: NodeOp, flops: int, same: Mapping[str, str] | None = None,
                          through_locals: bool = False) -> tuple[int, str | None]:
    """The contraction's matrix FLOPs (`flops` as written) with repeated and symmetric products
    counted once, and the entry that lowered them (None: none did). `same`: tensor -> the tensor
    that holds the same values (a common subexpression's twin), so `y1 @ y2.t()` with y2 a
    recomputation of y1 is a symmetric product. `through_locals`: an operand that an element-wise
    product of reads computed is seen as those reads (`(x * d) @ x.t()` is symmetric: cuBLAS
    `syrkx`); not for the eager unfused bound, whose matmul kernel sees two tensors."""
    reads = contraction_reads(node)
    if reads is None or len(reads) < 2:
        return flops, None
    indices = [i for _, idx, _ in reads for i in idx]
    bare = {i.terms[0][0] for i in indices if i.is_var()}
    how = None
    if not set(node.iv_names) <= bare:  # some variable is not an index of its own: maybe repeated
        maps = node.get_indexing_maps().data
        products = st.image_count(node, [r for _, _, a in reads for r in maps[a].data.results])
        if 2 * products < flops:
            flops, how = 2 * products, BROADCAST
    if through_locals:
        pieces = copied_pieces_products(node, reads)
        if pieces is not None and 2 * pieces < flops:
            return 2 * pieces, BROADCAST  # not also halved as symmetric: errs high, never low
    half = _symmetric_share(node, same or {}, through_locals)
    if half is not None:
        num, den = half
        flops, how = -(-flops * num // den), SYMMETRIC
    return flops, how


def copied_pieces_products(node: NodeOp, reads: Sequence[tuple[str, object, int]]) -> int | None:
    """Distinct products, at most, of a contraction one of whose operands is a local that copies
    alone write, each a piece of it from one source (`torch.cat([x, x.flip(0)]) @ w`, the halves of
    a bidirectional layer): the points whose operand element one copy wrote form a piece, and two
    pieces reading the same source whose sets of (source element, other operands' elements) are
    equal (isl proves it) multiply the same products: each such set counted once, by its piece's
    points. None when no operand is such a local, the copies overlap, or no two pieces are equal."""
    graph = node.parent_op()
    if not isinstance(graph, GraphOp) or node.guards is not None or node.dynamic_positions:
        return None
    maps = node.get_indexing_maps().data
    n = node.get_num_loops()
    for t, _, a in reads:
        copies = _copies_of(graph, node, t)  # written by copies: a local
        if copies is None:
            continue
        others = AffineMap(n, 0, tuple(r for u, _, b in reads if b != a for r in maps[b].data.results))
        other = st.access_map(node, st.Access("P", others, False, False, "input"))
        read = st.access_map(node, st.Access(t, maps[a].data, False, False, "input"))
        seen: list[tuple[str, isl.Set]] = []
        total = covered = 0
        for w in copies:
            wm = w.get_indexing_maps().data
            src = w.input_names[0]
            written = st.access_map(w, st.Access(t, wm[-1].data, True, False, "output"))
            source = st.access_map(w, st.Access(src, wm[0].data, False, False, "input"))
            to_src = read.apply_range(written.reverse().apply_range(source))
            piece = to_src.domain()
            pts = piece.count_val().to_python()
            covered += pts
            image = to_src.range_product(other.intersect_domain(piece)).range()
            if not any(s == src and image.is_equal(i) for s, i in seen):
                seen.append((src, image))
                total += pts
        if covered == st.points(node) and len(seen) < len(copies):
            return total
    return None


def _writers(graph: GraphOp) -> tuple[dict[str, list[NodeOp]], dict[int, int]]:
    """Each tensor's writers and each node's position, once per graph (a walk per contraction made
    the costs quadratic in the nodes)."""
    def build() -> tuple[dict[str, list[NodeOp]], dict[int, int]]:
        writers: dict[str, list[NodeOp]] = {}
        position: dict[int, int] = {}
        for i, n in enumerate(graph.nodes()):
            writers.setdefault(n.output_name, []).append(n)
            position[id(n)] = i
        return writers, position
    return op_analysis(graph, "writers_and_positions", build)


def _copies_of(graph: GraphOp, reader: NodeOp, tensor: str) -> list[NodeOp] | None:
    """The nodes that write local `tensor`, each a copy of one input read (through casts at most) over
    a box, no two writing one element, all before `reader` and none after; else None."""
    writers, position = _writers(graph)
    if id(reader) not in position:  # a graph rewritten since the cache was made
        invalidate_op_analyses(graph)
        writers, position = _writers(graph)
    ws: list[NodeOp] = []
    for n in writers.get(tensor, []):
        after = position[id(n)] >= position[id(reader)]
        v = st.stored_value(n)
        while isinstance(v.owner, CastOp):
            v = v.owner.x
        if after or n.reduce.data != "none" or n.guards is not None or n.dynamic_positions or \
                n.init is not None or len(n.ins) != 1 or not isinstance(v, BlockArgument) or not _box(n):
            return None
        ws.append(n)
    sources = [w.input_names[0] for w in ws]
    if len(set(sources)) == len(sources):
        return None  # no two copies of one source: nothing to share (DenseNet's concatenations)
    regions = [st.access_map(w, st.Access(tensor, w.get_indexing_maps().data[-1].data, True, False, "output"))
               .range() for w in ws]
    if any(not regions[i].intersect(regions[j]).is_empty() for i in range(len(ws)) for j in range(i)):
        return None
    return ws


def presummed(node: NodeOp) -> tuple[int, int, str] | None:
    """(MACs, additions, dtype of the summed operand) of the contraction with one operand summed over
    the copies of the other (module doc), the cheaper of the two ways round; None when it does not
    apply: a product of two direct reads, with constant loop bounds and no scan loop, one of whose
    reduced indices uses no output variable and repeats (fewer distinct values than the reduced
    variables have points), no guard using that index's variables.

    With A the repeated read and B the other, g is A's indices that are functions of the reduced
    variables alone, with the reduced variables A's other indices use (a convolution's taps r, s of
    `x[n, c % C, h + r, w + s]`): reduced points with equal g meet the same element of A at every
    output point o. So `sum_r A(o, g(r)) B(o, r) = sum_m A(o, m) B'(o, m)`, `B'(o, m) = sum_{r: g(r)
    = m} B(o, r)`, B' depending on o only through the output variables B uses. The product needs one
    MAC per distinct (output element, m): image(output, g); B' has an entry per (those variables,
    m), each the sum of its terms, one per reduced point: footprint(those variables and the reduced
    ones) - image(those variables, g) additions."""
    reads = contraction_reads(node)
    if reads is None or len(reads) != 2 or len(st.operand_factors(st.stored_value(node))) != 2 or \
            not _box(node) or _scan(node):
        return None
    maps = node.get_indexing_maps().data
    out = list(maps[-1].data.results)
    reduced = st.reduced_dims(node)
    guarded = set().union(*(st.dims_of(c.lhs) | st.dims_of(c.rhs) for c in node.guards.data.constraints)) \
        if node.guards is not None else set()
    best: tuple[int, int, str] | None = None
    for (_, _, a), (_, _, b) in (reads, reads[::-1]):
        ra, rb = maps[a].data.results, maps[b].data.results
        pure = [r for r in ra if st.dims_of(r) and st.dims_of(r) <= reduced]
        mixed = set().union(*(st.dims_of(r) for r in ra if st.dims_of(r) - reduced)) & reduced
        g = [*pure, *_dims(mixed)]  # the reduced points with equal g meet the same element of A
        if not pure or guarded & set().union(*(st.dims_of(r) for r in pure)):
            continue  # nothing repeats, or a guard cuts the copies apart
        if st.image_count(node, g) >= st.footprint(node, reduced):
            continue  # no repeat along the reduced variables
        outer = set().union(*(st.dims_of(r) for r in rb)) - reduced  # the output variables B uses
        macs = st.image_count(node, [*out, *g])
        adds = st.footprint(node, outer | reduced) - st.image_count(node, [*_dims(outer), *g])
        dtype = type_dtype(node.body.block.args[b].type)
        if best is None or macs + adds < best[0] + best[1]:
            best = (macs, adds, dtype)
    return best


def _scan(node: NodeOp) -> bool:
    """A node inside a scan loop: its operands change from step to step (a recurrence's state), so
    terms at different steps are not products of the same values."""
    return any(k.data == "sequential" for k in node.iterator_types.data)


def _dims(dims: set[int]) -> list[AffineExpr]:
    return [AffineExpr.dimension(d) for d in sorted(dims)]


def _box(node: NodeOp) -> bool:
    """Every loop bound a constant."""
    return all(isinstance(e, AffineConstantExpr)
               for e in (*node.lower_bounds.data.results, *node.upper_bounds.data.results))


def _symmetric_share(node: NodeOp, same: Mapping[str, str], through_locals: bool) -> tuple[int, int] | None:
    """(n + 1, 2 n) when the node's product is symmetric under exchanging two output variables of
    equal extent n, over a box domain: its tensor factors that vary along a reduced variable, as a
    multiset, are the same after the exchange, and some factor changes (`x_ik x_jk`, `sum_k x_ik d_k
    x_jk`); else None. The body must be a product (`chains.body_factors`, through casts), and so
    must an operand's element-wise producer that `through_locals` lets it read through. `same`
    renames a tensor to the one holding its values."""
    got = body_factors(node, through_casts=True)
    if got is None or _main_guards(node) or not _box(node):
        return None
    factors = [g for f, v in zip(*got, strict=True) if f.tensor is not None
               for g in (_through_product(f, v) if through_locals else [f])]
    reads = [(str(f.tensor), f.indices, f.divide) for f in factors]
    ranges = node_loop_ranges(node)
    out_vars = set().union(*(i.vars() for i in node_indices(node, len(node.get_indexing_maps().data) - 1)))
    reduced = set(node.iv_names) - out_vars
    along = [(same.get(t, t), idx, d) for t, idx, d in reads
             if set().union(*(e.vars() for e in idx)) & reduced]

    def key(sub: Mapping[str, AffExpr]) -> list[tuple[str, tuple[str, ...], bool]]:
        return sorted((t, tuple(str(e.substitute(sub)) for e in idx), d) for t, idx, d in along)

    out = [v for v in node.iv_names if v in out_vars]
    for i, a in enumerate(out):
        for b in out[i + 1:]:
            if ranges[a] != ranges[b]:
                continue
            swap = {a: AffExpr.var(b), b: AffExpr.var(a)}
            moved = any(tuple(e.substitute(swap) for e in idx) != idx for _, idx, _ in reads)
            if moved and key(swap) == key({}):
                n = ranges[a][1] - ranges[a][0] + 1
                return n + 1, 2 * n
    return None


def _through_product(f: Factor, v: SSAValue | None) -> list[Factor]:
    """Tensor factor `f` (reading value `v`) as the tensor factors of the element-wise product that
    wrote the whole of it, at the read's indices (a divisor's divide theirs); `[f]` where no such
    node wrote it."""
    w = v.owner if v is not None else None
    if not isinstance(w, NodeOp) or not writes_whole(w, tuple(v.type.get_shape())):  # type: ignore[union-attr]
        return [f]
    got = body_factors(w, through_casts=True)
    if got is None:
        return [f]
    outs = node_indices(w, len(w.get_indexing_maps().data) - 1)
    subst = {str(o.terms[0][0]): e for o, e in zip(outs, f.indices, strict=True)}
    return [replace(g, indices=tuple(e.substitute(subst) for e in g.indices), divide=g.divide != f.divide)
            for g in got[0] if g.tensor is not None]


def _main_guards(node: NodeOp) -> int:
    """How many guards enclose the node's main statement."""
    return len(NodeOp.ints(node.guard_scopes))


def _read_tensors(node: NodeOp) -> set[str]:
    """The tensors the node's statements read (its inputs and its gathers' sources)."""
    return set(node.input_names) | {g.tensor_name for g in st.body_ops(node) if isinstance(g, GatherOp)}


def _body_key(node: NodeOp, maps: Sequence[object] | None = None) -> object:
    """The node's body as a value: its ops, attributes and types, reads named by tensor and map
    (`maps`: the node's indexing maps, or those maps with its loops renamed)."""
    maps = node.get_indexing_maps().data if maps is None else maps
    memo: dict[SSAValue, object] = {}

    def key(v: SSAValue) -> object:
        if v not in memo:
            if isinstance(v, BlockArgument):
                memo[v] = ("read", node.input_names[v.index], maps[v.index])
            else:
                o = v.owner
                props = tuple(sorted((k, a) for k, a in o.properties.items()  # type: ignore[union-attr]
                                     if k != "source"))
                memo[v] = (o.name, props, v.type, tuple(key(x) for x in o.operands  # type: ignore[union-attr]
                                                        if not isinstance(o, GatherOp) or x is not o.source))
        return memo[v]

    y = node.body.block.last_op
    return tuple(key(v) for v in y.operands)  # type: ignore[union-attr]


def _renamed_key(node: NodeOp) -> tuple[object, tuple[int, ...]] | None:
    """The node's arithmetic up to a renaming of its loops: its dims renumbered in the order the
    body's reads (walked from the yield) and then its output first use them; with `layouts`, the
    output's own order left out: `t1[a, c] += x[a, b] * x[b, c]` and `t2[f, d] += x[d, e] * x[e, f]`
    are the same products (the two halves of `x @ x @ x @ x` associated as (x x)(x x); the second in
    a transposed layout, which its reader reads the other way round). Returned as the key without
    the output's order and that order (renumbered dims). None (compare as written) with a guard,
    a bound that is not a constant, an index value or a gather in the body, or an output index that
    is not a loop variable."""
    maps = [m.data for m in node.get_indexing_maps().data]
    out = maps[-1].results
    if node.guards is not None or node.dynamic_positions or not _box(node) or \
            not all(isinstance(r, AffineDimExpr) for r in out) or \
            any(isinstance(o, IndexOp | GatherOp) for o in st.body_ops(node)):
        return None
    order: list[int] = []

    def use(results: Sequence[AffineExpr]) -> None:
        for r in results:
            for d in sorted(st.dims_of(r)):
                if d not in order:
                    order.append(d)

    def visit(v: SSAValue) -> None:
        if isinstance(v, BlockArgument):
            use(maps[v.index].results)
        else:
            for x in v.owner.operands:  # type: ignore[union-attr]
                visit(x)

    y = node.body.block.last_op
    for v in y.operands:  # type: ignore[union-attr]
        visit(v)
    use(out)
    use([AffineExpr.dimension(d) for d in range(node.get_num_loops())])
    position = {d: i for i, d in enumerate(order)}
    dims = [AffineExpr.dimension(position[d]) for d in range(len(order))]
    renamed = [m.replace_dims_and_symbols(dims, [], len(order), 0)
               for m in maps]
    lbs, ubs = node.lower_bounds.data.results, node.upper_bounds.data.results
    steps, kinds = NodeOp.ints(node.steps), node.iterator_types.data
    core = ("renamed", tuple((kinds[d], lbs[d], ubs[d], steps[d]) for d in order), node.reduce, node.init,
            node.init_depth, _body_key(node, renamed))
    return core, tuple(position[r.position] for r in out)  # type: ignore[attr-defined]


def _node_keys(nodes: Sequence[NodeOp]) -> list[tuple[object, tuple[int, ...]] | None]:
    """Each node's `_renamed_key`, or its key as written where there is none; None for a node with
    dynamic output positions (never a duplicate)."""
    out: list[tuple[object, tuple[int, ...]] | None] = []
    for n in nodes:
        if n.dynamic_positions:
            out.append(None)
            continue
        out.append(_renamed_key(n) or (("written", tuple(n.iv_names), n.lower_bounds, n.upper_bounds,
                                        n.steps, n.guards, n.reduce, n.init, n.init_depth,
                                        n.get_indexing_maps().data[-1], _body_key(n)), ()))
    return out


def duplicates(nodes: Sequence[NodeOp], layouts: bool = False) -> dict[int, int]:
    """Node position -> the earlier node it duplicates (same statements, loops and guards up to a
    renaming of the loops, only the target differs), where no node between them writes an operand or
    the earlier result. `layouts`: also a node that computes the same products into another layout
    of its result (a transposed one): it needs no arithmetic either, but its tensor does not hold
    its twin's values element for element (so not for `same` tensors)."""
    return _twins(nodes, _node_keys(nodes), layouts)


def duplicates_both(nodes: Sequence[NodeOp]) -> tuple[dict[int, int], dict[int, int]]:
    """`duplicates(nodes)` and `duplicates(nodes, layouts=True)`, each node's key made once."""
    keys = _node_keys(nodes)
    return _twins(nodes, keys, False), _twins(nodes, keys, True)


def _twins(nodes: Sequence[NodeOp], keys: Sequence[tuple[object, tuple[int, ...]] | None],
           layouts: bool) -> dict[int, int]:
    seen: dict[object, int] = {}
    out: dict[int, int] = {}
    last_write: dict[str, int] = {}  # tensor -> the latest node so far that writes it
    for pos, (n, k) in enumerate(zip(nodes, keys, strict=True)):
        if k is not None:
            first = seen.setdefault((k[0], tuple(sorted(k[1])) if layouts else k[1]), pos)
            read = _read_tensors(n) | {nodes[first].output_name} if first != pos else set()
            if read and n.output_name not in read and all(last_write.get(t, -1) <= first for t in read):
                out[pos] = first
        last_write[n.output_name] = pos
    return out


def _uses(graph: GraphOp, nodes: Sequence[NodeOp]) \
        -> tuple[dict[str, str], dict[str, list[int]], dict[str, set[int]]]:
    """Each tensor's role, the nodes that write it and the nodes that read it (positions)."""
    roles = {t: d.role.data for t, d in graph.tensor_ops().items()}
    writers: dict[str, list[int]] = {}
    readers: dict[str, set[int]] = {}
    for pos, n in enumerate(nodes):
        writers.setdefault(n.output_name, []).append(pos)
        for t in _read_tensors(n):
            readers.setdefault(t, set()).add(pos)
    return roles, writers, readers


def select_branches(graph: GraphOp, nodes: Sequence[NodeOp]) \
        -> list[tuple[int, int, list[int], list[int]]]:
    """(contraction node, the other branch's contraction node, the element-wise nodes between the
    first and the select, those of the second) for each element-wise select whose condition reads
    tensor values and whose branches are locals only it reads, each written by one contraction and
    zero fills (module rules), or by element-wise nodes over one (`where(m, relu(x @ w1), tanh(x @
    w2))`); the caller keeps one when the two contractions cost the same."""
    roles, writers, readers = _uses(graph, nodes)
    out = []
    for pos, n in enumerate(nodes):
        v = st.stored_value(n)
        sel = v.owner
        if n.reduce.data != "none" or n.dynamic_positions or not isinstance(sel, SelectOp) or \
                not isinstance(sel.a, BlockArgument) or not isinstance(sel.b, BlockArgument) or \
                _main_guards(n) or not st.read_tensors(n, [sel.cond]):
            continue
        maps = n.get_indexing_maps().data
        a, b = n.input_names[sel.a.index], n.input_names[sel.b.index]
        out_map = maps[-1].data
        if a == b or maps[sel.a.index].data != out_map or maps[sel.b.index].data != out_map or \
                not all(i.is_var() for i in node_indices(n, len(maps) - 1)):
            continue
        cond = set(st.read_tensors(n, [sel.cond]))
        if any(readers.get(t) != {pos} for t in (a, b)) or cond & {a, b}:
            continue
        branches = [_branch(roles, nodes, writers, readers, t) for t in (a, b)]
        if None in branches:
            continue
        (ka, tail_a), (kb, tail_b) = branches  # type: ignore[misc]
        out.append((kb, ka, tail_b, tail_a))
    return out


#: a gate: (the bool tensor it reads, its indices as linear forms over the output positions, True when
#: it is the complement `1 - g` / `~g`)
Gate = tuple[str, tuple[tuple[tuple[tuple[int, int], ...], int], ...], bool]


def gated_selects(graph: GraphOp, nodes: Sequence[NodeOp]) -> list[tuple[int, int, list[int], list[int]]]:
    """`select_branches` for the arithmetic select `g * A + (1 - g) * B` (also `~g`, casts of a bool
    `g`, the gates inside the contractions where association moved them, `sum_k g_i x_ik w1_kj`):
    an element-wise sum of two locals only it reads, each a contraction's sum (through element-wise
    nodes) times a gate, or a contraction one of whose factors is a gate, the two gates complements
    of one bool element per output element. Each output element is then one branch's value (the
    other's product is zero): one contraction per element suffices, whatever the bools' values."""
    roles, writers, readers = _uses(graph, nodes)
    out = []
    for pos, n in enumerate(nodes):
        op = st.stored_value(n).owner
        if n.reduce.data != "none" or n.dynamic_positions or _main_guards(n) or n.init is not None or \
                not isinstance(op, BinaryOp) or op.fn.data != "add" or \
                not isinstance(op.lhs, BlockArgument) or not isinstance(op.rhs, BlockArgument):
            continue
        maps = n.get_indexing_maps().data
        a, b = n.input_names[op.lhs.index], n.input_names[op.rhs.index]
        if a == b or maps[op.lhs.index] != maps[-1] or maps[op.rhs.index] != maps[-1] or \
                not all(i.is_var() for i in node_indices(n, len(maps) - 1)) or \
                any(readers.get(t) != {pos} for t in (a, b)):
            continue
        sides = [_gated(roles, nodes, writers, readers, t) for t in (a, b)]
        if sides[0] is None or sides[1] is None:
            continue
        (ka, tail_a, ga), (kb, tail_b, gb) = sides
        if ga[:2] == gb[:2] and ga[2] != gb[2]:
            out.append((kb, ka, tail_b, tail_a))
    return out


def _gated(roles: dict[str, str], nodes: Sequence[NodeOp], writers: dict[str, list[int]],
           readers: dict[str, set[int]], tensor: str) -> tuple[int, list[int], Gate] | None:
    """(contraction, element-wise nodes after it, gate) of local `tensor` when it is zero wherever
    its gate is: a contraction with a gate factor read per output element, or an element-wise
    product of a gate and a branch (`_branch`)."""
    k = _sum_of_one_contraction(roles, nodes, writers, tensor)
    if k is not None:
        c = nodes[k]
        for f in st.product_factors(st.stored_value(c)):
            g = _gate(roles, nodes, writers, c, f, _positions(c))
            if g is not None:
                return k, [], g
        return None
    at = list(dict.fromkeys(writers.get(tensor, [])))
    if roles.get(tensor) != "local" or len(at) != 1:
        return None
    w = nodes[at[0]]
    v = st.stored_value(w)
    if w.reduce.data != "none" or w.dynamic_positions or _main_guards(w) or \
            not isinstance(v.owner, BinaryOp) or v.owner.fn.data != "mul":
        return None
    maps = w.get_indexing_maps().data
    at_pos = _positions(w)
    for f, other in ((v.owner.lhs, v.owner.rhs), (v.owner.rhs, v.owner.lhs)):
        if not isinstance(other, BlockArgument) or maps[other.index] != maps[-1]:
            continue
        t = w.input_names[other.index]
        if readers.get(t) != {at[0]}:
            continue
        g = _gate(roles, nodes, writers, w, f, at_pos)
        br = _branch(roles, nodes, writers, readers, t) if g is not None else None
        if g is not None and br is not None:
            return br[0], [*br[1], at[0]], g
    return None


def _positions(n: NodeOp) -> dict[int, tuple[tuple[tuple[int, int], ...], int]] | None:
    """Each output dim of `n` as a linear form over the output positions (None: an output index that
    is no bare dim)."""
    res = n.get_indexing_maps().data[-1].data.results
    if not all(isinstance(e, AffineDimExpr) for e in res):
        return None
    return {e.position: (((p, 1),), 0) for p, e in enumerate(res)}  # type: ignore[union-attr]


def _gate(roles: dict[str, str], nodes: Sequence[NodeOp], writers: dict[str, list[int]], n: NodeOp,
          v: SSAValue, at: dict[int, tuple[tuple[tuple[int, int], ...], int]] | None,
          negated: bool = False, depth: int = 0) -> Gate | None:
    """`v` of node `n` as a gate: a bool read per output element (`at`: n's dims as linear forms of
    the output positions), through casts, `1 - g`, `~g` and element-wise locals."""
    if at is None or depth > 6:
        return None
    o = v.owner
    if isinstance(o, CastOp):
        return _gate(roles, nodes, writers, n, o.x, at, negated, depth + 1)
    if isinstance(o, UnaryOp) and o.fn.data == "not":
        return _gate(roles, nodes, writers, n, o.x, at, not negated, depth + 1)
    if isinstance(o, BinaryOp) and o.fn.data == "sub" and isinstance(o.lhs.owner, ConstOp) and \
            float(o.lhs.owner.value.value.data) == 1.0 and type_dtype(o.lhs.type) != "bool":
        return _gate(roles, nodes, writers, n, o.rhs, at, not negated, depth + 1)
    if not isinstance(v, BlockArgument):
        return None
    forms = []
    for e in n.get_indexing_maps().data[v.index].data.results:
        f = st.linear_form(e)
        if f is None or not set(f[0]) <= set(at):
            return None  # a reduced dim, or not affine: no gate per output element
        coeffs: dict[int, int] = {}
        const = f[1]
        for d, c in f[0].items():
            terms, k = at[d]
            const += c * k
            for p, cp in terms:
                coeffs[p] = coeffs.get(p, 0) + c * cp
        forms.append((tuple(sorted((p, c) for p, c in coeffs.items() if c)), const))
    t, leaf = n.input_names[v.index], type_dtype(v.type) == "bool"  # any bool is 0 or 1
    ws = list(dict.fromkeys(writers.get(t, [])))
    got = None
    if roles.get(t) == "local" and len(ws) == 1:
        w = nodes[ws[0]]
        res = w.get_indexing_maps().data[-1].data.results
        if w.reduce.data == "none" and not w.dynamic_positions and not _main_guards(w) and w.init is None \
                and len(res) == len(forms) and all(isinstance(e, AffineDimExpr) for e in res):
            inner = {e.position: forms[p] for p, e in enumerate(res)}  # type: ignore[union-attr]
            got = _gate(roles, nodes, writers, w, st.stored_value(w), inner, negated, depth + 1)
    return got if got is not None or not leaf else (t, tuple(forms), negated)


def _branch(roles: dict[str, str], nodes: Sequence[NodeOp], writers: dict[str, list[int]],
            readers: dict[str, set[int]], tensor: str) -> tuple[int, list[int]] | None:
    """(the contraction node whose sum local `tensor` is, the element-wise nodes in between) when
    each of those maps, element for element, the one local it reads, of which it is the only
    reader; else None. Element (i, j) of `tensor` then needs element (i, j) of the sum alone."""
    tail: list[int] = []
    while len(tail) < 8:
        k = _sum_of_one_contraction(roles, nodes, writers, tensor)
        if k is not None:
            return k, tail
        at = list(dict.fromkeys(writers.get(tensor, [])))
        if roles.get(tensor) != "local" or len(at) != 1:
            return None
        n = nodes[at[0]]
        if n.reduce.data != "none" or n.dynamic_positions or _main_guards(n) or \
                any(isinstance(g, GatherOp) for g in st.body_ops(n)):
            return None
        maps = n.get_indexing_maps().data
        if not all(i.is_var() for i in node_indices(n, len(maps) - 1)):
            return None
        local = {t for t in n.input_names if roles.get(t) == "local"}
        if len(local) != 1:
            return None
        (tensor,) = local
        if any(t == tensor and maps[i].data != maps[-1].data for i, t in enumerate(n.input_names)) or \
                readers.get(tensor) != {at[0]}:
            return None
        tail.append(at[0])
    return None


def _sum_of_one_contraction(roles: dict[str, str], nodes: Sequence[NodeOp], writers: dict[str, list[int]],
                            tensor: str) -> int | None:
    """The node of the one contraction that writes local `tensor` (all else zero fills), else None."""
    if roles.get(tensor) != "local":
        return None
    sums = []
    for pos in dict.fromkeys(writers.get(tensor, [])):
        n = nodes[pos]
        if n.init is not None and n.init.value.data != 0:  # a folded init that is no zero fill
            return None
        stored = st.stored_value(n).owner
        if n.reduce.data == "none" and isinstance(stored, ConstOp) and stored.value.value.data == 0:
            continue
        if n.reduce.data != "add" or _main_guards(n):
            return None
        sums.append(pos)
    return sums[0] if len(sums) == 1 else None


def shared_factor_sums(graph: GraphOp, nodes: Sequence[NodeOp]) -> list[tuple[int, int, int, int]]:
    """(sum node, kept contraction, dropped contraction, elements of the combined operand) for each
    element-wise `a + b` / `a - b` of two locals only it reads, each written by one contraction (zero
    fills aside) over the same domain whose two factors are one shared read (same tensor and map) and
    one other read through the same map in both, or through any maps whose pairs of elements are no
    more than the elements of either: `x @ w1 + x @ w2` is `x @ (w1 + w2)`, `x @ w + x @ w.t()` is
    `x @ (w + w.t())`. A chain of
    such sums (`x @ w1 + x @ w2 + x @ w3`, a sum in a Python loop) is one product too: a sum node
    found here stands for its kept contraction where a later sum reads its result alone."""
    roles, writers, readers = _uses(graph, nodes)
    out = []
    stands_for: dict[str, int] = {}  # the result of a sum found here -> its kept contraction
    found: set[int] = set()
    for pos, n in enumerate(nodes):
        op = st.stored_value(n).owner
        if n.reduce.data != "none" or n.dynamic_positions or _main_guards(n) or n.init is not None or \
                not isinstance(op, BinaryOp) or op.fn.data not in ("add", "sub") or \
                not isinstance(op.lhs, BlockArgument) or not isinstance(op.rhs, BlockArgument):
            continue
        maps = n.get_indexing_maps().data
        a, b = n.input_names[op.lhs.index], n.input_names[op.rhs.index]
        if a == b or maps[op.lhs.index] != maps[-1] or maps[op.rhs.index] != maps[-1] or \
                not all(i.is_var() for i in node_indices(n, len(maps) - 1)):
            continue
        branches = [stands_for.get(t) if writers.get(t) and set(writers[t]) == {_last(writers[t])} and
                    _last(writers[t]) in found else _sum_of_one_contraction(roles, nodes, writers, t)
                    for t in (a, b)]
        if None in branches or any(readers.get(t) != {pos} for t in (a, b)):
            continue
        ka, kb = branches
        assert ka is not None and kb is not None
        other = _other_operand(nodes[ka], nodes[kb])
        if other is not None:
            out.append((pos, ka, kb, st.image_count(nodes[ka], other)))
            stands_for[n.output_name] = ka
            found.add(pos)
    return out


def _last(xs: Sequence[int]) -> int:
    return xs[-1]


def _other_operand(p: NodeOp, q: NodeOp) -> list[AffineExpr] | None:
    """The index results of `p`'s operand that differs from `q`'s, when the two are contractions of
    one product of two reads over the same domain, with one read shared and the other through the
    same map; else None."""
    if any(getattr(p, f) != getattr(q, f) for f in ("lower_bounds", "upper_bounds", "steps", "guards")) \
            or p.iv_names != q.iv_names or p.get_indexing_maps().data[-1] != q.get_indexing_maps().data[-1]:
        return None
    rp, rq = contraction_reads(p), contraction_reads(q)
    if rp is None or rq is None or len(rp) != 2 or len(rq) != 2 or \
            st.literal_ops((st.stored_value(p),))[0] != 1 or st.literal_ops((st.stored_value(q),))[0] != 1:
        return None  # one multiply per point: no scale, no further factor
    mp = [p.get_indexing_maps().data[i] for _, _, i in rp]
    mq = [q.get_indexing_maps().data[i] for _, _, i in rq]
    for i in (0, 1):
        j = 1 - i
        for k in (0, 1):
            if (rp[i][0], mp[i]) != (rq[k][0], mq[k]):
                continue
            a, b = list(mp[j].data.results), list(mq[1 - k].data.results)
            if (rp[j][0], a) != (rq[1 - k][0], b) and _same_elements_per_point(p, a, b):
                return a + b  # two tensors through one map, two slices of one, `w` and `w.t()`
    return None


def _same_elements_per_point(p: NodeOp, a: list[AffineExpr], b: list[AffineExpr]) -> bool:
    """The two reads `a` and `b` (over `p`'s domain) take no more distinct pairs of elements than
    either takes elements: their element-wise sum, a tensor over the pairs (`w + w.t()` for
    `x @ w + x @ w.t()`), has no more elements than either operand, so one contraction with it
    multiplies no more distinct products than either contraction did."""
    pairs = st.image_count(p, a + b)
    return pairs == st.image_count(p, a) == st.image_count(p, b)

