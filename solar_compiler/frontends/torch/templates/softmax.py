"""softmax / log_softmax / logsumexp: row max, row sum of exp(x - max), then one elementwise
statement. Only row-sized locals are created (no full-size exp tensor), so the unfused traffic
is the input read per pass plus the output, as a fused eager kernel would move at most."""

from __future__ import annotations

from solar_compiler.frontends.builder.exprs import add, cast, div, sub, un
from solar_compiler.frontends.builder.index_maps import norm_dim, norm_dims
from solar_compiler.frontends.builder.statements import accumulate, finalize
from solar_compiler.frontends.builder.translator import Translator
from solar_compiler.frontends.builder.values import Val, ivars, loops, stored
from solar_compiler.frontends.captured_program import AtenNode
from solar_compiler.loopir.affine import AffExpr
from solar_compiler.loopir.ast import Read, SExpr, TensorDecl

from ..registry import template


def _row(t: TensorDecl, full: list[AffExpr], dims: list[int]) -> SExpr:
    return Read(t.name, tuple(e for d, e in enumerate(full) if d not in dims), t.dtype)


def _stats(tr: Translator, x: Val, dims: list[int], dt: str, hint: str) -> tuple[TensorDecl, TensorDecl]:
    kept = [n for d, n in enumerate(x.shape) if d not in dims]
    m = tr.declare(f"{hint}_max", kept, dt)
    accumulate(tr, m, x, dims, False, "max=", lambda f: cast(x.read(f), dt))
    s = tr.declare(f"{hint}_sum", kept, dt)
    accumulate(tr, s, x, dims, False, "+=", lambda f: un("exp", sub(cast(x.read(f), dt), _row(m, f, dims))))
    return m, s


@template("aten.softmax.int", "aten._softmax.default", "aten._safe_softmax.default", log=False)
@template("aten.log_softmax.int", "aten._log_softmax.default", log=True)
def _softmax(tr: Translator, node: AtenNode, log: bool) -> Val:
    x = tr.val(node.args[0])
    dims = [norm_dim(int(node.args[1]), x.ndim)]
    out = tr.result()
    dt = out.dtype
    m, s = _stats(tr, x, dims, dt, out.name)
    lps = loops("i", x.shape)
    idx = ivars(lps)
    xv = cast(x.read(idx), dt)
    if log:
        # s := log(s) + max once per row, then out = x - s
        finalize(tr, s, lambda v: add(un("log", v), Read(m.name, v.indices, dt)))
        value = sub(xv, _row(s, idx, dims))
    else:
        value = div(un("exp", sub(xv, _row(m, idx, dims))), _row(s, idx, dims))
    tr.emit(out, idx, "=", value, lps)
    return stored(out)


@template("aten.logsumexp.default")
def _logsumexp(tr: Translator, node: AtenNode) -> Val:
    x = tr.val(node.args[0])
    dims = norm_dims(tr.arg(1, "dim", None), x.ndim)
    keepdim = bool(tr.arg(2, "keepdim", False))
    out = tr.result()
    dt = out.dtype
    m, s = _stats(tr, x, dims, dt, out.name)
    lps = loops("i", out.shape)
    idx = ivars(lps)
    row = [e for d, e in enumerate(idx) if not (keepdim and d in dims)]
    mv = Read(m.name, tuple(row), dt)
    tr.emit(out, idx, "=", add(un("log", Read(s.name, tuple(row), dt)), mv), lps)
    return stored(out)

