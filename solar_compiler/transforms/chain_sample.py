"""Copies of a kernel that the execution check of `reorder-chains` can run (`chain_check.py`):
in float64 (`to_f64`), and restricted to a sample of one output (`probed`).

A sample is a block of at most 2 indices per dimension around the output's middle, copied to a new
output; `narrowing.narrow` then restricts every statement to the points those elements need, and
every tensor is cut to the box of elements it still touches and every statement put in its own loop
nest over the box of its domain (statements run one after the other: docs/bounds.md section 5), so
that a tree too large to execute runs on what a few of its outputs depend on: the whole reduction
behind each sampled element, and nothing else.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace

from solar_compiler.loopir.affine import AffExpr
from solar_compiler.loopir.ast import (
    FLOAT_DTYPES,
    Assign,
    Binary,
    Bitcast,
    Cast,
    Cmp,
    Const,
    For,
    If,
    Kernel,
    Node,
    Read,
    Select,
    SExpr,
    TensorDecl,
    Unary,
    statements,
    stmt_reads,
    widened_bitcast,
)
from solar_compiler.loopir.domain import access_map, domain, domain_constraints
from solar_compiler.transforms.narrow import narrow

Index = Callable[[str, tuple], tuple]   # tensor, indices -> new indices


def to_f64(k: Kernel) -> Kernel:
    """`k` with every floating-point tensor, literal and cast in float64."""
    tensors = [replace(t, dtype=_f64(t.dtype)) for t in k.tensors]
    return Kernel(k.name, tensors, map_nodes(k.body, None))


def probed(pair: Sequence[Kernel], output: str) -> list[Kernel]:
    """Both kernels computing the same sample of `output` only (see the module doc); the leaves are
    cut to the same box in both, so that the same random inputs feed them."""
    ks = [_sampled(k, output) for k in pair]
    boxes = [_boxes(k) for k in ks]
    for t in ks[0].by_role("input", "weight"):
        first, second = (x[t.name] for x in boxes)
        merged = [(min(a[0], b[0]), max(a[1], b[1])) for a, b in zip(first, second, strict=True)]
        for x in boxes:
            x[t.name] = merged
    return [_cut(k, b) for k, b in zip(ks, boxes, strict=True)]


def _sampled(k: Kernel, output: str) -> Kernel:
    d = k.tensor(output)
    starts = [max((n - 2) // 2, 0) for n in d.shape]
    counts = [min(n, 2) for n in d.shape]
    name = "_probe"
    while any(t.name == name for t in k.tensors):
        name += "_"
    ivs = [f"_q{i}" for i in range(len(d.shape))]
    at = tuple(AffExpr.var(v) + s for v, s in zip(ivs, starts, strict=True))
    inner: list[Node] = [Assign(name, tuple(AffExpr.var(v) for v in ivs), "=", Read(output, at))]
    for v, n in reversed(list(zip(ivs, counts, strict=True))):
        inner = [For(v, AffExpr.lit(0), AffExpr.lit(n), 1, False, inner)]
    tensors = [replace(t, role="local") if t.name == output else t for t in k.tensors]
    tensors.append(TensorDecl(name, tuple(counts), d.dtype, "output"))
    return narrow(Kernel(k.name, tensors, [*k.body, *inner])).kernel


def _boxes(k: Kernel) -> dict[str, list[tuple[int, int]]]:
    """Per tensor and dimension, the smallest and largest index a statement touches (a loaded
    index: the whole dimension; an untouched tensor: one element)."""
    out: dict[str, list[tuple[int, int]]] = {t.name: [(n, -1) for n in t.shape] for t in k.tensors}
    for ctx in statements(k):
        if domain(ctx).is_empty():
            continue
        uses = [(ctx.stmt.target, ctx.stmt.indices), *((r.tensor, r.indices) for r in stmt_reads(ctx.stmt))]
        for tensor, idx in uses:
            box = out[tensor]
            for d, e in enumerate(idx):
                if isinstance(e, AffExpr):
                    vals = access_map(ctx, tensor, [e]).range()
                    lo, hi = vals.dim_min_val(0).to_python(), vals.dim_max_val(0).to_python()
                else:
                    lo, hi = 0, k.tensor(tensor).shape[d] - 1
                box[d] = (min(box[d][0], lo), max(box[d][1], hi))
    return {n: [(lo, hi) if hi >= lo else (0, 0) for lo, hi in b] for n, b in out.items()}


def _cut(k: Kernel, boxes: dict[str, list[tuple[int, int]]]) -> Kernel:
    def index(t: str, idx: tuple) -> tuple:
        return tuple(e - boxes[t][d][0] if isinstance(e, AffExpr) else e for d, e in enumerate(idx))

    tensors = [replace(t, shape=tuple(hi - lo + 1 for lo, hi in boxes[t.name])) for t in k.tensors]
    body: list[Node] = []
    for ctx in statements(k):
        dom = domain(ctx)
        if dom.is_empty():
            continue
        ivs, cons, _ = domain_constraints(ctx)
        inner = map_nodes([ctx.stmt], index)
        if cons:
            inner = [If(tuple(c.cond for c in cons), inner)]
        for i in reversed(range(len(ivs))):
            lo, hi = dom.dim_min_val(i).to_python(), dom.dim_max_val(i).to_python()
            inner = [For(ivs[i], AffExpr.lit(lo), AffExpr.lit(hi + 1), 1, False, inner)]
        body += inner
    return Kernel(k.name, tensors, body)


# ---- rewriting a kernel's expressions ------------------------------------------------------------------
def _f64(dt: str | None) -> str | None:
    return "f64" if dt in FLOAT_DTYPES else dt


def map_expr(e: SExpr, index: Index | None) -> SExpr:
    """`e` in float64 (`index` None), or with every read's indices mapped by `index`."""
    def dt(x: str | None) -> str | None:
        return _f64(x) if index is None else x

    def go(x: SExpr) -> SExpr:
        if isinstance(x, Read):
            idx = tuple(go(i) if isinstance(i, SExpr) else i for i in x.indices)
            return replace(x, indices=index(x.tensor, idx) if index else idx, dtype=dt(x.dtype))
        if isinstance(x, Const):
            return replace(x, dtype=dt(x.dtype))
        if isinstance(x, Bitcast):
            return widened_bitcast(x, go(x.x), dt(x.dtype))
        if isinstance(x, Cast | Unary):
            return replace(x, x=go(x.x), dtype=dt(x.dtype))
        if isinstance(x, Binary | Cmp):
            return replace(x, a=go(x.a), b=go(x.b), dtype=dt(x.dtype))
        if isinstance(x, Select):
            return replace(x, cond=go(x.cond), a=go(x.a), b=go(x.b), dtype=dt(x.dtype))
        return x

    return go(e)


def map_nodes(ns: Sequence[Node], index: Index | None) -> list[Node]:
    """`map_expr` on every statement (its value and its indices) of a loop nest."""
    out: list[Node] = []
    for n in ns:
        if isinstance(n, Assign):
            idx = tuple(map_expr(i, index) if isinstance(i, SExpr) else i for i in n.indices)
            out.append(Assign(n.target, index(n.target, idx) if index else idx, n.kind,
                              map_expr(n.value, index), n.loc, n.pos, n.origin))
        elif isinstance(n, For):
            out.append(For(n.iv, n.lb, n.ub, n.step, n.sequential, map_nodes(n.body, index)))
        else:
            out.append(If(n.conds, map_nodes(n.body, index)))
    return out
