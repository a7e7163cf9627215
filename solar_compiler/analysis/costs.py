"""Exact costs of a program, per einsum node and for the whole graph.

Interface shared by the cost-annotation pass, the roofline bounds and the reports. Entry points:
`program_costs(graph)` (an einsum graph's nodes), `module_costs(module)` (every program of the
module, `analysis/graphs.py`; `transforms/kernels.kernel_costs(kernel)` for a loop AST), and
`distinct_elements(sites)` for footprints.

Rules (the numbers the tests derive by hand):
* FLOPs are counted over the exact (guarded) iteration domain: a tap on padding is not work.
* A contraction is a `+=` whose value is a product (looking through casts, negation and the
  numerator of a division) with two factors that each depend on a reduced index (a loop variable
  absent from the target's indices): one multiply-add = one MAC = 2 matrix FLOPs per iteration; the
  body's other scalar ops are vector FLOPs. Its `matrix_dtype` is the narrowest dtype that holds
  every value of both factors (mixed operands must share one MMA format), looking through pure
  widening casts wherever they are: in the statement, or in the statements that wrote a local it
  reads (`value_dtypes.py`).
  Classifying more work as matrix can only lower a bound, never raise it.
* Otherwise each Unary/Binary/Cmp/Select is 1 vector FLOP per iteration (index arithmetic of a
  gather included), plus 1 for the accumulation of a reduction kind (+=, *=, max=, min=). Reads,
  literals, index values, casts and bit casts are 0 FLOPs: a conversion is a format change done on
  the load/store path, a bit cast the same register read as another type (no instruction), and
  counting them 0 can only lower a bound. No FLOPs (copy, fill, gather) = unit
  `memory`. exp/log/tanh/.../pow are also counted in `flops_transcendental`.
* Bytes of an access = distinct elements touched (islpy image of the domain) x dtype size; several
  accesses to one tensor in one node count their union. A gather (an index loaded from memory)
  counts the distinct positions of its affine dimensions, times 1 for each loaded dimension: the
  fewest elements it can touch, so bytes stay a lower bound; in a union it counts as the max of
  that and the exact union of the tensor's direct accesses. An indirect write (a scatter,
  `H[idx[k], d] += ...`) counts the same way: the distinct positions of its affine dimensions, 1 per
  loaded one, however many points it has (repeated indices may all hit one element); its op is
  flagged `indirect`, its index arithmetic counts as vector FLOPs as a gather's does, and the reads
  of its index tensors are reads of the node. A reduction whose identity init was not folded into
  its node also reads its target (the accumulator); a folded one does not.
* Indirect accesses are value-dependent. By default (`indirect="traced"`) a gather or scatter whose
  statement carries the frontend's traced footprint (`Assign.traced`: what it touched when the
  program ran on its traced sample) counts those distinct elements, like the routing a traced top-k
  fixes: the bound then holds for that sample, and the report says so. The footprint is used only
  while the statement keeps the accesses it was traced with, on the domain it was traced on or a
  part of it: narrowing to a part (a slice of a partly filled last page) keeps the trace's
  elements less k per point dropped (k accesses a point), at least what that part touches; a
  transform that builds another domain drops the trace. `indirect="min"` always takes the fewest
  elements over all index values. Gathers of one tensor by several statements carry the union the
  trace took of them all (`ast.Traced.union`): a tensor's reads count it when every statement of
  that union is among them, less k elements per point narrowing dropped from a member.
* Compulsory bytes: each input and weight over the union of all its reads in the kernel, each output
  over the union of all its writes, each once at its own dtype; locals are free.
"""

from __future__ import annotations

import gc
import math
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from functools import lru_cache
from itertools import combinations
from typing import TYPE_CHECKING

import islpy as isl
from xdsl.ir import BlockArgument, SSAValue
from xdsl.ir.affine import AffineMap

from solar_compiler.analysis import structured as st
from solar_compiler.analysis.distinct import (
    CSE,
    FACTORED,
    PRESUMMED,
    SELECT,
    distinct_matrix_flops,
    duplicates_both,
    gated_selects,
    presummed,
    select_branches,
    shared_factor_sums,
)
from solar_compiler.analysis.distinct_keys import key_floor
from solar_compiler.analysis.fast_conv import fast_conv_flops
from solar_compiler.analysis.graphs import module_graphs, node_ops
from solar_compiler.analysis.operand_products import operand_pair
from solar_compiler.analysis.poly_expand import POLY, GraphTables, expand
from solar_compiler.analysis.polyhedral import (
    Constraint,
    count_points,
    node_domain,
    partition,
)
from solar_compiler.analysis.prefix_sums import SCAN, prefix_sum_adds
from solar_compiler.analysis.step_functions import STEP, step_regions
from solar_compiler.analysis.value_dtypes import ValueDtypes, is_block_scale, join
from solar_compiler.analysis.vector_work import FOLDED, VectorWork
from solar_compiler.dialects.einsum import GatherOp, IndexOp, NodeOp, TensorOp, YieldOp
from solar_compiler.dialects.graph_convert import NodeText
from solar_compiler.dialects.loop import OriginAttr, Traced, traced_of
from solar_compiler.errors import LoopIRError
from solar_compiler.loopir.affine import AffCond, AffExpr, solo_vars
from solar_compiler.loopir.affine_map import from_map
from solar_compiler.loopir.rules import nbytes

if TYPE_CHECKING:
    from xdsl.dialects.builtin import ModuleOp

    from solar_compiler.dialects.einsum import GraphOp


@dataclass(frozen=True)
class Access:
    """One tensor touched by an op: distinct elements (islpy image of the domain) at its dtype."""

    tensor: str
    dtype: str
    elements: int
    bytes: int
    indirect: bool = False
    traced: bool = False       # an indirect access counted as the traced sample touched it


@dataclass(frozen=True)
class OpCost:
    name: str                  # node name, "S<index>" in program order
    label: str                 # the statement in text form
    equation: str              # extended einsum equation
    loc: str | None            # user's file:line
    unit: str                  # "matrix" | "vector" | "memory": the unit that does the work
    flops_matrix: int          # contraction FLOPs (a MAC = 2 FLOPs), tensor-core eligible
    flops_vector: int          # every other scalar op (1 op = 1 FLOP), transcendentals included
    flops_transcendental: int  # the part of flops_vector that is exp/log/tanh/...
    matrix_dtype: str | None   # operand dtype of the contraction (prices the matrix unit)
    vector_dtype: str          # dtype the vector work runs in
    iterations: int            # points of the (guarded) iteration domain
    reads: tuple[Access, ...]
    writes: tuple[Access, ...]
    sequential: bool = False
    indirect: bool = False
    # vector FLOPs counted literally: every scalar op of the statement at every point of its domain
    # (`flops_vector` is the minimum a legal implementation needs: `vector_work.py`); None: the same
    flops_vector_literal: int | None = None
    # the catalogue entry that priced this node below its work as written (`distinct.py`; only in
    # distinct costs, `--algorithms default`), e.g. "symmetric product"; None: as written
    algorithm: str | None = None
    source: str | None = None  # the source op it implements (module path, else op name), for the report
    # an LLM wrote the node's loop nest: the FLOPs of that nest as written, which the figures above do
    # not price (only a plain contraction's products are; `_op_cost`); None: a template's node
    llm_flops: int | None = None
    # who wrote that nest (`Origin.by`: "llm", or "stand-in" for a template's nest standing in for the
    # op's production algorithm, a DFT for an FFT); None: a template's node priced as written
    stand_in: str | None = None
    # the accumulation additions of a sum (part of `flops_vector`) that a matrix unit may do instead,
    # one MAC each with a ones operand (`_sums_on_matrix`; default model only), and the dtype of the
    # values summed, which prices them there (`HwTarget.price_sum`); 0 / None: none
    flops_sum: int = 0
    sum_dtype: str | None = None
    # a catalogue entry that trades matrix work for vector work (`_expand_polynomials`): computing
    # any share of the op's output elements as written instead adds that share of `revert_matrix`
    # matrix FLOPs (at `matrix_dtype`) and removes that share of `revert_vector` vector FLOPs, which
    # the bound may do on each target (`bounds.balance`), so it never exceeds the program as written
    revert_matrix: int = 0
    revert_vector: int = 0

    @property
    def vector_literal(self) -> int:
        return self.flops_vector if self.flops_vector_literal is None else self.flops_vector_literal

    @property
    def flops(self) -> int:
        return self.flops_matrix + self.flops_vector

    @property
    def bytes(self) -> int:
        return sum(a.bytes for a in self.reads) + sum(a.bytes for a in self.writes)


@dataclass(frozen=True)
class GraphCosts:
    kernel: str
    ops: list[OpCost]
    compulsory_bytes: int      # graph inputs + weights read once + outputs written once (distinct elements)
    compulsory: dict[str, int] = field(default_factory=dict)  # per tensor, bytes
    compulsory_written: int = 0  # the outputs' part of compulsory_bytes

    @property
    def flops_matrix(self) -> int:
        return sum(o.flops_matrix for o in self.ops)

    @property
    def flops_vector(self) -> int:
        return sum(o.flops_vector for o in self.ops)

    @property
    def flops_vector_literal(self) -> int:
        return sum(o.vector_literal for o in self.ops)

    @property
    def bytes_unfused(self) -> int:
        return sum(o.bytes for o in self.ops)


# ---- footprints: distinct elements of a union of accesses ---------------------------------------------
@dataclass(frozen=True)
class Site:
    """One access pattern: a statement's domain and the tensor's indices (None = loaded: a gather)."""

    ivs: tuple[str, ...]
    cons: tuple[Constraint, ...]
    indices: tuple[AffExpr | None, ...]
    traced: int | None = None  # a gather's (scatter's) distinct elements on the traced sample
    floor: int = 0             # the fewest a gather of distinct keys touches (`distinct_keys.py`)
    # a conditional store's write (`structured.conditional_store`): the elements it changes depend on
    # values, so it counts its traced count, or none (the fewest over all values)
    conditional: bool = False
    # a gather whose trace holds a union with other statements' gathers (`ast.Traced`): (the
    # group's tensor, its union, how many statements it has, which one this is, the node's position,
    # its points, the traced domain's points, its accesses of the tensor per point)
    union: tuple[str, int, int, int, int, int, int, int] | None = None
    _hash: int = field(init=False, compare=False, repr=False)

    def __post_init__(self) -> None:  # sites are cache keys: hash the nested expressions once
        object.__setattr__(self, "_hash", hash((self.ivs, self.cons, self.indices, self.traced, self.floor,
                                                self.conditional, self.union)))

    def __hash__(self) -> int:
        return self._hash

    @property
    def indirect(self) -> bool:
        return any(i is None for i in self.indices)


@dataclass(frozen=True)
class _Piece:
    """The image of a site's domain restricted to `ivs` under the tensor dims `dims` (one block)."""

    ivs: tuple[str, ...]
    conds: tuple[AffCond, ...]
    dims: tuple[AffExpr, ...]
    _hash: int = field(init=False, compare=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_hash", hash((self.ivs, self.conds, self.dims)))

    def __hash__(self) -> int:
        return self._hash


def distinct_elements(sites: Sequence[Site]) -> int:
    """Distinct tensor elements touched by the union of `sites` (gathers: see the module rules; a
    gather with a traced count touched that many on the traced sample, and the gathers of a traced
    union, when every statement of it is here, that union)."""
    direct = tuple(dict.fromkeys(s for s in sites if not s.indirect and not s.conditional))
    best = _union_count(direct)
    for s in sites:
        if s.conditional:
            best = max(best, s.traced or 0)
        elif s.indirect:
            affine = Site(s.ivs, s.cons, tuple(i for i in s.indices if i is not None))
            best = max(best, _union_count((affine,)), s.traced or 0, s.floor)
    return max(best, traced_union(sites))


def traced_union(sites: Sequence[Site]) -> int:
    """The largest traced union of gathers whose statements are all among `sites` (a member missing,
    and the union is not what these sites read). A member is one node, or the pieces narrowing cut
    its traced domain into: disjoint, their points at most the traced ones; each point dropped took
    at most the member's k accesses' elements from the union, which is counted less those. Pieces
    with more points than the trace's are copies of the node: no union."""
    groups: dict[tuple[str, int, int], dict[int, dict[int, tuple[int, int, int]]]] = {}
    for s in sites:
        if s.union is not None and s.indirect and not s.conditional:
            group, union, among, member, node, points, traced_points, k = s.union
            at = groups.setdefault((group, union, among), {}).setdefault(member, {})
            at[node] = (points, traced_points, k)
    best = 0
    for (_, union, among), members in groups.items():
        if sorted(members) != list(range(among)):
            continue
        dropped = 0
        for nodes in members.values():
            kept = sum(p for p, _, _ in nodes.values())
            traced_points = max(t for _, t, _ in nodes.values())
            if kept > traced_points:
                break
            dropped += max(k for _, _, k in nodes.values()) * (traced_points - kept)
        else:
            best = max(best, union - dropped)
    return best


INDIRECT = ("traced", "min")  # how indirect accesses are counted (module rules)


@lru_cache(maxsize=65536)
def _union_count(sites: tuple[Site, ...]) -> int:
    """Exact count of a union of affine images, factored: the tensor dims are split into blocks that
    no site couples, each site's image is a product of per-block images, and the union is counted
    by dropping sites covered by others, then over the one block where images differ, or else by
    inclusion-exclusion over products of per-block intersections."""
    if not sites:
        return 0
    rank = len(sites[0].indices)
    groups: list[list[list[str]]] = []
    live: list[Site] = []
    for s in sites:
        gs = _site_groups(s)
        if gs is not None:
            live.append(s)
            groups.append(gs)
    if not live:
        return 0
    links = []
    for s, gs in zip(live, groups, strict=True):
        for g in gs:
            gv = set(g)
            links.append([d for d, e in enumerate(s.indices) if e is not None and
                          e.vars() and e.vars() <= gv])
    blocks = partition(list(range(rank)), links)
    pieces = list(dict.fromkeys(tuple(_piece(s, gs, b) for b in blocks)
                                for s, gs in zip(live, groups, strict=True)))
    if len(pieces) == 1:
        return math.prod(_piece_count(p) for p in pieces[0])
    return _union_of_products(pieces)


def _site_groups(s: Site) -> list[list[str]] | None:
    """Variable groups of a site (coupled by a constraint or an index); None when its domain is empty."""
    for c in s.cons:
        if not c.vars and not c.cond.evaluate({}):
            return None
    idx_vars = [e.vars() for e in s.indices if e is not None]
    gs = partition(list(s.ivs), [c.vars for c in s.cons] + idx_vars)
    used = set().union(*idx_vars) if idx_vars else set()
    for g in gs:
        if not set(g) & used and count_points(g, [c for c in s.cons if c.vars and c.vars <= set(g)]) == 0:
            return None
    return gs


def _piece(s: Site, gs: list[list[str]], block: list[int]) -> _Piece:
    dims = tuple(e for d in block if (e := s.indices[d]) is not None)
    assert len(dims) == len(block), "gathers are projected to their affine dims before counting"
    used = set().union(*(e.vars() for e in dims))
    ivs = tuple(v for g in gs if set(g) & used for v in g)
    keep = set(ivs)
    conds = tuple(c.cond for c in s.cons if c.vars and c.vars <= keep)
    return _Piece(ivs, conds, dims)


@lru_cache(maxsize=65536)
def _piece_count(p: _Piece) -> int:
    if not p.ivs:
        return 1
    if solo_vars(p.dims) >= set(p.ivs) or any(e.is_quasi() for e in p.dims) and _piece_map(p).is_injective():
        # an injective map (every variable read off one dim, or isl says so of a view's div/mod
        # index arithmetic, such as a window partition of a padded image) touches one element
        # per point; counting its image instead enumerates it (a minute for 3e6 points)
        return count_points(p.ivs, [Constraint(c, frozenset(c.vars())) for c in p.conds])
    return _piece_set(p).count_val().to_python()


def _piece_map(p: _Piece) -> isl.Map:
    body = " and ".join(c.to_isl() for c in p.conds)
    head = f"G[{', '.join(p.ivs)}] -> T[{', '.join(e.to_isl() for e in p.dims)}]"
    return isl.Map(f"{{ {head} : {body} }}" if body else f"{{ {head} }}")


@lru_cache(maxsize=65536)
def _piece_set(p: _Piece) -> isl.Set:
    return _piece_map(p).range()


def _count(s: isl.Set) -> int:
    return s.count_val().to_python()


def _union_of_products(pieces: list[tuple[_Piece, ...]]) -> int:
    boxes = [tuple(_interval(p) for p in ps) for ps in pieces]
    if all(None not in b for b in boxes):
        got = _box_union(boxes, [BOX_STEPS])  # type: ignore[arg-type]
        if got is not None:
            return got
    sets = [[_piece_set(p) for p in ps] for ps in pieces]

    def covers(j: int, i: int) -> bool:
        return all(a.is_subset(b) for a, b in zip(sets[i], sets[j], strict=True))

    keep: list[int] = []
    for i in range(len(sets)):
        if any(covers(j, i) for j in keep):
            continue
        keep = [j for j in keep if not covers(i, j)]
        keep.append(i)
    if len(keep) == 1:
        return math.prod(_piece_count(p) for p in pieces[keep[0]])
    nb = len(sets[0])
    first = keep[0]
    differ = [b for b in range(nb) if not all(sets[first][b].is_equal(sets[j][b]) for j in keep[1:])]
    if len(differ) == 1:
        (b,) = differ
        union = sets[first][b]
        for j in keep[1:]:
            union = union.union(sets[j][b])
        return _count(union) * math.prod(_piece_count(pieces[first][x]) for x in range(nb) if x != b)
    if len(keep) <= 8:
        total = 0
        for r in range(1, len(keep) + 1):
            for sub in combinations(keep, r):
                term = 1
                for b in range(nb):
                    inter = sets[sub[0]][b]
                    for j in sub[1:]:
                        inter = inter.intersect(sets[j][b])
                    term *= _count(inter)
                    if term == 0:
                        break
                total += term if r % 2 else -term
        return total
    flat = None
    for j in keep:
        prod = sets[j][0]
        for s in sets[j][1:]:
            prod = prod.flat_product(s)
        flat = prod if flat is None else flat.union(prod)
    assert flat is not None
    return _count(flat)


def _interval(p: _Piece) -> tuple[int, int] | None:
    """The image of a one-dim piece `v + c` (or a constant) over bounds on `v` as [lo, hi] (lo > hi
    when empty); None for any other piece."""
    if len(p.dims) != 1:
        return None
    (e,) = p.dims
    if not p.ivs:
        return (e.const, e.const) if e.is_const() else None
    if len(p.ivs) != 1 or e.terms != ((p.ivs[0], 1),):
        return None
    (v,) = p.ivs
    lo: int | None = None
    hi: int | None = None
    for c in p.conds:
        a, b = c.expr.coeff(v), c.expr.const
        if c.expr.terms != ((v, a),) or a == 0:
            return None
        if c.op == "==":
            if b % a:
                return (1, 0)
            lo = -b // a if lo is None else max(lo, -b // a)
            hi = -b // a if hi is None else min(hi, -b // a)
        elif a > 0:  # a*v + b >= 0: v >= ceil(-b / a)
            lo = -(b // a) if lo is None else max(lo, -(b // a))
        else:        # v <= floor(b / -a)
            hi = b // -a if hi is None else min(hi, b // -a)
    if lo is None or hi is None:
        return None
    return lo + e.const, hi + e.const


BOX_STEPS = 100_000  # slabs the exact union of boxes may visit before isl is asked instead


def _box_union(boxes: Sequence[tuple[tuple[int, int], ...]], steps: list[int]) -> int | None:
    """Elements of a union of integer boxes, exactly: a sweep over the first dimension's slabs (where
    every box agrees on it, one slab), each the union of the boxes covering it over the remaining
    dimensions. The product-of-intervals images of a concatenation's slices (DenseNet's 49 reads of
    one growing tensor) take a few slabs; None when the sweep would take over `steps`."""
    live = list(dict.fromkeys(b for b in boxes if all(lo <= hi for lo, hi in b)))
    if not live:
        return 0
    if len(live) == 1 or not live[0]:
        return math.prod(hi - lo + 1 for lo, hi in live[0])
    first = {b[0] for b in live}
    if len(first) == 1:
        ((lo, hi),) = first
        rest = _box_union([b[1:] for b in live], steps)
        return None if rest is None else (hi - lo + 1) * rest
    cuts = sorted({lo for lo, _ in first} | {hi + 1 for _, hi in first})
    total = 0
    for a, z in zip(cuts, cuts[1:], strict=False):
        steps[0] -= 1
        if steps[0] < 0:
            return None
        rest = [b[1:] for b in live if b[0][0] <= a and z - 1 <= b[0][1]]
        if rest:
            got = _box_union(rest, steps)
            if got is None:
                return None
            total += (z - a) * got
    return total


# ---- a node's statements and their sites, read from the node ------------------------------------------
# A node runs as one or two statements ("slots"): its folded init (if any), then its main statement.
# The slots, numbered in node order, are the statement indices of the compulsory traffic and of an
# `UnfusedKernel` (`unfused.py`).
@dataclass(frozen=True)
class Slot:
    node: int
    init: bool


def node_slots(nodes: Sequence[NodeOp]) -> list[Slot]:
    return [s for i, n in enumerate(nodes)
            for s in ((Slot(i, True),) if n.init is not None else ()) + (Slot(i, False),)]


Leaf = tuple[str, AffineMap, bool]  # tensor, map (symbols: loaded positions), indirect


def node_leaves(n: NodeOp) -> dict[Leaf, int]:
    """The reads of the node's main statement, each with how often its value tree reads it: block
    arguments at their indexing maps, gathers (then the reads in their indices), in the order a
    walk of the stored value, then of the scatter's indices, meets them."""
    maps = [m.data for m in n.get_indexing_maps().data]
    names = n.input_names
    memo: dict[SSAValue, dict[Leaf, int]] = {}

    def of(v: SSAValue) -> dict[Leaf, int]:
        if v in memo:
            return memo[v]
        out: dict[Leaf, int] = {}
        if isinstance(v, BlockArgument):
            out[(names[v.index], maps[v.index], False)] = 1
        else:
            o = v.owner
            if isinstance(o, GatherOp):
                out[(o.tensor_name, o.map.data, True)] = 1
            if not isinstance(o, IndexOp):
                for x in o.operands:
                    for k, c in of(x).items():
                        out[k] = out.get(k, 0) + c
        memo[v] = out
        return out

    y = n.body.block.last_op
    assert isinstance(y, YieldOp)
    total: dict[Leaf, int] = {}
    for v in (y.stored, *y.dyn_indices):
        for k, c in of(v).items():
            total[k] = total.get(k, 0) + c
    return total


class NodeSites:
    """Sites (`costs.Site`) of the statements of a program's nodes, by the node's domain: its loops'
    bounds and steps, then its guards (the init: its outer loops and first guards)."""

    def __init__(self, nodes: Sequence[NodeOp], indirect: str):
        self.nodes = nodes
        self.indirect = indirect
        self._dom: dict[tuple[int, bool], tuple[tuple[str, ...], tuple[Constraint, ...]]] = {}
        self._leaves: dict[int, dict[Leaf, int]] = {}

    def domain(self, s: Slot) -> tuple[tuple[str, ...], tuple[Constraint, ...]]:
        key = (s.node, s.init)
        if key not in self._dom:
            self._dom[key] = node_domain(self.nodes[s.node], s.init)
        return self._dom[key]

    def leaves(self, i: int) -> dict[Leaf, int]:
        if i not in self._leaves:
            self._leaves[i] = node_leaves(self.nodes[i])
        return self._leaves[i]

    def site(self, s: Slot, m: AffineMap, tensor: str, write: bool) -> Site:
        """The site of an access of `tensor` at map `m` by statement `s`; a loaded position (a bare
        symbol of the map) is None, and an indirect access takes the traced count when it applies."""
        n = self.nodes[s.node]
        ivs, cons = self.domain(s)
        syms = [f"_s{k}" for k in range(m.num_symbols)]
        idx = from_map(m, n.iv_names, syms)
        if syms:  # a map without symbols has no loaded position: its indices as they are
            idx = tuple(None if str(e) in syms else e for e in idx)
        traced, floor, union = None, 0, None
        if None in idx and not s.init:
            rec = self._traced(n, s.node, tensor, write)
            traced = rec.elements if rec is not None else None
            if rec is not None and rec.among and not write:
                k = sum(c for (t, _, ind), c in self.leaves(s.node).items() if ind and t == tensor)
                union = (rec.group, rec.union, rec.among, rec.member, s.node, st.points(n), rec.points, k)
            floor = 0 if write else key_floor(n, m, tensor)
        if write and not s.init and st.conditional_store(n):
            rec = self._traced(n, s.node, tensor, write)
            return Site(ivs, cons, idx, rec.elements if rec is not None else None, 0, True)
        return Site(ivs, cons, idx, traced, floor, union=union)

    def _traced(self, n: NodeOp, i: int, tensor: str, write: bool) -> Traced | None:
        """The traced record of `tensor` for the node's indirect reads (or its scatter), while the
        node keeps the accesses the trace was taken on, over that domain or a part of it (module
        rules; a part keeps no union)."""
        traced = traced_of(n.traced)
        if self.indirect != "traced" or not traced:
            return None
        scatters = bool(n.dynamic_positions) or st.conditional_store(n)
        k = int(scatters and n.output_name == tensor) if write else \
            sum(c for (t, _, ind), c in self.leaves(i).items() if ind and t == tensor)
        for t in traced:
            if t.tensor == tensor and t.write == write:
                points = st.points(n)
                if t.accesses != k or not k or points > t.points:
                    return None
                if points == t.points:
                    return t
                # narrowed to a subset of the traced domain (narrowing keeps the trace; a transform
                # that builds other domains drops it): each point dropped took at most k of the
                # elements away (`points` stays the traced domain's, for a union's members)
                return replace(t, elements=max(0, t.elements - k * (t.points - points)))
        return None


# ---- FLOPs of one statement ---------------------------------------------------------------------------
def contraction_dtype(node: NodeOp, values: ValueDtypes | None = None) -> str | None:
    """The matrix dtype when the node is a contraction (see the module rules), else None: the
    narrowest dtype holding every value of both reduced factors (`value_dtypes.py`: through pure
    widening casts in the body and, given `values`, in the nodes that wrote a local it reads)."""
    if node.reduce.data != "add":
        return None
    reduced = st.reduced_dims(node)
    memo: dict = {}
    dep = [f for f in st.operand_factors(st.stored_value(node)) if node.value_dims(f, memo) & reduced]
    if len(dep) < 2:
        return None
    # a block scale (`s[i, k // 128]`) is applied per block in the accumulator, not on the matrix unit
    data = [f for f in dep if not is_block_scale(node, f, reduced)]
    if len(data) > 2:
        # more factors than the unit's two operands (an elementwise multiply folded into the tree by the
        # catalogue): each operand is the product of the factors on its side, priced at the narrowest
        # dtype holding each product (`operand_products.py`: a sign times an e2m1 value is e2m1); factors
        # that do not split into two operands keep the join, which holds every factor
        pair = operand_pair(node, data, values or ValueDtypes(None), reduced)
        if pair is not None:
            return pair_dtype(pair)
        return join(_value_dtype(node, f, values, reduced) for f in data)
    return pair_dtype(_value_dtype(node, f, values, reduced) for f in (data if len(data) >= 2 else dep)[:2])


def pair_dtype(dtypes: Iterable[str]) -> str:
    """The matrix dtype of a contraction on operands of `dtypes`: their join when one holds the other
    (bf16 and i8: bf16), else the mixed pair 'a*b' (sorted), which `hw/pricing.py` prices at the formats
    holding both: e4m3 x e5m2 runs on Hopper's fp8 tensor cores (they take mixed fp8 operands), f16 x
    bf16 on TF32 (which holds both exactly) whatever the f32 policy; their join (bf16, f32) would not."""
    ds = sorted(set(dtypes))
    j = join(ds)
    return j if len(ds) < 2 or j in ds else "*".join(ds)


def _value_dtype(node: NodeOp, f: SSAValue, values: ValueDtypes | None, reduced: frozenset[int]) -> str:
    return (values or ValueDtypes(None)).stored(node, f, reduced)


# ---- per node and per graph --------------------------------------------------------------------------
def accesses(tensors: Mapping[str, TensorOp], by_tensor: dict[str, list[Site]]) -> tuple[Access, ...]:
    """One access per tensor: the distinct elements of the union of its sites, at its dtype."""
    out = []
    for name, sites in by_tensor.items():
        dt = tensors[name].dtype
        n = distinct_elements(sites)
        out.append(Access(name, dt, n, nbytes(dt, n), any(s.indirect for s in sites),
                          any(s.traced is not None for s in sites)))
    return tuple(out)


def _op_cost(text: NodeText, tensors: Mapping[str, TensorOp], node: NodeOp, indirect: str,
             values: ValueDtypes, work: VectorWork, llm_products: bool = False) -> OpCost:
    """The costs of one node, read from its `einsum.node` through the structured interface
    (`structured.py`: points, FLOPs by class, unit, accesses and their footprints), the minimal
    vector work (`vector_work.py`) and the contraction's operand dtype (`value_dtypes.py`) from its
    body; the label and equation are its statements' text form (`graph_convert.NodeText`)."""
    c = st.node_counts(node)
    it = c.points
    mdt = contraction_dtype(node, values)
    if (mdt is not None) != (c.unit == "matrix"):
        raise LoopIRError(f"node {node.sym_name.data}: its counts and its operand dtypes disagree on "
                          "whether it is a contraction")
    literal = c.flops_vector_literal
    if c.unit == "matrix":
        fm, fv, tr = c.flops_matrix, literal, c.flops_transcendental_literal
        work.skip(node)
    else:
        fm, (fv, tr) = 0, work.node(node)
    llm = node.origin is not None and node.origin.stand_in
    llm_flops = fm + fv if llm else None
    if llm:  # one algorithm among many: price only the products a contraction means (docs/llm-frontend.md)
        fm, fv, tr, literal = (fm if llm_products else 0), 0, 0, 0
        if not fm:
            mdt = None
    fps = st.footprints(node, indirect == "traced")
    dts = {f.tensor: tensors[f.tensor].dtype for f in fps}
    rd, wr = ([Access(f.tensor, dts[f.tensor], f.elements, nbytes(dts[f.tensor], f.elements), f.indirect,
                      f.traced) for f in fps if f.write == w] for w in (False, True))
    label, eq, loc = text.describe(node)
    unit = c.unit if not llm else "matrix" if fm else "memory"
    return OpCost(
        name=node.sym_name.data, label=label, equation=eq, loc=loc, unit=unit,
        flops_matrix=fm, flops_vector=fv, flops_transcendental=tr, matrix_dtype=mdt,
        vector_dtype=tensors[node.output_name].dtype, iterations=it, reads=tuple(rd),
        writes=tuple(wr), sequential=c.sequential, indirect=c.indirect, flops_vector_literal=literal,
        algorithm=None, source=_source(node.origin), llm_flops=llm_flops,
        stand_in=node.origin.by.data if llm else None)


def _source(origin: OriginAttr | None) -> str | None:
    """How the report names a source op: its module path, else the op (`aten.mm.default`: mm)."""
    if origin is None:
        return None
    if origin.module.data:
        return origin.module.data
    op = origin.op.data
    parts = op.split(".")
    return parts[1] if len(parts) >= 2 and parts[0] in ("aten", "jax") else op


@contextmanager
def paused_gc() -> Iterator[None]:
    """Pause Python's cyclic GC. Counting allocates many short-lived acyclic objects (freed by
    reference counting) while the process holds a large xDSL module: generation-2 collections then
    took ~60 of ~110 ms for a 57-statement kernel, for nothing to collect."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def program_costs(graph: GraphOp, indirect: str = "traced", distinct: bool = False) -> GraphCosts:
    """Exact per-node costs and compulsory traffic of a program; `indirect` says how indirect
    accesses are counted: "traced" (the traced sample's footprint where the statements carry one)
    or "min" (the fewest elements over all index values); `distinct` prices repeated, symmetric and
    duplicated work once (`distinct.py`: the default model of computation)."""
    with paused_gc():
        g = _program_costs(graph, indirect)
        return distinct_costs(graph, g) if distinct else g


def distinct_costs(graph: GraphOp, g: GraphCosts, kernel_of: Sequence[int] | None = None) -> GraphCosts:
    """The default model's costs of `p` from its costs as written `g` (same program, same way of
    counting indirect accesses): the entries of `distinct.py` only lower the matrix FLOPs of some
    contractions and zero the arithmetic of duplicated nodes; traffic, vector work and every other
    node are those as written. So the roofline counts a program once and derives the default model's
    figures, instead of counting it twice (a second count cost as much as the first). `kernel_of`
    (node position -> kernel of the unfused bound): a duplicated node is free only when its twin runs
    in the same kernel (eager execution runs every source op; None: always free)."""
    nodes = node_ops(graph)
    if g.kernel != graph.kernel_name or len(g.ops) != len(nodes):
        raise LoopIRError(f"distinct costs: costs of {g.kernel} do not belong to program {graph.kernel_name}")
    ops = list(g.ops)
    in_layout, twins = duplicates_both(nodes)
    # a recomputed tensor holds its twin's values, unless in another layout (not for eager: its kernel
    # sees two tensors)
    same = {nodes[p].output_name: nodes[t].output_name for p, t in in_layout.items()} \
        if kernel_of is None else {}
    for pos, (node, o) in enumerate(zip(nodes, g.ops, strict=True)):
        if o.matrix_dtype is None:  # not a contraction: nothing of distinct.py applies
            continue
        fm, how = distinct_matrix_flops(node, o.flops_matrix, same, kernel_of is None)
        fast, winograd = fast_conv_flops(node, fm, o.matrix_dtype)  # inside the conv's own op
        if winograd is not None and fast < fm:
            fm, how = fast, winograd
        pre = presummed(node)
        # its additions are sums a matrix unit may take (one MAC each): never slower than as written
        if pre is not None and 2 * (pre[0] + pre[1]) < fm:
            macs, adds, dtype = pre
            ops[pos] = replace(o, flops_matrix=2 * macs, flops_vector=o.flops_vector + adds, flops_sum=adds,
                               sum_dtype=dtype, algorithm=PRESUMMED)
        elif how is not None:
            ops[pos] = replace(o, flops_matrix=fm, algorithm=how)
    if kernel_of is None and any(o.matrix_dtype for o in g.ops):
        _fold_through_contractions(graph, ops)
    if kernel_of is None:  # a region spans source ops: not for eager's one kernel per op
        _step_functions(nodes, ops)
    _scan_prefix_sums(nodes, ops)  # inside one node: eager's kernel may run it as a scan too
    free_twins(ops, twins, kernel_of)
    for drop, keep, drop_tail, keep_tail in [*select_branches(graph, nodes), *gated_selects(graph, nodes)]:
        if kernel_of is not None and len({kernel_of[p] for p in (drop, keep, *drop_tail, *keep_tail)}) != 1:
            continue  # eager execution runs both branches' kernels
        a, b = ops[drop], ops[keep]
        if (a.flops_matrix, a.flops_vector, a.iterations, a.matrix_dtype, a.writes[0].elements) == \
                (b.flops_matrix, b.flops_vector, b.iterations, b.matrix_dtype, b.writes[0].elements) \
                and a.flops_matrix and b.algorithm is None and \
                all(ops[p].algorithm is None for p in (*drop_tail, *keep_tail)):
            _select_one_branch(ops, drop, drop_tail, keep_tail)
    for total, keep, drop, combined in shared_factor_sums(graph, nodes):  # x @ (w1 + w2): one product
        if kernel_of is not None and len({kernel_of[total], kernel_of[keep], kernel_of[drop]}) != 1:
            continue  # eager execution runs both contractions and the sum as written
        a, b, t = ops[drop], ops[keep], ops[total]
        if a.algorithm is None and b.algorithm is None and t.algorithm is None and a.flops_matrix and \
                (a.flops_matrix, a.matrix_dtype, a.flops_vector) == (b.flops_matrix, b.matrix_dtype, 0) \
                and b.flops_vector == 0 and combined < a.flops_matrix + t.flops_vector:
            ops[drop] = replace(a, flops_matrix=0, algorithm=FACTORED)
            ops[total] = replace(t, flops_vector=combined, flops_transcendental=0, algorithm=FACTORED)
    _expand_polynomials(graph, nodes, ops, kernel_of)
    _sums_on_matrix(graph, nodes, ops)
    return replace(g, ops=ops)


def _select_one_branch(ops: list[OpCost], drop: int, drop_tail: Sequence[int], keep_tail: Sequence[int]) \
        -> None:
    """Count one branch of a value-dependent select: its contraction (the other's, `drop`, costs the
    same) and the element-wise chain that is cheaper in every kind of work; where neither is, no
    chain's work (each element needs one of them, which one depends on values: errs low)."""
    def work(tail: Sequence[int]) -> tuple[int, int]:
        return sum(ops[p].flops_vector for p in tail), sum(ops[p].flops_transcendental for p in tail)

    wd, wk = work(drop_tail), work(keep_tail)
    if wk[0] <= wd[0] and wk[1] <= wd[1]:
        free = list(drop_tail)
    elif wd[0] <= wk[0] and wd[1] <= wk[1]:
        free = list(keep_tail)
    else:
        free = [*drop_tail, *keep_tail]
    for p in (drop, *free):
        ops[p] = replace(ops[p], flops_matrix=0, flops_vector=0, flops_transcendental=0, algorithm=SELECT)


def free_twins(ops: list[OpCost], twins: Mapping[int, int], kernel_of: Sequence[int] | None = None) -> None:
    """No arithmetic for each node of `twins` (`distinct.duplicates`: position -> the earlier node it
    duplicates), whose twin's result holds its values (CSE); with `kernel_of`, only where the twin
    runs in the same kernel (eager execution runs every source op)."""
    for pos, twin in twins.items():
        if kernel_of is None or kernel_of[pos] == kernel_of[twin]:
            ops[pos] = replace(ops[pos], flops_matrix=0, flops_vector=0, flops_transcendental=0, flops_sum=0,
                               sum_dtype=None, algorithm=CSE)


def _sums_on_matrix(graph: GraphOp, nodes: Sequence[NodeOp], ops: list[OpCost]) -> None:
    """Mark the accumulation additions of each sum that is not a contraction as work a matrix unit
    may do (`OpCost.flops_sum`): an MMA computes `D = A B + C`, so adding x into an accumulator is one
    MAC with a ones operand (FlashAttention takes its row sums so), and a prefix sum is a product with
    a triangular ones matrix. Each addition is one MAC at least, whatever the tiling: an accumulation
    merges one value into a partial sum, a MAC merges at most one too, and a scan's every output is
    produced by at least one of them. The bound then splits these additions between the units
    (`bounds.balance`). The body's other operations stay vector work; a sum the catalogue rewrote
    (polynomial expansion, shared factors) keeps its rewritten work on the vector unit."""
    values: ValueDtypes | None = None
    for pos, (node, o) in enumerate(zip(nodes, ops, strict=True)):
        if node.reduce.data != "add" or o.matrix_dtype is not None or o.llm_flops is not None or \
                o.algorithm not in (None, FOLDED, SCAN):
            continue
        adds = _accumulation_adds(node, o)
        if adds <= 0:
            continue
        values = values or ValueDtypes(graph)
        dtype = values.stored(node, st.stored_value(node), st.reduced_dims(node))
        ops[pos] = replace(o, flops_sum=adds, sum_dtype=dtype)


def _accumulation_adds(node: NodeOp, o: OpCost) -> int:
    """The additions with which a sum that is not a contraction accumulates (one per point, or a
    scan's), at most its vector work other than transcendentals: what a matrix unit may take."""
    adds = prefix_sum_adds(node) if o.algorithm == SCAN else st.points(node)
    return max(0, min(adds or 0, o.flops_vector - o.flops_transcendental))


def _expand_polynomials(graph: GraphOp, nodes: Sequence[NodeOp], ops: list[OpCost],
                        kernel_of: Sequence[int] | None) -> None:
    """Price each sum of a polynomial as its monomials (`poly_expand.py`) where that needs fewer FLOPs
    than the node and the locals it absorbs, and keeps the matrix work of the graph (the kernel, for
    the unfused bound: all of it inside one kernel) within its matrix or vector work as it was; an
    expansion with fewer FLOPs but more vector work carries the way back (`OpCost.revert_matrix`),
    and one of vector work alone keeps its additions movable to the matrix unit (`flops_sum`)."""
    tables: GraphTables | None = None
    values: ValueDtypes | None = None
    scope_of = (lambda i: 0) if kernel_of is None else kernel_of.__getitem__  # noqa: E731
    totals: dict[int, list[int]] = {}  # scope -> [matrix, vector] FLOPs, kept up to date below
    for i, q in enumerate(ops):
        t = totals.setdefault(scope_of(i), [0, 0])
        t[0] += q.flops_matrix
        t[1] += q.flops_vector
    for pos, o in enumerate(ops):
        if nodes[pos].reduce.data != "add" or o.algorithm is not None or o.flops_transcendental \
                or o.llm_flops is not None:
            continue
        tables = tables or GraphTables(graph, nodes)
        e = expand(graph, nodes, pos, pair_dtype, tables)
        if e is None:
            continue
        here = (pos, *e.absorbed)
        if any(ops[i].algorithm is not None or ops[i].flops_transcendental or ops[i].llm_flops is not None
               for i in e.absorbed):
            continue
        if kernel_of is not None and len({kernel_of[i] for i in here}) != 1:
            continue  # eager execution runs the absorbed ops' kernels as written
        written = sum(ops[i].flops for i in here)
        fm, fv = totals[scope_of(pos)]
        fm_here, fv_here = sum(ops[i].flops_matrix for i in here), sum(ops[i].flops_vector for i in here)
        fm_after = fm - fm_here + e.flops_matrix
        fv_after = fv - fv_here + e.flops_vector
        total = e.flops_matrix + e.flops_vector
        if e.flops_matrix and o.matrix_dtype is not None and o.matrix_dtype != e.matrix_dtype:
            continue  # the node's own matrix dtype prices its products: keep one dtype per node
        revert, sums = (0, 0), 0
        if not e.flops_matrix:
            # distributivity of vector work alone: the node's additions as written may run on the
            # matrix unit (`_sums_on_matrix`), and so may the expansion's: its other vector work must
            # fit in the node's other work, and its whole vector work in the node's
            flex = _accumulation_adds(nodes[pos], o) if o.matrix_dtype is None else 0
            if total >= written or e.flops_vector > fv_here or e.flops_vector - e.flops_sum > fv_here - flex:
                continue
            sums = e.flops_sum
        elif total > written or (total == written and fv_after >= fv) or fv_after > fv or \
                (fm_after > fm and fm_after > fv):
            # fewer FLOPs, matrix work for vector work: priced with the way back to the program as
            # written on each target (any share of the output elements)
            if total >= written or e.flops_matrix >= fm_here or e.flops_vector <= fv_here or \
                    o.matrix_dtype is None or \
                    any(ops[i].vector_dtype != o.vector_dtype or ops[i].flops_matrix for i in e.absorbed):
                continue
            revert = (fm_here - e.flops_matrix, e.flops_vector - fv_here)
        ops[pos] = replace(o, unit="matrix" if e.flops_matrix else o.unit, flops_matrix=e.flops_matrix,
                           flops_vector=e.flops_vector, flops_transcendental=0,
                           matrix_dtype=e.matrix_dtype if e.flops_matrix else o.matrix_dtype,
                           algorithm=f"{POLY} ({e.words})", revert_matrix=revert[0], revert_vector=revert[1])
        if sums:
            values = values or ValueDtypes(graph)
            ops[pos] = replace(ops[pos], flops_sum=sums,
                               sum_dtype=values.stored(nodes[pos], st.stored_value(nodes[pos]),
                                                       st.reduced_dims(nodes[pos])))
        for i in e.absorbed:
            ops[i] = replace(ops[i], flops_matrix=0, flops_vector=0, flops_transcendental=0,
                             algorithm=f"{POLY} (into {o.source or o.name})")
        totals[scope_of(pos)] = [fm_after, fv_after]


def _fold_through_contractions(graph: GraphOp, ops: list[OpCost]) -> None:
    """Re-count the vector work of the graph's non-contraction nodes with factors folded through
    contractions (`vector_work.py`), in `ops` where that is cheaper. Not for the eager unfused bound
    (`kernel_of`): a fold moves work between source ops, so between eager kernels."""
    work = VectorWork(graph, fold=True)
    for pos, (node, o) in enumerate(zip(node_ops(graph), ops, strict=True)):
        if o.matrix_dtype is not None:
            work.skip(node)
            continue
        if o.llm_flops is not None:  # no vector work is priced in an LLM's loop nest
            continue
        fv, tr = work.node(node)
        if work.folded:
            if fv <= o.flops_vector and tr <= o.flops_transcendental and \
                    (fv, tr) != (o.flops_vector, o.flops_transcendental):
                ops[pos] = replace(o, flops_vector=fv, flops_transcendental=tr, algorithm=FOLDED)


def _step_functions(nodes: Sequence[NodeOp], ops: list[OpCost]) -> None:
    """Each region of element-wise nodes that computes step functions of one element
    (`step_functions.py`: a quantiser's comparison cascade) costs one operation per distinct source
    element at each node read outside it, none elsewhere, where that is fewer."""
    for r in step_regions(nodes):
        if any(ops[p].algorithm is not None or ops[p].matrix_dtype is not None or ops[p].llm_flops is not None
               for p in r.nodes):
            continue
        cost = {p: st.footprint(nodes[p], r.source_dims) if r.source_dims else 1 for p in r.exits}
        if sum(cost.values()) >= sum(ops[p].flops_vector for p in r.nodes):
            continue
        into = ops[r.exits[-1]].source or ops[r.exits[-1]].name
        for p in r.nodes:
            o = ops[p]
            ops[p] = replace(o, flops_vector=cost.get(p, 0), flops_transcendental=0,
                             algorithm=STEP if p in cost else f"{STEP} (into {into})")


def _scan_prefix_sums(nodes: Sequence[NodeOp], ops: list[OpCost]) -> None:
    """Re-count the accumulation of sums over nested ranges as a scan's (`prefix_sums.py`): one
    addition per summand, not per point, where that is fewer."""
    for pos, (node, o) in enumerate(zip(nodes, ops, strict=True)):
        if o.matrix_dtype is not None or o.algorithm is not None or o.llm_flops is not None or \
                node.reduce.data != "add":
            continue
        adds = prefix_sum_adds(node)
        pts = st.points(node)
        if adds is not None and adds < pts <= o.flops_vector:
            ops[pos] = replace(o, flops_vector=o.flops_vector - pts + adds, algorithm=SCAN)


def _program_costs(graph: GraphOp, indirect: str) -> GraphCosts:
    if indirect not in INDIRECT:
        raise LoopIRError(f"unknown indirect counting {indirect!r}; expected traced or min")
    nodes = node_ops(graph)
    tensors = graph.tensor_ops()
    text, values, work = NodeText(graph), ValueDtypes(graph), VectorWork(graph)
    priced = st.llm_priced_products(nodes)
    ops = [_op_cost(text, tensors, n, indirect, values, work, i in priced) for i, n in enumerate(nodes)]
    sites = NodeSites(nodes, indirect)
    read_sites: dict[str, list[Site]] = {}
    write_sites: dict[str, list[Site]] = {}
    for s in node_slots(nodes):
        n = nodes[s.node]
        write_sites.setdefault(n.output_name, []).append(
            sites.site(s, n.get_indexing_maps().data[-1].data, n.output_name, True))
        if not s.init:  # an init stores a literal: it reads nothing
            for t, m, _ in sites.leaves(s.node):
                read_sites.setdefault(t, []).append(sites.site(s, m, t, False))
    compulsory: dict[str, int] = {}
    written = 0
    for name, t in tensors.items():
        role = t.role.data
        if role in ("input", "weight"):
            compulsory[name] = nbytes(t.dtype, distinct_elements(read_sites.get(name, [])))
        elif role == "output":
            if name not in write_sites:
                raise LoopIRError(f"output tensor '{name}' of kernel '{graph.kernel_name}' is never written")
            compulsory[name] = nbytes(t.dtype, distinct_elements(write_sites[name]))
            written += compulsory[name]
    return GraphCosts(graph.kernel_name, ops, sum(compulsory.values()), compulsory, written)


def _module_costs(module: ModuleOp) -> list[GraphCosts]:
    return [program_costs(g) for g in module_graphs(module)]


def _module_costs_min(module: ModuleOp) -> list[GraphCosts]:
    return [program_costs(g, "min") for g in module_graphs(module)]


def _module_costs_distinct(module: ModuleOp) -> list[GraphCosts]:  # from the cached costs as written
    with paused_gc():
        return [distinct_costs(p, g)
                for p, g in zip(module_graphs(module), module_costs(module), strict=True)]


def _module_costs_min_distinct(module: ModuleOp) -> list[GraphCosts]:
    with paused_gc():
        return [distinct_costs(p, g)
                for p, g in zip(module_graphs(module), module_costs(module, "min"), strict=True)]


def module_costs(module: ModuleOp, indirect: str = "traced", distinct: bool = False) -> list[GraphCosts]:
    """Costs of every program of a module (its einsum graphs, or its kernels before lift-einsum),
    computed once per module state (`manager.py`), way of counting indirect accesses and model
    (`distinct`: the default model's deduplicated work)."""
    from solar_compiler.analysis.manager import get_analysis

    if indirect not in INDIRECT:
        raise LoopIRError(f"unknown indirect counting {indirect!r}; expected traced or min")
    fns = {(False, False): _module_costs, (True, False): _module_costs_min,
           (False, True): _module_costs_distinct, (True, True): _module_costs_min_distinct}
    return get_analysis(module, fns[indirect == "min", distinct])

