"""Backward of softmax and log_softmax along one dim: one row statistic, one output statement
(`gx = y * (g - sum(g * y))`; log: `gx = g - exp(y) * sum(g)`), as the eager kernels compute it."""

from __future__ import annotations

from solar_compiler.frontends.builder.exprs import cast, mul, sub, un
from solar_compiler.frontends.builder.index_maps import norm_dim
from solar_compiler.frontends.builder.statements import accumulate, kept_read
from solar_compiler.frontends.builder.translator import Translator
from solar_compiler.frontends.builder.values import Val, ivars, loops, stored
from solar_compiler.frontends.captured_program import AtenNode

from ..registry import template


@template("aten._softmax_backward_data.default", log=False)
@template("aten._log_softmax_backward_data.default", log=True)
def _softmax_backward(tr: Translator, node: AtenNode, log: bool) -> Val:
    """(grad_output, output, dim, input_dtype) -> grad_input, computed in the result's dtype."""
    g, y = tr.val(node.args[0]), tr.val(node.args[1])
    dims = [norm_dim(int(node.args[2]), y.ndim)]
    out = tr.result()
    dt = out.dtype
    kept = [n for d, n in enumerate(y.shape) if d not in dims]
    s = tr.declare(f"{out.name}_rowsum", kept, dt)
    if log:
        accumulate(tr, s, g, dims, False, "+=", lambda f: cast(g.read(f), dt))
    else:
        accumulate(tr, s, g, dims, False, "+=", lambda f: mul(cast(g.read(f), dt), cast(y.read(f), dt)))
    lps = loops("i", y.shape)
    idx = ivars(lps)
    gv, yv, sv = cast(g.read(idx), dt), cast(y.read(idx), dt), kept_read(s, dims, False, idx)
    value = sub(gv, mul(un("exp", yv), sv)) if log else mul(yv, sub(gv, sv))
    tr.emit(out, idx, "=", value, lps)
    return stored(out)
