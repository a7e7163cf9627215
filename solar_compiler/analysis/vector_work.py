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

What stays literal: the accumulation of a reduction (one operation per point), contractions (their
own rules in `costs.contraction_flops`), and, conservatively, everything inside a scan loop whose
values may change from step to step (a read of a tensor the scan writes depends on the scan
variable) and any subexpression that reads the statement's own target.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import islpy as isl

from solar_compiler.analysis.polyhedral import domain, footprint
from solar_compiler.loopir.affine import AffExpr
from solar_compiler.loopir.ast import (
    TRANSCENDENTAL,
    Binary,
    Cast,
    Cmp,
    IndexValue,
    Kernel,
    Read,
    Select,
    SExpr,
    StmtContext,
    Unary,
    expr_vars,
    reads,
    statements,
)

_OPS = (Unary, Binary, Cmp, Select)
_EXACT_FACTORS = 8  # product chains up to this many factors get the exact cheapest association order


def is_transcendental(e: SExpr) -> bool:
    return (isinstance(e, Unary) and e.fn in TRANSCENDENTAL) or (isinstance(e, Binary) and e.fn == "pow")


def literal_ops(e: SExpr) -> tuple[int, int]:
    """(scalar ops, transcendental ops) of one evaluation of `e` as written: a subexpression object
    reached twice (an SSA value used twice in MLIR) is computed once."""
    n = t = 0
    seen: set[int] = set()
    stack = [e]
    while stack:
        x = stack.pop()
        if id(x) in seen:
            continue
        seen.add(id(x))
        if isinstance(x, _OPS):
            n += 1
            t += is_transcendental(x)
        stack.extend(x.children)
    return n, t


@dataclass
class _Computed:
    """A subexpression some statement computed: where, over which of its loop variables (in the
    canonical order of the key), and which tensors its value depends on."""

    ctx: StmtContext
    order: tuple[str, ...]
    tensors: frozenset[str]
    _points: isl.Set | None = field(default=None, repr=False)

    def points(self) -> isl.Set:
        if self._points is None:
            self._points = _projected(self.ctx, self.order)
        return self._points


class VectorWork:
    """Minimal vector operations per statement of one kernel, statements visited in program order
    (`statement` must be called in that order: common subexpressions of earlier statements are
    remembered until a statement writes a tensor they read)."""

    def __init__(self, kernel: Kernel):
        self.kernel = kernel
        ctxs = statements(kernel)
        # tensors written inside each scan loop (by id): reads of them vary along its variable
        self._scan_writes: dict[int, set[str]] = {}
        for c in ctxs:
            for f in c.loops:
                if f.sequential:
                    self._scan_writes.setdefault(id(f), set()).add(c.stmt.target)
        self._computed: dict[SExpr, list[_Computed]] = {}
        self._last = -1

    # ---- per statement ----------------------------------------------------------------------------
    def statement(self, ctx: StmtContext, exprs: tuple[SExpr, ...]) -> tuple[int, int]:
        """(vector ops, transcendental ops) the expressions `exprs` of statement `ctx` (its value and
        dynamic target indices) need at least, over the statement's domain."""
        if ctx.index <= self._last:
            raise ValueError("VectorWork.statement: statements must be visited in program order")
        self._last = ctx.index
        run = _Statement(self, ctx)
        total = [0, 0]
        for e in exprs:
            n, t = run.count(e)
            total[0] += n
            total[1] += t
        if not run.in_scan:
            for key, comp in run.new:
                self._computed.setdefault(key, []).append(comp)
        self._forget(ctx.stmt.target)
        return total[0], total[1]

    def skip(self, ctx: StmtContext) -> None:
        """A statement counted by other rules (a contraction): only its write is noted."""
        if ctx.index <= self._last:
            raise ValueError("VectorWork.skip: statements must be visited in program order")
        self._last = ctx.index
        self._forget(ctx.stmt.target)

    def _forget(self, tensor: str) -> None:
        """A statement wrote `tensor`: values computed from it earlier are stale."""
        for key in list(self._computed):
            kept = [c for c in self._computed[key] if tensor not in c.tensors]
            if kept:
                self._computed[key] = kept
            else:
                del self._computed[key]

    def _not_computed(self, key: SExpr, ctx: StmtContext, order: tuple[str, ...], total: int) -> int:
        """How many of the points (of its variables) at which `ctx` needs `key` no earlier statement
        computed it at (`total` when none did)."""
        found = [c for c in self._computed.get(key, ()) if len(c.order) == len(order)]
        if not found:
            return total
        need = _projected(ctx, order)
        for c in found:
            need = need.subtract(c.points())
        return need.count_val().to_python()


class _Statement:
    def __init__(self, work: VectorWork, ctx: StmtContext):
        self.work, self.ctx = work, ctx
        self.in_scan = any(f.sequential for f in ctx.loops)
        self.seen: set[SExpr] = set()
        self.new: list[tuple[SExpr, _Computed]] = []
        self._fp: dict[frozenset[str], int] = {}

    # variables a subexpression's value depends on, and how many distinct values they take
    def evars(self, e: SExpr) -> frozenset[str]:
        s = self.ctx.stmt
        rd = {r.tensor for r in reads(e)}
        if s.target in rd:
            return frozenset(self.ctx.ivs)
        vs = set(expr_vars(e))
        for f in self.ctx.loops:
            if f.sequential and rd & self.work._scan_writes.get(id(f), set()):
                vs.add(f.iv)
        return frozenset(vs)

    def points(self, vs: frozenset[str]) -> int:
        if vs not in self._fp:
            self._fp[vs] = footprint(self.ctx, [AffExpr.var(v) for v in sorted(vs)]) if vs else 1
        return self._fp[vs]

    # ---- counting -------------------------------------------------------------------------------
    def count(self, e: SExpr) -> tuple[int, int]:
        if not isinstance(e, _OPS):
            n = t = 0
            for c in e.children:  # a gather's index arithmetic, a cast's operand
                a, b = self.count(c)
                n, t = n + a, t + b
            return n, t
        if e in self.seen:
            return 0, 0
        self.seen.add(e)
        points = self._new_points(e)
        if points == 0:  # computed by earlier statements at every point needed, children included
            return 0, 0
        if isinstance(e, Binary) and e.fn in ("mul", "div"):
            return self._chain(e)
        n, t = points, 0
        if is_transcendental(e):
            t = n
        for c in e.children:
            a, b = self.count(c)
            n, t = n + a, t + b
        return n, t

    def _new_points(self, e: SExpr) -> int:
        """The points (of its variables) at which `e` is needed here and no earlier statement
        computed it; this statement's computation is remembered for later ones."""
        vs = self.evars(e)
        total = self.points(vs)
        if self.in_scan:
            return total
        key, order = _canonical(e)
        if set(order) != set(vs):  # a value depending on more than its indices (own target)
            return total
        new = self.work._not_computed(key, self.ctx, order, total)
        self.new.append((key, _Computed(self.ctx, order, frozenset(r.tensor for r in reads(e)))))
        return new

    def _chain(self, e: Binary) -> tuple[int, int]:
        """A product chain: its multiplications and divisions at the cheapest association order
        (`_cheapest_product`; the written one is among them), plus its factors."""
        factors: list[tuple[SExpr, bool]] = []
        nodes: list[SExpr] = []
        _split(e, True, factors, nodes)
        n, t = self._cheapest_product([self.evars(f) for f, _ in factors]), 0
        for f, _ in factors:
            a, b = self.count(f)
            n, t = n + a, t + b
        return n, t

    def _cheapest_product(self, sets: list[frozenset[str]]) -> int:
        """The fewest operations of any association order of a product of factors with these variable
        sets (a division is a multiplication by the reciprocal of the divisor, whose product is
        divided out in one operation): every binary combination costs one operation per distinct
        value of the union of its operands' variables. Exact by dynamic programming over subsets up
        to `_EXACT_FACTORS` factors; beyond, the root alone (one operation per point of the whole
        product), which no order beats."""
        k = len(sets)
        full = frozenset().union(*sets)
        if k > _EXACT_FACTORS:
            return self.points(full)
        best: dict[int, int] = {1 << i: 0 for i in range(k)}
        union: dict[int, frozenset[str]] = {1 << i: s for i, s in enumerate(sets)}
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


def _split(e: SExpr, num: bool, factors: list[tuple[SExpr, bool]], nodes: list[SExpr]) -> None:
    """The factors of a multiplication/division chain (numerator or not) and its operation nodes."""
    if isinstance(e, Binary) and e.fn in ("mul", "div"):
        nodes.append(e)
        _split(e.a, num, factors, nodes)
        _split(e.b, num if e.fn == "mul" else not num, factors, nodes)
        return
    factors.append((e, num))


def _canonical(e: SExpr) -> tuple[SExpr, tuple[str, ...]]:
    """`e` with its loop variables renamed in order of first occurrence, and that order."""
    order: list[str] = []

    def note(a: AffExpr) -> None:
        for v in sorted(a.vars(), key=str):
            if v not in order:
                order.append(v)

    for x in e.walk():
        if isinstance(x, Read):
            for i in x.indices:
                if isinstance(i, AffExpr):
                    note(i)
        elif isinstance(x, IndexValue):
            note(x.expr)
    env = {v: AffExpr.var(f"_c{k}") for k, v in enumerate(order)}
    return _rename(e, env), tuple(order)


def _rename(e: SExpr, env: dict[str, AffExpr]) -> SExpr:
    from dataclasses import replace

    if isinstance(e, Read):
        return replace(e, indices=tuple(i.substitute(env) if isinstance(i, AffExpr) else _rename(i, env)
                                        for i in e.indices))
    if isinstance(e, IndexValue):
        return replace(e, expr=e.expr.substitute(env))
    if isinstance(e, Unary):
        return replace(e, x=_rename(e.x, env))
    if isinstance(e, Cast):
        return replace(e, x=_rename(e.x, env))
    if isinstance(e, Binary | Cmp):
        return replace(e, a=_rename(e.a, env), b=_rename(e.b, env))
    if isinstance(e, Select):
        return replace(e, cond=_rename(e.cond, env), a=_rename(e.a, env), b=_rename(e.b, env))
    return e


def _projected(ctx: StmtContext, order: tuple[str, ...]) -> isl.Set:
    """The distinct values of the variables `order` over the statement's domain, as a set P[...]."""
    dom = domain(ctx)
    names = ", ".join(f"_c{k}" for k in range(len(order)))
    m = isl.Map(f"{{ S{ctx.index}[{', '.join(ctx.ivs)}] -> P[{names}] : "
                f"{' and '.join(f'_c{k} = {v}' for k, v in enumerate(order)) or 'true'} }}")
    return m.intersect_domain(dom).range()
