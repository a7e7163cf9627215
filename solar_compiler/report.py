"""Rendering of roofline reports: the `report` (text) and `json` output targets, over the
`solar-report/1` data the `roofline` pass leaves on the module (`records.REPORT_ATTR`; built by
`analysis/summary.py`, whose docstring describes every field). Nothing here computes a figure.
"""

from __future__ import annotations

import io
import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import IO, Any, ClassVar

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.utils.target import Target

from solar_compiler.errors import SolarError
from solar_compiler.hw.model import describe_storage
from solar_compiler.records import load_report

# ---- reading back ---------------------------------------------------------------------------------

def module_report(module: ModuleOp) -> dict[str, Any]:
    report = load_report(module)
    if report is None:
        raise SolarError("no roofline report on the module: run the roofline pass first "
                         "(--roofline=all or -p roofline)")
    return report


@dataclass(frozen=True)
class JsonReportTarget(Target):
    name: ClassVar[str] = "json"

    def emit(self, ctx: Context, module: ModuleOp, output: IO[str]) -> None:
        output.write(json.dumps(module_report(module), indent=2) + "\n")


@dataclass(frozen=True)
class TextReportTarget(Target):
    name: ClassVar[str] = "report"

    def emit(self, ctx: Context, module: ModuleOp, output: IO[str]) -> None:
        output.write(render_text(module_report(module)))


# ---- text -----------------------------------------------------------------------------------------

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
    for prefix, scale in (("P", 1e15), ("T", 1e12), ("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if v >= scale:
            return f"{v / scale:.4g} {prefix}{unit}"
    return f"{v:.4g} {unit}"


def _validation_lines(v: dict[str, Any]) -> list[str]:
    """The validation record in full: what ran (samples, error, sizes) and every note; a validation
    that did not run is never claimed."""
    reason_shown = False
    if v["validated"]:
        err = v["max_rel_err"]
        how = f", {v['method']}" if v.get("method") else ""
        line = f"validated ({v['frontend']} frontend{how}): {v['samples']} sample(s)"
        if v.get("elements_checked"):
            line += f" of {v['elements_checked']:,} output elements"
        if err is not None:
            line += f", max relative error {err:.2e}"
        sizes = v.get("sizes")
        same = "; the full-size kernel checked to be the same program" if v.get("full_size_same_program") \
            else ""
        if sizes == "full":
            line += ", at full size"
        elif isinstance(sizes, str) and sizes.startswith("reduced: "):
            line += f", on a size-reduced instance ({sizes.removeprefix('reduced: ')}{same})"
        elif sizes:
            line += f", sizes {sizes}{same}"
        out = [line]
    elif v["frontend"] == "loop-text":
        out = ["NOT validated: loop-text input; nothing was executed against a reference"]
    else:  # the bound is still computed: say so, with the one-line reason
        out = [f"NOT validated ({v['frontend']} frontend; the bound is unvalidated): "
               f"{v.get('reason') or 'no reason recorded'}"]
        reason_shown = True
    by = v.get("translated_by") or []
    llm = [t for t in by if t.get("by") == "llm"]
    if llm:  # which path produced each op: template, or LLM with model and attempts
        n = len(by) - len(llm)
        out.append((f"translated: {n} op(s) by template; " if n else "translated: ") + "; ".join(
            f"{t['op']} ({t['loc']}) by LLM {t['model']}, {t['attempts']} attempt(s)"
            + (", cached" if t.get("cached") else "") for t in llm))
    f64 = v.get("float64_check") or {}
    if f64:  # the float32 comparison failed and the verdict was taken in float64
        probe = max((x for k, x in f64.items() if k.endswith(":probe")), default=0.0)
        dist = max((x for k, x in f64.items() if k.endswith(":loop_ir_vs_framework_f64")), default=0.0)
        out.append(f"note: float32 results differ beyond the summation tolerance; the program amplifies "
                   f"rounding (a 16-ulp perturbation moves its float64 output by {probe:.2e}); in float64 "
                   f"the loop IR is within {dist:.2e} of the framework")
    if v.get("reason") and not reason_shown:
        out.append(f"note: {v['reason']}")
    if v.get("export_failed"):
        out.append(f"note: captured by the dispatch fallback; export failed: {v['export_failed']}")
    if v.get("value_dependent"):
        out.append("value-dependent: the bound holds for the traced sample only; ops:")
        seen: dict[str, int] = {}
        for op in v["value_dependent"]:
            seen[op] = seen.get(op, 0) + 1
        out += [f"  {op}" + (f" (x{n})" if n > 1 else "") for op, n in seen.items()]
    return out


#: What each timing contract (`--cache-state`) assumes, for the report header (docs/bounds.md).
CACHE_CONTRACT = {
    "cold": "cold caches: every input, weight and output crosses the DRAM boundary (each timed call "
            "starts with nothing on chip, as when L2 is flushed before every trial)",
    "warm": "warm caches: a working set that fits storage kept between calls (on-chip, not per-SM) may "
            "start there, and its bytes are priced at the bandwidth of the levels inside it",
}


def fmt_bytes(v: float | None) -> str:
    """Whole bytes, rounded down (a lower bound stays one)."""
    return "n/a" if v is None else f"{math.floor(v):,}"


def _header(r: dict[str, Any], hws: list[str], cache_aware: bool) -> list[str]:
    tot = r["totals"]
    lines = [
        "solar-opt roofline report",
        f"source:     {r['source']}  (kernels: {', '.join(r['kernels'])})",
        *[f"{'validation:' if i == 0 else '':<12}{line}"
          for i, line in enumerate(_validation_lines(r["validation"]))],
        f"precision:  policy {r['precision']}",
        f"timing:     {CACHE_CONTRACT[r.get('cache_state', 'cold')]}",
    ]
    if r["validation"].get("notes"):
        lines.insert(-1, f"notes:      {'; '.join(r['validation']['notes'])}")
    if r["narrowed"]:
        share = f" ({tot['flops'] / tot['flops_as_written']:.1%})" if tot["flops_as_written"] else ""
        lines.append(f"narrowing:  needed work only (narrow-needed): {tot['flops']:,} of "
                     f"{tot['flops_as_written']:,} FLOPs as written{share}")
    else:
        lines.append("narrowing:  not run: counts are as written")
    for h in hws:
        hw = r["hw"][h]
        lines.append(f"hw:         {h}: {hw['description']}; DRAM {fmt_rate(hw['dram_bw']['value'], 'B/s')}; "
                     f"{hw['precision']}")
    if cache_aware:
        for h in hws:
            lv = "; ".join(f"{x['name']}: {describe_storage(x['per'], x['capacity'], x['units'])} at "
                           f"{fmt_rate(x['bandwidth'], 'B/s')}" for x in r["bounds"][h]["levels"])
            lines.append(f"levels:     {h}: {lv}")
    for i, a in enumerate(r.get("aliases") or []):
        what = "returned again" if a["how"] == "returned again" else f"a view of {a['role']} '{a['of']}'"
        lines.append(f"{'aliases:' if i == 0 else '':<12}output {a['position']} ('{a['output']}') is {what}: "
                     "no work (eager runs no kernel for it)")
    if r["cache_size"] is not None:
        lines.append(f"cache size: {r['cache_size']:,} bytes at the outermost (DRAM) level: overridden by "
                     "--cache-size (what-if study, not the targets' figures)")
    return lines


def render_text(r: dict[str, Any]) -> str:
    from rich import box
    from rich.console import Console
    from rich.table import Table

    buf = io.StringIO()
    hws = list(r["bounds"])
    fid = [f for f in r["fidelity"] if f != "cache-aware"]
    ca = "cache-aware" in r["fidelity"] and all(r["bounds"][h]["cache_aware_s"] is not None for h in hws)
    con = Console(file=buf, width=160 + (40 * len(hws) if ca else 0), no_color=True, force_terminal=False,
                  color_system=None, highlight=False, emoji=False, markup=False)
    con.print("\n".join(_header(r, hws, ca)), soft_wrap=True)

    grouped = _grouped(r)
    t = Table(title="ops" + (" (einsum nodes, each priced alone)" if grouped else ""), box=box.ASCII2,
              title_justify="left", show_footer=True)
    tot = r["totals"]
    t.add_column("op", footer="total")
    t.add_column("equation", overflow="fold", max_width=36)
    t.add_column("loc", overflow="fold", max_width=20)
    t.add_column("FLOPs matrix", justify="right", footer=f"{tot['flops_matrix']:,}")
    t.add_column("FLOPs vector", justify="right", footer=f"{tot['flops_vector']:,}")
    t.add_column("bytes", justify="right", footer=f"{sum(op['bytes'] for op in r['ops']):,}")
    t.add_column("FLOP/B", justify="right")
    for h in hws:
        # grouped: the unfused bound is the kernels' sum, not this column's (see the kernels table)
        t.add_column(f"{h}\nbound", justify="right",
                     footer="" if grouped else fmt_time(r["bounds"][h]["unfused_s"]))
        t.add_column(f"{h}\nbound by")
        if ca:
            t.add_column(f"{h}\ncache-aware bound", justify="right")
            t.add_column(f"{h}\nlevel")
    for op in r["ops"]:
        ai = "inf" if op["intensity"] is None else f"{op['intensity']:.3g}"
        vec = f"{op['flops_vector']:,}"
        if op.get("flops_vector_literal", op["flops_vector"]) != op["flops_vector"]:
            vec += f" (literal {op['flops_vector_literal']:,})"
        cells = [op["name"], op["equation"], op["loc"] or "-", f"{op['flops_matrix']:,}", vec,
                 f"{op['bytes']:,}", ai]
        for h in hws:
            cells += [fmt_time(op["bound_s"][h]), op["bottleneck"][h]]
            if ca:
                cells += [fmt_time(op["cache_aware_s"][h]), op["cache_aware_bottleneck"][h]]
        t.add_row(*cells)
    con.print(t)
    if grouped:
        con.print(_kernels_table(r, hws))
    con.print(_bounds_table(r, hws, fid, ca))
    extra = f", {fmt_bytes(tot['bytes_cache_aware'])} bytes cache-aware (DRAM level, {hws[0]})" if ca else ""
    con.print(f"totals: {tot['flops']:,} FLOPs ({tot['flops_matrix']:,} matrix, {tot['flops_vector']:,} "
              f"vector); {tot['bytes_unfused']:,} bytes unfused, {tot['bytes_fused']:,} bytes compulsory"
              f"{extra}")
    literal = tot.get("flops_vector_literal", tot["flops_vector"])
    if literal != tot["flops_vector"]:
        con.print(f"vector work: {tot['flops_vector']:,} FLOPs, the fewest a legal implementation needs "
                  f"(loop-invariant terms once, common subexpressions once, products reassociated); "
                  f"{literal:,} counted literally, every op at every point as written")
    if r["narrowed"]:
        con.print(f"as written (before narrow-needed): {tot['flops_as_written']:,} FLOPs "
                  f"({tot['flops_matrix_as_written']:,} matrix, {tot['flops_vector_as_written']:,} vector); "
                  f"{tot['bytes_unfused_as_written']:,} bytes unfused, {tot['bytes_fused_as_written']:,} "
                  "bytes compulsory")
    if ca:
        _print_bracket(con, r, hws[0])
    if ca and len({r["bounds"][h]["bytes_cache_aware"] for h in hws}) > 1:
        con.print("note: cache-aware DRAM-level bytes differ per target (capacities differ): " + ", ".join(
            f"{h} {fmt_bytes(r['bounds'][h]['bytes_cache_aware'])}" for h in hws))
    if r["value_dependent"]:
        traced = [v for v in r["value_dependent"] if v.get("traced")]
        con.print("value-dependent (indirect) accesses: " + "; ".join(
            f"{v['op']} ({', '.join(v['tensors'])})" for v in r["value_dependent"]))
        if traced:
            con.print("  counted as the traced sample touched them (the bound holds for that sample; "
                      "--indirect min for the all-inputs minimum): " + "; ".join(
                          f"{v['op']} ({', '.join(v['traced'])})" for v in traced))
        if len(traced) < len(r["value_dependent"]):
            con.print("  counted at the fewest elements any index values touch: " + "; ".join(
                f"{v['op']} ({', '.join(t for t in v['tensors'] if t not in v.get('traced', []))})"
                for v in r["value_dependent"] if set(v["tensors"]) - set(v.get("traced", []))))
    if r["inverse"] is not None:
        _inverse_table(con, r, [f for f in fid if f in ("unfused", "fused")])
    return buf.getvalue()


def _grouped(r: dict[str, Any]) -> bool:
    """Whether the unfused kernels come from a source-op record (else they are the ops)."""
    return any(k["op"] is not None for k in r["kernels_unfused"])


def _stmt_ranges(stmts: Sequence[int]) -> str:
    """[2, 3, 4, 7] -> 'S2-S4, S7'."""
    runs: list[list[int]] = []
    for i in stmts:
        if runs and i == runs[-1][-1] + 1:
            runs[-1].append(i)
        else:
            runs.append([i])
    return ", ".join(f"S{a[0]}" if len(a) == 1 else f"S{a[0]}-S{a[-1]}" for a in runs)


def _kernels_table(r: dict[str, Any], hws: list[str]) -> Any:
    from rich import box
    from rich.table import Table

    tot = r["totals"]
    t = Table(title="kernels of the unfused bound (one per source op; its intermediates stay on chip)",
              box=box.ASCII2, title_justify="left", show_footer=True)
    t.add_column("kernel", footer="total", overflow="fold", max_width=52)
    t.add_column("loc", overflow="fold", max_width=64)
    t.add_column("statements", overflow="fold", max_width=16)
    t.add_column("FLOPs matrix", justify="right", footer=f"{tot['flops_matrix']:,}")
    t.add_column("FLOPs vector", justify="right", footer=f"{tot['flops_vector']:,}")
    t.add_column("bytes", justify="right", footer=f"{tot['bytes_unfused']:,}")
    for h in hws:
        t.add_column(f"{h}\nbound", justify="right", footer=fmt_time(r["bounds"][h]["unfused_s"]))
        t.add_column(f"{h}\nbound by")
    for k in r["kernels_unfused"]:
        name = k["op"] if k["op"] is not None else k["name"]
        if len(r["kernels"]) > 1:
            name = f"{k['kernel']}.{name}"
        cells = [name, k["loc"] or "-", _stmt_ranges(k["stmts"]) or ", ".join(k["ops"]),
                 f"{k['flops_matrix']:,}", f"{k['flops_vector']:,}", f"{k['bytes']:,}"]
        for h in hws:
            cells += [fmt_time(k["bound_s"][h]), k["bottleneck"][h]]
        t.add_row(*cells)
    return t


def _bounds_table(r: dict[str, Any], hws: list[str], fid: list[str], ca: bool) -> Any:
    from rich import box
    from rich.table import Table

    tot = r["totals"]
    b = Table(title="bounds (lower bounds on runtime)", box=box.ASCII2, title_justify="left")
    b.add_column("fidelity")
    b.add_column("bytes", justify="right")
    for h in hws:
        b.add_column(f"{h}\nbound", justify="right")
        b.add_column(f"{h}\nbound by")
    rows = {"unfused": ("unfused_s", tot["bytes_unfused"]), "fused": ("fused_s", tot["bytes_fused"]),
            "cache-aware": ("cache_aware_s", tot["bytes_cache_aware"])}
    for f in r["fidelity"]:
        key, nbytes = rows[f]
        cells = [f, fmt_bytes(nbytes)]
        for h in hws:
            bh = r["bounds"][h]
            by = {"fused": bh["fused_bottleneck"], "unfused": "per kernel" if _grouped(r) else "per op",
                  "cache-aware": bh["cache_aware_bottleneck"] or "-"}[f]
            cells += [fmt_time(bh[key]), by]
        b.add_row(*cells)
    if "fused" in fid:
        for res in ("matrix", "vector", "memory"):
            cells = [f"  fused {res} term", ""]
            for h in hws:
                cells += [fmt_time(r["bounds"][h]["fused_terms_s"][res]), ""]
            b.add_row(*cells)
    if ca:
        names = list(dict.fromkeys(x["name"] for h in hws for x in r["bounds"][h]["levels"]))
        for name in names:
            per = {h: next((x for x in r["bounds"][h]["levels"] if x["name"] == name), None) for h in hws}
            got = {fmt_bytes(x["bytes"]) for x in per.values() if x is not None}
            cells = [f"  cache-aware {name} term", got.pop() if len(got) == 1 else "per target"]
            for h in hws:
                cells += [fmt_time(r["bounds"][h]["cache_aware_terms_s"][name]) if per[h] else "-", ""]
            b.add_row(*cells)
    return b


def _inverse_table(con: Any, r: dict[str, Any], fidelities: list[str]) -> None:
    from rich import box
    from rich.table import Table

    inv = r["inverse"]
    t = Table(title=f"inverse roofline: hardware needed for {fmt_time(inv['latency_s'])}",
              box=box.ASCII2, title_justify="left")
    for name in ("target", "fidelity", "DRAM BW", "x now", "matrix FLOP/s", "x now", "vector FLOP/s",
                 "x now", "all-figure scale", "met"):
        t.add_column(name, justify="left" if name in ("target", "fidelity", "met") else "right")
    for h in r["bounds"]:
        for f in fidelities:
            d = inv[h][f]
            t.add_row(h, f, fmt_rate(d["dram_bw_Bps"], "B/s"), f"{d['dram_bw_x']:.3g}x",
                      fmt_rate(d["matrix_flops"], "FLOP/s"), f"{d['matrix_x']:.3g}x",
                      fmt_rate(d["vector_flops"], "FLOP/s"), f"{d['vector_x']:.3g}x",
                      f"{d['scale_x']:.3g}x" if "scale_x" in d else "-", "yes" if d["met"] else "no")
    con.print(t)


def _print_bracket(con: Any, r: dict[str, Any], h: str) -> None:
    """Per contraction and level: the traffic lower bound beside the traffic of the best tiled
    schedule found (an achievable figure), so that users see how tight the bound can be."""
    rows = [op for op in r["ops"] if op.get("bytes_tiled", {}).get(h)]
    for op in rows:
        parts = [f"{lv}: bound {fmt_bytes(op['bytes_cache_aware'][h][lv])} <= tiled {fmt_bytes(t)}"
                 for lv, t in op["bytes_tiled"][h].items()]
        con.print(f"traffic bracket {op['name']} ({h}): " + "; ".join(parts))
