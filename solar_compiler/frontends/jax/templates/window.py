"""`reduce_window_sum/max/min` (pooling): per output position, a window over every dim (window
dims, strides, (lo, hi) padding, base and window dilation); padding and base dilation as guards:
the padded or inserted positions hold the reduction's identity and are not work."""

from __future__ import annotations

import numpy as np

from solar_compiler.executor.numeric import STORAGE
from solar_compiler.frontends.builder.exprs import INF, c, cast
from solar_compiler.frontends.builder.index_maps import dilated_window_index
from solar_compiler.frontends.builder.values import Loop, Val, ivars, stored
from solar_compiler.frontends.captured_program import AtenNode
from solar_compiler.loopir.affine import AffExpr
from solar_compiler.loopir.ast import INT_DTYPES

from ..registry import template
from ..translator import JaxTranslator


@template("jax.reduce_window_sum", kind="+=")
@template("jax.reduce_window_max", kind="max=")
@template("jax.reduce_window_min", kind="min=")
def _reduce_window(tr: JaxTranslator, node: AtenNode, kind: str) -> Val:
    x = tr.val(node.args[0])
    p = node.kwargs
    n = x.ndim
    window = [int(k) for k in p["window_dimensions"]]
    stride = [int(s) for s in p.get("window_strides") or [1] * n]
    low = [int(lo) for lo, _ in p["padding"]]
    base = [int(d) for d in p.get("base_dilation") or [1] * n]
    wdil = [int(d) for d in p.get("window_dilation") or [1] * n]
    out = tr.result()
    dt = out.dtype
    o_lps = [Loop(f"p{d}", 0, s) for d, s in enumerate(out.shape)]
    r_lps = [Loop(f"r{d}", 0, k) for d, k in enumerate(window)]
    pv = ivars(o_lps)
    rv = [AffExpr.var(lp.iv) if window[d] != 1 else AffExpr.lit(0) for d, lp in enumerate(r_lps)]
    idx, guards = dilated_window_index(pv, rv, out.shape, x.shape, window, stride, low, wdil, base)
    # a window dim of size 1 and stride 1 is the output dim itself: no window loop
    keep = [d for d in range(n) if window[d] != 1]
    ident = {"+=": 0, "max=": -INF, "min=": INF}[kind]
    if dt in INT_DTYPES and kind != "+=":
        info = np.iinfo(STORAGE[dt])
        ident = int(info.min) if kind == "max=" else int(info.max)
    tr.emit(out, pv, "=", c(ident, dt), o_lps)
    tr.emit(out, pv, kind, cast(x.read(idx), dt), o_lps + [r_lps[d] for d in keep], guards)
    return stored(out)
