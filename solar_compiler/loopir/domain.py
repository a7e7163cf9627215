"""A statement's iteration domain as affine constraints (loop bounds, steps, guards): the common
ground of the polyhedral counts (`analysis/polyhedral.py`) and the executor's legality check
(`executor/legality.py`). It lives below both so that the executor needs nothing from analysis/
(the package import graph is a DAG: tests/test_layers.py)."""

from __future__ import annotations

from dataclasses import dataclass

from solar_compiler.loopir.affine import AffCond, AffExpr
from solar_compiler.loopir.ast import StmtContext


@dataclass(frozen=True)
class Constraint:
    """One affine constraint of a domain, with the variables it couples."""

    cond: AffCond
    vars: frozenset[str]


def domain_constraints(ctx: StmtContext) -> tuple[tuple[str, ...], list[Constraint], dict[str, int]]:
    """(ivs, constraints, steps) of a statement's iteration domain: loop bounds and guards. Computed
    once per statement context (kept on it: a context is immutable) since every count, footprint
    and reuse bound of the statement starts from it."""
    memo = ctx.__dict__.get("_domain")
    if memo is None:
        memo = _domain_constraints(ctx)
        object.__setattr__(ctx, "_domain", memo)
    ivs, cons, steps = memo
    return ivs, list(cons), dict(steps)


def _domain_constraints(ctx: StmtContext) -> tuple[tuple[str, ...], tuple[Constraint, ...], dict[str, int]]:
    cons: list[Constraint] = []
    steps: dict[str, int] = {}
    for f in ctx.loops:
        v = AffExpr.var(f.iv)
        for c in (AffCond.compare(v, ">=", f.lb), AffCond.compare(v, "<", f.ub)):
            cons.append(Constraint(c, frozenset(c.vars())))
        if f.step != 1:
            steps[f.iv] = f.step
            c = AffCond((v - f.lb) % f.step, "==")
            cons.append(Constraint(c, frozenset(c.vars())))
    for g in ctx.guards:
        cons.append(Constraint(g, frozenset(g.vars())))
    return ctx.ivs, tuple(cons), steps
