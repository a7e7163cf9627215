"""Reads split per part: an entry of the catalogue of the default model of computation that lets the
association entry see through assembled operands and shared producers (docs/bounds.md, section 0).

Multi-head latent attention as transformers computes it (DeepSeek-V2) expands the latent cache with
one `kv_b_proj` product, takes the keys' and the values' parts of its output, and assembles each
head's keys from the expanded part and the rotary part (`new_empty` and two `copy_` into slices).
The absorbed order (`q W_UK` against the latent, `(P c_kv) W_UV`) is an association of the same
products, but the association entry sees no tree: the score contraction reads a tensor two copies
wrote, and the expansion feeds two consumers. Two exact rewrites of the einsum graph remove both
obstacles, and nothing else:

* **A read of an assembled operand is split per part.** A product node C reads a local T every
  element of which (among those C reads) some pure copy `T[f(p)] = S[h(p)]` wrote last (an `=`
  node whose output indices are distinct variables plus constants over a box). When a variable v
  C sums over indexes one position of the read as `v + c` (and no other), and the copies' regions
  cut v's range into intervals, each inside one copy's region, C becomes one node per interval,
  each reading that copy's source S directly at `h(f^-1(g))`: the first keeps C's init, the others
  accumulate onto it (a sum over a range is the sum of the sums over its parts). A read that lies
  inside one copy's region is redirected without a split (T has two writers at least: a tree joins
  a tensor one copy wrote already). The copies nothing reads any more are
  erased. Exact: each piece reads the values C read. (Pieces along an output variable are not
  made: they would give a producer several writers, which the association entry does not join.)
* **A producer read in disjoint parts is computed per part.** A node P that writes each element of a
  local T once (a copy, a product, a contraction from zeros) and whose readers read pairwise
  disjoint sets of T, each injectively from the box of the consumer variables that index it,
  becomes one node per read computing exactly those elements (its loops are the consumer's
  variables, then P's reduced ones; P's output variables become the read's indices), placed where P
  was; each consumer reads its own part. Exact, and no more work: the parts are disjoint subsets
  of T. Where the parts overlap and every reader is a sum (`y.sum(0) + y.sum(1)`), each reader
  gets its part computed for it all the same: more work, which the catalogue keeps only when each
  reader's tree then reassociates to less.

* **A sum over an element-wise sum is split per term.** A product node R (a sum too) one of whose
  operands is a local T that one element-wise node E wrote whole, as a sum or difference of reads
  (`x @ w + b`), and that only R reads, once, becomes one node per term, each reading the term's
  tensor through E's map (`sum_i (mm[i, j] + b[j])` is `sum_i mm[i, j] + sum_i b[j]`; `(a b + c) v`
  is `a b v + c v`): the first keeps R's init, the others accumulate onto it, a subtracted term's
  product negated, and E goes. When a product P accumulated onto E's result before R read it
  (`nn.Linear`'s products onto its copied bias), P's result is one more term and E becomes a zero
  fill (guards on P's taps allowed: a padded convolution onto its bias). Exact in real arithmetic
  (distributivity); the product term then joins its tree
  (`(x @ w + b).sum(0)` is `x.sum(0) @ w + n b`).

The first changes no FLOP, nor does the second for disjoint parts; the third computes a product
once per term and the second one per reader of overlapping parts, so `catalogue.py` keeps the
splits only where the association entry then finds a cheaper order through the new nodes and the
program's work falls (the report says "split per part" beside it).
"""

from __future__ import annotations

from collections import Counter, deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace

import islpy as isl
from xdsl.dialects.builtin import (
    AffineMapAttr,
    ArrayAttr,
    FlatSymbolRefAttr,
    StringAttr,
)
from xdsl.ir import Attribute, Block, BlockArgument
from xdsl.ir.affine import (
    AffineBinaryOpExpr,
    AffineBinaryOpKind,
    AffineConstantExpr,
    AffineDimExpr,
    AffineExpr,
    AffineMap,
)

from solar_compiler.analysis import structured as st
from solar_compiler.analysis.chains import body_factors
from solar_compiler.dialects.einsum import GraphOp, NodeOp, TensorOp, YieldOp, link_edges, set_edges
from solar_compiler.dialects.graph_convert import fresh_scope_number
from solar_compiler.dialects.loop import BinaryOp, ConstOp, UnaryOp, i64_array, location_text, type_dtype
from solar_compiler.transforms.gather_hoist import fresh_name, producer_node
from solar_compiler.transforms.indicator_gather import drop_unnamed

SPLIT = "split per part"

Keep = Callable[[str], bool]   # which original node (by name) a rewrite may split
Box = tuple[tuple[int, int], ...]  # per dimension [lo, hi)


@dataclass(frozen=True)
class Forward:
    """C's read `arg` of an assembled local, per piece of C's variable `var`: (lo, hi, the copy)."""

    consumer: NodeOp
    arg: int
    var: int | None                               # None: one piece, no split
    pieces: tuple[tuple[int, int, NodeOp], ...]


@dataclass(frozen=True)
class Split:
    """A producer whose reads (consumer, input index) are parts of its output: disjoint, or
    `overlapping` (each reader's part is computed for it alone: more work, unless the association
    entry then finds a cheaper order for each)."""

    producer: NodeOp
    fill: NodeOp | None
    reads: tuple[tuple[NodeOp, int], ...]
    overlapping: bool = False


@dataclass(frozen=True)
class Terms:
    """A product node (a sum too) reading a local that one element-wise node wrote as a sum of reads:
    its terms, as the writer's input positions and signs (`sub(%0, add(%1, %0))`: (0, +), (1, -), (0, -))."""

    consumer: NodeOp
    arg: int                             # the consumer's operand the writer wrote
    writer: NodeOp
    terms: tuple[tuple[int, int], ...]   # (writer input position, sign: 1 or -1)
    #: a node that accumulated onto the writer's result before the consumer read it (`nn.Linear`'s
    #: products onto its copied bias): its sum is one more term, and the writer becomes a zero fill
    onto: NodeOp | None = None
    #: an element-wise node between the sum and the consumer that scales it by a literal (`linear(x) *
    #: 2`, `/ n`, a negation): the consumer reads through it, each term scaled
    scale: NodeOp | None = None


@dataclass
class Applied:
    """What `split_parts` did to one graph: per original node name (the key a caller keeps or not),
    the nodes it built, and a line for the report."""

    built: dict[str, set[str]]
    words: dict[str, str]
    locs: dict[str, str]
    #: the keys whose split may add work: per term (a product per term), or per reader of
    #: overlapping parts (a product recomputed per reader)
    adding_work: set[str] = field(default_factory=set)


@dataclass
class _Edit:
    """One graph being rewritten: its declarations, the names taken and the next scope number, kept
    here rather than read off the graph at every rewrite (a large network has thousands of nodes);
    the rewrites set the edges they change themselves (`set_edges`)."""

    graph: GraphOp
    decls: dict[str, TensorOp]
    taken: set[str]
    scope: int

    def fresh(self, base: str) -> str:
        name = fresh_name(base, self.taken)
        self.taken.add(name)
        return name

    def scopes(self, n: int) -> int:
        self.scope += n
        return self.scope - n


def split_parts(graph: GraphOp, keep: Keep | None = None) -> Applied:
    """Apply both rewrites to the graph until neither matches (`keep`: the original nodes, by name,
    that may be split; all when None). Pieces inherit their original's key. Each node is looked at
    once, and the nodes a rewrite builds right after it."""
    done = Applied({}, {}, {})
    origin: dict[str, str] = {}   # node name -> the original node it was built from
    nodes = graph.nodes()
    decls = graph.tensor_ops()
    edit = _Edit(graph, decls, set(decls) | {n.sym_name.data for n in nodes}, fresh_scope_number(graph))

    def key(n: NodeOp) -> str:
        return origin.get(n.sym_name.data, n.sym_name.data)

    def record(k: str, new: Sequence[NodeOp], words: str, loc: Attribute) -> None:
        for n in new:
            origin[n.sym_name.data] = k
        done.built.setdefault(k, set()).update(n.sym_name.data for n in new)
        done.words.setdefault(k, words)
        done.locs.setdefault(k, location_text(loc) or "")

    work = deque(nodes)
    while work:
        while work:
            c = work.popleft()
            if c.parent is None or (keep is not None and not keep(key(c))):
                continue  # erased by an earlier rewrite, or not to be split
            t = _term_match(decls, c)
            if t is not None:
                k, words, loc = key(c), f"{c.output_name} per term of {c.input_names[t.arg]}", c.location
                new = split_terms(edit, t)
                record(k, new, words, loc)
                done.adding_work.add(k)
                work.extendleft(reversed(new))
                continue
            f = _node_forward(decls, c)
            if f is not None:
                k, words, loc = key(c), f"{c.input_names[f.arg]} read per copied part", c.location
                new = forward(edit, f)
                record(k, new, words, loc)
                work.extendleft(reversed(new))
        for p in graph.nodes():
            if p.parent is None or (keep is not None and not keep(key(p))):
                continue
            m = _split_match(decls, p)
            if m is not None:
                k, loc = key(p), p.location
                words = f"{p.output_name} computed per consumer" + ("" if m.overlapping else "'s part")
                new = split_producer(edit, m)
                record(k, new, words, loc)
                if m.overlapping:
                    done.adding_work.add(k)
                work.extend(new)
    if done.built:
        drop_unnamed(graph)
        link_edges(graph)
        graph.verify_()
    return done


# ---- shared checks --------------------------------------------------------------------------------------
def _const(e: AffineExpr) -> int | None:
    return e.value if isinstance(e, AffineConstantExpr) else None


def _box(node: NodeOp) -> Box | None:
    """The node's loop box when every bound is a constant and every step 1."""
    lows, ups = node.lower_bounds.data.results, node.upper_bounds.data.results
    out = []
    for lo, hi, s in zip(lows, ups, NodeOp.ints(node.steps), strict=True):
        a, b = _const(lo), _const(hi)
        if a is None or b is None or s != 1:
            return None
        out.append((a, b))
    return tuple(out)


def _plain(node: NodeOp) -> bool:
    return node.reduce.data in ("none", "add") and not node.dynamic_positions and \
        all(k.data != "sequential" for k in node.get_iterator_types().data)


def _linear(e: AffineExpr, n: int) -> tuple[list[int], int] | None:
    """(coefficient per dim, constant) of an expression over `n` dims without div, mod or symbols."""
    if isinstance(e, AffineConstantExpr):
        return [0] * n, e.value
    if isinstance(e, AffineDimExpr):
        return [int(d == e.position) for d in range(n)], 0
    if not isinstance(e, AffineBinaryOpExpr):
        return None
    a, b = _linear(e.lhs, n), _linear(e.rhs, n)
    if a is None or b is None:
        return None
    if e.kind == AffineBinaryOpKind.Add:
        return [x + y for x, y in zip(a[0], b[0], strict=True)], a[1] + b[1]
    if e.kind == AffineBinaryOpKind.Mul:
        if not any(b[0]):
            return [x * b[1] for x in a[0]], a[1] * b[1]
        if not any(a[0]):
            return [y * a[1] for y in b[0]], a[1] * b[1]
    return None


def _range(e: AffineExpr, box: Box) -> tuple[int, int] | None:
    """[lo, hi) of an affine expression over a box (None with div or mod)."""
    lin = _linear(e, len(box))
    if lin is None:
        return None
    coeffs, const = lin
    lo = hi = const
    for c, (a, b) in zip(coeffs, box, strict=True):
        if c == 0:
            continue
        if b <= a:
            return (0, 0)
        lo += min(c * a, c * (b - 1))
        hi += max(c * a, c * (b - 1))
    return lo, hi + 1


def _out_offsets(node: NodeOp) -> list[tuple[int, int]] | None:
    """(loop dim, constant) per output position when each is a distinct loop variable plus a
    constant and every loop variable is one of them (a copy's write: a bijection onto a box)."""
    out = []
    n = node.get_num_loops()
    for e in node.get_indexing_maps().data[-1].data.results:
        lin = _linear(e, n)
        if lin is None:
            return None
        coeffs, const = lin
        dims = [d for d, c in enumerate(coeffs) if c]
        if len(dims) != 1 or coeffs[dims[0]] != 1:
            return None
        out.append((dims[0], const))
    return out if sorted(d for d, _ in out) == list(range(n)) else None


# ---- reads of assembled operands ------------------------------------------------------------------------
def _copy_source(w: NodeOp) -> bool:
    """A pure copy: `T[...] = S[...]`, one read stored as it is, no guard, the same dtype."""
    y = w.body.block.last_op
    return isinstance(y, YieldOp) and isinstance(y.stored, BlockArgument) and w.reduce.data == "none" and \
        w.init is None and w.guards is None and len(w.ins) == 1 and \
        type_dtype(y.stored.type) == type_dtype(w.result.type.element_type)


def _region(w: NodeOp) -> Box | None:
    """The box of T a `=` node writes (copies and fills)."""
    if w.reduce.data != "none" or w.guards is not None or w.dynamic_positions:
        return None
    box, offs = _box(w), _out_offsets(w)
    if box is None or offs is None:
        return None
    return tuple((box[d][0] + c, box[d][1] + c) for d, c in offs)


def _writers(c: NodeOp, arg: int) -> list[NodeOp] | None:
    """The writers of C's operand `arg` before C, latest first (None: one is not a `=` of a box)."""
    out = []
    v = c.ins[arg]
    while isinstance(v.owner, NodeOp):
        w = v.owner
        if _region(w) is None:
            return None
        out.append(w)
        v = w.dest
        if v is None:
            return None
    return out


def forward_matches(graph: GraphOp) -> list[Forward]:
    decls = graph.tensor_ops()
    nodes = graph.nodes()
    written = Counter(n.output_name for n in nodes)
    return [f for c in nodes if any(written[t] > 1 for t in c.input_names)
            for f in [_node_forward(decls, c)] if f is not None]


def _node_forward(decls: dict[str, TensorOp], c: NodeOp) -> Forward | None:
    """The first of C's reads of an assembled local that is split or redirected (None: none is)."""
    if not _plain(c) or c.guards is not None or body_factors(c) is None:
        return None  # only a product node joins a tree
    box = _box(c)
    if box is None:
        return None
    for a, name in enumerate(c.input_names):
        decl = decls.get(name)
        if decl is None or decl.role.data != "local" or not isinstance(c.ins[a].owner, NodeOp):
            continue
        m = _forward_match(c, a, box)
        if m is not None:
            return m
    return None


def _forward_match(c: NodeOp, a: int, box: Box) -> Forward | None:
    writers = _writers(c, a)
    if not writers or len(writers) < 2 or not any(_copy_source(w) for w in writers):
        return None  # one writer: a copy, which a tree joins already, or no copy at all
    g = c.get_indexing_maps().data[a].data.results
    regions = [_region(w) for w in writers]
    read = [_range(e, box) for e in g]
    if any(r is None for r in read):
        return None
    whole = _piece(writers, regions, read)  # type: ignore[arg-type]
    if whole is not None:
        return Forward(c, a, None, ((0, 0, whole),)) if _source_holds(whole, c) else None
    lins = [_linear(e, len(box)) for e in g]   # all affine: their ranges are known
    summed = st.reduced_dims(c)
    for r, lin in enumerate(lins):
        assert lin is not None
        dims = [d for d, k in enumerate(lin[0]) if k]
        if len(dims) != 1 or lin[0][dims[0]] != 1 or dims[0] not in summed:
            continue
        var, off = dims[0], lin[1]
        if any(x is None or x[0][var] for r2, x in enumerate(lins) if r2 != r):
            continue  # the variable indexes another position too
        pieces = _pieces(c, g, box, var, r, off, writers, regions)
        if pieces is not None:
            return Forward(c, a, var, pieces)
    return None


def _pieces(c: NodeOp, g: Sequence[AffineExpr], box: Box, var: int, r: int, off: int,
            writers: Sequence[NodeOp], regions: Sequence[Box | None]) \
        -> tuple[tuple[int, int, NodeOp], ...] | None:
    """C's range of `var` (indexing position r as `var + off`) cut where the writers' regions start or
    end, each piece inside one copy's region (None: not so, or one piece only)."""
    lo, hi = box[var]
    inner = {x - off for reg in regions if reg is not None for x in reg[r]}
    edges = sorted({lo, hi} | {x for x in inner if lo < x < hi})
    if len(edges) < 3:
        return None
    pieces = []
    for a0, b0 in zip(edges, edges[1:], strict=False):
        sub = list(box)
        sub[var] = (a0, b0)
        rd = [_range(e, tuple(sub)) for e in g]
        w = _piece(writers, regions, rd)  # type: ignore[arg-type]
        if w is None or not _source_holds(w, c):
            return None
        pieces.append((a0, b0, w))
    return tuple(pieces)


def _piece(writers: Sequence[NodeOp], regions: Sequence[Box | None], read: Sequence[tuple[int, int]]) \
        -> NodeOp | None:
    """The copy that wrote last every element of the read box (None: another writer, or several)."""
    for w, reg in zip(writers, regions, strict=True):
        assert reg is not None
        overlap = all(max(a, c) < min(b, d) for (a, b), (c, d) in zip(read, reg, strict=True))
        if not overlap:
            continue
        inside = all(c <= a and b <= d for (a, b), (c, d) in zip(read, reg, strict=True))
        return w if inside and _copy_source(w) else None
    return None


def _source_holds(w: NodeOp, c: NodeOp) -> bool:
    """The copy's source holds at C the values the copy read: C comes after the copy and no node
    between writes the source."""
    return _holds(w.input_names[0], w, c)


def forward(edit: _Edit, f: Forward) -> list[NodeOp]:
    """Rewrite one match: C's pieces in its place, each reading its copy's source (the value the
    copy read: `_source_holds`), the later pieces of a sum accumulating onto the earlier ones."""
    c = f.consumer
    g = c.get_indexing_maps().data[f.arg].data
    new: list[NodeOp] = []
    reduced = f.var is not None and f.var in st.reduced_dims(c)
    for i, (lo, hi, w) in enumerate(f.pieces):
        p = c.clone()
        if f.var is not None:
            nd = c.get_num_loops()
            lows = list(c.lower_bounds.data.results)
            ups = list(c.upper_bounds.data.results)
            lows[f.var], ups[f.var] = AffineExpr.constant(lo), AffineExpr.constant(hi)
            p.properties["lower_bounds"] = AffineMapAttr(AffineMap(nd, 0, tuple(lows)))
            p.properties["upper_bounds"] = AffineMapAttr(AffineMap(nd, 0, tuple(ups)))
            _rename(p, edit, f"{c.sym_name.data}_p", keep_init=not (i > 0 and reduced))
        _read(p, f.arg, _through_copy(g, w), w.input_names[0])
        ins = list(c.ins)
        ins[f.arg] = w.ins[0]
        set_edges(p, ins, new[-1].result if new and reduced else c.dest)
        edit.graph.body.block.insert_op_before(p, c)
        new.append(p)
    writers = _writers(c, f.arg) or []
    c.result.replace_all_uses_with(new[-1].result)
    c.detach()
    c.erase(safe_erase=False)
    _erase_dead_stores(edit, writers)
    for p in new:
        p.verify()
    return new


def _erase_dead_stores(edit: _Edit, writers: Sequence[NodeOp]) -> None:
    """Erase the copies and fills among `writers` (of a local) whose region nothing reads any more
    (the other pieces of an assembled operand whose reader now reads their sources), then every
    node whose result nothing uses, up the chains they read. Erasing a node whose result nothing
    uses, or whose result's users take its init instead, leaves every other edge as it was."""
    todo: list[NodeOp] = []
    for w in writers:
        reg = _region(w)
        if w.parent is not None and reg is not None and w.dest is not None and _unread(w, reg):
            todo += _producers(w)
            w.result.replace_all_uses_with(w.dest)
            w.detach()
            w.erase(safe_erase=False)
    todo += [w for w in writers if w.parent is not None]
    while todo:
        n = todo.pop()
        if n.parent is None or n.result.uses or edit.decls[n.output_name].role.data != "local":
            continue
        todo += _producers(n)
        n.detach()
        n.erase(safe_erase=False)


def _producers(n: NodeOp) -> list[NodeOp]:
    """The nodes whose results `n` takes (its inputs, its gathers' sources, its init)."""
    vals = [*n.ins, *(g.source for g in n.gathers()), n.dest]
    return [v.owner for v in vals if v is not None and isinstance(v.owner, NodeOp)]


def _unread(w: NodeOp, region: Box) -> bool:
    """No node reads an element of `region` from the value `w` writes or from a later value of the
    tensor (the writers after `w` are `=` stores: an accumulation reads what it updates)."""
    v = w.result
    while True:
        following = None
        for use in v.uses:
            o = use.operation
            if not isinstance(o, NodeOp):
                return False   # a gather's source, the graph's return
            if o.dest is v:
                if o.reduce.data != "none" or o.init is not None:
                    return False
                following = o
                continue
            box = _box(o)
            if box is None:
                return False
            for i, x in enumerate(o.ins):
                if x is not v:
                    continue
                rd = [_range(e, box) for e in o.get_indexing_maps().data[i].data.results]
                if any(r is None for r in rd) or \
                        all(max(a, c) < min(b, d) for (a, b), (c, d) in zip(rd, region, strict=True)):  # type: ignore[misc]
                    return False
        if following is None:
            return True
        v = following.result


def _through_copy(g: AffineMap, w: NodeOp, arg: int = 0) -> AffineMap:
    """C's read `g` of T, as a read of the writer's operand `arg` (a copy's source): the writer's
    read map at the writer's variables that write g's elements (`h(f^-1(g))`)."""
    offs = _out_offsets(w)
    assert offs is not None
    at: list[AffineExpr] = [AffineExpr.constant(0)] * w.get_num_loops()
    for r, (d, k) in enumerate(offs):
        at[d] = g.results[r] + (-k) if k else g.results[r]
    h = w.get_indexing_maps().data[arg].data
    return AffineMap(g.num_dims, 0, tuple(e.replace_dims_and_symbols(at, []) for e in h.results))


def _renumber(p: NodeOp, edit: _Edit) -> None:
    """Fresh scope numbers for a clone (its loops and blocks are its own)."""
    olds = [s for k in ("scopes", "guard_scopes", "init_guard_scopes") if k in p.properties
            for s in NodeOp.ints(p.properties[k])]  # type: ignore[arg-type]
    distinct = list(dict.fromkeys(olds))
    base = edit.scopes(len(distinct))
    table = {s: base + i for i, s in enumerate(distinct)}
    for k in ("scopes", "guard_scopes", "init_guard_scopes"):
        if k in p.properties:
            p.properties[k] = i64_array(tuple(table[s] for s in NodeOp.ints(p.properties[k])))  # type: ignore[arg-type]


def _rename(p: NodeOp, edit: _Edit, base: str, keep_init: bool) -> None:
    """A clone's own name and scopes; without its original's folded init when it accumulates onto
    an earlier piece (`keep_init` False)."""
    p.properties["sym_name"] = StringAttr(edit.fresh(base))
    _renumber(p, edit)
    if not keep_init:
        for k in ("init", "init_depth", "init_guard_scopes", "init_guard_depths", "init_origin"):
            p.properties.pop(k, None)


def _read(p: NodeOp, arg: int, at: AffineMap, tensor: str) -> None:
    """The clone's operand `arg` reads `tensor` at `at` (its edges are set by the caller)."""
    maps = list(p.indexing_maps.data)
    maps[arg] = AffineMapAttr(at)
    names = list(p.inputs.data)
    names[arg] = FlatSymbolRefAttr(tensor)
    p.properties["indexing_maps"] = ArrayAttr(maps)
    p.properties["inputs"] = ArrayAttr(names)
    p.properties.pop("traced", None)


# ---- producers read in disjoint parts ---------------------------------------------------------------------
def split_matches(graph: GraphOp) -> list[Split]:
    decls = graph.tensor_ops()
    out = []
    for p in graph.nodes():
        s = _split_match(decls, p)
        if s is not None:
            out.append(s)
    return out


def _split_match(decls: dict[str, TensorOp], p: NodeOp) -> Split | None:
    decl = decls.get(p.output_name)
    if decl is None or decl.role.data != "local" or not p.result.uses:
        return None
    reads: list[tuple[NodeOp, int]] = []
    for use in p.result.uses:
        o = use.operation
        if not isinstance(o, NodeOp) or o.dest is p.result:
            return None   # a gather's source, a later writer, the graph's return
        if use.index < len(o.ins):
            reads.append((o, use.index))
    if len(reads) < 2 or not _plain(p) or p.guards is not None or body_factors(p) is None or \
            any(body_factors(o) is None for o in {id(o): o for o, _ in reads}.values()):
        return None   # only product nodes join trees
    box = _box(p)
    out = p.get_indexing_maps().data[-1].data.results
    if box is None or not all(isinstance(e, AffineDimExpr) for e in out) or \
            [e.position for e in out] != list(range(len(out))):  # type: ignore[union-attr]
        return None
    if any(box[d] != (0, decl.dims[d]) for d in range(len(out))):
        return None
    fill = None
    if p.reduce.data == "add":
        start = st.zero_start(p, len(out))
        if start is None:
            return None
        fill = start[0]
    elif st.init_producer(p) is not None or st.reduced_dims(p):
        return None
    images = []
    for c, i in reads:
        im = _read_image(c, i, p.output_name)
        if im is None:
            return None
        images.append(im)
    overlapping = any(not a.is_disjoint(b) for j, a in enumerate(images) for b in images[j + 1:])
    if overlapping and not all(o.reduce.data == "add" for o, _ in reads):
        return None  # recomputed per reader only for sums and contractions, which may then reassociate
    return Split(p, fill, tuple(reads), overlapping)


def _used(c: NodeOp, i: int) -> list[int]:
    return sorted({d for e in c.get_indexing_maps().data[i].data.results for d in st.dims_of(e)})


def _read_image(c: NodeOp, i: int, tensor: str) -> isl.Set | None:
    """The elements C's read `i` touches over the box of the variables it uses, when that read is
    injective from the box (None otherwise, or without a constant box)."""
    box = _box(c)
    if box is None:
        return None
    used = _used(c, i)
    names = [f"d{d}" for d in range(c.get_num_loops())]
    res = c.get_indexing_maps().data[i].data.results
    cons = " and ".join(f"{box[d][0]} <= d{d} < {box[d][1]}" for d in used) or "true"
    text = ", ".join(_isl(e, names) for e in res)
    try:
        m = isl.Map(f"{{ [{', '.join(names[d] for d in used)}] -> {tensor}[{text}] : {cons} }}")
    except isl.Error:
        return None
    return m.range() if m.is_injective() else None


def _isl(e: AffineExpr, names: Sequence[str]) -> str:
    """An affine expression in isl's syntax, dims by name."""
    if isinstance(e, AffineConstantExpr):
        return str(e.value)
    if isinstance(e, AffineDimExpr):
        return names[e.position]
    assert isinstance(e, AffineBinaryOpExpr)
    op = {AffineBinaryOpKind.Add: "+", AffineBinaryOpKind.Mul: "*", AffineBinaryOpKind.FloorDiv: "//",
          AffineBinaryOpKind.Mod: "%", AffineBinaryOpKind.CeilDiv: None}[e.kind]
    if op is None:
        raise isl.Error("ceildiv")
    return f"({_isl(e.lhs, names)} {op} {_isl(e.rhs, names)})"


def split_producer(edit: _Edit, s: Split) -> list[NodeOp]:
    """Rewrite one match: one producer per read, where P was; each consumer reads its part."""
    p = s.producer
    t = edit.decls[p.output_name]
    new = []
    for c, i in s.reads:
        box = _box(c)
        assert box is not None
        used = _used(c, i)
        name = edit.fresh(f"{p.output_name}_part")
        node_name = edit.fresh(f"{p.sym_name.data}_part")
        decl = TensorOp(name, tuple(box[u][1] - box[u][0] for u in used), t.dtype, "local")
        edit.graph.body.block.insert_op_after(decl, list(edit.decls.values())[-1])
        edit.decls[name] = decl
        n = _part_producer(edit, p, s.fill, c, i, used, box, name, node_name)
        set_edges(n, list(p.ins), decl.result)
        edit.graph.body.block.insert_op_before(n, p)
        new.append(n)
        nd = c.get_num_loops()
        maps = list(c.indexing_maps.data)
        maps[i] = AffineMapAttr(AffineMap(nd, 0, tuple(AffineExpr.dimension(u) + (-box[u][0]) if box[u][0]
                                                          else AffineExpr.dimension(u) for u in used)))
        names = list(c.inputs.data)
        names[i] = FlatSymbolRefAttr(name)
        c.properties["inputs"] = ArrayAttr(names)
        c.properties["indexing_maps"] = ArrayAttr(maps)
        c.properties.pop("traced", None)
        ins = list(c.ins)
        ins[i] = n.result
        set_edges(c, ins, c.dest)
    for x in (p, s.fill):
        if x is not None:
            assert not x.result.uses
            x.detach()
            x.erase(safe_erase=False)
    for n in new:
        n.verify()
    for c, _ in s.reads:
        c.verify()
    return new


def _part_producer(edit: _Edit, p: NodeOp, fill: NodeOp | None, c: NodeOp, i: int, used: Sequence[int],
                   box: Box, name: str, node_name: str) -> NodeOp:
    """P computing the elements C's read `i` touches: C's used variables (from 0), then P's reduced
    ones; P's output variable at position r is the read's index r."""
    out = [e.position for e in p.get_indexing_maps().data[-1].data.results]  # type: ignore[union-attr]
    nu, np_ = len(used), p.get_num_loops()
    reduced = [d for d in range(np_) if d not in out]
    nd = nu + len(reduced)
    from_c: list[AffineExpr] = [AffineExpr.constant(0)] * c.get_num_loops()
    for j, u in enumerate(used):
        from_c[u] = AffineExpr.dimension(j) + box[u][0] if box[u][0] else AffineExpr.dimension(j)
    read = c.get_indexing_maps().data[i].data.results
    from_p: list[AffineExpr] = [AffineExpr.constant(0)] * np_
    for r, d in enumerate(out):
        from_p[d] = read[r].replace_dims_and_symbols(from_c, [])
    for j, d in enumerate(reduced):
        from_p[d] = AffineExpr.dimension(nu + j)

    def over_p(results: Sequence[AffineExpr]) -> AffineMapAttr:
        return AffineMapAttr(AffineMap(nd, 0, tuple(e.replace_dims_and_symbols(from_p, []) for e in results)))

    block = Block()
    values = {}
    for a in p.body.block.args:
        values[a] = block.insert_arg(a.type, len(block.args))
    for o in p.body.block.ops:
        k = o.clone(value_mapper=values)
        block.add_op(k)
        values.update(zip(o.results, k.results, strict=True))
    pmaps = p.get_indexing_maps().data
    base = edit.scopes(nd)
    lbs = [AffineExpr.constant(0)] * nu + [p.lower_bounds.data.results[d].replace_dims_and_symbols(from_p, [])
                                           for d in reduced]
    ubs = [AffineExpr.constant(box[u][1] - box[u][0]) for u in used] + \
        [p.upper_bounds.data.results[d].replace_dims_and_symbols(from_p, []) for d in reduced]
    types = [StringAttr("parallel")] * nu + [p.iterator_types.data[d] for d in reduced]
    ivs = [c.iv_names[u] for u in used]
    ivs += [fresh_name(p.iv_names[d], set(ivs)) for d in reduced]
    props = {
        "sym_name": StringAttr(node_name),
        "inputs": ArrayAttr([FlatSymbolRefAttr(x) for x in p.input_names]),
        "output": FlatSymbolRefAttr(name), "reduce": p.reduce,
        "ivs": ArrayAttr([StringAttr(v) for v in ivs]), "iterator_types": ArrayAttr(types),
        "lower_bounds": AffineMapAttr(AffineMap(nd, 0, tuple(lbs))),
        "upper_bounds": AffineMapAttr(AffineMap(nd, 0, tuple(ubs))),
        "steps": i64_array((1,) * nd),
        "indexing_maps": ArrayAttr([*(over_p(pmaps[a.index].data.results) for a in p.body.block.args),
                                    AffineMapAttr(AffineMap(nd, 0, tuple(AffineExpr.dimension(j)
                                                                         for j in range(nu))))]),
        "scopes": i64_array(tuple(range(base, base + nd)))}
    return producer_node(p, fill, nu, props, block)



# ---- sums over element-wise sums ------------------------------------------------------------------------
def term_matches(graph: GraphOp) -> list[Terms]:
    decls = graph.tensor_ops()
    return [t for c in graph.nodes() if c.reduce.data == "add"
            for t in [_term_match(decls, c)] if t is not None]


def _term_match(decls: dict[str, TensorOp], c: NodeOp) -> Terms | None:
    """C, a sum of products (a plain sum too), and an operand of it that one element-wise node wrote
    whole as a sum of two or more reads, when C is that local's only reader and reads it once (None
    otherwise): C is linear in it."""
    if c.reduce.data != "add" or not _plain(c) or c.guards is not None or c.gathers() or \
            _box(c) is None or body_factors(c) is None:
        return None
    def whole(decl: TensorOp) -> Box:
        return tuple((0, n) for n in NodeOp.ints(decl.shape))

    for a, name in enumerate(c.input_names):
        decl, e = decls.get(name), c.ins[a].owner
        if decl is None or decl.role.data != "local" or not isinstance(e, NodeOp) or \
                c.input_names.count(name) != 1 or [u.operation for u in e.result.uses] != [c]:
            continue
        scale = None
        if _scaling(e, whole(decl)):
            scale, e = e, e.ins[0].owner
            decl = decls.get(scale.input_names[0])
            if decl is None or decl.role.data != "local" or not isinstance(e, NodeOp) or \
                    [u.operation for u in e.result.uses] != [scale]:
                continue
        m = _terms_of(c, a, e, whole(decl))
        if m is not None:
            return replace(m, scale=scale)
    return None


def _scaling(n: NodeOp, whole: Box) -> bool:
    """Whether `n` writes its whole local as one read times or over a literal, or its negation, in
    the read's dtype."""
    if n.reduce.data != "none" or n.init is not None or n.guards is not None or n.dynamic_positions or \
            n.gathers() or len(n.ins) != 1 or (n.dest is not None and isinstance(n.dest.owner, NodeOp)) or \
            _region(n) != whole:
        return False
    y = n.body.block.last_op
    v = y.stored.owner if isinstance(y, YieldOp) else None
    if isinstance(v, UnaryOp):
        ok = v.fn.data == "neg" and isinstance(v.x, BlockArgument)
    elif isinstance(v, BinaryOp) and v.fn.data in ("mul", "div"):
        ok = isinstance(v.lhs, BlockArgument) and isinstance(v.rhs.owner, ConstOp) or \
            v.fn.data == "mul" and isinstance(v.rhs, BlockArgument) and isinstance(v.lhs.owner, ConstOp)
    else:
        return False
    arg = n.body.block.args[0]
    return ok and type_dtype(arg.type) == type_dtype(n.result.type.element_type)


def _terms_of(c: NodeOp, a: int, e: NodeOp, whole: Box) -> Terms | None:
    onto = None
    # products accumulated onto the local (guarded too: a padded convolution's taps onto its bias)
    if e.reduce.data == "add" and e.init is None and not e.dynamic_positions and \
            e.dest is not None and isinstance(e.dest.owner, NodeOp) and _region_of_sum(e) == whole:
        onto, e = e, e.dest.owner  # type: ignore[assignment]
        if [u.operation for u in e.result.uses] != [onto]:
            return None
    if e.reduce.data != "none" or e.init is not None or e.guards is not None or e.dynamic_positions or \
            e.gathers() or (e.dest is not None and isinstance(e.dest.owner, NodeOp)) or _region(e) != whole:
        return None
    ey = e.body.block.last_op
    terms = _addends(ey.stored) if isinstance(ey, YieldOp) else None
    if terms is None or len(terms) + (onto is not None) < 2 or \
            not all(_holds(e.input_names[t], e, c) for t, _ in terms):
        return None
    return Terms(c, a, e, tuple(terms), onto)


def _holds(name: str, w: NodeOp, c: NodeOp) -> bool:
    """No node between `w` and `c` writes tensor `name`: at C it holds the values W read."""
    o = w.next_op
    while o is not None and o is not c:
        if isinstance(o, NodeOp) and o.output_name == name:
            return False
        o = o.next_op
    return o is c


def _region_of_sum(n: NodeOp) -> Box | None:
    """The box of T a `+=` node adds into, when its output indices are its parallel variables plus
    constants over a box (its reduced variables appear in no output index)."""
    box = _box(n)
    if box is None:
        return None
    reduced = set(st.reduced_dims(n))
    out = []
    for e in n.get_indexing_maps().data[-1].data.results:
        lin = _linear(e, len(box))
        if lin is None:
            return None
        dims = [d for d, k in enumerate(lin[0]) if k]
        if len(dims) != 1 or lin[0][dims[0]] != 1 or dims[0] in reduced:
            return None
        out.append((box[dims[0]][0] + lin[1], box[dims[0]][1] + lin[1]))
    return tuple(out)


def _addends(v: object, sign: int = 1) -> list[tuple[int, int]] | None:
    """(block-argument position, sign) of each read a chain of `add`s and `sub`s of reads adds (None:
    anything else in it)."""
    if isinstance(v, BlockArgument):
        return [(v.index, sign)]
    o = getattr(v, "owner", None)
    if isinstance(o, BinaryOp) and o.fn.data in ("add", "sub"):
        a, b = _addends(o.lhs, sign), _addends(o.rhs, sign if o.fn.data == "add" else -sign)
        return None if a is None or b is None else a + b
    return None


def split_terms(edit: _Edit, m: Terms) -> list[NodeOp]:
    """Rewrite one match: one sum per term in C's place, each reading the term's tensor where E read
    it for the elements C sums, the later ones accumulating onto the earlier; E goes."""
    c, e, a = m.consumer, m.writer, m.arg
    g = c.get_indexing_maps().data[a].data
    if m.scale is not None:
        g = _through_copy(g, m.scale)  # C's read of the scaled local, as a read of what it scales
    new: list[NodeOp] = []
    for i, (arg, sign) in enumerate((*m.terms, (-1, 1)) if m.onto is not None else m.terms):
        p = c.clone()
        _rename(p, edit, f"{c.sym_name.data}_t", keep_init=i == 0)
        ins = list(c.ins)
        if arg < 0:  # the accumulated products: C itself, reading them over a zero fill
            assert m.onto is not None
            if m.scale is not None:
                _read(p, a, g, m.onto.output_name)
                ins[a] = m.onto.result
        else:
            _read(p, a, _through_copy(g, e, arg), e.input_names[arg])
            ins[a] = e.ins[arg]
            if sign < 0:
                _negate(p)
        if m.scale is not None:
            _scaled(p, m.scale)
        set_edges(p, ins, new[-1].result if new else c.dest)
        edit.graph.body.block.insert_op_before(p, c)
        new.append(p)
    c.result.replace_all_uses_with(new[-1].result)
    c.detach()
    c.erase(safe_erase=False)
    if m.scale is not None:
        _erase_dead_stores(edit, [m.scale])
    if m.onto is not None:
        _zero_fill(e)
        new.append(e)
    elif e.parent is not None:
        _erase_dead_stores(edit, [e])
    for p in new:
        p.verify()
    return new


def _negate(n: NodeOp) -> None:
    """The node yields the negation of what it yielded (a subtracted term's sum)."""
    y = n.body.block.last_op
    assert isinstance(y, YieldOp)
    neg = UnaryOp("neg", y.stored, type_dtype(y.stored.type))
    n.body.block.insert_op_before(neg, y)
    y.operands[0] = neg.result


def _scaled(n: NodeOp, scale: NodeOp) -> None:
    """The node yields what it yielded, scaled as `scale`'s body scales its one read."""
    y = n.body.block.last_op
    assert isinstance(y, YieldOp)
    sb = scale.body.block
    mapping = {sb.args[0]: y.stored}
    for o in list(sb.ops)[:-1]:
        n.body.block.insert_op_before(o.clone(value_mapper=mapping), y)
    sy = sb.last_op
    assert isinstance(sy, YieldOp)
    y.operands[0] = mapping[sy.stored]


def _zero_fill(w: NodeOp) -> None:
    """Make `=` node `w` write zeros where it wrote the sum of its reads (its terms are now summed
    by sums of their own)."""
    dtype = type_dtype(w.result.type.element_type)
    zero = ConstOp(0, dtype)
    block = Block([zero, YieldOp(zero.result)])
    old = w.body.block
    w.body.insert_block_before(block, old)
    w.body.detach_block(old)
    old.erase(safe_erase=False)
    w.properties["inputs"] = ArrayAttr([])
    w.properties["indexing_maps"] = ArrayAttr([w.indexing_maps.data[-1]])
    set_edges(w, [], w.dest)
