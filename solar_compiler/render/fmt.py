"""Number and name formatting shared by the text report and the plot."""

from __future__ import annotations

import math
from pathlib import PurePath

_SI = (("P", 1e15), ("T", 1e12), ("G", 1e9), ("M", 1e6), ("k", 1e3))


def fmt_time(s: float | None) -> str:
    if s is None:
        return "n/a"
    if s == 0:
        return "0 s"
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("us", 1e-6), ("ns", 1e-9)):
        if s >= scale:
            return f"{s / scale:.4g} {unit}"
    return f"{s / 1e-12:.4g} ps"


def fmt_rate(v: float, unit: str) -> str:
    for prefix, scale in _SI:
        if v >= scale:
            return f"{v / scale:.4g} {prefix}{unit}"
    return f"{v:.4g} {unit}"


def fmt_si(v: float | None, unit: str = "") -> str:
    """A count for people, 3 significant digits: 1.21 G, 12.6 MB, 512 B, 0. Rounded down, so that a
    printed byte or FLOP count never exceeds the exact one (the JSON has the exact counts)."""
    if v is None:
        return "n/a"
    for prefix, scale in _SI:
        if v >= scale:
            q = v / scale
            digits = 2 if q < 10 else 1 if q < 100 else 0
            q = math.floor(q * 10 ** digits) / 10 ** digits
            return f"{q:.{digits}f} {prefix}{unit}".rstrip()
    return f"{math.floor(v):d} {unit}".rstrip()


def fmt_pct(x: float | None) -> str:
    """A fraction 0..1 as a percentage: 41.3%, 0.04%, <0.01%."""
    if x is None:
        return "n/a"
    if x == 0:
        return "0%"
    p = 100 * x
    if p < 0.01:
        return "<0.01%"
    return f"{p:.2g}%" if p < 1 else f"{p:.1f}%"


#: Op names too long for a table column, in the short form everyone uses.
ABBREVIATIONS = {
    "scaled_dot_product_attention": "sdpa",
    "_scaled_dot_product_flash_attention_for_cpu": "sdpa",
    "_scaled_dot_product_flash_attention": "sdpa",
    "_scaled_dot_product_efficient_attention": "sdpa",
    "_scaled_dot_product_cudnn_attention": "sdpa",
    "_scaled_dot_product_attention_math": "sdpa",
    "_embedding_bag": "embedding_bag",
    "_embedding_bag_forward_only": "embedding_bag",
    "_native_batch_norm_legit_no_training": "batch_norm",
    "_native_batch_norm_legit": "batch_norm",
    "native_batch_norm": "batch_norm",
    "native_layer_norm": "layer_norm",
    "native_group_norm": "group_norm",
}


def short_op(op: str | None) -> str:
    """'aten.addmm.default' -> 'addmm', 'aten.softmax.int' -> 'softmax',
    'aten.scaled_dot_product_attention.default' -> 'sdpa' (joined ops keep ' + ')."""
    if not op:
        return "-"
    parts = []
    for one in op.split(" + "):
        bits = one.split(".")
        name = bits[1] if len(bits) >= 2 and bits[0] in ("aten", "prims", "jax", "lax") else one
        parts.append(ABBREVIATIONS.get(name, name))
    return " + ".join(parts)


def short_loc(loc: str | None, source: str) -> str:
    """A statement's 'file:line' as the line alone when the file is the report's source, else the
    file's base name and line."""
    if not loc:
        return "-"
    file, _, line = loc.rpartition(":")
    if not file:
        return loc
    if file == source:
        return line
    return f"{PurePath(file).name}:{line}"
