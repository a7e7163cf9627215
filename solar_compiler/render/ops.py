"""The per-statement view (`--ops`): every einsum node priced alone, sorted by bound. It is not what
the unfused bound sums: a node's intermediate crosses DRAM here, while inside its kernel (a softmax's
five statements, SDPA's QK^T and its softmax) it stays on chip; the kernels table is that bound's
view. Only the rows shown are rendered (a network of thousands of statements stays fast)."""

from __future__ import annotations

from typing import Any

from solar_compiler.render.fit import Col, Fit
from solar_compiler.render.fmt import fmt_si, fmt_time, short_loc

TITLE = ("statements (einsum nodes), each priced alone: an intermediate crosses DRAM here but stays on "
         "chip inside its kernel, so these bounds do not add up to the unfused bound")


def ops_table(r: dict[str, Any], top: int, cache_aware: bool) -> Fit:
    """Cache-aware columns only with one target (two targets' would not fit a terminal)."""
    hws = list(r["bounds"])
    cache_aware = cache_aware and len(hws) == 1
    first = hws[0]
    order = sorted(range(len(r["ops"])), key=lambda i: -r["ops"][i]["bound_s"][first])
    shown = order if top <= 0 else order[:top]
    cols = [Col("op", key=True), Col("module", key=True, breaks="."),
            Col("equation", breaks=" ,"), Col("line", rank=2), Col("FLOPs", right=True, rank=1),
            Col("bytes", right=True, rank=1), Col("FLOP/B", right=True, rank=2)]
    for h in hws:
        cols += [Col(f"{h}\nbound", right=True, group=h), Col("bound by", group=h)]
        if cache_aware:
            cols += [Col("cache-\naware", right=True, group=h), Col("level", group=h)]
    t = Fit(TITLE, cols)
    for i in shown:
        op = r["ops"][i]
        ai = "inf" if op["intensity"] is None else f"{op['intensity']:.3g}"
        cells = [op["name"], op.get("module") or "model", op["equation"], short_loc(op["loc"], r["source"]),
                 fmt_si(op["flops"]), fmt_si(op["bytes"], "B"), ai]
        for h in hws:
            cells += [fmt_time(op["bound_s"][h]), op["bottleneck"][h]]
            if cache_aware:
                cells += [fmt_time(op["cache_aware_s"][h]), op["cache_aware_bottleneck"][h] or "-"]
        t.add_row(*cells)
    rest = order[len(shown):]
    if rest:
        cells = ["", f"({len(rest)} more)", "", "", fmt_si(sum(r["ops"][i]["flops"] for i in rest)),
                 fmt_si(sum(r["ops"][i]["bytes"] for i in rest), "B"), ""]
        for h in hws:
            cells += [fmt_time(sum(r["ops"][i]["bound_s"][h] for i in rest)), ""]
            if cache_aware:
                cells += ["", ""]
        t.add_row(*cells)
    return t


def traffic_lines(r: dict[str, Any], h: str, top: int) -> list[str]:
    """Per contraction and level: the traffic lower bound beside the traffic of the best tiled
    schedule found (an achievable figure), so that one sees how tight the bound can be; exact
    integer bytes (the JSON's), as a bound and a schedule may differ in the last digits."""
    rows = [op for op in r["ops"] if (op.get("bytes_tiled") or {}).get(h)]
    rows.sort(key=lambda op: -op["bound_s"][h])
    out = []
    for op in rows if top <= 0 else rows[:top]:
        parts = [f"{lv}: at least {op['bytes_cache_aware'][h][lv]:,} B, tiled {t:,} B"
                 for lv, t in op["bytes_tiled"][h].items()]
        out.append(f"traffic of {op['name']} on {h} (lower bound vs best tiling found): " + "; ".join(parts))
    return out
