"""Needed-work narrowing: shrink each statement's domain to the points whose result reaches an output.

Kernels run statement by statement (non-scan loops carry no dependence: executor/legality.py), so
two islpy analyses at statement granularity are exact enough to be useful and sound:

1. Forward, known values: regions of every tensor whose elements hold a known constant, from
   literal fills, selects whose condition is an affine comparison of loop variables (a causal mask,
   also through a bool mask tensor filled that way), and constant folding with the executor's own
   arithmetic (exp(-inf) = 0, -inf - x = -inf, 0 * x = 0, 0 / x = 0, max(x, inf) = inf). Rules that
   absorb an unknown operand assume it is finite (and a divisor non-zero, as a softmax row sum with
   one unmasked entry is): masked positions are then exact whenever the data is. A
   statement's reads of a tensor written in the same scan loop are unknown.
2. Backward, needed elements (least fixpoint): every output element is needed; a point of a
   statement is kept iff it writes a needed element, is not a reduction contribution known to be
   the identity (x += 0, m max= -inf), and is not an `=` write overwritten in a later loop nest with
   no read of the tensor in between; the reads of kept points are needed, except a select branch its
   known condition never takes.

A kept point whose value is a known constant becomes a constant store (`T[..] = c`, no reads), so no
kept point ever reads an element that the narrowed kernel no longer computes. An indirect write (a
scatter: a dynamic target index) is never narrowed, its reads are needed on its whole domain, and it
is taken to touch every element along its dynamic dimensions: it ends every known value there,
neither kills nor is killed, and a scattered reduction needs all those elements (its accumulators).
Value-dependent masks (a mask tensor that is an input) are not narrowed. Regions become `if` guards
(one copy of the statement per disjoint convex piece); an empty loop or `if` is removed.

Here: the two walks over the program (the forward known values, the kills). The statement records,
the known-value folding, the live reads and the backward fixpoint are statement-level machinery on
the loop AST that the backward slice of sampled validation runs too: `executor/needed.py`.
"""

from __future__ import annotations

import bisect

import islpy as isl

from solar_compiler.executor.needed import (
    Known,
    _access,
    _check_deadline,
    _empty_like,
    _kept,
    _live,
    _merge,
    _nonempty,
    _reach,
    _Stmt,
    _tensor_box,
    _union,
    _Values,
    backward,
)
from solar_compiler.executor.numeric import identity
from solar_compiler.loopir.affine import solo_vars
from solar_compiler.loopir.ast import Assign, Const, For, Kernel, Node, statements, stmt_reads
from solar_compiler.loopir.domain import domain, footprint, iteration_count, loop_ranges


def needed_points(k: Kernel) -> list[_Stmt]:
    """One round of the analysis on a typechecked kernel: per statement (program order), its kept
    points (`kept`), the regions where its value is a known constant (`root`) and the known values
    when it runs (`values`). Plain records: the rewrite that applies them is
    `transforms/narrow.py`."""
    stmts = [_Stmt(c, domain(c)) for c in statements(k)]
    _forward(k, stmts)
    _kills(k, stmts)
    _backward(k, stmts)
    return stmts


# ---- kills and the backward fixpoint --------------------------------------------------------------------
def _forward(k: Kernel, stmts: list[_Stmt]) -> None:
    vals = _Values(k)
    for st in stmts:
        _check_deadline()
        ctx, s = st.ctx, st.ctx.stmt
        scans = [f for f in ctx.loops if f.sequential]
        vals.dirty = _written_in(stmts, scans[0]) if scans else set()
        st.values = vals.snapshot({r.tensor for r in stmt_reads(s)})
        if s.indirect:
            _forward_indirect(k, vals, st)
            continue
        root = vals.of(s.value, ctx, st.dom)
        acc = _access(ctx, s.target, s.indices)
        written = acc.intersect_domain(st.dom).range()
        if s.kind != "=":
            ident = identity(s.kind, k.tensor(s.target).dtype)
            st.drop = root.pop(ident, _empty_like(st.dom))
        injective = (solo_vars(s.indices) >= set(ctx.ivs)
                     or iteration_count(ctx) == footprint(ctx, s.indices))
        # Copies of a statement run one after the other (statement-at-a-time), so an injective `=`
        # may be split into pieces or constant stores, and a reduction outside scans into pieces (its
        # contributions combine in any order: a block-diagonal product keeps its two blocks);
        # anything else keeps one copy on a convex region, with its reads live everywhere.
        st.splittable = (s.kind == "=" and injective) or (s.kind != "=" and not scans)
        st.root = root if s.kind == "=" and st.splittable and not isinstance(s.value, Const) else {}
        stored = _union(st.root.values(), st.dom)
        if st.drop is not None and st.splittable:
            stored = stored.union(st.drop)
        st.live = _live(vals, s.value, ctx, st.dom.subtract(stored))
        # update the known values of the target
        table = vals.known[s.target]
        if s.kind == "=" and not scans:
            new: Known = {}
            for v, r in root.items():
                new[v] = acc.intersect_domain(r).range() if injective else \
                    written.subtract(acc.intersect_domain(st.dom.subtract(r)).range())
            if isinstance(s.value, Const):
                new = {s.value.value: written}
            vals.known[s.target] = _merge({v: e.subtract(written) for v, e in table.items()}, new)
        else:
            live = st.dom if st.drop is None else st.dom.subtract(st.drop)
            touched = written if scans else acc.intersect_domain(live).range()
            vals.known[s.target] = _nonempty({v: e.subtract(touched) for v, e in table.items()})


def _forward_indirect(k: Kernel, vals: _Values, st: _Stmt) -> None:
    """A scatter: kept whole (one copy, no constant stores), every read live on its domain, and
    every element it may touch no longer holds a known value."""
    s = st.ctx.stmt
    st.splittable = False
    st.live = [x for e in (s.value, *s.dynamic_indices) for x in _live(vals, e, st.ctx, st.dom)]
    touched = _reach(k, st)
    vals.known[s.target] = _nonempty({v: e.subtract(touched) for v, e in vals.known[s.target].items()})


def _written_in(stmts: list[_Stmt], loop: For) -> set[str]:
    return {st.ctx.stmt.target for st in stmts if any(f is loop for f in st.ctx.loops)}


def _top_level(k: Kernel) -> dict[int, int]:
    """Statement index -> index of the top-level node that contains it."""
    out: dict[int, int] = {}
    ids = {id(c.stmt): c.index for c in statements(k)}

    def go(n: Node, top: int) -> None:
        if isinstance(n, Assign):
            out[ids[id(n)]] = top
        else:
            for c in n.body:
                go(c, top)

    for t, n in enumerate(k.body):
        go(n, t)
    return out


def _kills(k: Kernel, stmts: list[_Stmt]) -> None:
    top = _top_level(k)
    readers: dict[str, set[int]] = {}
    for st in stmts:
        s = st.ctx.stmt
        for r in stmt_reads(s):
            readers.setdefault(r.tensor, set()).add(top[st.ctx.index])
        if s.kind != "=":
            readers.setdefault(s.target, set()).add(top[st.ctx.index])
    writes: dict[int, isl.Map] = {}  # statement index -> its write relation over its domain

    def written(st: _Stmt) -> isl.Map:
        if st.ctx.index not in writes:
            s = st.ctx.stmt
            writes[st.ctx.index] = _access(st.ctx, s.target, s.indices).intersect_domain(st.dom)
        return writes[st.ctx.index]

    by_target: dict[str, list[_Stmt]] = {}  # the statements writing each tensor, in program order
    rank: dict[int, int] = {}  # statement index -> its position in its target's list
    for st in stmts:
        writers = by_target.setdefault(st.ctx.stmt.target, [])
        rank[st.ctx.index] = len(writers)
        writers.append(st)
    read_at = {t: sorted(ts) for t, ts in readers.items()}
    ranges: dict[int, isl.Set] = {}
    boxes: dict[int, list[tuple[int, int]] | None] = {}
    for w in stmts:
        sw = w.ctx.stmt
        if sw.kind != "=" or sw.indirect:  # a scatter's elements are unknown: it is never killed
            continue
        apart = False  # a later writer whose elements cannot meet w's (a concatenation's slices)
        for w2 in by_target[sw.target][rank[w.ctx.index] + 1:]:  # the later writers only
            s2 = w2.ctx.stmt
            t1, t2 = top[w.ctx.index], top[w2.ctx.index]
            if s2.kind != "=" or t2 == t1:
                continue
            rs = read_at.get(sw.target, [])
            j = bisect.bisect_left(rs, t1)
            if j < len(rs) and rs[j] <= t2:
                break  # a read in between (or in either nest): nothing later kills
            if s2.indirect:
                continue  # may write fewer elements than it reaches: kills nothing
            if _disjoint(_write_box(w, boxes), _write_box(w2, boxes)):
                apart = True  # kills nothing: the isl intersection would be empty
                continue
            if w2.ctx.index not in ranges:
                ranges[w2.ctx.index] = written(w2).range()
            dead = written(w).intersect_range(ranges[w2.ctx.index]).domain()
            w.kill = dead if w.kill is None else w.kill.union(dead)
        if apart and w.kill is None:
            w.kill = isl.Set.empty(w.dom.get_space())


def _write_box(st: _Stmt, memo: dict[int, list[tuple[int, int]] | None]) -> list[tuple[int, int]] | None:
    """Per target dimension, an interval holding every element the statement writes (its loops'
    ranges through the affine indices, guards ignored); None when a bound is not constant."""
    i = st.ctx.index
    if i not in memo:
        rng = loop_ranges(st.ctx)
        memo[i] = None if rng is None else [e.bounds(rng) for e in st.ctx.stmt.indices]  # type: ignore[union-attr]
    return memo[i]


def _disjoint(a: list[tuple[int, int]] | None, b: list[tuple[int, int]] | None) -> bool:
    return a is not None and b is not None and any(
        hi1 < lo2 or hi2 < lo1 for (lo1, hi1), (lo2, hi2) in zip(a, b, strict=True))


def _backward(k: Kernel, stmts: list[_Stmt]) -> None:
    backward(k, stmts, {t.name: _tensor_box(k, t.name) for t in k.by_role("output")}, _kept)
