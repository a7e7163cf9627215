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
    Const,
    IndexValue,
    Kernel,
    Read,
    Select,
    SExpr,
    StmtContext,
    Unary,
    expr_vars,
    product_factors,
    reads,
    statements,
)

_OPS = (Unary, Binary, Cmp, Select)
_EXACT_FACTORS = 8  # product chains up to this many factors get the exact cheapest association order
#: `OpCost.algorithm` of a statement whose vector work folds a factor through a contraction
FOLDED = "folded through a contraction"


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

    def __init__(self, kernel: Kernel, fold: bool = False):
        self.kernel = kernel
        self.fold = fold  # factors folded through contractions (the default model's catalogue)
        ctxs = statements(kernel)
        # tensors written inside each scan loop (by id): reads of them vary along its variable
        self._scan_writes: dict[int, set[str]] = {}
        for c in ctxs:
            for f in c.loops:
                if f.sequential:
                    self._scan_writes.setdefault(id(f), set()).add(c.stmt.target)
        self.folded = False  # whether the last statement counted folded a factor through a contraction
        self._ctxs = ctxs
        self._writers: dict[str, list[StmtContext]] = {}
        self._readers_of: dict[str, list[StmtContext]] = {}
        for c in ctxs:
            self._writers.setdefault(c.stmt.target, []).append(c)
            for r in reads(c.stmt.value):
                self._readers_of.setdefault(r.tensor, []).append(c)
        self._computed: dict[SExpr, list[_Computed]] = {}
        # tensor -> keys of `_computed` whose values read it (may hold stale or repeated keys): a
        # write visits only those (an expression's hash walks its whole tree, so no full scan)
        self._readers: dict[str, list[SExpr]] = {}
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
                for t in comp.tensors:
                    self._readers.setdefault(t, []).append(key)
        self._forget(ctx.stmt.target)
        self.folded = run.folded
        return total[0], total[1]

    def skip(self, ctx: StmtContext) -> None:
        """A statement counted by other rules (a contraction): only its write is noted."""
        if ctx.index <= self._last:
            raise ValueError("VectorWork.skip: statements must be visited in program order")
        self._last = ctx.index
        self._forget(ctx.stmt.target)

    def _forget(self, tensor: str) -> None:
        """A statement wrote `tensor`: values computed from it earlier are stale."""
        for key in self._readers.pop(tensor, ()):
            comps = self._computed.get(key)
            if comps is None:
                continue
            kept = [c for c in comps if tensor not in c.tensors]
            if not kept:
                del self._computed[key]
            elif len(kept) < len(comps):
                self._computed[key] = kept

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


    # ---- factors folded through contractions ---------------------------------------------------------
    def _local(self, name: str) -> bool:
        return self.kernel.tensor(name).role == "local"

    def _contractions_writing(self, tensor: str) -> list[StmtContext] | None:
        """The contractions that write local `tensor`, when nothing else does but zero fills."""
        if not self._local(tensor):
            return None
        out = []
        for c in self._writers.get(tensor, []):
            s = c.stmt
            if s.kind == "=" and isinstance(s.value, Const) and s.value.value == 0:
                continue
            if s.kind != "+=" or _operands(c) is None or not _bare(s.indices):
                return None
            out.append(c)
        return out or None

    def folds(self, ctx: StmtContext, factors: list[SExpr]) -> tuple[set[int], int] | None:
        """Factors of a product chain of statement `ctx` that are cheaper applied on the other side
        of a contraction (module rules), and what applying them there costs; None: none is."""
        gone: set[int] = set()
        cost = 0
        for i, g in enumerate(factors):
            tensors = frozenset(r.tensor for r in reads(g))
            if ctx.stmt.target in tensors:
                continue
            gv = expr_vars(g)
            best = self._fold_forward(i, factors, gv, tensors)
            back = self._fold_back(ctx, gv, tensors)
            options = [x for x in (best, back) if x is not None]
            if options:
                gone.add(i)
                cost += min(options)
        return (gone, cost) if gone and len(gone) < len(factors) else None

    def _fold_forward(self, i: int, factors: list[SExpr], gv: set[str],
                      tensors: frozenset[str]) -> int | None:
        """`g` (factor i, reading `tensors`) multiplies a read of a local only contractions write:
        the fewest operations of applying it to one of each such contraction's operands instead
        (when nothing `g` reads is written from the first of them on)."""
        best = None
        for j, r in enumerate(factors):
            if j == i or not isinstance(r, Read) or not _bare(r.indices):
                continue
            writers = self._contractions_writing(r.tensor)
            if writers is None or not gv <= expr_vars(r):
                continue
            first = min(c.index for c in self._writers[r.tensor])
            if any(c.index >= first for t in tensors for c in self._writers.get(t, [])):
                continue
            pos = {str(x.terms[0][0]): k for k, x in enumerate(r.indices)}  # type: ignore[union-attr]
            total = 0
            for c in writers:
                out = [str(x.terms[0][0]) for x in c.stmt.indices]  # type: ignore[union-attr]
                need = {out[pos[v]] for v in gv}
                fits = [footprint(c, [AffExpr.var(v) for v in sorted(expr_vars(x))])
                        for x in _operands(c) or () if need <= expr_vars(x)]
                if not fits:
                    total = None
                    break
                total += min(fits)
            if total is not None and (best is None or total < best):
                best = total
        return best

    def _fold_back(self, ctx: StmtContext, gv: set[str], tensors: frozenset[str]) -> int | None:
        """`g` multiplies the value of a local that only contractions read, where `g` is constant
        along their reduced variables: the fewest operations of applying it to their outputs (or
        an operand) instead."""
        s = ctx.stmt
        if s.kind != "=" or not self._local(s.target) or not _bare(s.indices) or \
                len(self._writers.get(s.target, [])) != 1:
            return None
        if not gv <= s.target_vars:
            return None
        pos = {str(x.terms[0][0]): k for k, x in enumerate(s.indices)}  # type: ignore[union-attr]
        total = 0
        for c in self._readers_of.get(s.target, []):
            ops = _operands(c)
            mine = [x for x in ops or () if isinstance(x, Read) and x.tensor == s.target]
            if ops is None or len(mine) != 1 or not _bare(mine[0].indices) or c.index < ctx.index:
                return None
            between = {w.stmt.target for w in self._ctxs[ctx.index + 1:c.index]}
            if between & tensors or self._contractions_writing(c.stmt.target) is None and \
                    self._local(c.stmt.target):
                return None
            if not self._zero_initialised(c):
                return None
            need = {str(mine[0].indices[pos[v]].terms[0][0]) for v in gv}  # type: ignore[union-attr]
            if not need <= c.stmt.target_vars:
                return None
            fits = [footprint(c, [AffExpr.var(v) for v in sorted(c.stmt.target_vars)])]
            fits += [footprint(c, [AffExpr.var(v) for v in sorted(expr_vars(x))])
                     for x in ops if x is not mine[0] and need <= expr_vars(x)]
            total += min(fits)
        return total if self._readers_of.get(s.target) else None

    def _zero_initialised(self, c: StmtContext) -> bool:
        """Contraction `c`'s target holds only its sum: every other write of it is a zero fill."""
        for w in self._writers.get(c.stmt.target, []):
            if w is c:
                continue
            if not (w.stmt.kind == "=" and isinstance(w.stmt.value, Const) and w.stmt.value.value == 0):
                return False
        return True


def _bare(indices: tuple) -> bool:
    return all(isinstance(x, AffExpr) and x.is_var() for x in indices)


def _operands(c: StmtContext) -> list[SExpr] | None:
    """The factors of contraction `c` that vary along its reduced variables (at least two), else None."""
    if c.stmt.kind != "+=":
        return None
    reduced = set(c.ivs) - c.stmt.target_vars
    dep = [f for f in product_factors(c.stmt.value) if expr_vars(f) & reduced]
    return dep if len(dep) >= 2 else None


class _Statement:
    def __init__(self, work: VectorWork, ctx: StmtContext):
        self.work, self.ctx = work, ctx
        self.in_scan = any(f.sequential for f in ctx.loops)
        self.seen: set[SExpr] = set()
        self.folded = False  # a factor was cheaper folded through a contraction
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
        sets = [self.evars(f) for f, _ in factors]
        n, t = self._cheapest_product(sets), 0
        moved = self.work.folds(self.ctx, [f for f, _ in factors]) if self.work.fold else None
        if moved is not None:
            gone, cost = moved
            folded = self._cheapest_product([x for i, x in enumerate(sets) if i not in gone]) + cost
            if folded < n:
                n, self.folded = folded, True
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
