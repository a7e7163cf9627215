"""Kernel AST -> text form. `parse(print(k))` gives back `k` (typed), which the tests check."""

from __future__ import annotations

import math

from solar_compiler.loopir.affine import AffExpr
from solar_compiler.loopir.ast import (
    INT_DTYPES,
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
    default_literal_dtype,
    pair_expected,
)

INDENT = "    "
_BIN_SYM = {"add": ("+", 6), "sub": ("-", 6), "mul": ("*", 7), "div": ("/", 7), "floordiv": ("//", 7),
            "mod": ("%", 7), "and": ("and", 3), "or": ("or", 2)}
_CMP_SYM = {"eq": "==", "ne": "!=", "lt": "<", "le": "<=", "gt": ">", "ge": ">="}
_ATOM = 10


def print_kernels(kernels: list[Kernel]) -> str:
    return "\n".join(print_kernel(k) for k in kernels)


def print_kernel(k: Kernel) -> str:
    params = [t for t in k.tensors if t.role != "local"]
    head = ", ".join(f"{t.name}: {t.dtype}[{', '.join(map(str, t.shape))}] {t.role}" for t in params)
    lines = [f"kernel {k.name}({head}):"]
    lines += [f"{INDENT}local {t.name}: {t.dtype}[{', '.join(map(str, t.shape))}]"
              for t in k.tensors if t.role == "local"]
    _nodes(k, k.body, 1, lines)
    return "\n".join(lines) + "\n"


def _nodes(k: Kernel, nodes: list[Node], depth: int, out: list[str]) -> None:
    pad = INDENT * depth
    for n in nodes:
        if isinstance(n, For):
            kind = "scan" if n.sequential else "range"
            args = [str(n.ub)] if n.lb == AffExpr.lit(0) and n.step == 1 else [str(n.lb), str(n.ub)]
            if n.step != 1:
                args.append(str(n.step))
            out.append(f"{pad}for {n.iv} in {kind}({', '.join(args)}):")
            _nodes(k, n.body, depth + 1, out)
        elif isinstance(n, If):
            out.append(f"{pad}if {' and '.join(str(c) for c in n.conds)}:")
            _nodes(k, n.body, depth + 1, out)
        else:
            out.append(pad + print_assign(k, n))


def print_assign(k: Kernel, a: Assign) -> str:
    idx = ", ".join(str(i) if isinstance(i, AffExpr) else _expr(k, i, "i64", 0) for i in a.indices)
    s = f"{a.target}[{idx}] {a.kind} {expr_str(k, a.value, k.tensor(a.target).dtype)}"
    return s + (f' @ "{a.loc}"' if a.loc else "")


def _literal(c: Const) -> str:
    v = c.value
    if isinstance(v, bool) or c.dtype == "bool":
        return "True" if v else "False"
    if c.dtype in INT_DTYPES:
        return str(int(v))
    f = float(v)
    if math.isnan(f):
        return "nan"
    if math.isinf(f):
        return "inf" if f > 0 else "-inf"
    return repr(f)


def _prec(e: SExpr) -> int:
    if isinstance(e, Select):
        return 1
    if isinstance(e, Binary) and e.fn in _BIN_SYM:
        return _BIN_SYM[e.fn][1]
    if isinstance(e, Binary) and e.fn == "pow":
        return 9
    if isinstance(e, Cmp):
        return 5
    if isinstance(e, Unary) and e.fn == "not":
        return 4
    if isinstance(e, Unary) and e.fn == "neg":
        return 8
    if isinstance(e, IndexValue):
        return _ATOM if e.expr.is_var() else 6
    return _ATOM


def expr_str(k: Kernel, e: SExpr, expected: str | None) -> str:
    """Print `e` so that the parser's type inference (given `expected`) reproduces its types."""
    return _expr(k, e, expected, 0)


def _wrap(s: str, prec: int, need: int) -> str:
    return f"({s})" if prec < need else s


def _expr(k: Kernel, e: SExpr, expected: str | None, need: int) -> str:
    if isinstance(e, Const):
        lit = _literal(e)
        inferred = expected or default_literal_dtype(
            True if lit in ("True", "False") else (0 if lit.lstrip("-").isdigit() else 0.0))
        if inferred == e.dtype:
            return _wrap(lit, 8 if lit.startswith("-") else _ATOM, need)
        return f"{e.dtype}({lit})"
    if isinstance(e, IndexValue):
        return _wrap(str(e.expr), _prec(e), need)
    if isinstance(e, Read):
        idx = ", ".join(str(i) if isinstance(i, AffExpr) else _expr(k, i, "i64", 0) for i in e.indices)
        return f"{e.tensor}[{idx}]"
    if isinstance(e, Cast):
        # `f32(2)` would read back as the f32 literal 2.0, not as a cast of the i64 literal 2
        inner = f"{e.x.dtype}({_literal(e.x)})" if isinstance(e.x, Const) else _expr(k, e.x, None, 0)
        return f"{e.dtype}({inner})"
    if isinstance(e, Bitcast):
        return f"bitcast({_expr(k, e.x, None, 0)}, {e.dtype})"  # the operand typed as a cast's is
    if isinstance(e, Unary):
        if e.fn == "neg" and isinstance(e.x, Const):
            return f"neg({_expr(k, e.x, expected, 0)})"  # `-2.0` would read back as the literal -2.0
        if e.fn == "neg":
            return _wrap("-" + _expr(k, e.x, expected, 8), 8, need)
        if e.fn == "not":
            return _wrap("not " + _expr(k, e.x, "bool", 4), 4, need)
        return f"{e.fn}({_expr(k, e.x, expected, 0)})"
    if isinstance(e, Binary | Cmp):
        ea, eb = pair_expected(_untyped_consts(e.a), _untyped_consts(e.b), k,
                               expected if isinstance(e, Binary) else None)
        if isinstance(e, Cmp):
            s = f"{_expr(k, e.a, ea, 6)} {_CMP_SYM[e.pred]} {_expr(k, e.b, eb, 6)}"
            return _wrap(s, 5, need)
        if e.fn in _BIN_SYM:
            sym, p = _BIN_SYM[e.fn]
            return _wrap(f"{_expr(k, e.a, ea, p)} {sym} {_expr(k, e.b, eb, p + 1)}", p, need)
        if e.fn == "pow":
            return _wrap(f"{_expr(k, e.a, ea, _ATOM)} ** {_expr(k, e.b, eb, 8)}", 9, need)
        return f"{e.fn}({_expr(k, e.a, ea, 0)}, {_expr(k, e.b, eb, 0)})"
    if isinstance(e, Select):
        ea, eb = pair_expected(_untyped_consts(e.a), _untyped_consts(e.b), k, expected)
        s = f"{_expr(k, e.a, ea, 2)} if {_expr(k, e.cond, 'bool', 2)} else {_expr(k, e.b, eb, 1)}"
        return _wrap(s, 1, need)
    raise TypeError(f"cannot print {e!r}")


def _untyped_consts(e: SExpr) -> SExpr:
    """A constant that will print as a bare literal is untyped for the parser's inference; the
    printer treats every Const as a literal candidate, as the parser does before typing."""
    return Const(e.value) if isinstance(e, Const) else e
