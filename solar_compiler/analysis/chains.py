"""Contraction trees of a program and their joint sum-of-products form (`reorder-chains`).

A *product node* computes `T[out] (=|+=) f1 * f2 * ... / g1 ...` where every factor is an affine
read of another tensor or a float literal (negation is the literal -1): a contraction, a scaling
by a constant or a per-index factor, or a copy. A local tensor T is a *private intermediate* when
it is written by one product node P (after a zero fill, or with a folded zero init, or by `=`),
read by later product nodes of one tree (once or more: each read is its own copy of P's sum), which
read only elements that were defined. Product nodes
joined by private intermediates form in-trees; a tree is maximal when its root's output is not a
private intermediate. Substituting every intermediate by its producer's sum gives the tree's joint
form: one sum over all loop variables (the root's, plus every inner node's reduction variables) of
the product of the leaf factors, restricted by every node's bounds and guards (masks and narrowed
domains: 0/1 factors). docs/reorder-chains.md proves each rule; `chain_order.py` prices the orders.

Variables that a view splits (`k // 64`, `k % 64`) are delinearised into two variables, so that each
factor depends on the variables it really indexes.

Everything is read from the `einsum.graph` (issue 20): a node's factors from its scalar body (block
arguments at their indexing maps, `loop.const` literals, `loop.binary` mul/div, `loop.unary` neg),
and the tensor's writers and readers from the use-def chains `link_edges` builds: every writer of a
tensor takes the previous value as its init (`dest`), so "P is the only writer" is "P's init is the
tensor's initial value (or a zero fill's result that nothing else reads) and nothing takes P's
result as init", and "C is the only reader" is "C is the only node with P's result as an input".
The joint form is still built on named affine expressions (`loopir.affine`, from the maps by
`from_map`), the form `chain_order.py` emits its orders in.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from functools import partial

import islpy as isl
from xdsl.dialects.builtin import FloatAttr, FusedLoc
from xdsl.ir import Attribute, BlockArgument, SSAValue

from solar_compiler.analysis.structured import init_producer, reduced_dims, value_consumers
from solar_compiler.dialects.einsum import GraphOp, NodeOp, TensorOp, YieldOp
from solar_compiler.dialects.loop import (
    BinaryOp,
    CastOp,
    ConstOp,
    Origin,
    UnaryOp,
    location_text,
    type_dtype,
)
from solar_compiler.loopir.affine import AffCond, AffExpr, FloorDiv, Mod
from solar_compiler.loopir.affine_map import from_map, from_set
from solar_compiler.loopir.rules import FLOAT_DTYPES
from solar_compiler.loopir.simplify import simplify_affine

Ranges = dict[str, tuple[int, int]]
#: a private intermediate's producer, its zero fill, its reads and its readers (node positions)
Edge = tuple[int, int | None, int, tuple[int, ...]]

#: the most leaves an intermediate read more than once by its consumer brings into a tree, its
#: copies counted (repeated squaring doubles them at each step: `matrix_power(a, 8) @ v` has 9)
MAX_COPIED_LEAVES = 16


@dataclass(frozen=True)
class Factor:
    """A factor of a product: an affine read of `tensor`, or a literal (`tensor` None). A divisor
    (`divide`) divides the product instead of multiplying it."""

    tensor: str | None
    indices: tuple[AffExpr, ...] = ()
    value: float = 1.0
    divide: bool = False

    def vars(self) -> set[str]:
        return set().union(*(i.vars() for i in self.indices)) if self.indices else set()

    def text(self) -> str:
        if self.tensor is None:
            return f"{self.value:g}"
        return f"{self.tensor}[{', '.join(map(str, self.indices))}]" if self.indices else f"{self.tensor}[]"


@dataclass(frozen=True)
class Tree:
    """A maximal tree of product nodes and its joint form."""

    kernel: str
    root: str                              # the root node's name
    nodes: tuple[str, ...]                 # its product nodes, in program order
    fills: tuple[str, ...]                 # zero fills of its intermediates (they go with the tree)
    intermediates: tuple[str, ...]         # tensors that exist only inside the tree
    output: str                            # the root's output tensor
    out_index: tuple[AffExpr, ...]         # where the root writes it, over the joint variables
    vars: tuple[str, ...]                  # joint variables, in nest order
    ranges: tuple[tuple[int, int], ...]    # their hull ranges (inclusive)
    factors: tuple[Factor, ...]            # leaf factors and literals
    constraints: tuple[AffCond, ...]       # every node's bounds and guards that the ranges do not imply
    init: str                              # root: "none" (=), "folded" (zero init in the node), "separate"
    init_conds: tuple[AffCond, ...]        # the conditions under which the root's own init/store runs
    dtype: str
    written: str                           # the order as written, in words
    locs: tuple[str, ...]
    loc: str | None
    origin: Origin | None
    init_origin: Origin | None
    sums: int                              # product nodes with a reduction variable
    notes: tuple[str, ...] = field(default=())

    def range_of(self) -> dict[str, tuple[int, int]]:
        return dict(zip(self.vars, self.ranges, strict=True))

    @property
    def tensor_factors(self) -> tuple[Factor, ...]:
        return tuple(f for f in self.factors if f.tensor is not None)

    def equation(self) -> str:
        """`out[..] = sum(v, ..) f1 * f2 / g`: the joint form in one line."""
        out_vars = set().union(*(i.vars() for i in self.out_index)) if self.out_index else set()
        summed = [v for v in self.vars if v not in out_vars]
        num = [f.text() for f in self.factors if not f.divide] or ["1"]
        den = [f.text() for f in self.factors if f.divide]
        body = " * ".join(num) + "".join(f" / {d}" for d in den)
        lhs = f"{self.output}[{', '.join(map(str, self.out_index))}]"
        where = f" if {' and '.join(map(str, self.constraints))}" if self.constraints else ""
        return f"{lhs} = " + (f"sum({', '.join(summed)}) " if summed else "") + body + where


# ---- product nodes -----------------------------------------------------------------------------------
def body_factors(node: NodeOp, through_casts: bool = False) \
        -> tuple[list[Factor], list[SSAValue | None]] | None:
    """The factors of the product a node yields, and the tensor value each tensor factor reads (None
    for a literal); None when the body is not a product (see the module doc): a gather, a cast
    (unless `through_casts`: symmetry does not depend on the operand dtype, an order's price does),
    an index value, any other op, or a read of the node's own output refuses it."""
    ivs = node.iv_names
    maps = node.get_indexing_maps().data
    names = node.input_names
    target = node.output_name
    out: list[Factor] = []
    vals: list[SSAValue | None] = []

    def go(v: SSAValue, div: bool) -> bool:
        if isinstance(v, BlockArgument):
            if names[v.index] == target:
                return False
            out.append(Factor(names[v.index], from_map(maps[v.index].data, ivs), divide=div))
            vals.append(node.ins[v.index])
            return True
        o = v.owner
        if isinstance(o, ConstOp):
            if type_dtype(o.result.type) not in FLOAT_DTYPES or not isinstance(o.value, FloatAttr):
                return False
            out.append(Factor(None, value=float(o.value.value.data), divide=div))
            vals.append(None)
            return True
        if isinstance(o, BinaryOp) and o.fn.data in ("mul", "div"):
            return go(o.lhs, div) and go(o.rhs, div != (o.fn.data == "div"))
        if isinstance(o, UnaryOp) and o.fn.data == "neg":
            out.append(Factor(None, value=-1.0))
            vals.append(None)
            return go(o.x, div)
        if through_casts and isinstance(o, CastOp):
            return go(o.x, div)
        return False

    y = node.body.block.last_op
    assert isinstance(y, YieldOp)
    return (out, vals) if go(y.stored, False) else None


@dataclass(frozen=True)
class _Node:
    pos: int
    op: NodeOp
    factors: tuple[Factor, ...] | None     # None: not a product node
    values: tuple[SSAValue | None, ...]    # the tensor value each factor reads (None: a literal)
    fill: bool                             # `T[..] = 0` alone

    @property
    def name(self) -> str:
        return self.op.sym_name.data

    @property
    def target(self) -> str:
        return self.op.output_name

    @property
    def sums(self) -> bool:
        return self.op.reduce.data == "add" and bool(reduced_dims(self.op))


def _is_zero_fill(node: NodeOp) -> bool:
    y = node.body.block.last_op
    assert isinstance(y, YieldOp)
    c = y.stored.owner
    return (node.reduce.data == "none" and node.init is None and not node.dynamic_positions
            and isinstance(c, ConstOp) and c.value.value.data == 0)


def _classify(tensors: dict[str, TensorOp], pos: int, node: NodeOp) -> _Node:
    ok = (node.reduce.data in ("none", "add") and not node.dynamic_positions
          and tensors[node.output_name].dtype in FLOAT_DTYPES and all(s == 1 for s in NodeOp.ints(node.steps))
          and all(k.data != "sequential" for k in node.get_iterator_types().data))
    if ok and node.reduce.data == "none" and reduced_dims(node):
        ok = False  # `=` over a variable the target does not index keeps the last value: not a sum
    got = body_factors(node) if ok else None
    if got is not None and not any(f.tensor is not None for f in got[0]):
        got = None  # a literal fill is not a product of tensors
    factors, values = (tuple(got[0]), tuple(got[1])) if got is not None else (None, ())
    return _Node(pos, node, factors, values, _is_zero_fill(node))


def _out_index(node: NodeOp) -> tuple[AffExpr, ...]:
    return from_map(node.get_indexing_maps().data[-1].data, node.iv_names)


def _out_vars(n: _Node) -> list[tuple[str, int]] | None:
    """(variable, offset) per output dimension when each is a distinct variable plus a constant and
    every variable of the target occurs: the write is a bijection onto its image."""
    idx = _out_index(n.op)
    target_vars = set().union(*(i.vars() for i in idx)) if idx else set()
    out = []
    for i in idx:
        if len(i.terms) != 1 or not isinstance(i.terms[0][0], str) or i.terms[0][1] != 1:
            return None
        out.append((i.terms[0][0], i.const))
    names = [v for v, _ in out]
    return out if len(set(names)) == len(names) == len(target_vars) else None


# ---- use-def helpers ------------------------------------------------------------------------------------
def _next_writer(v: SSAValue) -> NodeOp | None:
    """The node that takes tensor value `v` as its init: the next writer of that tensor. Read off
    `v`'s uses directly (an init is an operand of the node itself): a value with many readers is
    not sorted into program order for the one writer among them."""
    found: dict[int, NodeOp] = {}
    for use in v.uses:
        op = use.operation
        if isinstance(op, NodeOp) and op.dest is v:
            found[id(op)] = op
    if len(found) < 2:
        return next(iter(found.values()), None)
    return next(u for u in value_consumers(v) if u.dest is v)  # not SSA: the first in program order


def _readers(v: SSAValue) -> list[NodeOp]:
    """The nodes that read tensor value `v` (an input or a gather's source; not as their init)."""
    return [u for u in value_consumers(v)
            if any(x is v for x in u.ins) or any(g.source is v for g in u.gathers())]


# ---- trees ----------------------------------------------------------------------------------------------
def program_trees(graph: GraphOp, reorderable_only: bool = False) -> list[Tree]:
    """The maximal trees of product nodes of a graph (every one, trivial ones included; with
    `reorderable_only`, not the trees of one node with at most two tensor factors, which have no
    other order: their joint form is not built, most of a large network's trees)."""
    tensors = graph.tensor_ops()
    nodes = [_classify(tensors, i, op) for i, op in enumerate(graph.nodes())]
    at = {id(n.op): n for n in nodes}
    producer: dict[str, tuple[int, int | None]] = {}   # intermediate -> (producer, its zero fill)
    leaves: dict[int, int] = {}   # a node's leaf factors, its private intermediates substituted
    readers: dict[str, tuple[int, ...]] = {}
    for n in nodes:
        if n.factors is None:
            continue
        leaves[n.pos] = sum(leaves[producer[f.tensor][0]] if f.tensor in producer else 1
                            for f in n.factors if f.tensor is not None)
        edge = _private(tensors, at, n)
        if edge is not None and (edge[2] == 1 or edge[2] * leaves[n.pos] <= MAX_COPIED_LEAVES):
            producer[n.target] = edge[:2]
            readers[n.target] = edge[3]
    _one_tree_each(nodes, producer, readers)
    child_of = {producer[t][0]: t for t in producer}
    trees = []
    for n in nodes:
        if n.factors is None or n.pos in child_of:
            continue
        members = _members(nodes, n, producer)
        if reorderable_only and len(members) == 1 and sum(f.tensor is not None for f in n.factors) <= 2 \
                and not summed_alone(n.factors, _out_index(n.op)):
            continue  # one node (no factor is an intermediate): its tensor factors are the tree's
        if not _leaves_stable(at, members, n, producer):
            continue
        tree = _joint(graph.kernel_name, tensors, nodes, n, members, producer)
        if tree is not None:
            trees.append(tree)
    return trees


def _one_tree_each(nodes: Sequence[_Node], producer: dict[str, tuple[int, int | None]],
                   readers: dict[str, tuple[int, ...]]) -> None:
    """Drop the intermediates read by nodes of two trees or more (each tree would need the value,
    which no one of them may then compute alone), until none is left; a drop can split a tree, so
    the roots are found again each round."""
    while True:
        def root(pos: int) -> int:
            t = nodes[pos].target
            return pos if t not in producer else root(readers[t][0])
        split = [t for t, rs in readers.items() if t in producer and len({root(r) for r in rs}) > 1]
        if not split:
            return
        for t in split:
            del producer[t]


def summed_alone(factors: Sequence[Factor], out_index: Sequence[AffExpr]) -> bool:
    """Whether a product of two tensor factors sums over a variable only one of them reads, which
    that factor may be summed over alone first (`sum_ij a_i b_j` is `sum(a) sum(b)`): the one order
    of a one-node tree other than as written."""
    tensors = [f for f in factors if f.tensor is not None]
    if len(tensors) != 2:
        return False
    out = set().union(*(i.vars() for i in out_index)) if out_index else set()
    a, b = (f.vars() - out for f in tensors)
    return bool(a ^ b)


def _private(tensors: dict[str, TensorOp], at: dict[int, _Node], n: _Node) -> Edge | None:
    """(producer, zero fill, reads, readers) when the output of product node `n` may be a private
    intermediate: its tensor is local, written by `n` alone (after a zero fill where `n` sums onto
    it), and read only by later product nodes (`readers`), which read only elements it defines,
    `reads` times in all. `program_trees` keeps it when every reader belongs to one tree, which
    substitutes each read by its own copy of the producer's sum: `y = a @ a; y @ y` has the leaves
    `a a a a`, and so has `g = a @ a; g @ (g @ v)` with `v`."""
    t = n.target
    if n.factors is None or tensors[t].role.data != "local" or _out_vars(n) is None:
        return None
    op = n.op
    if _next_writer(op.result) is not None:
        return None  # written again later
    fill = None
    first = op
    if op.reduce.data == "add" and op.init is None:
        f = init_producer(op)
        if f is None or not at[id(f)].fill or init_producer(f) is not None:
            return None
        fill, first = at[id(f)].pos, f
    elif init_producer(op) is not None:
        return None
    assert first.dest is not None
    if _readers(first.dest) or (first is not op and _readers(first.result)):
        return None  # the tensor's earlier values are read
    readers = [at[id(u)] for u in _readers(op.result)]
    if not readers or any(c.factors is None for c in readers):
        return None
    reads = [(c, f) for c in readers for f in c.factors or () if f.tensor == t]
    if len(reads) < len(readers) or any(f.divide for _, f in reads):
        return None  # a sum in a denominator does not distribute
    if first is not op:
        def_set = _image(first, t, _out_index(first), first.get_num_loops(), len(_guards(first)))
    elif op.init is not None:
        loops, conds = NodeOp.ints(op.init_depth)
        def_set = _image(op, t, _out_index(op), loops, conds)
    else:
        def_set = _image(op, t, _out_index(op), op.get_num_loops(), len(_guards(op)))
    if not all(_same_space_subset(_image(c.op, t, f.indices, c.op.get_num_loops(), len(_guards(c.op))),
                                  def_set) for c, f in reads):
        return None
    return n.pos, fill, len(reads), tuple(c.pos for c in readers)


def _guards(node: NodeOp) -> tuple[AffCond, ...]:
    return from_set(node.guards.data, node.iv_names) if node.guards is not None else ()


def _conds(node: NodeOp, loops: int, guards: int) -> list[AffCond]:
    """The constraints of the node's first `loops` loops (bounds, steps) and its first `guards`
    guards: its domain, or its folded init's."""
    ivs = node.iv_names
    lbs = from_map(node.lower_bounds.data, ivs)
    ubs = from_map(node.upper_bounds.data, ivs)
    steps = NodeOp.ints(node.steps)
    out: list[AffCond] = []
    for d in range(loops):
        v = AffExpr.var(ivs[d])
        out += [AffCond.compare(v, ">=", lbs[d]), AffCond.compare(v, "<", ubs[d])]
        if steps[d] != 1:
            out.append(AffCond((v - lbs[d]) % steps[d], "=="))
    return out + list(_guards(node)[:guards])


def _image(node: NodeOp, tensor: str, index: Sequence[AffExpr], loops: int, guards: int) -> isl.Set:
    """The elements of `tensor` that `index` touches over the node's first `loops` loops and
    `guards` guards."""
    ivs = node.iv_names[:loops]
    cons = " and ".join(c.to_isl() for c in _conds(node, loops, guards)) or "true"
    return isl.Map(f"{{ S[{', '.join(ivs)}] -> {tensor}[{', '.join(i.to_isl() for i in index)}] : {cons} }}"
                   ).range()


def _same_space_subset(a: isl.Set, b: isl.Set) -> bool:
    try:
        return a.is_subset(b)
    except isl.Error:
        return False


def _members(nodes: Sequence[_Node], root: _Node, producer: dict[str, tuple[int, int | None]]) -> list[_Node]:
    out, stack, seen = [], [root], set()
    while stack:
        n = stack.pop()
        if n.pos in seen:
            continue  # an intermediate read twice (its copies are in the joint form, not here)
        seen.add(n.pos)
        out.append(n)
        assert n.factors is not None
        stack += [nodes[producer[f.tensor][0]] for f in n.factors if f.tensor in producer]
    return sorted(out, key=lambda x: x.pos)


def _leaves_stable(at: dict[int, _Node], members: Sequence[_Node], root: _Node,
                   producer: dict[str, tuple[int, int | None]]) -> bool:
    """No leaf a member reads is written again before the root (the tree is computed at the root),
    and the root's output is not read inside the tree: the writers after the value a member reads
    are its use-def chain of inits."""
    inside = {m.pos for m in members}
    for m in members:
        for f, v in zip(m.factors or (), m.values, strict=True):
            if f.tensor is None or f.tensor in producer:
                continue
            if f.tensor == root.target:
                return False
            assert v is not None
            w = _next_writer(v)
            while w is not None and at[id(w)].pos <= root.pos:
                if at[id(w)].pos > m.pos and at[id(w)].pos not in inside:
                    return False
                w = _next_writer(w.result)
    return True


# ---- the joint form -------------------------------------------------------------------------------------
class _Builder:
    def __init__(self) -> None:
        self.vars: list[str] = []
        self.ranges: Ranges = {}
        self.factors: list[Factor] = []
        self.constraints: list[AffCond] = []

    def fresh(self, base: str, rng: tuple[int, int]) -> str:
        name, k = base, 1
        while name in self.ranges or name in self.vars:
            name, k = f"{base}_{k}", k + 1
        self.vars.append(name)
        self.ranges[name] = rng
        return name


def _joint(kernel: str, tensors: dict[str, TensorOp], nodes: Sequence[_Node], root: _Node,
           members: Sequence[_Node], producer: dict[str, tuple[int, int | None]]) -> Tree | None:
    b = _Builder()
    words: dict[int, str] = {}

    def visit(n: _Node, env: dict[str, AffExpr]) -> str:
        op = n.op
        for iv, rng in zip(op.iv_names, op.get_static_loop_intervals(), strict=True):
            if iv not in env:
                env[iv] = AffExpr.var(b.fresh(iv, rng))
        b.constraints += [c.substitute(env) for c in _conds(op, op.get_num_loops(), len(_guards(op)))]
        parts = []
        for f in n.factors or ():
            if f.tensor is not None and f.tensor in producer:
                child = nodes[producer[f.tensor][0]]
                ov = _out_vars(child)
                assert ov is not None
                sub = {v: i.substitute(env) - off for (v, off), i in zip(ov, f.indices, strict=True)}
                parts.append(visit(child, sub))
            else:
                g = replace(f, indices=tuple(i.substitute(env) for i in f.indices))
                b.factors.append(g)
                parts.append(("1 / " if f.divide else "") + (f.tensor or f"{f.value:g}"))
        words[n.pos] = "(" + " * ".join(parts) + ")" if len(parts) > 1 else parts[0]
        return words[n.pos]

    root_env: dict[str, AffExpr] = {}
    written = visit(root, root_env)
    rop = root.op
    out_index = [i.substitute(root_env) for i in _out_index(rop)]
    own: list[AffCond] | None = None
    if rop.init is not None:
        init = "folded"
        own = _conds(rop, *NodeOp.ints(rop.init_depth))
    elif rop.reduce.data == "add":
        init = "separate"
    else:
        init, own = "none", _conds(rop, rop.get_num_loops(), len(_guards(rop)))
    init_conds = [c.substitute(root_env) for c in own] if own is not None else []
    exprs = _Exprs(b.factors, out_index, b.constraints, init_conds)
    if not _delinearise(b, exprs):
        return None
    units = {v: AffExpr.lit(b.ranges[v][0]) for v in b.vars if b.ranges[v][0] == b.ranges[v][1]}
    exprs.map(partial(AffExpr.substitute, env=units))  # a variable of one value is a constant
    b.vars = [v for v in b.vars if v not in units]
    cons = _essential(exprs.constraints, b.ranges)
    if cons is None:
        return None
    factor_vars = set().union(*(f.vars() for f in exprs.factors))
    out_vars = set().union(*(i.vars() for i in exprs.out_index)) if exprs.out_index else set()
    if set(b.vars) - factor_vars or out_vars - factor_vars:
        return None  # a variable no factor indexes (a repeated sum, a broadcast): not an einsum
    fills = tuple(nodes[producer[t][1]].name for m in members for t in [m.target]
                  if m is not root and producer[t][1] is not None)
    locs = tuple(dict.fromkeys(loc for m in members for loc in _locs(m.op.location) if loc))
    return Tree(
        kernel=kernel, root=root.name, nodes=tuple(m.name for m in members), fills=fills,
        intermediates=tuple(m.target for m in members if m is not root), output=root.target,
        out_index=tuple(exprs.out_index), vars=tuple(b.vars), ranges=tuple(b.ranges[v] for v in b.vars),
        factors=tuple(exprs.factors), constraints=tuple(cons), init=init,
        init_conds=tuple(_essential(exprs.init_conds, b.ranges) or ()),
        dtype=tensors[root.target].dtype, written=written, locs=locs,
        loc=_locs(rop.location)[-1], origin=rop.origin.origin if rop.origin is not None else None,
        init_origin=rop.init_origin.origin if rop.init is not None and rop.init_origin is not None else None,
        sums=sum(m.sums for m in members))


def _locs(loc: Attribute) -> list[str | None]:
    """(init, main) source positions of a node with a folded init (a fused location), else its one."""
    if isinstance(loc, FusedLoc) and len(loc.locations.data) == 2:
        return [location_text(x) for x in loc.locations.data]
    return [location_text(loc)]


@dataclass
class _Exprs:
    """Every affine expression of a tree under construction (rewritten together by a split)."""

    factors: list[Factor]
    out_index: list[AffExpr]
    constraints: list[AffCond]
    init_conds: list[AffCond]

    def map(self, fn) -> None:  # noqa: ANN001 - AffExpr -> AffExpr
        self.factors = [replace(f, indices=tuple(fn(i) for i in f.indices)) for f in self.factors]
        self.out_index = [fn(i) for i in self.out_index]
        self.constraints = [AffCond(fn(c.expr), c.op) for c in self.constraints]
        self.init_conds = [AffCond(fn(c.expr), c.op) for c in self.init_conds]

    def atoms(self) -> list[FloorDiv | Mod]:
        out: list[FloorDiv | Mod] = []
        exprs = [i for f in self.factors for i in f.indices] + self.out_index + \
            [c.expr for c in self.constraints + self.init_conds]
        for e in exprs:
            out += [a for a, _ in e.terms if not isinstance(a, str)]
        return out


def _delinearise(b: _Builder, ex: _Exprs) -> bool:
    """Split every variable used as `v // d` and `v % d` (d dividing its extent) into two, then
    simplify: a flattened view indexes the tree's tensors by its two variables again."""
    for _ in range(4 * len(b.vars) + 4):
        ex.map(lambda e: simplify_affine(e, b.ranges))
        split = None
        for a in ex.atoms():
            num = a.num
            if len(num.terms) != 1 or not isinstance(num.terms[0][0], str):
                continue
            v, coef = num.terms[0]
            d = a.den // math.gcd(abs(coef), a.den)
            lo, hi = b.ranges[v]
            if d > 1 and lo == 0 and (hi + 1) % d == 0 and hi + 1 > d:
                split = (v, d)
                break
        if split is None:
            return True
        v, d = split
        at = b.vars.index(v)
        lo_ext = (b.ranges[v][1] + 1) // d
        del b.ranges[v]
        b.vars.remove(v)
        hi_name = b.fresh(f"{v}h", (0, lo_ext - 1))
        lo_name = b.fresh(f"{v}l", (0, d - 1))
        b.vars.remove(hi_name)
        b.vars.remove(lo_name)
        b.vars[at:at] = [hi_name, lo_name]
        ex.map(partial(AffExpr.substitute, env={v: AffExpr.var(hi_name) * d + AffExpr.var(lo_name)}))
    return False


def _essential(conds: Sequence[AffCond], ranges: Ranges) -> list[AffCond] | None:
    """The constraints the variable ranges do not imply, without repeats; None if one can never
    hold (an empty tree)."""
    out: list[AffCond] = []
    for c in conds:
        lo, hi = c.expr.bounds(ranges)
        if c.op == ">=" and lo >= 0 or c.op == "==" and lo == hi == 0:
            continue
        if c.op == ">=" and hi < 0 or c.op == "==" and (lo > 0 or hi < 0):
            return None
        if c not in out:
            out.append(c)
    return out
