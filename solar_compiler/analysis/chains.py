"""Contraction trees of a program and their joint sum-of-products form (`reorder-chains`).

A *product node* computes `T[out] (=|+=) f1 * f2 * ... / g1 ...` where every factor is an affine
read of another tensor or a float literal (negation is the literal -1): a contraction, a scaling
by a constant or a per-index factor, or a copy. A local tensor T is a *private intermediate* when
it is written by one product node P (after a zero fill, or with a folded zero init, or by `=`),
read once by one later product node C, and C reads only elements that were defined. Product nodes
joined by private intermediates form in-trees; a tree is maximal when its root's output is not a
private intermediate. Substituting every intermediate by its producer's sum gives the tree's joint
form: one sum over all loop variables (the root's, plus every inner node's reduction variables) of
the product of the leaf factors, restricted by every node's bounds and guards (masks and narrowed
domains: 0/1 factors). docs/reorder-chains.md proves each rule; `chain_order.py` prices the orders.

Variables that a view splits (`k // 64`, `k % 64`) are delinearised into two variables, so that each
factor depends on the variables it really indexes.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from functools import partial

import islpy as isl

from solar_compiler.analysis.program import Program
from solar_compiler.loopir.affine import AffCond, AffExpr, FloorDiv, Mod
from solar_compiler.loopir.ast import FLOAT_DTYPES, Binary, Const, Origin, Read, SExpr, Unary, stmt_reads
from solar_compiler.loopir.domain import access_map, domain_constraints, loop_ranges
from solar_compiler.loopir.grouping import NodeGroup
from solar_compiler.loopir.simplify import simplify_affine

Ranges = dict[str, tuple[int, int]]


@dataclass(frozen=True)
class Factor:
    """A factor of a product: an affine read of `tensor`, or a literal (`tensor` None). A divisor
    (`divide`) divides the product instead of multiplying it."""

    tensor: str | None
    indices: tuple[AffExpr, ...] = ()
    value: float = 1.0
    divide: bool = False

    def vars(self) -> set[str]:
        return set().union(*(i.vars() for i in self.indices)) if self.indices else set()

    def text(self) -> str:
        if self.tensor is None:
            return f"{self.value:g}"
        return f"{self.tensor}[{', '.join(map(str, self.indices))}]" if self.indices else f"{self.tensor}[]"


@dataclass(frozen=True)
class Tree:
    """A maximal tree of product nodes and its joint form."""

    kernel: str
    root: str                              # the root node's name
    nodes: tuple[str, ...]                 # its product nodes, in program order
    fills: tuple[str, ...]                 # zero fills of its intermediates (they go with the tree)
    intermediates: tuple[str, ...]         # tensors that exist only inside the tree
    output: str                            # the root's output tensor
    out_index: tuple[AffExpr, ...]         # where the root writes it, over the joint variables
    vars: tuple[str, ...]                  # joint variables, in nest order
    ranges: tuple[tuple[int, int], ...]    # their hull ranges (inclusive)
    factors: tuple[Factor, ...]            # leaf factors and literals
    constraints: tuple[AffCond, ...]       # every node's bounds and guards that the ranges do not imply
    init: str                              # root: "none" (=), "folded" (zero init in the node), "separate"
    init_conds: tuple[AffCond, ...]        # the conditions under which the root's own init/store runs
    dtype: str
    written: str                           # the order as written, in words
    locs: tuple[str, ...]
    loc: str | None
    origin: Origin | None
    init_origin: Origin | None
    sums: int                              # product nodes with a reduction variable
    notes: tuple[str, ...] = field(default=())

    def range_of(self) -> dict[str, tuple[int, int]]:
        return dict(zip(self.vars, self.ranges, strict=True))

    @property
    def tensor_factors(self) -> tuple[Factor, ...]:
        return tuple(f for f in self.factors if f.tensor is not None)

    def equation(self) -> str:
        """`out[..] = sum(v, ..) f1 * f2 / g`: the joint form in one line."""
        out_vars = set().union(*(i.vars() for i in self.out_index)) if self.out_index else set()
        summed = [v for v in self.vars if v not in out_vars]
        num = [f.text() for f in self.factors if not f.divide] or ["1"]
        den = [f.text() for f in self.factors if f.divide]
        body = " * ".join(num) + "".join(f" / {d}" for d in den)
        lhs = f"{self.output}[{', '.join(map(str, self.out_index))}]"
        where = f" if {' and '.join(map(str, self.constraints))}" if self.constraints else ""
        return f"{lhs} = " + (f"sum({', '.join(summed)}) " if summed else "") + body + where


# ---- product nodes -----------------------------------------------------------------------------------
def factors_of(e: SExpr, target: str) -> list[Factor] | None:
    """The factors of a product expression, or None when `e` is not one (see the module doc)."""
    out: list[Factor] = []

    def go(x: SExpr, div: bool) -> bool:
        if isinstance(x, Read):
            if x.indirect or x.tensor == target:
                return False
            out.append(Factor(x.tensor, tuple(x.indices), divide=div))  # type: ignore[arg-type]
            return True
        if isinstance(x, Const):
            if isinstance(x.value, bool) or x.dtype not in FLOAT_DTYPES:
                return False
            out.append(Factor(None, value=float(x.value), divide=div))
            return True
        if isinstance(x, Binary) and x.fn in ("mul", "div"):
            return go(x.a, div) and go(x.b, div != (x.fn == "div"))
        if isinstance(x, Unary) and x.fn == "neg":
            out.append(Factor(None, value=-1.0))
            return go(x.x, div)
        return False

    return out if go(e, False) else None


@dataclass(frozen=True)
class _Node:
    pos: int
    group: NodeGroup
    factors: tuple[Factor, ...] | None     # None: not a product node
    fill: bool                             # `T[..] = 0` alone

    @property
    def name(self) -> str:
        return self.group.name

    @property
    def target(self) -> str:
        return self.group.main.stmt.target

    @property
    def sums(self) -> bool:
        s = self.group.main.stmt
        return s.kind == "+=" and bool(set(self.group.main.ivs) - s.target_vars)


def _classify(p: Program, pos: int, g: NodeGroup) -> _Node:
    ctx = g.main
    s = ctx.stmt
    k = p.kernel
    fill = (s.kind == "=" and isinstance(s.value, Const) and s.value.value == 0 and not s.indirect
            and len(g.stmts) == 1)
    ok = (s.kind in ("=", "+=") and not s.indirect and k.tensor(s.target).dtype in FLOAT_DTYPES
          and all(f.step == 1 and not f.sequential for f in ctx.loops))
    if ok and s.kind == "=" and set(ctx.ivs) - s.target_vars:
        ok = False  # `=` over a variable the target does not index keeps the last value: not a sum
    factors = factors_of(s.value, s.target) if ok else None
    if factors is not None and not any(f.tensor is not None for f in factors):
        factors = None  # a literal fill is not a product of tensors
    return _Node(pos, g, tuple(factors) if factors is not None else None, fill)


def _out_vars(n: _Node) -> list[tuple[str, int]] | None:
    """(variable, offset) per output dimension when each is a distinct variable plus a constant and
    every variable of the target occurs: the write is a bijection onto its image."""
    s = n.group.main.stmt
    out = []
    for i in s.indices:
        assert isinstance(i, AffExpr)
        if len(i.terms) != 1 or not isinstance(i.terms[0][0], str) or i.terms[0][1] != 1:
            return None
        out.append((i.terms[0][0], i.const))
    names = [v for v, _ in out]
    return out if len(set(names)) == len(names) == len(s.target_vars) else None


# ---- trees ----------------------------------------------------------------------------------------------
def program_trees(p: Program) -> list[Tree]:
    """The maximal trees of product nodes of a program (every one, trivial ones included)."""
    nodes = [_classify(p, i, g) for i, g in enumerate(p.nodes)]
    writers: dict[str, list[int]] = {}
    readers: dict[str, list[int]] = {}
    for n in nodes:
        writers.setdefault(n.target, []).append(n.pos)
        for c in n.group.stmts:
            for r in stmt_reads(c.stmt):
                readers.setdefault(r.tensor, []).append(n.pos)
    producer: dict[str, tuple[int, int | None]] = {}   # intermediate -> (producer, its zero fill)
    for n in nodes:
        edge = _private(p, nodes, n, writers, readers)
        if edge is not None:
            producer[n.target] = edge
    child_of = {producer[t][0]: t for t in producer}
    trees = []
    for n in nodes:
        if n.factors is None or n.pos in child_of:
            continue
        members = _members(nodes, n, producer)
        if not _leaves_stable(nodes, members, n, producer, writers):
            continue
        tree = _joint(p, nodes, n, members, producer)
        if tree is not None:
            trees.append(tree)
    return trees


def _reads(e: SExpr) -> list[Read]:
    return [x for x in e.walk() if isinstance(x, Read)]


def _private(p: Program, nodes: Sequence[_Node], n: _Node, writers: dict[str, list[int]],
             readers: dict[str, list[int]]) -> tuple[int, int | None] | None:
    """(producer, zero fill) when the output of product node `n` is a private intermediate."""
    t = n.target
    if n.factors is None or p.kernel.tensor(t).role != "local" or _out_vars(n) is None:
        return None
    s = n.group.main.stmt
    w = writers.get(t, [])
    fill = None
    if s.kind == "+=" and n.group.init is None:
        if len(w) != 2 or w[1] != n.pos or not nodes[w[0]].fill:
            return None
        fill = w[0]
    elif w != [n.pos]:
        return None
    r = readers.get(t, [])
    if len(r) != 1 or r[0] <= n.pos or nodes[r[0]].factors is None:
        return None
    c = nodes[r[0]]
    reads = [x for x in _reads(c.group.main.stmt.value) if x.tensor == t]
    if len(reads) != 1 or any(f.tensor == t and f.divide for f in c.factors or ()):
        return None  # a sum in a denominator does not distribute
    defined = nodes[fill].group.main if fill is not None else (n.group.init or n.group.main)
    read_set = access_map(c.group.main, t, reads[0].indices).range()  # type: ignore[arg-type]
    def_set = access_map(defined, t, defined.stmt.indices).range()  # type: ignore[arg-type]
    if not _same_space_subset(read_set, def_set):
        return None
    return n.pos, fill


def _same_space_subset(a: isl.Set, b: isl.Set) -> bool:
    try:
        return a.is_subset(b)
    except isl.Error:
        return False


def _members(nodes: Sequence[_Node], root: _Node, producer: dict[str, tuple[int, int | None]]) -> list[_Node]:
    out, stack = [], [root]
    while stack:
        n = stack.pop()
        out.append(n)
        assert n.factors is not None
        stack += [nodes[producer[f.tensor][0]] for f in n.factors if f.tensor in producer]
    return sorted(out, key=lambda x: x.pos)


def _leaves_stable(nodes: Sequence[_Node], members: Sequence[_Node], root: _Node,
                   producer: dict[str, tuple[int, int | None]], writers: dict[str, list[int]]) -> bool:
    """No leaf a member reads is written again before the root (the tree is computed at the root),
    and the root's output is not read inside the tree."""
    inside = {m.pos for m in members}
    for m in members:
        for f in m.factors or ():
            if f.tensor is None or f.tensor in producer:
                continue
            if f.tensor == root.target or any(m.pos < w <= root.pos and w not in inside
                                              for w in writers.get(f.tensor, [])):
                return False
    return True


# ---- the joint form -------------------------------------------------------------------------------------
class _Builder:
    def __init__(self) -> None:
        self.vars: list[str] = []
        self.ranges: Ranges = {}
        self.factors: list[Factor] = []
        self.constraints: list[AffCond] = []

    def fresh(self, base: str, rng: tuple[int, int]) -> str:
        name, k = base, 1
        while name in self.ranges or name in self.vars:
            name, k = f"{base}_{k}", k + 1
        self.vars.append(name)
        self.ranges[name] = rng
        return name


def _joint(p: Program, nodes: Sequence[_Node], root: _Node, members: Sequence[_Node],
           producer: dict[str, tuple[int, int | None]]) -> Tree | None:
    b = _Builder()
    words: dict[int, str] = {}

    def visit(n: _Node, env: dict[str, AffExpr]) -> str:
        ctx = n.group.main
        rng = loop_ranges(ctx) or {}  # None only for an unevaluable bound: KeyError below
        for f in ctx.loops:
            if f.iv not in env:
                env[f.iv] = AffExpr.var(b.fresh(f.iv, rng[f.iv]))
        _, cons, _ = domain_constraints(ctx)
        b.constraints += [c.cond.substitute(env) for c in cons]
        parts = []
        for f in n.factors or ():
            if f.tensor is not None and f.tensor in producer:
                child = nodes[producer[f.tensor][0]]
                ov = _out_vars(child)
                assert ov is not None
                sub = {v: i.substitute(env) - off for (v, off), i in zip(ov, f.indices, strict=True)}
                parts.append(visit(child, sub))
            else:
                g = replace(f, indices=tuple(i.substitute(env) for i in f.indices))
                b.factors.append(g)
                parts.append(("1 / " if f.divide else "") + (f.tensor or f"{f.value:g}"))
        words[n.pos] = "(" + " * ".join(parts) + ")" if len(parts) > 1 else parts[0]
        return words[n.pos]

    root_env: dict[str, AffExpr] = {}
    try:
        written = visit(root, root_env)
    except KeyError:  # a loop bound that is not constant-evaluable: no hull range
        return None
    rs = root.group.main.stmt
    out_index = [i.substitute(root_env) for i in rs.indices]  # type: ignore[union-attr]
    if root.group.init is not None:
        init, own = "folded", root.group.init
    else:
        init, own = ("separate", None) if rs.kind == "+=" else ("none", root.group.main)
    init_conds: list[AffCond] = []
    if own is not None:
        init_conds = [c.cond.substitute(root_env) for c in domain_constraints(own)[1]]
    exprs = _Exprs(b.factors, out_index, b.constraints, init_conds)
    if not _delinearise(b, exprs):
        return None
    units = {v: AffExpr.lit(b.ranges[v][0]) for v in b.vars if b.ranges[v][0] == b.ranges[v][1]}
    exprs.map(partial(AffExpr.substitute, env=units))  # a variable of one value is a constant
    b.vars = [v for v in b.vars if v not in units]
    cons = _essential(exprs.constraints, b.ranges)
    if cons is None:
        return None
    factor_vars = set().union(*(f.vars() for f in exprs.factors))
    out_vars = set().union(*(i.vars() for i in exprs.out_index)) if exprs.out_index else set()
    if set(b.vars) - factor_vars or out_vars - factor_vars:
        return None  # a variable no factor indexes (a repeated sum, a broadcast): not an einsum
    fills = tuple(nodes[producer[t][1]].name for m in members for t in [m.target]
                  if m is not root and producer[t][1] is not None)
    locs = tuple(dict.fromkeys(c.stmt.loc for m in members for c in m.group.stmts if c.stmt.loc))
    main = root.group.main.stmt
    return Tree(
        kernel=p.name, root=root.name, nodes=tuple(m.name for m in members), fills=fills,
        intermediates=tuple(m.target for m in members if m is not root), output=root.target,
        out_index=tuple(exprs.out_index), vars=tuple(b.vars), ranges=tuple(b.ranges[v] for v in b.vars),
        factors=tuple(exprs.factors), constraints=tuple(cons), init=init,
        init_conds=tuple(_essential(exprs.init_conds, b.ranges) or ()),
        dtype=p.kernel.tensor(root.target).dtype, written=written, locs=locs, loc=main.loc,
        origin=main.origin, init_origin=root.group.init.stmt.origin if root.group.init else None,
        sums=sum(m.sums for m in members))


@dataclass
class _Exprs:
    """Every affine expression of a tree under construction (rewritten together by a split)."""

    factors: list[Factor]
    out_index: list[AffExpr]
    constraints: list[AffCond]
    init_conds: list[AffCond]

    def map(self, fn) -> None:  # noqa: ANN001 - AffExpr -> AffExpr
        self.factors = [replace(f, indices=tuple(fn(i) for i in f.indices)) for f in self.factors]
        self.out_index = [fn(i) for i in self.out_index]
        self.constraints = [AffCond(fn(c.expr), c.op) for c in self.constraints]
        self.init_conds = [AffCond(fn(c.expr), c.op) for c in self.init_conds]

    def atoms(self) -> list[FloorDiv | Mod]:
        out: list[FloorDiv | Mod] = []
        exprs = [i for f in self.factors for i in f.indices] + self.out_index + \
            [c.expr for c in self.constraints + self.init_conds]
        for e in exprs:
            out += [a for a, _ in e.terms if not isinstance(a, str)]
        return out


def _delinearise(b: _Builder, ex: _Exprs) -> bool:
    """Split every variable used as `v // d` and `v % d` (d dividing its extent) into two, then
    simplify: a flattened view indexes the tree's tensors by its two variables again."""
    for _ in range(4 * len(b.vars) + 4):
        ex.map(lambda e: simplify_affine(e, b.ranges))
        split = None
        for a in ex.atoms():
            num = a.num
            if len(num.terms) != 1 or not isinstance(num.terms[0][0], str):
                continue
            v, coef = num.terms[0]
            d = a.den // math.gcd(abs(coef), a.den)
            lo, hi = b.ranges[v]
            if d > 1 and lo == 0 and (hi + 1) % d == 0 and hi + 1 > d:
                split = (v, d)
                break
        if split is None:
            return True
        v, d = split
        at = b.vars.index(v)
        lo_ext = (b.ranges[v][1] + 1) // d
        del b.ranges[v]
        b.vars.remove(v)
        hi_name = b.fresh(f"{v}h", (0, lo_ext - 1))
        lo_name = b.fresh(f"{v}l", (0, d - 1))
        b.vars.remove(hi_name)
        b.vars.remove(lo_name)
        b.vars[at:at] = [hi_name, lo_name]
        ex.map(partial(AffExpr.substitute, env={v: AffExpr.var(hi_name) * d + AffExpr.var(lo_name)}))
    return False


def _essential(conds: Sequence[AffCond], ranges: Ranges) -> list[AffCond] | None:
    """The constraints the variable ranges do not imply, without repeats; None if one can never
    hold (an empty tree)."""
    out: list[AffCond] = []
    for c in conds:
        lo, hi = c.expr.bounds(ranges)
        if c.op == ">=" and lo >= 0 or c.op == "==" and lo == hi == 0:
            continue
        if c.op == ">=" and hi < 0 or c.op == "==" and (lo > 0 or hi < 0):
            return None
        if c not in out:
            out.append(c)
    return out
