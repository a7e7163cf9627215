"""Is statement-at-a-time execution of a kernel equal to its point-by-point program order?

The executor runs each statement over all iterations of its non-scan loops before the next one
(loop distribution), and runs a scan loop in order with the non-scan loops around it vectorised
inside each step (interchange). Both are exact when non-scan loops carry no dependence: no two
instances that touch the same element (one of them writing) first differ in a non-scan loop they
share. Two instances of one statement that both write are fine (a reduction, or `=` where the
lexicographically last point wins, which the executor implements). Everything else is checked here
with islpy, after a syntactic shortcut for the common case of identical accesses that pin every
shared non-scan variable. Indirect (gathered or scattered) index positions are unconstrained: an
indirect write may touch any element along them, so a gather from a tensor written in the same
non-scan loop, or a read of a tensor scattered into there, is rejected rather than guessed.
"""

from __future__ import annotations

from collections.abc import Sequence

import islpy as isl

from solar_compiler.loopir.affine import AffCond, AffExpr
from solar_compiler.loopir.ast import For, Index, Kernel, LoopIRError, StmtContext, statements, stmt_reads
from solar_compiler.loopir.domain import domain_constraints

Access = tuple[str, tuple[Index, ...], bool]  # tensor, indices, is_write


def check_distributable(kernel: Kernel) -> None:
    """Raise LoopIRError when a non-scan loop carries a dependence between statement instances."""
    ctxs = statements(kernel)
    written = {c.stmt.target for c in ctxs}
    acc = {c.index: _accesses(c, written) for c in ctxs}
    nests: dict[int, list[StmtContext]] = {}  # statements by outermost loop: only they share loops
    for c in ctxs:
        if c.loops:
            nests.setdefault(id(c.loops[0]), []).append(c)
    for group in nests.values():
        _check_nest(group, acc)


def _check_nest(group: list[StmtContext], acc: dict[int, list[Access]]) -> None:
    for n, a in enumerate(group):
        for b in group[n:]:
            common = _common(a.loops, b.loops)
            if all(f.sequential for f in common):
                continue
            for ta, ia, wa in acc[a.index]:
                for tb, ib, wb in acc[b.index]:
                    if ta != tb or not (wa or wb) or (a is b and (wb or not wa)):
                        continue
                    loop = _carrier(a, ia, b, ib, common)
                    if loop is not None:
                        raise LoopIRError(_message(a, b, ta, loop), b.stmt.pos)


def _accesses(c: StmtContext, written: set[str]) -> list[Access]:
    out: list[Access] = [(c.stmt.target, c.stmt.indices, True)]
    out += [(r.tensor, r.indices, False) for r in stmt_reads(c.stmt) if r.tensor in written]
    return out


def _common(la: Sequence[For], lb: Sequence[For]) -> list[For]:
    out = []
    for x, y in zip(la, lb, strict=False):
        if x is not y:
            break
        out.append(x)
    return out


def _pins(ia: Sequence[Index], ib: Sequence[Index], var: str) -> bool:
    """Equal accesses force equal values of `var` (some index is `c*var + k` in both)."""
    return any(isinstance(x, AffExpr) and x == y and x.vars() == {var} and not x.is_quasi() and x.coeff(var)
               for x, y in zip(ia, ib, strict=True))


def _carrier(a: StmtContext, ia: Sequence[Index], b: StmtContext, ib: Sequence[Index],
             common: Sequence[For]) -> For | None:
    """The first shared non-scan loop that carries a conflict between the two accesses, if any."""
    open_ = [f for f in common if not f.sequential]
    if all(_pins(ia, ib, f.iv) for f in open_):
        return None
    ren_a = {v: AffExpr.var(f"a_{v}") for v in a.ivs}
    ren_b = {v: AffExpr.var(f"b_{v}") for v in b.ivs}
    cons = [c.cond.substitute(ren_a) for c in domain_constraints(a)[1]]
    cons += [c.cond.substitute(ren_b) for c in domain_constraints(b)[1]]
    cons += [AffCond(x.substitute(ren_a) - y.substitute(ren_b), "==") for x, y in zip(ia, ib, strict=True)
             if isinstance(x, AffExpr) and isinstance(y, AffExpr)]
    dims = ", ".join([f"a_{v}" for v in a.ivs] + [f"b_{v}" for v in b.ivs])
    base = " and ".join(c.to_isl() for c in cons) or "true"
    prefix: list[str] = []
    for f in common:
        if not f.sequential:
            s = isl.Set(f"{{ [{dims}] : {' and '.join([base, *prefix, f'a_{f.iv} != b_{f.iv}'])} }}")
            if not s.is_empty():
                return f
        prefix.append(f"a_{f.iv} = b_{f.iv}")
    return None


def _message(a: StmtContext, b: StmtContext, tensor: str, loop: For) -> str:
    def say(c: StmtContext) -> str:
        at = c.stmt.loc or c.stmt.pos
        return f"the statement writing '{c.stmt.target}'" + (f" ({at})" if at else "")

    who = say(a) if a is b else f"{say(a)} and {say(b)}"
    return (f"{who} touch the same element of '{tensor}' in different iterations of non-scan loop "
            f"'{loop.iv}': the executor runs a statement over all iterations of its non-scan loops at "
            f"once, which needs them to carry no dependence (make '{loop.iv}' a scan loop)")
