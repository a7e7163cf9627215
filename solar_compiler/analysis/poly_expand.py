"""Polynomial expansion of a summed body: the catalogue entry of the default model of computation
that prices `sum_k (x_ik - y_jk)^2` as `||x_i||^2 - 2 x_i . y_j + ||y_j||^2`, what `torch.cdist`,
scikit-learn's `euclidean_distances` and every k-means kernel compute (docs/bounds.md, section 0.0).
`costs.py` applies it to distinct costs (`--algorithms default`).

A sum reduction whose body is, through the element-wise locals that only feed it, a polynomial in
its reads (add, sub, mul, neg, a literal scale or divisor, an integer power, exact widening casts)
equals in real arithmetic the sum of its monomials, each a product of reads summed over the reduced
variables. Each monomial is priced in the cheapest order this entry knows:

* a power of a read is vector work over the read's own variables (`x_ik^2` over (i, k), not
  (i, j, k)); a factor whose variables lie inside another's is multiplied into it there;
* a reduced variable only one factor reads is summed over that factor alone (`sum_k x_ik^2` is a
  norm over (i, k)); a factor without reduced variables multiplies the sum per output element;
* the two factors left that share reduced variables are one contraction on the matrix unit
  (2 FLOPs per point of their joint variables), at the matrix dtype of their tensors (`pair_dtype`;
  where the dtype rules give no matrix rate the pricing runs it on the vector unit); a monomial
  with three or more such factors is not expanded (nor is the node);
* combining: one add per monomial beyond the first per output element (plus one when the node
  accumulates into an earlier value), a literal coefficient applied to the monomial's smallest
  factor; a minus sign is the subtraction.

Without a product for the matrix unit the expansion is distributivity and loop-invariant factoring
of vector work: `sum_j (a_i + b_j)` is `n a_i + sum_j b_j`, `mean(1 - s)` is `1 - mean(s)`; it is
taken on the same terms (fewer FLOPs, vector work not rising).

Only exact polynomials: a `max`, `exp`, `abs` or a gather anywhere stops the entry (an L1 distance
keeps its figure). The node takes the expansion when it needs fewer FLOPs than it and the locals it
absorbs as written (or as many, with vector work moved to the matrix unit: `(x[:, :, None] * w[None])
.sum(1)` is `x @ w`), and the graph's matrix work after it stays within its matrix or its vector work
as written: a matrix FLOP is never priced slower than a vector FLOP of the same dtype
(`hw/pricing.py`), so under the fused bound's max over units no target's bound rises. An expansion
with fewer FLOPs that trades matrix work for more vector work (`(x[None] + c[:, None, None]) @ w`:
`x @ w` once, and one addition per output element) is taken with the way back: each target may
compute any share of the output as written instead (`OpCost.revert_matrix`, `bounds.balance`).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from fractions import Fraction

from xdsl.ir import BlockArgument, SSAValue

from solar_compiler.analysis import structured as st
from solar_compiler.analysis.polyhedral import node_indices, node_loop_ranges, writes_whole
from solar_compiler.analysis.value_dtypes import join
from solar_compiler.dialects.einsum import GraphOp, NodeOp
from solar_compiler.dialects.loop import BinaryOp, CastOp, ConstOp, UnaryOp
from solar_compiler.loopir.affine import AffExpr
from solar_compiler.loopir.affine_map import to_affine_expr

POLY = "polynomial expansion"  # how the names of its entries start (`catalogue.Rewrite.words`)
MAX_MONOMIALS = 32
MAX_VISITS = 4096  # scalar ops and reads visited per node: a deep DAG of locals is given up, not walked
_FLOATS = {"f16": 2, "bf16": 2, "f32": 4, "f64": 8}

Factor = tuple[str, tuple[AffExpr, ...]]  # a read: tensor, indices over the node's variables
Monomial = tuple[Factor, ...]             # its factors, sorted, repeated for a power
Poly = dict[Monomial, Fraction]


def _widens(src: str, dst: str) -> bool:
    """Whether a cast from `src` to `dst` is exact for every value (f16 or bf16 to f32, f32 to f64)."""
    return src in _FLOATS and dst in _FLOATS and _FLOATS[dst] > _FLOATS[src]


class _NotPolynomial(Exception):
    """The body is no polynomial this entry expands."""


@dataclass(frozen=True)
class Expansion:
    """The price of one sum node after expansion, and the element-wise producers it absorbs."""

    node: int                   # position of the sum node
    absorbed: tuple[int, ...]   # positions of the locals' writers whose work the expansion replaces
    flops_matrix: int
    flops_vector: int
    matrix_dtype: str | None
    words: str                  # "3 monomials: 1 matrix product, 2 vector" for the report
    flops_sum: int = 0          # the part of flops_vector that is additions of sums


def _key(f: Factor) -> tuple[str, tuple[str, ...]]:
    return f[0], tuple(str(e) for e in f[1])


def _mul(a: Poly, b: Poly) -> Poly:
    out: Poly = {}
    for ma, ca in a.items():
        for mb, cb in b.items():
            m = tuple(sorted(ma + mb, key=_key))
            out[m] = out.get(m, Fraction(0)) + ca * cb
    if len(out) > MAX_MONOMIALS:
        raise _NotPolynomial
    return {m: c for m, c in out.items() if c}


def _starts_at_zero(n: NodeOp) -> bool:
    """Whether the sum accumulates into zeros: a folded zero init, or a zero fill of the whole tensor
    before it (an unfolded one)."""
    if n.init is not None:
        return n.init.value.data == 0
    fill = st.init_producer(n)
    return fill is not None and st.whole_fill(fill, 0)


def _add(a: Poly, b: Poly, sign: int = 1) -> Poly:
    out = dict(a)
    for m, c in b.items():
        out[m] = out.get(m, Fraction(0)) + sign * c
    if len(out) > MAX_MONOMIALS:
        raise _NotPolynomial
    return {m: c for m, c in out.items() if c}


def _const(v: SSAValue) -> Fraction | None:
    o = v.owner
    if isinstance(o, ConstOp):
        x = o.value.value.data
        return Fraction(x) if math.isfinite(x) else None
    return None


class GraphTables:
    """What every expansion in a graph looks up: each tensor's role, dtype and shape, and each
    node's position; built once per graph (`expand` of every node shares it)."""

    def __init__(self, graph: GraphOp, nodes: Sequence[NodeOp]):
        decls = graph.tensor_ops()
        self.roles = {t: d.role.data for t, d in decls.items()}
        self.dtypes = {t: d.dtype for t, d in decls.items()}
        self.shapes = {t: NodeOp.ints(d.shape) for t, d in decls.items()}
        self.positions = {x: i for i, x in enumerate(nodes)}


class _Builder:
    """The polynomial of a node's stored value over reads of tensors no absorbed local writes."""

    def __init__(self, tables: GraphTables):
        self.roles, self.dtypes, self.shapes = tables.roles, tables.dtypes, tables.shapes
        self.positions = tables.positions
        self.absorbed: list[NodeOp] = []
        self.inlined: dict[tuple[NodeOp, tuple[AffExpr, ...]], Poly] = {}
        self.visits = 0

    def node(self, n: NodeOp, subst: dict[str, AffExpr] | None) -> Poly:
        if n.dynamic_positions or NodeOp.ints(n.guard_scopes):
            raise _NotPolynomial
        return self.value(n, st.stored_value(n), subst, {})

    def value(self, n: NodeOp, v: SSAValue, subst: dict[str, AffExpr] | None,
              memo: dict[SSAValue, Poly]) -> Poly:
        if v in memo:
            return memo[v]
        self.visits += 1
        if self.visits > MAX_VISITS:
            raise _NotPolynomial
        got = self._value(n, v, subst, memo)
        memo[v] = got
        return got

    def _value(self, n: NodeOp, v: SSAValue, subst: dict[str, AffExpr] | None,
               memo: dict[SSAValue, Poly]) -> Poly:
        if isinstance(v, BlockArgument):
            return self.read(n, v.index, subst)
        o = v.owner
        c = _const(v)
        if c is not None:
            return {(): c} if c else {}
        if isinstance(o, CastOp):
            src, dst = str(o.x.type), str(o.result.type)
            if src != dst and not _widens(src, dst):
                raise _NotPolynomial  # a narrowing cast rounds: no polynomial
            return self.value(n, o.x, subst, memo)
        if isinstance(o, UnaryOp) and o.fn.data == "neg":
            return {m: -c for m, c in self.value(n, o.x, subst, memo).items()}
        if isinstance(o, BinaryOp):
            fn = o.fn.data
            if fn in ("add", "sub"):
                return _add(self.value(n, o.lhs, subst, memo), self.value(n, o.rhs, subst, memo),
                            1 if fn == "add" else -1)
            if fn == "mul":
                return _mul(self.value(n, o.lhs, subst, memo), self.value(n, o.rhs, subst, memo))
            if fn == "div":
                d = _const(o.rhs)
                if not d:
                    raise _NotPolynomial
                return {m: c / d for m, c in self.value(n, o.lhs, subst, memo).items()}
            if fn == "pow":
                e = _const(o.rhs)
                if e is None or e.denominator != 1 or not 1 <= e <= 4:
                    raise _NotPolynomial
                base = self.value(n, o.lhs, subst, memo)
                out: Poly = {(): Fraction(1)}
                for _ in range(int(e)):
                    out = _mul(out, base)
                return out
        raise _NotPolynomial

    def read(self, n: NodeOp, i: int, subst: dict[str, AffExpr] | None) -> Poly:
        idx = node_indices(n, i)
        if subst is not None:
            idx = tuple(e.substitute(subst) for e in idx)
        tensor = n.input_names[i]
        w = st.producer(n, i)
        if w is not None and self._inlinable(w, tensor):
            outs = node_indices(w, len(w.get_indexing_maps().data) - 1)
            inner = {str(o.terms[0][0]): e for o, e in zip(outs, idx, strict=True)}
            if w not in self.absorbed:
                self.absorbed.append(w)
            if (w, idx) not in self.inlined:
                self.inlined[w, idx] = self.node(w, inner)
            return self.inlined[w, idx]
        return {((tensor, idx),): Fraction(1)}

    def _inlinable(self, w: NodeOp, tensor: str) -> bool:
        """A local fully written, element-wise, by one node that nothing else partially overwrites."""
        return self.roles.get(tensor) == "local" and w in self.positions and \
            writes_whole(w, tuple(self.shapes[tensor]))


def _vars(f: Factor) -> frozenset[str]:
    return frozenset().union(*(e.vars() for e in f[1])) if f[1] else frozenset()


@dataclass
class _Priced:
    matrix: int = 0
    vector: int = 0
    adds: int = 0  # the part of `vector` that is additions of sums (a matrix unit may take them)
    pairs: tuple[tuple[frozenset[str], frozenset[str]], ...] = ()  # each matrix product's operands' tensors


def _price_monomial(m: Monomial, coeff: Fraction, reduced: frozenset[str], size: dict[str, int],
                    distinct: Callable[[Sequence[AffExpr]], int], out: _Priced) -> None:
    """Add the monomial's work, summed over `reduced`, to `out` (module docstring); raises
    _NotPolynomial where three or more factors share reduced variables. `distinct` counts the
    distinct values of index expressions over the node's domain: a product is computed once per
    distinct tuple of the values it multiplies (`x[i % n, k] * w[k, j]` over i < 8 n is n products
    per (k, j), broadcast), as the distinct-products entry counts a contraction's."""
    def points(vs: frozenset[str]) -> int:
        return math.prod(size[v] for v in vs)

    # a factor: (variables, tensors it multiplies, the indices its values are a function of); a power
    # is vector work over the read's own variables
    factors: list[tuple[frozenset[str], frozenset[str], tuple[AffExpr, ...]]] = []
    for f, e in Counter(m).items():
        vs = _vars(f)
        if not vs <= size.keys():  # a loaded position (a map symbol): no loop variable to price over
            raise _NotPolynomial
        out.vector += (e - 1) * points(vs)
        factors.append((vs, frozenset({f[0]}), f[1]))
    read = frozenset().union(*(f[0] for f in factors))  # a reduced variable no factor reads scales the sum
    changed = True
    while changed:
        changed = False
        inner = [f for f in factors if f[0] & reduced]
        for a in inner:  # a factor inside another's variables is multiplied into it there
            b = next((b for b in inner if b is not a and a[0] <= b[0]), None)
            if b is not None:
                out.vector += points(b[0])
                factors.remove(a)
                factors[factors.index(b)] = (b[0], a[1] | b[1], b[2] + a[2])
                changed = True
                break
        if changed:
            continue
        for i, (vs, ts, _) in enumerate(factors):  # a reduced variable no other factor reads: summed alone
            others = frozenset().union(*(g[0] for j, g in enumerate(factors) if j != i))
            own = (vs & reduced) - others
            if own:
                out.vector += points(vs) - points(vs - own)
                out.adds += points(vs) - points(vs - own)
                factors[i] = (vs - own, ts, tuple(AffExpr.var(v) for v in sorted(vs - own)))
                changed = True
                break
    inner = [f for f in factors if f[0] & reduced]
    if len(inner) > 2:
        raise _NotPolynomial
    scale = coeff * math.prod(size[v] for v in reduced - read)
    result_index: list[AffExpr] = []
    if inner:
        (va, ta, ea), (vb, tb, eb) = inner
        out.matrix += 2 * min(points(va | vb), distinct((*ea, *eb)))
        out.pairs += ((ta, tb),)
        result_index = [AffExpr.var(v) for v in sorted((va | vb) - reduced)]
    if abs(scale) != 1:  # a literal coefficient, applied to the smallest factor
        out.vector += min((points(f[0]) for f in factors), default=1)
    outer = [f for f in factors if not f[0] & reduced]
    result = len(outer) + (1 if inner else 0)
    if result > 1:  # the rest multiply once per distinct tuple of their values
        at = frozenset().union(*(f[0] for f in factors)) - reduced
        values = (*(e for f in outer for e in f[2]), *result_index)
        out.vector += (result - 1) * min(points(at), distinct(values))


def expand(graph: GraphOp, nodes: Sequence[NodeOp], pos: int,
           pair_dtype: Callable[[Iterable[str]], str], tables: GraphTables | None = None) -> Expansion | None:
    """The expansion of the sum node at `pos`, or None where its body is no polynomial over a box
    domain (module docstring; one monomial: a broadcast multiply summed, a matrix product; a
    contraction of one monomial is the node as it is); `pair_dtype` gives a matrix product's dtype;
    `tables`: the graph's (built here when not given)."""
    n = nodes[pos]
    if n.reduce.data != "add" or n.dynamic_positions or NodeOp.ints(n.guard_scopes):
        return None
    ranges = node_loop_ranges(n)
    size = {v: hi - lo + 1 for v, (lo, hi) in ranges.items()}
    if any(lo != 0 for lo, _ in ranges.values()) or st.points(n) != math.prod(size.values()):
        return None
    builder = _Builder(tables or GraphTables(graph, nodes))
    dtype_of = builder.dtypes
    try:
        poly = builder.node(n, None)
        if not poly or len(poly) == 1 and st.contraction_factors(n) is not None:
            return None  # one monomial of a contraction: the node as it is
        out_idx = node_indices(n, len(n.get_indexing_maps().data) - 1)
        if not all(e.is_var() for e in out_idx):
            return None
        outs = frozenset(str(e.terms[0][0]) for e in out_idx)
        reduced = frozenset(n.iv_names) - outs
        priced = _Priced()
        ivs = n.iv_names

        def distinct(exprs: Sequence[AffExpr]) -> int:
            return st.image_count(n, [to_affine_expr(e, ivs) for e in exprs])

        for m, c in poly.items():
            _price_monomial(m, c, reduced, size, distinct, priced)
    except _NotPolynomial:
        return None
    if not priced.pairs and len(poly) == 1:
        return None  # one monomial, no product: a factor lifted out of a sum (association, folding)
    adds = len(poly) - 1 + (0 if _starts_at_zero(n) else 1)
    priced.vector += adds * math.prod(size[v] for v in outs)
    priced.adds += adds * math.prod(size[v] for v in outs)
    dtypes = [pair_dtype([join(dtype_of[t] for t in a), join(dtype_of[t] for t in b)])
              for a, b in priced.pairs]
    mdt = pair_dtype(dtypes) if dtypes else None
    gone = {n, *builder.absorbed}
    while True:  # a local's writer is absorbed when only absorbed nodes read it
        keep = {w for w in gone - {n} if not set(st.consumers(w)) <= gone}
        if not keep:
            break
        gone -= keep
    absorbed = tuple(sorted(builder.positions[w] for w in gone - {n}))
    n_matrix = len(priced.pairs)
    words = f"{len(poly)} monomial{'s' * (len(poly) != 1)}, {n_matrix} on the matrix unit, " \
        f"{len(poly) - n_matrix} vector"
    return Expansion(pos, absorbed, priced.matrix, priced.vector, mdt, words, priced.adds)
