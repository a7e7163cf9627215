"""Semantic mutants of a loop-IR kernel: the bugs a frontend translation could plausibly have.

Used to measure how many wrong translations executor-based validation catches
(`benchmarks/mutants.py`). Each mutant differs from the kernel in exactly one place: an index off
by one (for an indirect write: a mutation of its loaded index), two indices of a read swapped,
another reduction kind, another scalar operation, a guard dropped, a statement dropped, or a
constant changed. A mutant may be ill-typed or out of bounds;
telling those apart is the caller's job (typecheck / check_bounds).
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import replace

from solar_compiler.loopir.affine import AffExpr
from solar_compiler.loopir.ast import (
    REDUCTIONS,
    Assign,
    Binary,
    Bitcast,
    Cast,
    Cmp,
    Const,
    For,
    If,
    IndexValue,
    Kernel,
    Node,
    Read,
    Select,
    SExpr,
    Unary,
)

Path = tuple[int, ...]  # positions in nested bodies, outermost first

BINARY_SWAPS = {"add": ("sub", "mul"), "sub": ("add",), "mul": ("add", "div"), "div": ("mul",),
                "max": ("min",), "min": ("max",), "pow": ("mul",), "floordiv": ("mod",), "mod": ("floordiv",),
                "and": ("or",), "or": ("and",)}
UNARY_SWAPS = {"exp": ("log",), "log": ("exp",), "tanh": ("sigmoid",), "sigmoid": ("tanh",),
               "sqrt": ("rsqrt",), "rsqrt": ("sqrt",), "erf": ("tanh",), "sin": ("cos",), "cos": ("sin",),
               "abs": ("neg",), "neg": ("abs",), "floor": ("ceil",), "ceil": ("floor",)}
CMP_SWAPS = {"lt": ("gt",), "gt": ("lt",), "le": ("ge",), "ge": ("le",), "eq": ("ne",), "ne": ("eq",)}


def mutants(kernel: Kernel) -> Iterator[tuple[str, Kernel]]:
    """(description, mutant) pairs, in program order."""
    for path, node in _walk(kernel.body, ()):
        if isinstance(node, Assign):
            where = node.loc or node.pos or f"statement writing '{node.target}'"
            yield f"{where}: drop the statement writing '{node.target}'", _replace(kernel, path, [])
            for desc, new in _assign_variants(node):
                yield f"{where}: {desc}", _replace(kernel, path, [new])
        elif isinstance(node, If):
            first = next((n for _, n in _walk(node.body, ()) if isinstance(n, Assign)), None)
            where = (first.loc or first.pos) if first is not None else None
            for i, c in enumerate(node.conds):
                conds = node.conds[:i] + node.conds[i + 1:]
                yield f"{where or 'guard'}: drop guard '{c}'", _replace(kernel, path, [If(conds, node.body)])


def _walk(nodes: list[Node], path: Path) -> Iterator[tuple[Path, Node]]:
    for i, n in enumerate(nodes):
        yield path + (i,), n
        if isinstance(n, For | If):
            yield from _walk(n.body, path + (i,))


def _replace(kernel: Kernel, path: Path, new: list[Node]) -> Kernel:
    """A copy of `kernel` with the node at `path` replaced by `new`; untouched subtrees are shared."""

    def go(nodes: list[Node], p: Path) -> list[Node]:
        i, rest = p[0], p[1:]
        if not rest:
            return nodes[:i] + new + nodes[i + 1:]
        n = nodes[i]
        assert isinstance(n, For | If)
        return nodes[:i] + [replace(n, body=go(n.body, rest))] + nodes[i + 1:]

    return Kernel(kernel.name, list(kernel.tensors), go(kernel.body, path))


def _assign_variants(a: Assign) -> Iterator[tuple[str, Assign]]:
    for d, e in enumerate(a.indices):
        if isinstance(e, SExpr):  # a scatter: mutate the loaded index (its reads, its arithmetic)
            for desc, v in _expr_variants(e):
                yield f"dynamic write index {d} of '{a.target}': {desc}", \
                    replace(a, indices=a.indices[:d] + (v,) + a.indices[d + 1:])
            continue
        for k in (1, -1):
            idx = a.indices[:d] + (e + k,) + a.indices[d + 1:]
            yield f"write index {d} of '{a.target}' {k:+d}", replace(a, indices=idx)
    for kind in REDUCTIONS:
        if kind != a.kind:
            yield f"'{a.kind}' -> '{kind}'", replace(a, kind=kind)
    for desc, v in _expr_variants(a.value):
        yield desc, replace(a, value=v)


def _expr_variants(e: SExpr) -> Iterator[tuple[str, SExpr]]:
    yield from _node_variants(e)
    if isinstance(e, Read):
        for d, i in enumerate(e.indices):
            if isinstance(i, SExpr):
                for desc, v in _expr_variants(i):
                    yield desc, replace(e, indices=e.indices[:d] + (v,) + e.indices[d + 1:])
    elif isinstance(e, Unary | Cast | Bitcast):
        for desc, v in _expr_variants(e.x):
            yield desc, replace(e, x=v)
    elif isinstance(e, Binary | Cmp):
        for desc, v in _expr_variants(e.a):
            yield desc, replace(e, a=v)
        for desc, v in _expr_variants(e.b):
            yield desc, replace(e, b=v)
    elif isinstance(e, Select):
        for field in ("cond", "a", "b"):
            for desc, v in _expr_variants(getattr(e, field)):
                yield desc, replace(e, **{field: v})


def _node_variants(e: SExpr) -> Iterator[tuple[str, SExpr]]:
    if isinstance(e, Read):
        for d, i in enumerate(e.indices):
            if isinstance(i, AffExpr):
                for k in (1, -1):
                    yield (f"read index {d} of '{e.tensor}' {k:+d}",
                           replace(e, indices=e.indices[:d] + (i + k,) + e.indices[d + 1:]))
        for d1 in range(len(e.indices)):
            for d2 in range(d1 + 1, len(e.indices)):
                idx = list(e.indices)
                idx[d1], idx[d2] = idx[d2], idx[d1]
                yield f"swap indices {d1} and {d2} of a read of '{e.tensor}'", replace(e, indices=tuple(idx))
    elif isinstance(e, Binary):
        for fn in BINARY_SWAPS.get(e.fn, ()):
            yield f"'{e.fn}' -> '{fn}'", replace(e, fn=fn)
    elif isinstance(e, Unary):
        for fn in UNARY_SWAPS.get(e.fn, ()):
            yield f"'{e.fn}' -> '{fn}'", replace(e, fn=fn)
    elif isinstance(e, Cmp):
        for p in CMP_SWAPS.get(e.pred, ()):
            yield f"'{e.pred}' -> '{p}'", replace(e, pred=p)
    elif isinstance(e, Const):
        yield f"constant {e.value} -> {_changed(e.value)}", replace(e, value=_changed(e.value))
    elif isinstance(e, IndexValue):
        yield f"index value {e.expr} -> {e.expr + 1}", replace(e, expr=e.expr + 1)


def _changed(v: float | int | bool) -> float | int | bool:
    if isinstance(v, bool):
        return not v
    if isinstance(v, int):
        return v + 1
    return 0.0 if math.isinf(v) or math.isnan(v) else v + 1.0
