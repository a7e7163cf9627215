"""CTC loss (`aten._ctc_loss`, what `F.ctc_loss` becomes): torch's forward (alpha) recursion in log
space (`aten/src/ATen/native/LossCTC.cpp`), every batch element at its own input and target length.

The extended target l' of a row (blanks around and between its labels, states s < 2S + 1) is walked
in a `scan` over time; every state of every row is updated at every step:

    alpha[t, s] = logsumexp(alpha[t-1, s], alpha[t-1, s-1], alpha[t-1, s-2]) + lp[t, l'_s]

two terms for a blank state (even s), three for a label state, its s-2 term -inf where its label
equals the previous label (`rep`: no skip over the blank between two equal labels); each
logsumexp as torch's kernel computes it: `m + log(sum exp(a - m))`, m the largest term (at least
the dtype's lowest finite value, so that states not yet reachable stay -inf, where torch sets m = 0).
The lengths are values: they choose no loop bound. The labels a row reads past its target length
are the blank (so padding may hold any value), and its loss is read, through the lengths, at row
`input_length` of the alpha table and states `2 * target_length` and `2 * target_length - 1`: the
table has a row 0 before the first step (state 0 at log 1: an input of length 0 gives 0 for an
empty target, inf otherwise, as torch's), and a column of -inf before state 0 (the state "-1" an
empty target's second term and the first states' `s-1`, `s-2` terms read). The steps a shorter
input does not take are computed all the same and never read: the nest runs the padded extents
(T steps of 2S + 1 states per row), where torch's kernels stop each row at its own lengths, which
are values. So the nest is a stand-in (`Translator.mark_stand_in`): its traffic is counted, no
compute term (the lengths' work is not known before the values are, and the bound errs low).

The loss reduction and `zero_infinity` are later ops of the graph (`eq inf` / `where`, `clamp` /
`div` / `mean`, `sum`); `zero_infinity` is also an argument only torch's backward reads. Export
cannot trace `_ctc_loss` (log_alpha's width is a value), so the dispatch recorder captures it: a
value-dependent program, validated on the fresh samples that capture the same kernel again (all do:
no length is traced into it).
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from solar_compiler.frontends.builder.exprs import (
    add,
    c,
    cast,
    cmp,
    index_read,
    index_value,
    maximum,
    mul,
    select,
    sub,
    un,
)
from solar_compiler.frontends.builder.translator import Translator
from solar_compiler.frontends.builder.values import Loop, Val, stored
from solar_compiler.frontends.captured_program import AtenNode
from solar_compiler.loopir.affine import AffExpr
from solar_compiler.loopir.ast import Index, Read, SExpr, TensorDecl

from ..registry import template

_LOWEST = {"f64": float(np.finfo(np.float64).min), "f32": float(np.finfo(np.float32).min)}


def _lengths(tr: Translator, arg: object, n: int, hint: str) -> Val:
    """A lengths argument as an [N] integer value: the tensor itself, or (a list, `_ctc_loss.default`)
    a table of its literals."""
    if isinstance(arg, (list, tuple)):
        if len(arg) != n:
            raise tr.error(f"{len(arg)} {hint} for a batch of {n}")
        table = tr.declare(f"{tr.out_meta().name}_{hint}", (n,), "i64")
        for k, v in enumerate(arg):
            tr.emit(table, [AffExpr.lit(k)], "=", c(int(v), "i64"), [])
        return stored(table)
    v = tr.val(arg)
    if v.shape != (n,):
        raise tr.error(f"{hint} of shape {list(v.shape)} for a batch of {n}")
    return v


def _logsumexp(terms: list[SExpr], m: SExpr) -> SExpr:
    """log(sum exp(a - m)) + m."""
    total = None
    for a in terms:
        e = un("exp", sub(a, m))
        total = e if total is None else add(total, e)
    assert total is not None
    return add(un("log", total), m)


def _stabiliser(terms: list[SExpr], low: SExpr) -> SExpr:
    """The largest of `terms`, at least `low`: m of `_logsumexp`."""
    m = terms[0]
    for a in terms[1:]:
        m = maximum(m, a)
    return maximum(m, low)


@template("aten._ctc_loss.Tensor", "aten._ctc_loss.default")
def _ctc_loss(tr: Translator, node: AtenNode) -> Val:
    """(log_probs [T, N, C], targets [N, S], input_lengths [N], target_lengths [N], blank,
    zero_infinity) -> the negative log-likelihood of each row [N] (and log_alpha, unused)."""
    lp, tg = tr.val(node.args[0]), tr.val(node.args[1])
    blank = int(tr.arg(4, "blank", 0))  # type: ignore[call-overload]
    tr.mark_stand_in()
    if tr.used(1):
        raise tr.error("no loop-IR template for _ctc_loss's log_alpha output (its width, "
                       "2 * max(target_lengths) + 1, is a value)")
    if lp.ndim != 3:
        raise tr.error(f"no loop-IR template for _ctc_loss of rank-{lp.ndim} log_probs")
    if tg.ndim != 2:
        raise tr.error("no loop-IR template for _ctc_loss with concatenated (1-D) targets: each row's offset "
                       "and the longest target are values (pad them to [N, S])")
    T, N, C = lp.shape
    S = tg.shape[1]
    if tg.shape[0] != N or T < 1 or not 0 <= blank < C:
        raise tr.error(f"_ctc_loss of log_probs {list(lp.shape)}, targets {list(tg.shape)}, blank {blank}")
    il = _lengths(tr, node.args[2], N, "input_lengths")
    tl = _lengths(tr, node.args[3], N, "target_lengths")
    out = tr.result()
    dt = out.dtype
    if dt not in _LOWEST:
        raise tr.error(f"no loop-IR template for _ctc_loss in {dt} (torch's kernels: float32, float64)")
    hint = out.name
    neg_inf, low = c(-math.inf, dt), c(_LOWEST[dt], dt)
    b, j, r, k = (AffExpr.var(v) for v in ("b", "j", "r", "k"))
    lit = AffExpr.lit
    B_l = Loop("b", 0, N)

    # the labels of each row, the blank past its target length; rep: a label equal to the one before
    lab = tr.declare(f"{hint}_label", (N, S), "i64")
    rep = tr.declare(f"{hint}_repeat", (N, S), "bool")
    if S:
        own = cmp("lt", index_value(j), index_read(tl, [b]))
        value = select(own, index_read(tg, [b, j]), c(blank, "i64"))
        tr.emit(lab, [b, j], "=", value, [B_l, Loop("j", 0, S)])
        tr.emit(rep, [b, lit(0)], "=", c(False, "bool"), [B_l])
    if S > 1:
        same = cmp("eq", Read(lab.name, (b, j), "i64"), Read(lab.name, (b, j - 1), "i64"))
        tr.emit(rep, [b, j], "=", same, [B_l, Loop("j", 1, S)])

    def label(at: AffExpr) -> SExpr:
        return Read(lab.name, (b, at), "i64")

    def lp_at(t: AffExpr, cls: Index) -> SExpr:
        return cast(lp.read([t, b, cls]), dt)

    # alpha[row, b, 1 + s]: row 0 before the first step, row t + 1 after step t; column 0 is -inf
    W = 2 * S + 2
    alpha = tr.declare(f"{hint}_alpha", (T + 1, N, W), dt)
    tr.emit(alpha, [r, b, lit(0)], "=", neg_inf, [Loop("r", 0, T + 1), B_l])
    if W > 3:
        tr.emit(alpha, [r, b, k], "=", neg_inf, [Loop("r", 0, 2), B_l, Loop("k", 3, W)])
    tr.emit(alpha, [lit(0), b, lit(1)], "=", c(0, dt), [B_l])
    tr.emit(alpha, [lit(1), b, lit(1)], "=", lp_at(lit(0), lit(blank)), [B_l])
    if S:
        tr.emit(alpha, [lit(0), b, lit(2)], "=", neg_inf, [B_l])
        tr.emit(alpha, [lit(1), b, lit(2)], "=", lp_at(lit(0), label(lit(0))), [B_l])
    if T > 1:
        m_blank = tr.declare(f"{hint}_max_blank", (N, S + 1), dt)
        m_label = tr.declare(f"{hint}_max_label", (N, S), dt)
        with tr.inside(Loop("r", 2, T + 1, sequential=True)):
            _step(tr, alpha, m_blank, lit(blank), 0, None, lp_at, S + 1)
            if S:
                _step(tr, alpha, m_label, label(j), 1, rep, lp_at, S)

    # the loss: -logsumexp of states 2L and 2L - 1 (columns 2L + 1, 2L) at row input_length
    at = index_read(il, [b])
    two_l = mul(index_read(tl, [b]), c(2, "i64"))
    ends = [Read(alpha.name, (at, b, add(two_l, c(1, "i64"))), dt), Read(alpha.name, (at, b, two_l), dt)]
    m_end = tr.declare(f"{hint}_max_end", (N,), dt)
    tr.emit(m_end, [b], "=", _stabiliser(ends, low), [B_l])
    tr.emit(out, [b], "=", un("neg", _logsumexp(ends, Read(m_end.name, (b,), dt))), [B_l])
    return stored(out)


def _step(tr: Translator, alpha: TensorDecl, m: TensorDecl, cls: Index, odd: int, rep: TensorDecl | None,
          lp_at: Callable[[AffExpr, Index], SExpr], n: int) -> None:
    """One time step (row r from row r - 1) of the states s = 2j + odd, j < n: blanks (odd 0: two terms)
    or labels (odd 1: three, the s-2 term -inf where `rep`). `m` [N, n] takes each state's stabiliser."""
    dt = alpha.dtype
    b, j, r = AffExpr.var("b"), AffExpr.var("j"), AffExpr.var("r")
    col = 2 * j + 1 + odd  # column of state s = 2j + odd

    def prev(back: int) -> SExpr:
        return Read(alpha.name, (r - 1, b, col - back), dt)

    terms = [prev(0), prev(1)]
    if rep is not None:
        terms.append(select(Read(rep.name, (b, j), "bool"), c(-math.inf, dt), prev(2)))
    lps = [Loop("b", 0, alpha.shape[1]), Loop("j", 0, n)]
    tr.emit(m, [b, j], "=", _stabiliser(terms, c(_LOWEST[dt], dt)), lps)
    value = add(_logsumexp(terms, Read(m.name, (b, j), dt)), lp_at(r - 1, cls))
    tr.emit(alpha, [r, b, col], "=", value, lps)
