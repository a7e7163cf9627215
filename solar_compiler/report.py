"""Rendering of roofline reports: the `report` (text) and `json` output targets, over the
`solar-report/1` data the `roofline` pass registers with the analysis manager for the module
(`summary.register_report`; built by `analysis/summary.py`, whose docstring describes every field).
The report is a result, never IR: nothing here reads it from a module attribute, and nothing here
computes a figure.
"""

from __future__ import annotations

import io
import json
import math
from dataclasses import dataclass
from typing import IO, Any, ClassVar

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.utils.target import Target

from solar_compiler.analysis.summary import module_report as registered_report
from solar_compiler.errors import SolarError
from solar_compiler.render.fit import Col, Fit
from solar_compiler.render.fmt import fmt_pct, fmt_rate, fmt_time

__all__ = ["JsonReportTarget", "TextReportTarget", "fmt_rate", "fmt_time", "module_report", "render_text"]

# ---- reading back ---------------------------------------------------------------------------------

def module_report(module: ModuleOp) -> dict[str, Any]:
    report = registered_report(module)
    if report is None:
        raise SolarError("no roofline report for the module: run the roofline pass first, in the same "
                         "pipeline, after the last pass that changes the IR (--roofline=all or -p roofline)")
    return report


@dataclass(frozen=True)
class JsonReportTarget(Target):
    name: ClassVar[str] = "json"

    def emit(self, ctx: Context, module: ModuleOp, output: IO[str]) -> None:
        output.write(json.dumps(module_report(module), indent=2) + "\n")


@dataclass(frozen=True)
class TextReportTarget(Target):
    """`-t report{width=120 depth=2 top=20 ops=true explain=true}`: the text report at a width,
    the module tree to a depth (0: the deepest that fits), `top` rows per table (0: all), the
    per-statement table, the glossary (the driver's --width/--depth/--top/--ops/--explain set them)."""

    name: ClassVar[str] = "report"
    width: int = 120
    depth: int = 0
    top: int = 20
    ops: bool = False
    explain: bool = False

    def emit(self, ctx: Context, module: ModuleOp, output: IO[str]) -> None:
        output.write(render_text(module_report(module), width=self.width, depth=self.depth, top=self.top,
                                 ops=self.ops, explain=self.explain))


# ---- text -----------------------------------------------------------------------------------------

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
        if same and v.get("repeated_blocks"):
            same += (" with more copies of its repeated layer block (" + ", ".join(v["repeated_blocks"])
                     + "), every copy checked to read its inputs alike")
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
    if v.get("export_failed") and v.get("frontend") == "torch-make_fx":  # autograd inside forward
        out.append(f"note: traced by make_fx, not export: {v['export_failed']}")
    elif v.get("export_failed"):
        out.append(f"note: captured by the dispatch fallback; export failed: {v['export_failed']}")
    if v.get("value_dependent"):
        out.append("value-dependent: the bound holds for the traced sample only; ops:")
        seen: dict[str, int] = {}
        for op in v["value_dependent"]:
            seen[op] = seen.get(op, 0) + 1
        out += [f"  {op}" + (f" (x{n})" if n > 1 else "") for op, n in seen.items()]
    rc = v.get("reorder_chains")
    if rc:
        out.append(f"reorder-chains: the rewritten graph reproduces the original ({rc['how']}, "
                   f"{rc['samples']} random sample(s) in {rc['dtype']}, max relative error "
                   f"{rc['max_rel_err']:.2e})" if rc["validated"] else
                   f"reorder-chains: the rewritten graph NOT checked: {rc['reason']}")
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
    """The header as 'label: text' lines (wrapped at the report's width by `render_text`)."""
    tot = r["totals"]
    lines = [
        "solar-opt roofline report",
        f"source:     {r['source']}  (kernels: {', '.join(r['kernels'])})",
        *[f"{'validation:' if i == 0 else '':<12}{line}"
          for i, line in enumerate(_validation_lines(r["validation"]))],
        f"precision:  policy {r['precision']}" + (f" ({why})" if (why := r.get("precision_reason")) else ""),
        f"timing:     {CACHE_CONTRACT[r.get('cache_state', 'cold')]}",
        f"model:      {model_line(r)}",
    ]
    if r["validation"].get("notes"):
        lines.insert(-3, f"notes:      {'; '.join(r['validation']['notes'])}")
    if r["validation"].get("step") == "train":
        opt = r["validation"].get("optimizer")
        at = next(i for i, line in enumerate(lines) if line.startswith("precision:"))
        lines.insert(at, "step:       one training step: forward, loss, parameter gradients (backward)"
                        + (f", then the {opt} update" if opt else "") + " (docs/training.md)")
    if r.get("chains") and (r["reorder_chains"] or any(c["better"] for c in r["chains"])):
        lines.append(_chains_line(r))  # said only where it tells something
    stand_in = "a reference nest for the op's production algorithm"
    for kind, label, whose in (("llm", "LLM ops:", "an LLM's loop nest"),
                               ("stand-in", "stand-ins:", stand_in)):
        rows = [o for o in r.get("llm_ops") or [] if o.get("by", "llm") == kind]
        for i, o in enumerate(rows):  # docs/llm-frontend.md, "Pricing"
            priced = f"{o['flops_priced']:,} FLOPs priced (the products of its plain contractions)" \
                if o["flops_priced"] else "no compute term"
            lines.append(f"{label if i == 0 else '':<12}{o['op']} ({o['loc']}): {whose}, not "
                         f"priced as written ({o['flops_written']:,} FLOPs): {priced}, its traffic counted")
    moved = {h: r["bounds"][h].get("sum_adds_on_matrix") or 0.0 for h in hws}
    if any(moved.values()):  # docs/bounds.md section 0.4, "Work either unit may do"
        lines.append(f"{'sums:':<12}{tot['flops_sum']:,} additions of sums and scans may run on the matrix "
                     "unit (one MAC with a ones operand each); the fused terms run "
                     + ", ".join(f"{round(n):,} on {h}" for h, n in moved.items()) + " there")
    if r["narrowed"] and tot["flops_as_written"] != tot["flops"]:
        share = f" ({tot['flops'] / tot['flops_as_written']:.1%})" if tot["flops_as_written"] else ""
        both = _BEST if any(c["applied"] for c in r.get("chains", ())) else ""
        lines.append(f"narrowing:  needed work only (narrow-needed{both}): {tot['flops']:,} of "
                     f"{tot['flops_as_written']:,} FLOPs as written{share}")
    elif not r["narrowed"]:
        lines.append("narrowing:  not run: counts are as written")
    for i, a in enumerate(r.get("aliases") or []):
        what = "returned again" if a["how"] == "returned again" else f"a view of {a['role']} '{a['of']}'"
        lines.append(f"{'aliases:' if i == 0 else '':<12}output {a['position']} ('{a['output']}') is {what}: "
                     "no work (eager runs no kernel for it)")
    if r["cache_size"] is not None:
        lines.append(f"cache size: {r['cache_size']:,} bytes at the outermost (DRAM) level: overridden by "
                     "--cache-size (what-if study, not the targets' figures)")
    return lines


_BEST = " and reorder-chains"

#: The model of computation per `--algorithms` (docs/bounds.md, section 0), for the report header.
MODEL = {
    "default": "default (any order, fusion and tiling, and the catalogue of rewrites of docs/bounds.md "
               "section 0)",
    "classical": "classical (the products as written, in any order, fusion and tiling: SOLAR's model)",
}


#: Rewrites of one kind the model line spells out; the rest are counted (the JSON lists them all).
REWRITES_SHOWN = 3


def rewrite_words(rewrites: list[dict[str, Any]]) -> list[str]:
    """The rewrites as the model line says them, at most REWRITES_SHOWN per kind: a network repeats
    one rewrite per layer, which listed in full took pi0's report 150 lines."""
    by_kind: dict[str, list[str]] = {}
    for w in rewrites:
        said = (w.get("words") or f"{w['kind']}: {w['what']}") + (f" ({w['loc']})" if w["loc"] else "")
        seen = by_kind.setdefault(w["kind"], [])
        if said not in seen:
            seen.append(said)
    out: list[str] = []
    for kind, said in by_kind.items():
        out += said[:REWRITES_SHOWN]
        if len(said) > REWRITES_SHOWN:
            out.append(f"{len(said) - REWRITES_SHOWN} more {kind} (--format json lists all)")
    return out


def model_line(r: dict[str, Any]) -> str:
    """What the bounds cover, and what the default bound was priced as (its rewrites)."""
    algorithms = r.get("algorithms", "classical")
    text = MODEL[algorithms]
    rewrites = r.get("rewrites") or []
    if algorithms == "default":
        if rewrites:
            text += "; priced as " + "; ".join(rewrite_words(rewrites))
            cl = r["classical"]["bounds"]
            text += "; as written: fused " + ", ".join(f"{h} {fmt_time(b['fused_s'])}" for h, b in cl.items())
        else:
            text += "; no rewrite saves work here"
    return text


#: Reordering contraction trees is worth a table and a suggestion when it could save at least this
#: share of the fused bound (of the unfused one without a fused bound) on some target.
MATERIAL = 0.01


def chain_gain(r: dict[str, Any]) -> dict[str, float]:
    """Per target, the most that the better orders could save, as a share of the fused bound: the
    FLOPs they save at the slowest rate of the target (matrix or vector: however they are priced,
    they take no longer) plus the bytes they save at DRAM bandwidth. An upper estimate, so that a
    material gain is never hidden."""
    better = [c for c in r.get("chains") or () if c["better"] and c["flops_best"] is not None]
    flops = sum(c["flops_as_written"] - c["flops_best"] for c in better)
    nbytes = sum(max(0, c["bytes_as_written"] - (c["bytes_best"] or 0)) for c in better)
    out: dict[str, float] = {}
    for h, b in r["bounds"].items():
        hw = r["hw"][h]
        rates = [f["value"] for kind in ("matrix", "vector") for f in hw[kind].values() if f["value"]]
        saved = (flops / min(rates) if rates else 0.0) + nbytes / hw["dram_bw"]["value"]
        base = b["fused_s"] if b.get("fused_s") else b.get("unfused_s")
        out[h] = saved / base if base else 0.0
    return out


def chains_material(r: dict[str, Any]) -> bool:
    """Whether reordering could save at least `MATERIAL` of the bound on some target."""
    return any(x >= MATERIAL for x in chain_gain(r).values())


def _chains_line(r: dict[str, Any]) -> str:
    """Whether the costs use the best association orders (`reorder-chains`), and what they save;
    `--reorder-chains` is suggested only for a material gain."""
    rows = r["chains"]
    better = [c for c in rows if c["better"]]
    a, b = sum(c["flops_as_written"] for c in better), sum(c["flops_best"] for c in better)
    gain = f"{a:,} -> {b:,} FLOPs in them ({a / b:.3g}x)" if better and b else ""
    if not better:
        ran = "reorder-chains ran" if r["reorder_chains"] else "as written"
        return f"chains:     {ran}: no contraction tree has an order with fewer FLOPs ({len(rows)} priced)"
    n = f"{len(better)} of {len(rows)} tree(s)"
    if r["reorder_chains"]:
        return f"chains:     best orders used (reorder-chains): {n} rewritten, {gain}"
    if any(w["kind"] == "reassociated" for w in r.get("rewrites", ())):
        return (f"chains:     best orders priced (--algorithms default; the IR as written): {n}, {gain}; "
                "--reorder-chains rewrites the IR")
    if not chains_material(r):
        most = max(chain_gain(r).values(), default=0.0)
        return (f"chains:     as written; {n} have an order with fewer FLOPs, {gain}, saving at most "
                f"{fmt_pct(most)} of the bound (under {MATERIAL:.0%}: not worth reordering)")
    return f"chains:     as written; {n} have an order with fewer FLOPs, {gain}: --reorder-chains applies it"


def _chains_table(r: dict[str, Any]) -> Fit:
    t = Fit("contraction trees (as written, and in the order with the fewest FLOPs)",
            [Col("tree", key=True, breaks="."), Col("loc", rank=2, breaks=", "),
             Col("order as written", breaks=" "), Col("FLOPs", right=True), Col("bytes", right=True, rank=2),
             Col("best order", breaks=" "), Col("FLOPs ", right=True), Col("bytes ", right=True, rank=2),
             Col("ratio", right=True), Col("used")], box="ascii")
    multi = len(r["kernels"]) > 1
    for c in r["chains"]:
        best = c["flops_best"] is not None
        t.add_row(f"{c['kernel']}.{c['root']}" if multi else c["root"], ", ".join(c["locs"]) or "-",
                  c["order_as_written"], f"{c['flops_as_written']:,}", f"{c['bytes_as_written']:,}",
                  c["order_best"] or "-", f"{c['flops_best']:,}" if best else "-",
                  f"{c['bytes_best']:,}" if best else "-", f"{c['ratio']:.3g}x" if c["ratio"] else "-",
                  "yes" if c["applied"] else "no")
    return t


def _wrapped_header(r: dict[str, Any], hws: list[str], cache_aware: bool, width: int) -> list[str]:
    """The header lines, then per target what the bounds were priced with (`render/header.py`),
    each wrapped at `width` under its label."""
    from solar_compiler.render.header import split_label, target_lines, wrap

    head = _header(r, hws, cache_aware)
    pairs = [("", head[0])] + [split_label(line) for line in head[1:]]
    for h in hws:
        pairs += target_lines(h, r["hw"][h])
    return wrap(pairs, width)


def render_text(r: dict[str, Any], width: int = 120, depth: int = 0, top: int = 20, ops: bool = False,
                explain: bool = False) -> str:
    """The text report: header, bounds, module tree, kernels by bound, measured times, totals; the
    per-statement table with `ops`, the glossary with `explain`. Every table fits `width` columns;
    only the rows shown are rendered."""
    from rich.console import Console

    from solar_compiler.render.glossary import explain_lines
    from solar_compiler.render.kernels import kernel_table
    from solar_compiler.render.measured import measured_tables
    from solar_compiler.render.ops import ops_table, traffic_lines
    from solar_compiler.render.tree import auto_depth, module_table

    buf = io.StringIO()
    hws = list(r["bounds"])
    fid = [f for f in r["fidelity"] if f != "cache-aware"]
    ca = "cache-aware" in r["fidelity"] and all(r["bounds"][h]["cache_aware_s"] is not None for h in hws)
    con = Console(file=buf, width=width, no_color=True, force_terminal=False, color_system=None,
                  highlight=False, emoji=False, markup=False)

    def say(text: str) -> None:
        con.print(text, overflow="fold", crop=False)

    say("\n".join(_wrapped_header(r, hws, ca, width)))
    con.print(_bounds_table(r, hws, fid, ca))
    unfused = "unfused" in r["fidelity"]  # the module and kernel tables are views of the unfused bound
    if unfused and any(m["path"] for m in r.get("modules") or []):
        con.print(module_table(r, depth or auto_depth(r, max(top, 12) if top > 0 else 1 << 30)))
    if unfused:
        con.print(kernel_table(r, top))
    reassociated = any(w["kind"] == "reassociated" for w in r.get("rewrites", ()))
    if any(c["better"] or c["applied"] for c in r.get("chains", ())) and (reassociated or chains_material(r)):
        con.print(_chains_table(r))
    tables, notes = measured_tables(r)
    for t in tables:
        con.print(t)
    for note in notes:
        say(note)
    tot = r["totals"]
    extra = f", {fmt_bytes(tot['bytes_cache_aware'])} bytes cache-aware (DRAM level, {hws[0]})" if ca else ""
    say(f"totals: {tot['flops']:,} FLOPs ({tot['flops_matrix']:,} matrix, {tot['flops_vector']:,} "
        f"vector); {tot['bytes_unfused']:,} bytes unfused, {tot['bytes_fused']:,} bytes compulsory{extra}")
    for line in _phase_lines(r, hws):
        say(line)
    literal = tot.get("flops_vector_literal", tot["flops_vector"])
    if literal != tot["flops_vector"]:
        say(f"vector work: {tot['flops_vector']:,} FLOPs, the fewest a legal implementation needs "
            f"(loop-invariant terms once, common subexpressions once, products reassociated); "
            f"{literal:,} counted literally, every op at every point as written")
    if r["narrowed"] and tot["flops_as_written"] != tot["flops"]:
        both = _BEST if any(c["applied"] for c in r.get("chains", ())) else ""
        say(f"as written (before narrow-needed{both}): {tot['flops_as_written']:,} FLOPs "
            f"({tot['flops_matrix_as_written']:,} matrix, {tot['flops_vector_as_written']:,} vector); "
            f"{tot['bytes_unfused_as_written']:,} bytes unfused, {tot['bytes_fused_as_written']:,} "
            "bytes compulsory")
    if ca and len({r["bounds"][h]["bytes_cache_aware"] for h in hws}) > 1:
        say("note: cache-aware DRAM-level bytes differ per target (capacities differ): " + ", ".join(
            f"{h} {fmt_bytes(r['bounds'][h]['bytes_cache_aware'])}" for h in hws))
    if r["value_dependent"]:
        vd = r["value_dependent"]
        shown = vd if top <= 0 else vd[:top]
        more = f"; {len(vd) - len(shown)} more (--top 0 lists all)" if len(shown) < len(vd) else ""
        say("value-dependent (indirect) accesses: " + "; ".join(
            f"{v['op']} ({', '.join(dict.fromkeys(v['tensors']))})" for v in shown) + more)
        traced = [v for v in shown if v.get("traced")]
        if traced:
            say("  counted as the traced sample touched them (the bound holds for that sample; "
                "--indirect min for the all-inputs minimum): " + "; ".join(
                    f"{v['op']} ({', '.join(dict.fromkeys(v['traced']))})" for v in traced))
        untraced = [(v["op"], [t for t in dict.fromkeys(v["tensors"]) if t not in (v.get("traced") or [])])
                    for v in shown]
        if any(ts for _, ts in untraced):
            say("  counted at the fewest elements any index values touch: " + "; ".join(
                f"{op} ({', '.join(ts)})" for op, ts in untraced if ts))
    if r["inverse"] is not None:
        _inverse_table(con, r, [f for f in fid if f in ("unfused", "fused")])
    if ops:
        con.print(ops_table(r, top, ca))
        if ca:
            for line in traffic_lines(r, hws[0], top):
                say(line)
    hints = [] if ops else ["--ops: per statement"]
    hints += ["--depth N: module tree depth", "--top N: rows (0: all)"]
    if not explain:
        hints.append("--explain: terms")
    say("more: " + "; ".join(hints))
    if explain:
        say("\n".join(explain_lines(width)))
    return "".join(line.rstrip() + "\n" for line in buf.getvalue().splitlines())


def _phase_lines(r: dict[str, Any], hws: list[str]) -> list[str]:
    """A training step's totals by phase (`phases` of the report; docs/training.md): FLOPs, the
    unfused kernels' bytes and their part of the unfused bound on the first target."""
    rows = r.get("phases") or []
    if not rows:
        return []
    h = hws[0] if hws else None
    lines = ["training step by phase (the bounds above cover the whole step):"]
    for p in rows:
        flops = p["flops_matrix"] + p["flops_vector"]
        bound = f", {fmt_time(p['unfused_s'][h])} on {h}" if h in p["unfused_s"] else ""
        lines.append(f"  {p['phase']}: {flops:,} FLOPs ({p['flops_matrix']:,} matrix), "
                     f"{p['bytes_unfused']:,} B unfused, {p['kernels']} kernels{bound}")
    return lines


def _grouped(r: dict[str, Any]) -> bool:
    """Whether the unfused kernels come from a source-op record (else they are the ops)."""
    return any(k["op"] is not None for k in r["kernels_unfused"])


def _bounds_table(r: dict[str, Any], hws: list[str], fid: list[str], ca: bool) -> Fit:
    tot = r["totals"]
    cols = [Col("fidelity", key=True), Col("bytes", right=True, rank=1)]
    for h in hws:
        cols += [Col(f"{h}\nbound", right=True, group=h), Col(f"{h}\nbound by", group=h)]
    b = Fit("bounds (lower bounds on runtime)", cols, box="ascii")
    rows = {"unfused": ("unfused_s", tot["bytes_unfused"]), "fused": ("fused_s", tot["bytes_fused"]),
            "cache-aware": ("cache_aware_s", tot["bytes_cache_aware"])}
    for f in r["fidelity"]:
        key, nbytes = rows[f]
        cells = [f, fmt_bytes(nbytes)]
        for h in hws:
            bh = r["bounds"][h]
            per = "per kernel" if _grouped(r) else "per op"
            floor = bh.get("latency_floor_s") or 0.0
            by = {"fused": bh["fused_bottleneck"],
                  "unfused": "latency" if floor and bh["unfused_s"] == floor else per,
                  "cache-aware": bh["cache_aware_bottleneck"] or "-"}[f]
            cells += [fmt_time(bh[key]), by]
        b.add_row(*cells)
    if "fused" in fid:
        for res in ("matrix", "vector", "memory"):
            cells = [f"  fused {res} term", ""]
            for h in hws:
                cells += [fmt_time(r["bounds"][h]["fused_terms_s"][res]), ""]
            b.add_row(*cells)
        if any(r["bounds"][h].get("latency_floor_s") for h in hws):
            cells = ["  latency floor", ""]
            for h in hws:
                floor = r["bounds"][h].get("latency_floor_s")
                cells += [fmt_time(floor) if floor else "-", ""]
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


def _met(d: dict[str, Any], latency_s: float) -> str:
    """'yes', 'no', or why no figure can meet the latency (it is below the target's latency floor)."""
    if d["met"]:
        return "yes"
    floor = d.get("latency_floor_s") or 0.0
    return f"no, below the latency floor {fmt_time(floor)}" if floor > latency_s else "no"


def _inverse_table(con: Any, r: dict[str, Any], fidelities: list[str]) -> None:
    inv = r["inverse"]
    t = Fit(f"inverse roofline: hardware needed for {fmt_time(inv['latency_s'])}",
            [Col("target", key=True), Col("fidelity", key=True), Col("DRAM BW", right=True),
             Col("x now", right=True, rank=2), Col("matrix FLOP/s", right=True),
             Col("x now ", right=True, rank=2),
             Col("vector FLOP/s", right=True), Col("x now  ", right=True, rank=2),
             Col("scale all figures", right=True, rank=1), Col("met")], box="ascii")
    for h in r["bounds"]:
        for f in fidelities:
            d = inv[h][f]
            t.add_row(h, f, fmt_rate(d["dram_bw_Bps"], "B/s"), f"{d['dram_bw_x']:.3g}x",
                      fmt_rate(d["matrix_flops"], "FLOP/s"), f"{d['matrix_x']:.3g}x",
                      fmt_rate(d["vector_flops"], "FLOP/s"), f"{d['vector_x']:.3g}x",
                      f"{d['scale_x']:.3g}x" if "scale_x" in d else "-", _met(d, inv["latency_s"]))
    con.print(t)
