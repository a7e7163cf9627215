"""The fewest vector operations a legal implementation of a program needs.

Counted literally, every scalar operation of every statement runs at every point of the statement's
domain: softmax costs 7 operations per element (its `exp(x - max)` is written twice), SDPA 10 per
score, an LSTM adds its two biases again at every time step. A kernel does about half of that, and
where vector work binds (attention with a small head dimension) the literal count makes the bound
too high. The count here is that of the cheapest evaluation the following rules allow (each one is
proved to keep the bound a lower bound in docs/bounds.md, "Minimal vector work"):

* **Loop-invariant terms once.** A subexpression is evaluated once per distinct value of the loop
  variables it depends on (`footprint` of its variables over the domain), not once per point:
  `b_ih[j] + b_hh[j]` written over (t, b, j) costs one addition per j.
* **Common subexpressions.** Equal subexpressions of one statement cost once; an expression of a
  later statement equal (after renaming its loop variables) to one an earlier statement computed
  costs only at the points the earlier ones did not cover, as long as no statement in between
  writes a tensor it reads: softmax's second `exp(x - max)` costs nothing.
* **Reciprocal-multiply (products reassociated).** A chain of multiplications and divisions is a
  product of factors; dividing by a factor is multiplying by its reciprocal, so the factors may be
  combined in any order, those that depend on fewer loop variables first, at their own footprint:
  `(x - m[c]) / sqrt(v[c] + e) * w[c]` is one multiplication per element by a per-channel scale.
  The chain costs its cheapest association order (exact, by dynamic programming over the factors).

* **Identities.** A factor or divisor of literal 1 and an addition or subtraction of literal 0 are
  no operations: what narrowing leaves of a 0/1 mask inside its region (`x[i, k] * 1.0` of `x @
  eye(n)` or of a band product).

* **Factors folded through contractions.** A factor of a product chain may be applied on the other
  side of a contraction, wherever it is cheapest: a factor of a read of a local that only a
  contraction writes (zero-initialised) multiplies one of that contraction's operands instead (SDPA's
  scale folded into Q: `(q k) c = (q c) k`, one operation per element of q, not per score), and a
  factor of a local that only contractions read, constant along their reduced variables, multiplies
  their outputs (or an operand) instead (softmax's `/ den` on O, not P: `sum_m (p / d) v = (sum_m
  p v) / d`). Nothing a folded factor reads may be written where it moves past. Only in the
  default model of computation (`fold`; docs/bounds.md section 0.0): `classical` keeps the
  products as written.

What stays literal: the accumulation of a reduction (one operation per point), contractions (their
own rules in `costs.contraction_flops`), and, conservatively, everything inside a scan loop whose
values may change from step to step (a read of a tensor the scan writes depends on the scan
variable) and any subexpression that reads the statement's own target.

How it reads the IR: one `einsum.node` at a time (`VectorWork.node`, nodes in program order), its
scalar body walked from its yield (`structured.py`). A subexpression's loop variables are the
node's dims it depends on (`NodeOp.value_dims`), its distinct values `structured.footprint`. An
expression of a later node equals one of an earlier node "after renaming loop variables" when their
keys are equal: each node's dims renamed in order of first occurrence in the expression (the
indexing maps composed with the permutation between the two nodes' loops), and a read's key holds
the SSA value of the tensor it reads, so "no write in between" is the same SSA operand (a write
makes a new value). The contraction folds still ask, by tensor name and node position, which nodes
write or read a local (`_writers`, `_readers_of`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import islpy as isl
from xdsl.ir import BlockArgument, Operation, SSAValue
from xdsl.ir.affine import AffineBinaryOpExpr, AffineConstantExpr, AffineDimExpr, AffineExpr, AffineSymExpr

from solar_compiler.analysis import structured as st
from solar_compiler.dialects.einsum import GatherOp, GraphOp, IndexOp, NodeOp, YieldOp
from solar_compiler.dialects.loop import BinaryOp, CastOp, CmpOp, ConstOp, SelectOp, UnaryOp

_OPS = (UnaryOp, BinaryOp, CmpOp, SelectOp)
_EXACT_FACTORS = 8  # product chains up to this many factors get the exact cheapest association order
#: `OpCost.algorithm` of a node whose vector work folds a factor through a contraction
FOLDED = "folded through a contraction"


@dataclass
class _Computed:
    """A subexpression some node computed: where, and over which of its dims (in the canonical
    order of the key)."""

    node: NodeOp
    order: tuple[int, ...]
    _points: isl.Set | None = field(default=None, repr=False)

    def points(self) -> isl.Set:
        if self._points is None:
            self._points = _projected(self.node, self.order)
        return self._points


class VectorWork:
    """Minimal vector operations per node of one einsum graph, nodes visited in program order
    (`node` / `skip` must be called in that order: the common subexpressions of earlier nodes are
    remembered, keyed on the SSA values they read, so a later write makes them unreachable)."""

    def __init__(self, graph: GraphOp, fold: bool = False):
        self.graph = graph
        self.fold = fold  # factors folded through contractions (the default model's catalogue)
        self._decls = graph.tensor_ops()
        self._nodes = graph.nodes()
        self._pos = {id(n): k for k, n in enumerate(self._nodes)}
        # tensors written inside each scan loop (by its `scopes` number): reads of them vary along it
        self._scan_writes: dict[int, set[str]] = {}
        self._writers: dict[str, list[NodeOp]] = {}
        self._readers_of: dict[str, list[NodeOp]] = {}
        for n in self._nodes:
            if len(n.ins) != len(n.inputs.data) or n.dest is None:
                raise ValueError(f"VectorWork: node {n.sym_name.data} of graph {graph.kernel_name}: "
                                 "edges not linked (einsum.link_edges)")
            scopes = n.ints(n.scopes)
            for d, k in enumerate(n.get_iterator_types().data):
                if k.data == "sequential":
                    self._scan_writes.setdefault(scopes[d], set()).add(n.output_name)
            self._writers.setdefault(n.output_name, []).append(n)
            for t in _read_names(n):
                self._readers_of.setdefault(t, []).append(n)
        self.folded = False  # whether the last node counted folded a factor through a contraction
        self._computed: dict[object, list[_Computed]] = {}
        self._last = -1

    # ---- per node -----------------------------------------------------------------------------------
    def node(self, node: NodeOp) -> tuple[int, int]:
        """(vector ops, transcendental ops) node `node` needs at least over its domain: its body's
        value and dynamic output indices by the module's rules, plus one accumulation per point of a
        reduction."""
        self._visit(node, "node")
        y = _yield(node)
        run = _Node(self, node)
        total = [0, 0]
        for v in (y.stored, *y.dyn_indices):
            n, t = run.count(v)
            total[0] += n
            total[1] += t
        if not run.in_scan:
            for key, comp in run.new:
                self._computed.setdefault(key, []).append(comp)
        self.folded = run.folded
        return total[0] + (node.reduce.data != "none") * st.points(node), total[1]

    def skip(self, node: NodeOp) -> None:
        """A node counted by other rules (a contraction): its write makes a new SSA value, so
        nothing to forget; only the program order is checked."""
        self._visit(node, "skip")

    def _visit(self, node: NodeOp, what: str) -> None:
        pos = self._pos.get(id(node))
        if pos is None:
            raise ValueError(f"VectorWork.{what}: node {node.sym_name.data} is not of graph "
                             f"{self.graph.kernel_name}")
        if pos <= self._last:
            raise ValueError(f"VectorWork.{what}: nodes must be visited in program order")
        self._last = pos

    def _not_computed(self, key: object, node: NodeOp, order: tuple[int, ...], total: int) -> int:
        """How many of the points (of its dims) at which `node` needs `key` no earlier node computed
        it at (`total` when none did)."""
        found = [c for c in self._computed.get(key, ()) if len(c.order) == len(order)]
        if not found:
            return total
        need = _projected(node, order)
        for c in found:
            need = need.subtract(c.points())
        return need.count_val().to_python()

    # ---- factors folded through contractions ---------------------------------------------------------
    def _local(self, name: str) -> bool:
        return self._decls[name].role.data == "local"

    def _contractions_writing(self, tensor: str) -> list[NodeOp] | None:
        """The contractions that write local `tensor`, when nothing else does but zero fills (a
        folded zero init included); each indexes it by loop variables or constants (a reassociated
        step indexes a decode's single query row by its value)."""
        if not self._local(tensor):
            return None
        out = []
        for w in self._writers.get(tensor, []):
            if _zero_fill(w):
                continue
            if not _zero_init(w) or w.reduce.data != "add" or _operands(w) is None or w.dynamic_positions or \
                    not all(isinstance(e, AffineDimExpr | AffineConstantExpr)
                            for e in w.get_indexing_maps().data[-1].data.results):
                return None
            out.append(w)
        return out or None

    def folds(self, node: NodeOp, factors: list[SSAValue]) -> tuple[set[int], int] | None:
        """Factors of a product chain of `node` that are cheaper applied on the other side of a
        contraction (module rules), and what applying them there costs; None: none is."""
        gone: set[int] = set()
        cost = 0
        for i, g in enumerate(factors):
            tensors = _reads(node, g)
            if node.output_name in tensors:
                continue
            gv = node.value_dims(g)
            best = self._fold_forward(node, i, factors, gv, tensors)
            back = self._fold_back(node, gv, tensors)
            options = [x for x in (best, back) if x is not None]
            if options:
                gone.add(i)
                cost += min(options)
        return (gone, cost) if gone and len(gone) < len(factors) else None

    def _fold_forward(self, node: NodeOp, i: int, factors: list[SSAValue], gv: frozenset[int],
                      tensors: frozenset[str]) -> int | None:
        """`g` (factor i, reading `tensors`) multiplies a read of a local only contractions write:
        the fewest operations of applying it to one of each such contraction's operands instead
        (when nothing `g` reads is written from the first of them on)."""
        best = None
        for j, r in enumerate(factors):
            if j == i or not isinstance(r, BlockArgument):
                continue
            rmap = node.get_indexing_maps().data[r.index].data
            if not _bare(rmap.results) or not gv <= node.value_dims(r):
                continue
            pos = {x.position: k for k, x in enumerate(rmap.results)}  # type: ignore[union-attr]
            cost = self._into_writers(node.input_names[r.index], frozenset(pos[v] for v in gv), tensors, 0)
            if cost is not None and (best is None or cost < best):
                best = cost
        return best

    def _into_writers(self, name: str, need_pos: frozenset[int], tensors: frozenset[str],
                      depth: int) -> int | None:
        """The fewest operations of applying a factor that varies along positions `need_pos` of local
        `name` in the contractions that write it: each at one of its operands, or, where that operand
        is a local only this contraction reads and only contractions write (a reassociated chain:
        `(q W_UK) c_kv`), further up the chain."""
        writers = self._contractions_writing(name)
        if writers is None:
            return None
        first = min(self._pos[id(w)] for w in self._writers[name])
        if any(self._pos[id(w)] >= first for t in tensors for w in self._writers.get(t, [])):
            return None
        total = 0
        for c in writers:
            out = c.get_indexing_maps().data[-1].data.results
            need = {e.position for k in need_pos for e in [out[k]] if isinstance(e, AffineDimExpr)}
            memo: dict[SSAValue, frozenset[int]] = {}
            fits = []
            for x in _operands(c) or ():
                dims = c.value_dims(x, memo)
                if need <= dims:
                    fits.append(st.footprint(c, dims))
                if depth >= 4 or not isinstance(x, BlockArgument):
                    continue
                t = c.input_names[x.index]
                xmap = c.get_indexing_maps().data[x.index].data.results
                at = {e.position: k for k, e in enumerate(xmap) if isinstance(e, AffineDimExpr)}
                if self._local(t) and self._readers_of.get(t) == [c] and need <= set(at) and \
                        all(isinstance(e, AffineDimExpr | AffineConstantExpr) for e in xmap):
                    deeper = self._into_writers(t, frozenset(at[d] for d in need), tensors, depth + 1)
                    if deeper is not None:
                        fits.append(deeper)
            if not fits:
                return None
            total += min(fits)
        return total

    def _fold_back(self, node: NodeOp, gv: frozenset[int], tensors: frozenset[str]) -> int | None:
        """`g` multiplies the value of a local that only contractions read, where `g` is constant
        along their reduced variables: the fewest operations of applying it to their outputs (or
        an operand) instead."""
        out_name = node.output_name
        writes = sum(1 + (w.init is not None) for w in self._writers.get(out_name, []))
        if node.reduce.data != "none" or not self._local(out_name) or not _bare_output(node) or writes != 1:
            return None
        if not gv <= node.output_dims():
            return None
        return self._into_readers(node, gv, tensors, 0)

    def _into_readers(self, node: NodeOp, gv: frozenset[int], tensors: frozenset[str],
                      depth: int) -> int | None:
        """The fewest operations of applying a factor over `node`'s dims `gv` (output dims) in the
        contractions that read `node`'s output, each at its output or an operand, or, where that
        output is a local only such contractions read in turn (a reassociated chain: `P @ c_kv`, then
        `@ W_UV`), further down the chain."""
        out_name = node.output_name
        omap = node.get_indexing_maps().data[-1].data
        pos = {x.position: k for k, x in enumerate(omap.results)}  # type: ignore[union-attr]
        intervals = node.get_static_loop_intervals()
        here = self._pos[id(node)]
        total = 0
        readers = self._readers_of.get(out_name, [])
        for c in readers:
            ops = _operands(c)
            mine = [x for x in ops or () if _read_name(c, x) == out_name]
            there = self._pos[id(c)]
            if ops is None or len(mine) != 1 or not isinstance(mine[0], BlockArgument) or there < here:
                return None
            mmap = c.get_indexing_maps().data[mine[0].index].data
            if not _bare_or_single(mmap.results, omap.results, intervals):
                return None
            between = {w.output_name for w in self._nodes[here + 1:there]}
            if c.init is not None:  # its folded init runs before it, after `node`
                between.add(c.output_name)
            if between & tensors or self._contractions_writing(c.output_name) is None and \
                    self._local(c.output_name):
                return None
            if not self._zero_initialised(c):
                return None
            need = frozenset(e.position for v in gv for e in [mmap.results[pos[v]]]
                             if isinstance(e, AffineDimExpr))
            if not need <= c.output_dims():
                return None
            memo: dict[SSAValue, frozenset[int]] = {}
            fits = [st.footprint(c, c.output_dims())]
            fits += [st.footprint(c, c.value_dims(x, memo)) for x in ops
                     if x is not mine[0] and need <= c.value_dims(x, memo)]
            if depth < 4 and self._local(c.output_name) and _bare_output(c) and \
                    self._contractions_writing(c.output_name) == [c] and self._readers_of.get(c.output_name):
                deeper = self._into_readers(c, need, tensors, depth + 1)
                if deeper is not None:
                    fits.append(deeper)
            total += min(fits)
        return total if readers else None

    def _zero_initialised(self, c: NodeOp) -> bool:
        """Contraction `c`'s output holds only its sum: every other write of it is a zero fill."""
        return _zero_init(c) and all(w is c or _zero_fill(w) for w in self._writers.get(c.output_name, []))


def _yield(node: NodeOp) -> YieldOp:
    y = node.body.block.last_op
    assert isinstance(y, YieldOp)
    return y


def _body_ops(node: NodeOp, values: tuple[SSAValue, ...]) -> list[Operation]:
    """The ops of the node's body the values are computed from (a gather's source, a tensor value
    of the graph, is not followed)."""
    block = node.body.block
    seen: set[Operation] = set()
    stack = list(values)
    while stack:
        o = stack.pop().owner
        if isinstance(o, Operation) and o not in seen and o.parent_block() is block:
            seen.add(o)
            stack.extend(o.operands)
    return list(seen)


def _bare(results: tuple[AffineExpr, ...]) -> bool:
    return all(isinstance(x, AffineDimExpr) for x in results)


def _bare_or_single(results: tuple[AffineExpr, ...], written: tuple[AffineExpr, ...],
                    intervals: tuple[tuple[int, int], ...]) -> bool:
    """A reader's map of a tensor a node writes at `written` (bare): each index a loop variable, or
    the constant the writer's variable takes as its one value (a decode's single query row, which
    a reassociated order indexes by its value): a factor varies along no such position."""
    return all(isinstance(x, AffineDimExpr) or (isinstance(x, AffineConstantExpr) and
                                                 intervals[w.position] == (x.value, x.value))  # type: ignore[union-attr]
               for x, w in zip(results, written, strict=True))


def _bare_output(node: NodeOp) -> bool:
    return not node.dynamic_positions and _bare(node.get_indexing_maps().data[-1].data.results)


def _zero_init(node: NodeOp) -> bool:
    """No folded init, or a folded zero."""
    return node.init is None or node.init.value.data == 0


def _zero_fill(node: NodeOp) -> bool:
    """A node that stores the literal 0 (an unfolded zero init)."""
    o = _yield(node).stored.owner
    return node.reduce.data == "none" and node.init is None and isinstance(o, ConstOp) and \
        o.value.value.data == 0


def _operands(c: NodeOp) -> list[SSAValue] | None:
    """The factors of an `add` reduction that vary along its reduced dims (at least two), else None."""
    if c.reduce.data != "add":
        return None
    reduced = st.reduced_dims(c)
    memo: dict[SSAValue, frozenset[int]] = {}
    dep = [f for f in st.product_factors(_yield(c).stored) if c.value_dims(f, memo) & reduced]
    return dep if len(dep) >= 2 else None


def _read_name(node: NodeOp, v: SSAValue) -> str | None:
    """The tensor a body value reads directly (a block argument or a gather), else None."""
    if isinstance(v, BlockArgument):
        return node.input_names[v.index]
    return v.owner.tensor_name if isinstance(v.owner, GatherOp) else None


def _reads(node: NodeOp, v: SSAValue) -> frozenset[str]:
    """Tensors a body value reads."""
    out = {_read_name(node, v)}
    for o in _body_ops(node, (v,)):
        if isinstance(o, GatherOp):
            out.add(o.tensor_name)
        out.update(_read_name(node, x) for x in o.operands if isinstance(x, BlockArgument))
    out.discard(None)
    return frozenset(out)  # type: ignore[arg-type]


def _read_names(node: NodeOp) -> list[str]:
    """One entry per tensor read of the body the yield uses (a tensor read at two places twice)."""
    y = _yield(node)
    args: set[BlockArgument] = {x for x in (y.stored, *y.dyn_indices) if isinstance(x, BlockArgument)}
    out = []
    for o in _body_ops(node, (y.stored, *y.dyn_indices)):
        if isinstance(o, GatherOp):
            out.append(o.tensor_name)
        args.update(x for x in o.operands if isinstance(x, BlockArgument))
    out += [node.input_names[a.index] for a in sorted(args, key=lambda a: a.index)]
    return out


class _Node:
    def __init__(self, work: VectorWork, node: NodeOp):
        self.work, self.node = work, node
        kinds = node.get_iterator_types().data
        self.in_scan = any(k.data == "sequential" for k in kinds)
        scopes = node.ints(node.scopes)
        self._scans = [(d, work._scan_writes.get(scopes[d], set())) for d, k in enumerate(kinds)
                       if k.data == "sequential"]
        self.seen: set[object] = set()
        self.folded = False  # a factor was cheaper folded through a contraction
        self.new: list[tuple[object, _Computed]] = []
        self._fp: dict[frozenset[int], int] = {}
        self._dims: dict[SSAValue, frozenset[int]] = {}

    # dims a subexpression's value depends on, and how many distinct values they take
    def evars(self, v: SSAValue) -> frozenset[int]:
        rd = _reads(self.node, v)
        if self.node.output_name in rd:
            return frozenset(range(self.node.get_num_loops()))
        vs = set(self.node.value_dims(v, self._dims))
        for d, written in self._scans:
            if rd & written:
                vs.add(d)
        return frozenset(vs)

    def points(self, vs: frozenset[int]) -> int:
        if vs not in self._fp:
            self._fp[vs] = st.footprint(self.node, vs) if vs else 1
        return self._fp[vs]

    # ---- counting -------------------------------------------------------------------------------
    def count(self, v: SSAValue) -> tuple[int, int]:
        o = v.owner
        if isinstance(v, BlockArgument) or not isinstance(o, Operation):
            return 0, 0
        if isinstance(o, BinaryOp) and o.fn.data in ("add", "sub") and _literal_is(o.rhs, 0):
            return self.count(o.lhs)  # x + 0 and x - 0 are x: no operation
        if isinstance(o, BinaryOp) and o.fn.data == "add" and _literal_is(o.lhs, 0):
            return self.count(o.rhs)
        if not isinstance(o, _OPS):
            n = t = 0
            # a gather's index arithmetic (not its source, a tensor value), a cast's operand
            for c in (o.indices if isinstance(o, GatherOp) else o.operands):
                a, b = self.count(c)
                n, t = n + a, t + b
            return n, t
        key, order = _canonical(self.node, v)
        if (key, order) in self.seen:
            return 0, 0
        self.seen.add((key, order))
        points = self._new_points(v, key, order)
        if points == 0:  # computed by earlier nodes at every point needed, operands included
            return 0, 0
        if isinstance(o, BinaryOp) and o.fn.data in ("mul", "div"):
            return self._chain(v)
        n, t = points, 0
        if st.is_transcendental(o):
            t = n
        for c in o.operands:
            a, b = self.count(c)
            n, t = n + a, t + b
        return n, t

    def _new_points(self, v: SSAValue, key: object, order: tuple[int, ...]) -> int:
        """The points (of its dims) at which `v` is needed here and no earlier node computed it;
        this node's computation is remembered for later ones."""
        vs = self.evars(v)
        total = self.points(vs)
        if self.in_scan:
            return total
        if set(order) != set(vs):  # a value depending on more than its indices (own output)
            return total
        new = self.work._not_computed(key, self.node, order, total)
        self.new.append((key, _Computed(self.node, order)))
        return new

    def _chain(self, v: SSAValue) -> tuple[int, int]:
        """A product chain: its multiplications and divisions at the cheapest association order
        (`_cheapest_product`; the written one is among them), plus its factors."""
        factors: list[SSAValue] = []
        _split(v, factors)
        # a factor (or divisor) of literal 1 is no operation: what narrowing leaves of a 0/1 mask
        # inside its region (`x * 1.0`), a scale of 1
        factors = [f for f in factors if not _literal_is(f, 1)] or factors[:1]
        sets = [self.evars(f) for f in factors]
        n, t = self._cheapest_product(sets), 0
        moved = self.work.folds(self.node, factors) if self.work.fold else None
        if moved is not None:
            gone, cost = moved
            folded = self._cheapest_product([x for i, x in enumerate(sets) if i not in gone]) + cost
            if folded < n:
                n, self.folded = folded, True
        for f in factors:
            a, b = self.count(f)
            n, t = n + a, t + b
        return n, t

    def _cheapest_product(self, sets: list[frozenset[int]]) -> int:
        """The fewest operations of any association order of a product of factors with these dim
        sets (a division is a multiplication by the reciprocal of the divisor, whose product is
        divided out in one operation): every binary combination costs one operation per distinct
        value of the union of its operands' dims. Exact by dynamic programming over subsets up
        to `_EXACT_FACTORS` factors; beyond, the root alone (one operation per point of the whole
        product), which no order beats."""
        k = len(sets)
        full = frozenset().union(*sets)
        if k > _EXACT_FACTORS:
            return self.points(full)
        best: dict[int, int] = {1 << i: 0 for i in range(k)}
        union: dict[int, frozenset[int]] = {1 << i: s for i, s in enumerate(sets)}
        for mask in range(1, 1 << k):
            if mask in best:
                continue
            low = mask & -mask
            rest = mask ^ low
            union[mask] = union[low] | union[rest]
            cost = None
            sub = rest
            while True:  # splits (A, mask - A) with the lowest factor in A
                a = sub | low
                b = mask ^ a
                if b:
                    c = best[a] + best[b]
                    cost = c if cost is None else min(cost, c)
                if not sub:
                    break
                sub = (sub - 1) & rest
            best[mask] = (cost or 0) + self.points(union[mask])
        return best[(1 << k) - 1]


def _literal_is(v: SSAValue, value: float) -> bool:
    """Whether `v` is a literal equal to `value` (through casts, which keep 0 and 1 exact)."""
    while isinstance(v.owner, CastOp):
        v = v.owner.x
    o = v.owner
    return isinstance(o, ConstOp) and float(o.value.value.data) == value


def _split(v: SSAValue, factors: list[SSAValue]) -> None:
    """The factors of a multiplication/division chain (a divisor is a factor too)."""
    o = v.owner
    if isinstance(o, BinaryOp) and o.fn.data in ("mul", "div"):
        _split(o.lhs, factors)
        _split(o.rhs, factors)
        return
    factors.append(v)


def _canonical(node: NodeOp, v: SSAValue) -> tuple[object, tuple[int, ...]]:
    """A key of `v` with the node's dims renamed in order of first occurrence (equal keys: the same
    expression up to renaming loop variables, reading the same tensor values), and that order."""
    order: list[int] = []
    env: dict[int, int] = {}
    memo: dict[SSAValue, object] = {}
    maps = node.get_indexing_maps().data

    def aff(e: AffineExpr) -> object:
        if isinstance(e, AffineDimExpr):
            if e.position not in env:
                env[e.position] = len(order)
                order.append(e.position)
            return ("d", env[e.position])
        if isinstance(e, AffineSymExpr):
            return ("s", e.position)
        if isinstance(e, AffineConstantExpr):
            return ("c", e.value)
        assert isinstance(e, AffineBinaryOpExpr)
        return (e.kind, aff(e.lhs), aff(e.rhs))

    def key(x: SSAValue) -> object:
        if x in memo:
            return memo[x]
        if isinstance(x, BlockArgument):
            got: object = ("in", node.ins[x.index], tuple(aff(r) for r in maps[x.index].data.results))
        else:
            o = x.owner
            assert isinstance(o, Operation)
            if isinstance(o, GatherOp):
                got = ("gather", o.source, tuple(aff(r) for r in o.map.data.results),
                       tuple(key(i) for i in o.indices), x.type)
            elif isinstance(o, IndexOp):
                got = ("index", tuple(aff(r) for r in o.map.data.results))
            else:
                got = (o.name, tuple(sorted((k, str(a)) for k, a in o.properties.items())), x.type,
                       tuple(key(i) for i in o.operands))
        memo[x] = got
        return got

    k = key(v)
    return k, tuple(order)


def _projected(node: NodeOp, order: tuple[int, ...]) -> isl.Set:
    """The distinct values of the dims `order` over the node's domain, as a set P[...]."""
    dom = st.domain(node)
    dims = ", ".join(f"d{i}" for i in range(node.get_num_loops()))
    names = ", ".join(f"_c{k}" for k in range(len(order)))
    m = isl.Map(f"{{ S[{dims}] -> P[{names}] : "
                f"{' and '.join(f'_c{k} = d{d}' for k, d in enumerate(order)) or 'true'} }}")
    return m.intersect_domain(dom).range()
