"""The structured-op interface of an `einsum.node`, read from the op alone (no loop AST).

`dialects/einsum.py` gives what the op's attributes say (`get_indexing_maps`, `get_iterator_types`,
`get_static_loop_ranges`, `derived_iterator_types`); this module gives what needs a polyhedral
library or a walk of the scalar body, figure-neutral, for any analysis pass to build on:

* `domain(node)`: the iteration domain (bounds, steps, guards) as an isl set over `d0..d{n-1}`,
  and `points(node)`, its exact point count. Both are cached on the attributes that define the
  domain, not on the op's identity: a rewrite that changes a bound gets a fresh domain.
* `accesses(node)`: every tensor access: tensor, indexing map, read or write, direct or indirect
  (an `einsum.gather`, or an output map with symbols: a scatter), and the accumulator read of a
  reduction whose identity init was not folded into the node.
* `body_ops(node)` / `op_counts(node)`: the scalar ops of the body reachable from its yield, and
  how many of each kind (`loop.binary:mul`, `loop.unary:exp`, `einsum.gather`, ...) run per point.
* `node_counts(node)`: points, unit and FLOPs by class with the rules of `analysis/costs.py` (a
  test checks them equal on every node of the bundled examples): matrix FLOPs of a contraction,
  vector FLOPs counted literally (`OpCost.vector_literal`) and transcendentals counted literally.
  The *minimal* vector work (`vector_work.py`: common subexpressions across statements, loop-
  invariant terms once) and the bytes (unions of footprints over a program) are program-level
  analyses and stay there.
* `producer(node, i)`, `init_producer(node)`, `consumers(node)`: the graph's edges as use-def
  chains (the SSA operands `einsum.link_edges` gives a node), not names searched in program order.

Counting splits the domain's dimensions into groups no constraint couples and counts each alone
(`count_val` of a 7-deep convolution domain does not finish; its groups take milliseconds).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import cmp_to_key, lru_cache

import islpy as isl
from xdsl.dialects.builtin import AffineMapAttr, AffineSetAttr, DenseArrayBase, TensorType
from xdsl.ir import BlockArgument, Operation, SSAValue
from xdsl.ir.affine import (
    AffineBinaryOpExpr,
    AffineBinaryOpKind,
    AffineConstantExpr,
    AffineDimExpr,
    AffineExpr,
    AffineMap,
    AffineSymExpr,
)
from xdsl.ir.affine.affine_set import AffineConstraintKind
from xdsl.utils.disjoint_set import DisjointSet

from solar_compiler.analysis.manager import identity_table
from solar_compiler.dialects.einsum import GatherOp, GraphOp, IndexOp, NodeOp, TensorOp, YieldOp
from solar_compiler.dialects.loop import BinaryOp, CastOp, CmpOp, ConstOp, SelectOp, UnaryOp
from solar_compiler.loopir.rules import TRANSCENDENTAL, nbytes

_FLOP_OPS = (UnaryOp, BinaryOp, CmpOp, SelectOp)  # 1 FLOP each; (bit) casts, reads, literals are free


# ---- edges: use-def chains -----------------------------------------------------------------------
def producer(node: NodeOp, i: int) -> NodeOp | None:
    """The node whose result input `i` reads (the last earlier node that wrote that tensor), or None
    where it reads the tensor's initial value (an input, a weight, or storage no node wrote yet)."""
    owner = node.ins[i].owner
    return owner if isinstance(owner, NodeOp) else None


def init_producer(node: NodeOp) -> NodeOp | None:
    """The node whose result is this node's init (destination): the earlier writer of its output
    whose elements this node leaves as they are (a partial write) or updates (a reduction)."""
    dest = node.dest
    assert dest is not None, f"node {node.sym_name.data}: edges not linked"
    owner = dest.owner
    return owner if isinstance(owner, NodeOp) else None


def value_consumers(v: SSAValue) -> list[NodeOp]:
    """The nodes that use a tensor value: as an input, as the source of a gather in their body, or
    as their init; each once, in program order (the graph's `einsum.return` is not a node)."""
    found: dict[int, NodeOp] = {}
    for use in v.uses:
        op = use.operation
        if isinstance(op, GatherOp):
            op = op.parent_op()
        if isinstance(op, NodeOp):
            found[id(op)] = op
    if len(found) < 2:
        return list(found.values())
    # program order by walking from each to the next (the consumers of a value sit near each other
    # far more often than the graph is short: numbering the whole block per call was quadratic)
    return sorted(found.values(), key=cmp_to_key(lambda a, b: -1 if a.is_before_in_block(b) else 1))


def consumers(node: NodeOp) -> list[NodeOp]:
    """The nodes that use this node's result (`value_consumers` of it): its readers, and the next
    writer of its output tensor, which takes it as init."""
    return value_consumers(node.result)


# ---- the iteration domain ------------------------------------------------------------------------
def isl_expr(e: AffineExpr) -> str:
    """An affine expression in isl syntax over dims `d<i>` and symbols `s<i>`."""
    if isinstance(e, AffineDimExpr):
        return f"d{e.position}"
    if isinstance(e, AffineSymExpr):
        return f"s{e.position}"
    if isinstance(e, AffineConstantExpr):
        return str(e.value)
    assert isinstance(e, AffineBinaryOpExpr)
    a, b = isl_expr(e.lhs), isl_expr(e.rhs)
    match e.kind:
        case AffineBinaryOpKind.Add:
            return f"({a} + {b})"
        case AffineBinaryOpKind.Mul:  # isl wants the constant factor first
            return f"({b} * {a})" if isinstance(e.rhs, AffineConstantExpr) else f"({a} * {b})"
        case AffineBinaryOpKind.Mod:
            return f"({a} mod {b})"
        case AffineBinaryOpKind.FloorDiv:
            return f"floor({a}/{b})"
        case AffineBinaryOpKind.CeilDiv:
            return f"ceil({a}/{b})"


def dims_of(e: AffineExpr) -> frozenset[int]:
    if isinstance(e, AffineDimExpr):
        return frozenset((e.position,))
    if isinstance(e, AffineBinaryOpExpr):
        return dims_of(e.lhs) | dims_of(e.rhs)
    return frozenset()


@dataclass(frozen=True)
class Constraint:
    """One constraint of a domain in isl syntax, with the dims it couples."""

    text: str
    dims: frozenset[int]


DomainKey = tuple[int, AffineMapAttr, AffineMapAttr, DenseArrayBase, AffineSetAttr | None]


class _KeptHashKey(tuple):
    """A domain key that keeps its hash: hashing the attributes walks their affine expressions, and
    the counts below look a node's key up tens of thousands of times on a large network."""

    def __hash__(self) -> int:
        got = self.__dict__.get("_hash")
        if got is None:
            got = self.__dict__["_hash"] = tuple.__hash__(self)
        return got


# one key object per set of domain attributes, by their identity (attributes are immutable and a
# cloned node shares its original's): a cache lookup then finds the stored key by identity. An entry
# keeps its attributes alive, so their ids are not reused while it stands.
_KEYS: dict[tuple[int, ...], _KeptHashKey] = identity_table()
_KEYS_MAX = 1 << 16


def domain_key(node: NodeOp) -> DomainKey:
    """The attributes that define a node's domain: the cache key of everything counted on it."""
    n, lbs, ubs, steps, guards = (node.get_num_loops(), node.lower_bounds, node.upper_bounds, node.steps,
                                  node.guards)
    ids = (n, id(lbs), id(ubs), id(steps), id(guards))
    key = _KEYS.get(ids)
    if key is not None and key[1] is lbs and key[2] is ubs and key[3] is steps and key[4] is guards:
        return key  # type: ignore[return-value]
    key = _KeptHashKey((n, lbs, ubs, steps, guards))
    if len(_KEYS) >= _KEYS_MAX:
        _KEYS.clear()
    _KEYS[ids] = key
    return key  # type: ignore[return-value]


@lru_cache(maxsize=16384)
def _constraints(key: DomainKey) -> tuple[Constraint, ...]:
    n, lbs, ubs, steps, guards = key
    out: list[Constraint] = []
    for i, (lb, ub, st) in enumerate(zip(lbs.data.results, ubs.data.results,
                                         NodeOp.ints(steps), strict=True)):
        d = frozenset({i})
        lo, hi = isl_expr(lb), isl_expr(ub)
        out.append(Constraint(f"d{i} >= {lo}", d | dims_of(lb)))
        out.append(Constraint(f"d{i} < {hi}", d | dims_of(ub)))
        if st != 1:
            out.append(Constraint(f"(d{i} - {lo}) mod {st} = 0", d | dims_of(lb)))
    if guards is not None:
        for c in guards.data.constraints:
            e = isl_expr(c.lhs - c.rhs)
            op = {AffineConstraintKind.ge: ">=", AffineConstraintKind.le: "<=",
                  AffineConstraintKind.eq: "="}[c.kind]
            out.append(Constraint(f"{e} {op} 0", dims_of(c.lhs) | dims_of(c.rhs)))
    assert all(max(c.dims, default=-1) < n for c in out)
    return tuple(out)


def _isl_set(dims: Sequence[int], cons: Iterable[Constraint]) -> isl.Set:
    body = " and ".join(c.text for c in cons) or "true"
    return isl.Set(f"{{ S[{', '.join(f'd{i}' for i in dims)}] : {body} }}")


@lru_cache(maxsize=16384)
def _domain(key: DomainKey) -> isl.Set:
    return _isl_set(range(key[0]), _constraints(key))


def domain(node: NodeOp) -> isl.Set:
    """The node's iteration domain `{ S[d0, ..., d{n-1}] : bounds, steps, guards }`."""
    return _domain(domain_key(node))


def _groups(n: int, cons: Sequence[Constraint], extra: Iterable[frozenset[int]] = ()) -> list[list[int]]:
    """Dims split into classes no constraint (or `extra` set) couples (xDSL's `DisjointSet`), in the
    order of their first dim."""
    sets = DisjointSet(range(n))
    for ds in [c.dims for c in cons] + list(extra):
        ds = sorted(ds)
        for d in ds[1:]:
            sets.union(ds[0], d)
    out: dict[int, list[int]] = {}
    for d in range(n):
        out.setdefault(sets.find(d), []).append(d)
    return list(out.values())


@lru_cache(maxsize=16384)
def _count(dims: tuple[int, ...], cons: tuple[Constraint, ...], keep: tuple[int, ...] | None = None) -> int:
    """Points of `{dims : cons}`, or of its projection onto `keep` (None: no projection)."""
    s = _isl_set(dims, cons)
    if keep is not None and len(keep) < len(dims):
        drop = [i for i, d in enumerate(dims) if d not in keep]
        for i in reversed(drop):
            s = s.project_out(isl.dim_type.set, i, 1)
    return s.count_val().to_python()


def _count_product(key: DomainKey, keep: frozenset[int] | None) -> int:
    cons = _constraints(key)
    if any(not c.dims for c in cons) and _count((), tuple(c for c in cons if not c.dims)) == 0:
        return 0  # a false constant guard empties the domain
    total = 1
    for g in _groups(key[0], cons):
        gs = set(g)
        gc = tuple(c for c in cons if c.dims and c.dims <= gs)
        if keep is not None and not gs & keep:
            if _count(tuple(g), gc) == 0:
                return 0
            continue
        k = None if keep is None or gs <= keep else tuple(d for d in g if d in keep)
        total *= _count(tuple(g), gc, k)
        if total == 0:
            return 0
    return total


@lru_cache(maxsize=16384)
def _points(key: DomainKey) -> int:
    return _count_product(key, None)


def points(node: NodeOp) -> int:
    """Exact number of points of the node's iteration domain."""
    return _points(domain_key(node))


def footprint(node: NodeOp, dims: Iterable[int]) -> int:
    """Distinct values of the loop variables `dims` over the domain (its projection's points)."""
    return _footprint(domain_key(node), frozenset(dims))


@lru_cache(maxsize=65536)
def _footprint(key: DomainKey, keep: frozenset[int]) -> int:
    return _count_product(key, keep)


# ---- accesses ------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Access:
    """One tensor access of a node. `indirect`: some positions are loaded values (the map's
    symbols: a gather's index operands, a scatter's extra yield values). `kind`: input (a block
    argument), gather, output, or accumulator (the read of the output a reduction combines into
    when its identity init is not folded into the node)."""

    tensor: str
    map: AffineMap
    write: bool
    indirect: bool
    kind: str


def accesses(node: NodeOp) -> list[Access]:
    maps = [m.data for m in node.get_indexing_maps().data]
    out = [Access(t, m, False, False, "input") for t, m in zip(node.input_names, maps, strict=False)]
    out += [Access(o.tensor_name, o.map.data, False, True, "gather") for o in body_ops(node)
            if isinstance(o, GatherOp)]
    scatter = bool(node.dynamic_positions)
    if node.reduce.data != "none" and node.init is None:
        out.append(Access(node.output_name, maps[-1], False, scatter, "accumulator"))
    out.append(Access(node.output_name, maps[-1], True, scatter, "output"))
    return out


def _image(dims: tuple[int, ...], cons: tuple[Constraint, ...], results: tuple[AffineExpr, ...]) -> int:
    return _image_of(dims, cons, tuple(isl_expr(r) for r in results), any(_quasi(r) for r in results))


def _quasi(e: AffineExpr) -> bool:
    """Whether `e` has a div or mod (a view's index arithmetic: a window partition, a roll)."""
    return isinstance(e, AffineBinaryOpExpr) and (
        e.kind not in (AffineBinaryOpKind.Add, AffineBinaryOpKind.Mul) or _quasi(e.lhs) or _quasi(e.rhs))


@lru_cache(maxsize=65536)
def _image_of(dims: tuple[int, ...], cons: tuple[Constraint, ...], results: tuple[str, ...],
              quasi: bool) -> int:
    """Distinct values of `results` over the domain. A div/mod map that isl proves injective
    (milliseconds) has one element per point, and its domain is counted: counting its range took
    64 s for one of SwinMLP's window partitions (3e6 points), the rule `costs._piece_count` applies
    on the loop-AST path."""
    body = " and ".join(c.text for c in cons) or "true"
    m = isl.Map(f"{{ S[{', '.join(f'd{i}' for i in dims)}] -> T[{', '.join(results)}] : {body} }}")
    if quasi and m.is_injective():
        return m.domain().count_val().to_python()
    return m.range().count_val().to_python()


def image_count(node: NodeOp, results: Sequence[AffineExpr]) -> int:
    """Distinct values of the affine `results` over the domain (the elements an access with these
    indices touches), factored over the groups of dims that neither a constraint nor an index
    couples. Cached on the domain's attributes and the results, as every count here is."""
    return _image_count(domain_key(node), tuple(results))


@lru_cache(maxsize=65536)
def _image_count(key: DomainKey, results: tuple[AffineExpr, ...]) -> int:
    cons = _constraints(key)
    if any(not c.dims for c in cons) and _count((), tuple(c for c in cons if not c.dims)) == 0:
        return 0
    used = [dims_of(r) for r in results]
    total = 1
    for g in _groups(key[0], cons, used):
        gs = set(g)
        gc = tuple(c for c in cons if c.dims and c.dims <= gs)
        rs = tuple(r for r, u in zip(results, used, strict=True) if u and u <= gs)
        if not rs:
            total *= min(_count(tuple(g), gc), 1)
        elif gs <= {r.position for r in rs if isinstance(r, AffineDimExpr)}:
            total *= _count(tuple(g), gc)  # every dim read off one result: one element per point
        else:
            total *= _image(tuple(g), gc, rs)
        if total == 0:
            return 0
    return total


def tensor_elements(node: NodeOp, tensor: str, write: bool, traced: bool = False) -> int:
    """Distinct elements of `tensor` the node reads (or writes): the union of its direct accesses'
    images; an indirect access counts the fewest it can touch over all index values (the distinct
    positions of its affine dims, 1 per loaded one), the rule of `costs.py` with indirect="min";
    with `traced`, at least what the traced sample touched where `traced_elements` applies (the
    rule with indirect="traced")."""
    acc = [a for a in accesses(node) if a.tensor == tensor and a.write == write]
    return _footprint_of(node, acc, traced).elements if acc else 0


@dataclass(frozen=True)
class Footprint:
    """What a node moves of one tensor in one direction: distinct elements (`tensor_elements`),
    whether an access is indirect, and whether the traced sample's footprint counted it."""

    tensor: str
    write: bool
    elements: int
    indirect: bool
    traced: bool


def footprints(node: NodeOp, traced: bool = False) -> list[Footprint]:
    """The node's reads per tensor in the statement's order (`read_tensors`), then its write: what
    it moves if it runs alone (unfused); `traced` as in `tensor_elements`."""
    acc = accesses(node)
    keys = [(t, False) for t in read_tensors(node)] + [(node.output_name, True)]
    return [_footprint_of(node, [a for a in acc if a.tensor == t and a.write == w], traced) for t, w in keys]


def _footprint_of(node: NodeOp, acc: list[Access], traced: bool) -> Footprint:
    """The footprint of `acc`, accesses of one tensor in one direction (at least one)."""
    best, by_trace = 0, False
    for a in acc:
        if traced and a.indirect:  # a scatter's accumulator read is traced with its write
            t = traced_elements(node, a.tensor, a.write or a.kind == "accumulator")
            if t is not None:
                best, by_trace = max(best, t), True
    return Footprint(acc[0].tensor, acc[0].write, max(best, _min_elements(node, acc)),
                     any(a.indirect for a in acc), by_trace)


def _min_elements(node: NodeOp, acc: list[Access]) -> int:
    direct = list(dict.fromkeys(a.map.results for a in acc if not a.indirect))
    best = 0
    if len(direct) == 1:
        best = image_count(node, direct[0])
    elif direct:
        dom = domain(node)
        union = None
        for rs in direct:
            m = isl.Map(f"{{ S[{', '.join(f'd{i}' for i in range(node.get_num_loops()))}] -> "
                        f"T[{', '.join(isl_expr(r) for r in rs)}] }}").intersect_domain(dom).range()
            union = m if union is None else union.union(m)
        assert union is not None
        best = union.count_val().to_python()
    for a in acc:
        if a.indirect:
            affine = [r for r in a.map.results if not isinstance(r, AffineSymExpr)]
            best = max(best, image_count(node, affine))
            if a.kind == "gather":
                from solar_compiler.analysis.distinct_keys import key_floor  # it reads this module's domains
                best = max(best, key_floor(node, a.map, a.tensor))
    return best


def gather_count(node: NodeOp, tensor: str) -> int:
    """How many gathers of `tensor` the node's body has as an expression tree (a gather its SSA
    value reaches twice counts twice): the reads of `tensor` the traced sample counted."""
    memo: dict[SSAValue, int] = {}

    def count(v: SSAValue) -> int:
        if v not in memo:
            o = v.owner
            if isinstance(v, BlockArgument) or not isinstance(o, Operation):
                memo[v] = 0
            else:
                own = isinstance(o, GatherOp) and o.tensor_name == tensor
                memo[v] = own + sum(count(x) for x in o.operands)
        return memo[v]

    y = _yield(node)
    return sum(count(v) for v in (y.stored, *y.dyn_indices))


def conditional_store(node: NodeOp) -> bool:
    """Whether the node stores a select one branch of which is its target's own element
    (`T[i] = v if c else T[i]`, the loop IR's `Assign.kept_when`): it changes only the elements
    whose condition stores the new value, which depend on values (an in-place `masked_fill_`)."""
    if node.reduce.data != "none" or node.init is not None or node.dynamic_positions:
        return False
    v = stored_value(node).owner
    if not isinstance(v, SelectOp):
        return False
    maps = node.get_indexing_maps().data
    return any(isinstance(b, BlockArgument) and node.input_names[b.index] == node.output_name
               and maps[b.index] == maps[-1] for b in (v.a, v.b))


def traced_elements(node: NodeOp, tensor: str, write: bool) -> int | None:
    """The distinct elements of `tensor` the traced sample touched through the node's gathers (its
    scatter when `write`), from the node's `traced` records: only while the node keeps the domain
    (`points`) and the number of such accesses the trace was taken on; else None (a rewrite made
    it stale: the fewest over all index values applies)."""
    if node.traced is None:
        return None
    n = int((bool(node.dynamic_positions) or conditional_store(node)) and node.output_name == tensor) \
        if write else gather_count(node, tensor)
    for a in node.traced.data:
        t = a.traced
        if t.tensor == tensor and t.write == write:
            return t.elements if n and (t.points, t.accesses) == (points(node), n) else None
    return None


def read_tensors(node: NodeOp, values: Sequence[SSAValue] | None = None) -> list[str]:
    """The tensors the node's body reads, in the order its expression tree first reads them (value
    then dynamic output indices, each op before its operands): the order of the statement as
    written; the accumulator, when read, follows. Given `values` (body values, such as a select's
    condition), the tensors those are computed from, without the accumulator."""
    inputs = node.input_names
    seen: set[SSAValue] = set()
    out: dict[str, None] = {}
    roots = (_yield(node).stored, *_yield(node).dyn_indices) if values is None else tuple(values)
    stack = list(reversed(roots))
    while stack:
        v = stack.pop()
        if v in seen:
            continue
        seen.add(v)
        if isinstance(v, BlockArgument):
            out.setdefault(inputs[v.index])
            continue
        o = v.owner
        assert isinstance(o, Operation)
        if isinstance(o, GatherOp):
            out.setdefault(o.tensor_name)
        stack.extend(reversed(o.operands))
    if values is None and node.reduce.data != "none" and node.init is None:
        out.setdefault(node.output_name)
    return list(out)


def tensor_bytes(node: NodeOp, tensor: str, write: bool) -> int:
    """`tensor_elements` times the tensor's element size (`einsum.tensor` of the node's graph)."""
    graph = node.parent_op()
    assert isinstance(graph, GraphOp)
    return nbytes(graph.tensor_ops()[tensor].dtype, tensor_elements(node, tensor, write))


def node_bytes(node: NodeOp) -> tuple[dict[str, int], dict[str, int]]:
    """(bytes read, bytes written) per tensor: what one node moves if it runs alone (unfused)."""
    acc = accesses(node)
    reads = {a.tensor: tensor_bytes(node, a.tensor, False) for a in acc if not a.write}
    writes = {a.tensor: tensor_bytes(node, a.tensor, True) for a in acc if a.write}
    return reads, writes


def is_indirect(node: NodeOp) -> bool:
    return any(a.indirect for a in accesses(node))


# ---- the scalar body -----------------------------------------------------------------------------
def reachable(values: Iterable[SSAValue]) -> list[Operation]:
    """The body ops the values are computed from, each once (an SSA value used twice is computed
    once), operands before users."""
    seen: set[Operation] = set()
    order: list[Operation] = []
    stack: list[tuple[SSAValue, bool]] = [(v, False) for v in values]
    while stack:
        v, done = stack.pop()
        o = v.owner
        if isinstance(v, BlockArgument) or not isinstance(o, Operation):
            continue
        if done:
            if o not in seen:
                seen.add(o)
                order.append(o)
            continue
        if o in seen:
            continue
        stack.append((v, True))
        stack.extend((x, False) for x in o.operands)
    return order


def zero_start(node: NodeOp, outs: int) -> tuple[NodeOp | None] | None:
    """How an `add` reduction over its first `outs` (output) loops starts from zeros: a folded zero
    init at their depth (`(None,)`), or a zero fill of the whole tensor that only it reads
    (`(fill,)`); None when it starts from anything else."""
    if node.init is not None:
        ok = node.init.value.data == 0 and NodeOp.ints(node.init_depth) == (outs, 0)
        return (None,) if ok else None
    fill = init_producer(node)
    if fill is None or not whole_fill(fill, 0) or not isinstance(fill.dest.owner, TensorOp) or \
            [u.operation for u in fill.result.uses] != [node]:
        return None
    return (fill,)


def whole_fill(node: NodeOp, value: float) -> bool:
    """Whether the node stores the literal `value` in every element of its tensor, once each (a
    fill, such as an unfolded zero init): no reduction, guard or loaded position, an output map of
    distinct loop variables, as many points as the tensor has elements."""
    o = stored_value(node).owner
    out = node.get_indexing_maps().data[-1].data.results
    t = node.result.type
    return node.reduce.data == "none" and node.guards is None and not node.dynamic_positions and \
        isinstance(o, ConstOp) and o.value.value.data == value and isinstance(t, TensorType) and \
        all(isinstance(e, AffineDimExpr) for e in out) and len({e.position for e in out}) == len(out) and \
        points(node) == math.prod(t.get_shape())


def block_args(v: SSAValue) -> list[BlockArgument]:
    """The block arguments (the input reads) a body value is computed from, once each, in argument
    order."""
    seen: dict[int, BlockArgument] = {}
    stack = [v]
    while stack:
        x = stack.pop()
        if isinstance(x, BlockArgument):
            seen[x.index] = x
        elif isinstance(x.owner, Operation):
            stack.extend(x.owner.operands)
    return [seen[i] for i in sorted(seen)]


def _yield(node: NodeOp) -> YieldOp:
    y = node.body.block.last_op
    assert isinstance(y, YieldOp)
    return y


def stored_value(node: NodeOp) -> SSAValue:
    """The body value the node stores at each point (what its yield gives)."""
    return _yield(node).stored


def body_ops(node: NodeOp) -> list[Operation]:
    """The scalar ops of the node's body that its yield uses, operands first."""
    y = _yield(node)
    return reachable((y.stored, *y.dyn_indices))


def op_kind(o: Operation) -> str:
    """`loop.binary:add`, `loop.unary:exp`, `loop.cmp:lt`, `einsum.gather`, ..."""
    fn = o.properties.get("fn") or o.properties.get("pred")
    return f"{o.name}:{fn.data}" if fn is not None else o.name  # type: ignore[attr-defined]


def op_counts(node: NodeOp) -> Counter[str]:
    """How many scalar ops of each kind one point of the domain runs (its body as written)."""
    return Counter(op_kind(o) for o in body_ops(node))


def is_transcendental(o: Operation) -> bool:
    return (isinstance(o, UnaryOp) and o.fn.data in TRANSCENDENTAL) or \
        (isinstance(o, BinaryOp) and o.fn.data == "pow")


def literal_ops(values: Iterable[SSAValue]) -> tuple[int, int]:
    """(FLOP ops, transcendental ops) of one evaluation of `values` together."""
    ops = [o for o in reachable(values) if isinstance(o, _FLOP_OPS)]
    return len(ops), sum(map(is_transcendental, ops))


# ---- contractions --------------------------------------------------------------------------------
def _is_product(v: SSAValue) -> bool:
    o = v.owner
    while isinstance(o, CastOp):
        o = o.x.owner
    return (isinstance(o, UnaryOp) and o.fn.data == "neg") or \
        (isinstance(o, BinaryOp) and o.fn.data in ("mul", "div"))


def operand_factors(v: SSAValue) -> list[SSAValue]:
    """The factors a product multiplies: through multiplication, negation, a division's numerator,
    and a cast of a product (a cast of one factor stays on it: it decides the operand dtype)."""
    o = v.owner
    if isinstance(o, CastOp) and _is_product(o.x):
        return operand_factors(o.x)
    if isinstance(o, UnaryOp) and o.fn.data == "neg":
        return operand_factors(o.x)
    if isinstance(o, BinaryOp) and o.fn.data == "mul":
        return operand_factors(o.lhs) + operand_factors(o.rhs)
    if isinstance(o, BinaryOp) and o.fn.data == "div":
        return operand_factors(o.lhs)
    return [v]


def product_factors(v: SSAValue) -> list[SSAValue]:
    """`operand_factors` through every cast (what the multiply-adds multiply)."""
    o = v.owner
    if isinstance(o, CastOp) or (isinstance(o, UnaryOp) and o.fn.data == "neg"):
        return product_factors(o.operands[0])
    if isinstance(o, BinaryOp) and o.fn.data == "mul":
        return product_factors(o.lhs) + product_factors(o.rhs)
    if isinstance(o, BinaryOp) and o.fn.data == "div":
        return product_factors(o.lhs)
    return [v]


def structural_key(v: SSAValue, memo: dict[SSAValue, object] | None = None) -> object:
    """Equal keys for values that compute the same expression (common subexpressions)."""
    memo = {} if memo is None else memo
    if v not in memo:
        if isinstance(v, BlockArgument):
            memo[v] = ("arg", v.index)
        else:
            o = v.owner
            assert isinstance(o, Operation)
            memo[v] = (o.name, tuple(sorted(o.properties.items())), v.type,
                       tuple(structural_key(x, memo) for x in o.operands))
    return memo[v]


def reduced_dims(node: NodeOp) -> frozenset[int]:
    return frozenset(range(node.get_num_loops())) - node.output_dims()


def contraction_factors(node: NodeOp) -> list[SSAValue] | None:
    """The factors of a contraction that depend on a reduced dim (two or more), or None when the node
    is not a contraction: an `add` reduction of a product of two factors that each depend on a
    reduced dim (one multiply-add per point)."""
    if node.reduce.data != "add":
        return None
    red = reduced_dims(node)
    memo: dict[SSAValue, frozenset[int]] = {}
    dep = [f for f in operand_factors(_yield(node).stored) if node.value_dims(f, memo) & red]
    return dep if len(dep) >= 2 else None


def plain_contraction(node: NodeOp) -> bool:
    """A contraction whose reduced factors are stored values, read directly (a cast at most): no
    arithmetic and no gather makes a factor, so its multiply-adds are the products the contraction
    means, whichever loop nest wrote it (a one-hot gather written as a product is not one)."""
    factors = contraction_factors(node)
    if factors is None or node.dynamic_positions:
        return False
    ops = reachable(factors)
    return not any(isinstance(o, (*_FLOP_OPS, GatherOp)) for o in ops)


def llm_priced_products(nodes: Sequence[NodeOp]) -> set[int]:
    """Positions of the LLM-written nodes whose products are priced (docs/llm-frontend.md section 7):
    plain contractions none of whose operands is an *indicator* an LLM built: a value of a comparison
    or of a select between literals (a one-hot matrix, a comparison matrix for ranks, a triangle of
    ones built from indices), or any value computed from loop indices, and copies of those. A product
    by such a matrix is a gather, a count or a scan written as a contraction, not a product of the op."""
    indicators: set[str] = set()
    out: set[int] = set()
    for pos, n in enumerate(nodes):
        if n.origin is None or not n.origin.stand_in:
            continue
        reads = {t for t in n.input_names if t != n.output_name}
        if plain_contraction(n) and not reads & indicators:
            out.add(pos)
        elif _indicator(n) or (reads & indicators and not any(isinstance(o, _FLOP_OPS) for o in body_ops(n))):
            indicators.add(n.output_name)
    return out


def _indicator(n: NodeOp) -> bool:
    """The node stores a comparison's value or a select between literals, or computes from indices."""
    v = stored_value(n)
    o = v.owner
    while isinstance(o, CastOp):
        o = o.x.owner
    if isinstance(o, CmpOp) or (isinstance(o, SelectOp) and all(
            isinstance(b.owner, ConstOp) for b in (o.a, o.b))):
        return True
    return any(isinstance(x, IndexOp) for x in reachable((v,)))


def _contraction_flops(node: NodeOp, pts: int) -> tuple[int, int]:
    """(matrix, vector) FLOPs of a contraction, by the rules of `costs.contraction_flops`: each
    distinct factor's own ops once per distinct point of its loop variables; one MAC per point, or
    the cheapest pairwise order of three or more reduced factors (over the loop box, scaled by the
    domain's share of it), never above 2 per point."""
    red = reduced_dims(node)
    memo: dict[SSAValue, frozenset[int]] = {}
    keys: dict[SSAValue, object] = {}
    factors = list({structural_key(f, keys): f for f in product_factors(_yield(node).stored)}.values())
    vector = 0
    for f in factors:
        n = literal_ops((f,))[0]
        if n:
            dims = node.value_dims(f, memo)
            vector += n * (footprint(node, dims) if dims else 1)
    matrix = 2 * pts
    dep = [f for f in factors if node.value_dims(f, memo) & red]
    if len(dep) >= 3:
        matrix = min(matrix, _pairwise_flops(node, [node.value_dims(f, memo) for f in dep], pts))
    return matrix, vector


def _pairwise_flops(node: NodeOp, factor_dims: list[frozenset[int]], pts: int) -> int:
    import opt_einsum

    ranges = node.get_static_loop_intervals()  # a verified node's bounds are affine in outer loops
    n = node.get_num_loops()
    letter = [opt_einsum.get_symbol(d) for d in range(n)]
    out_dims = node.output_dims()
    out = "".join(letter[d] for d in range(n) if d in out_dims)
    terms = ["".join(letter[d] for d in range(n) if d in fd) for fd in factor_dims]
    extent = {letter[d]: hi - lo + 1 for d, (lo, hi) in enumerate(ranges)}
    shapes = [tuple(extent[c] for c in t) for t in terms]
    _, info = opt_einsum.contract_path(f"{','.join(terms)}->{out}", *shapes, shapes=True, optimize="optimal")
    box = math.prod(extent.values())
    return int(min(2 * pts, math.floor(int(info.opt_cost) * pts / box)))


# ---- operation counts ------------------------------------------------------------------------------
@dataclass(frozen=True)
class NodeCounts:
    """A node's operation counts (the rules of `analysis/costs.py`)."""

    points: int                # points of the (guarded) iteration domain
    unit: str                  # "matrix" (a contraction) | "vector" | "memory" (no FLOPs: a copy)
    flops_matrix: int          # a multiply-add = 2 FLOPs
    flops_vector_literal: int  # every other scalar op at every point (accumulation included)
    flops_transcendental_literal: int
    per_point: Counter[str]    # scalar op kinds one point runs (`op_counts`)
    sequential: bool           # a loop of the node is a scan's
    indirect: bool             # a gather or a scatter


def node_counts(node: NodeOp) -> NodeCounts:
    y = _yield(node)
    pts = points(node)
    n_ops, n_tr = literal_ops((y.stored,))
    for i in y.dyn_indices:  # a scatter's index arithmetic, counted apart as a gather's is
        a, b = literal_ops((i,))
        n_ops, n_tr = n_ops + a, n_tr + b
    accumulates = node.reduce.data != "none"
    if contraction_factors(node) is not None:
        fm, fv = _contraction_flops(node, pts)
        fv += sum(literal_ops((i,))[0] for i in y.dyn_indices) * pts
        unit = "matrix"
    else:
        fm, fv = 0, (n_ops + accumulates) * pts
        unit = "vector" if n_ops or accumulates else "memory"
    ops = body_ops(node)  # once: the per-point kinds, and whether it gathers (`is_indirect`)
    indirect = bool(node.dynamic_positions) or any(isinstance(o, GatherOp) for o in ops)
    return NodeCounts(pts, unit, fm, fv, n_tr * pts, Counter(op_kind(o) for o in ops),
                      any(k.data == "sequential" for k in node.get_iterator_types().data), indirect)


# ---- linear forms, domain groups and access relations (io_bounds, tiling, polyhedral) ---------------
def linear_form(e: AffineExpr) -> tuple[dict[int, int], int] | None:
    """(nonzero coefficient per dim, constant) of `e` when it is linear in the dims (no mod, floordiv,
    ceildiv, symbol), else None: the reuse theorems and the tile footprints need the coefficients."""
    if isinstance(e, AffineDimExpr):
        return {e.position: 1}, 0
    if isinstance(e, AffineConstantExpr):
        return {}, e.value
    linear_kinds = (AffineBinaryOpKind.Add, AffineBinaryOpKind.Mul)
    if not isinstance(e, AffineBinaryOpExpr) or e.kind not in linear_kinds:
        return None
    a, b = linear_form(e.lhs), linear_form(e.rhs)
    if a is None or b is None:
        return None
    if e.kind == AffineBinaryOpKind.Add:
        coeffs = dict(a[0])
        for d, c in b[0].items():
            coeffs[d] = coeffs.get(d, 0) + c
        return {d: c for d, c in coeffs.items() if c}, a[1] + b[1]
    if a[0] and b[0]:
        return None  # a product of two dims is not affine (the verifier refuses it; kept total here)
    (coeffs, k), scale = (a, b[1]) if not b[0] else (b, a[1])
    return {d: c * scale for d, c in coeffs.items() if c * scale}, k * scale


def domain_groups(node: NodeOp, extra: Iterable[frozenset[int]] = ()) \
        -> list[tuple[tuple[int, ...], tuple[Constraint, ...]]]:
    """The domain's dims in classes no constraint (nor `extra` set) couples, each with the constraints
    over its dims: counts over the domain are products over these classes. Constant constraints
    (no dims) are left out: `points(node) == 0` tells whether they empty the domain."""
    cons = _constraints(domain_key(node))
    out = []
    for g in _groups(node.get_num_loops(), cons, extra):
        gs = set(g)
        out.append((tuple(g), tuple(c for c in cons if c.dims and c.dims <= gs)))
    return out


def set_points(dims: Sequence[int], cons: Sequence[Constraint]) -> int:
    """Points of `{ S[d<dims>] : cons }` (a class of `domain_groups`)."""
    return _count(tuple(dims), tuple(cons))


def isl_set_of(dims: Sequence[int], cons: Iterable[Constraint]) -> isl.Set:
    """`{ S[d<dims>] : cons }` as an isl set (a class of `domain_groups`, or the whole domain)."""
    return _isl_set(dims, cons)


def access_map(node: NodeOp, access: Access) -> isl.Map:
    """`{ S[d0..] -> T[map] }` of a direct access, restricted to the node's domain (the range is the
    elements it touches). An indirect access has loaded positions, no affine relation: refused."""
    if access.indirect:
        raise ValueError(f"node '{node.sym_name.data}': the access of '{access.tensor}' is indirect "
                         "(loaded index positions have no affine access relation)")
    return _access(node.get_num_loops(), access.tensor, access.map).intersect_domain(domain(node))


def init_domain(node: NodeOp) -> isl.Set:
    """The domain of the node's folded init: its outer `init_depth[0]` loops under its first
    `init_depth[1]` guard constraints (the dialect docstring)."""
    assert node.init is not None and node.init_depth is not None, f"{node.sym_name.data}: no folded init"
    return _init_domain(domain_key(node), NodeOp.ints(node.init_depth))


@lru_cache(maxsize=16384)
def _init_domain(key: DomainKey, depth: tuple[int, ...]) -> isl.Set:
    loops, guards = depth
    n_bounds = sum(2 + (st != 1) for st in NodeOp.ints(key[3]))
    cons = _constraints(key)
    bounds = [c for c in cons[:n_bounds] if max(c.dims) < loops]
    return _isl_set(range(loops), [*bounds, *cons[n_bounds:n_bounds + guards]])


def init_access_map(node: NodeOp, access: Access) -> isl.Map:
    """`access_map` of the folded init's write (the output map, which uses only the init's loops),
    restricted to the init's domain."""
    loops = NodeOp.ints(node.init_depth)[0]
    return _access(loops, access.tensor, access.map).intersect_domain(init_domain(node))


@lru_cache(maxsize=65536)
def _access(n: int, tensor: str, m: AffineMap) -> isl.Map:
    dims = ", ".join(f"d{i}" for i in range(n))
    return isl.Map(f"{{ S[{dims}] -> {tensor}[{', '.join(isl_expr(r) for r in m.results)}] }}")
