"""report.html (one file, no server, no network: CSS, script and SVG charts inline) and one page per
model (models/<group>/<stem>.html) that the per-model table links to.

Charts are SVG drawn here, so they render without script: per group and target, the distribution
of fused headroom (histogram over log-spaced bins) and a roofline (attained FLOP/s against arithmetic
intensity flops / fused bytes, under the target's DRAM slope and its highest contraction peak found in
the reports; a model is plotted at its measured time, or at its fused bound when unmeasured). Tables
sort on a click on their header (numeric cells sort by value; empty cells last).
"""

from __future__ import annotations

import html
import math
import os
from pathlib import Path
from typing import Any

from .results import op_breakdown, row_key
from .store import Store
from .suite import Unit
from .summary import fmt_s, fmt_x

CSS = """
body{font:14px/1.4 system-ui,sans-serif;margin:1.5em;color:#222}
h1{font-size:1.4em}h2{font-size:1.2em;margin-top:1.6em}h3{font-size:1.05em}
table{border-collapse:collapse;margin:.5em 0}th,td{border:1px solid #ccc;padding:2px 6px;text-align:left}
th{background:#f0f0f0}table.sortable th{cursor:pointer;user-select:none}
th[aria-sort=ascending]::after{content:" \\25B2"}th[aria-sort=descending]::after{content:" \\25BC"}
td.n{text-align:right;font-variant-numeric:tabular-nums}.viol{background:#fdd}.failed{color:#a00}
.charts{display:flex;flex-wrap:wrap;gap:1em}svg{background:#fff;border:1px solid #ddd}
svg text{font:11px sans-serif}.meta{color:#555}
"""

JS = """
function sortTable(th){
  const table=th.closest('table'), body=table.tBodies[0], idx=[...th.parentNode.children].indexOf(th);
  const asc=th.getAttribute('aria-sort')!=='ascending';
  for(const h of th.parentNode.children) h.removeAttribute('aria-sort');
  th.setAttribute('aria-sort', asc?'ascending':'descending');
  const num=th.dataset.type==='num';
  const key=r=>{const c=r.children[idx]; return num ? (c.dataset.v===''||c.dataset.v===undefined ? null
                  : parseFloat(c.dataset.v)) : c.textContent.trim().toLowerCase();};
  const rows=[...body.rows];
  rows.sort((a,b)=>{const x=key(a),y=key(b); if(x===null&&y===null) return 0; if(x===null) return 1;
    if(y===null) return -1; const c = x<y?-1:(x>y?1:0); return asc?c:-c;});
  for(const r of rows) body.appendChild(r);
}
document.addEventListener('DOMContentLoaded',()=>{
  for(const th of document.querySelectorAll('table.sortable th'))
    th.addEventListener('click',()=>sortTable(th));
});
"""


def esc(x: Any) -> str:
    return html.escape("" if x is None else str(x))


def page(title: str, body: str) -> str:
    return (
        f"<!DOCTYPE html>\n<html lang=en><head><meta charset=utf-8><title>{esc(title)}</title>"
        f"<style>{CSS}</style><script>{JS}</script></head><body>{body}</body></html>\n"
    )


def cell(v: Any, kind: str = "text", link: str | None = None, cls: str = "") -> str:
    """A table cell; numeric kinds carry the raw value in data-v for sorting."""
    if kind == "text":
        text = esc(v)
        if link:
            text = f'<a href="{esc(link)}">{text}</a>'
        return f"<td{f' class={cls}' if cls else ''}>{text}</td>"
    shown = {
        "s": fmt_s,
        "x": fmt_x,
        "int": lambda z: "-" if z is None else f"{int(z):,}",
        "pct": lambda z: "-" if z is None else f"{100 * z:.0f}%",
    }[kind](v)
    raw = "" if v is None else repr(float(v))
    return f'<td class="n {cls}" data-v="{raw}">{esc(shown)}</td>'


OP_COLUMNS = [("op", "text"), ("module", "text"), ("loc", "text"), ("FLOPs", "int"), ("bytes", "int"),
              ("bound", "s"), ("share", "pct"), ("bottleneck", "text")]


def op_table(ops: list[dict[str, Any]], tid: str) -> str:
    """A sortable table of an op breakdown (`results.op_breakdown` rows)."""
    rows = [
        "<tr>" + cell(o["op"]) + cell(o.get("module")) + cell(o["loc"]) + cell(o["flops"], "int")
        + cell(o["bytes"], "int")
        + cell(o["bound_s"], "s") + cell(o["share"], "pct") + cell(o["bottleneck"]) + "</tr>"
        for o in ops
    ]
    return sortable(OP_COLUMNS, rows, tid)


def sortable(cols: list[tuple[str, str]], rows: list[str], tid: str) -> str:
    head = "".join(f'<th data-type="{"text" if k == "text" else "num"}">{esc(n)}</th>' for n, k in cols)
    body = "".join(rows)
    return f'<table class=sortable id="{tid}"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'


# ---- charts --------------------------------------------------------------------------------------

W, H, PAD = 420, 260, 44


def _log_axis(lo: float, hi: float) -> tuple[float, float]:
    return math.floor(math.log10(lo)), math.ceil(math.log10(hi)) if hi > lo else math.floor(
        math.log10(lo)
    ) + 1


def histogram(values: list[float], title: str) -> str:
    """Counts of headroom per bin of width 10^(1/4) (log scale), x axis in decades."""
    vals = [v for v in values if v and v > 0]
    body = [f'<text x="{W / 2}" y="16" text-anchor="middle">{esc(title)}</text>']
    if not vals:
        body.append(f'<text x="{W / 2}" y="{H / 2}" text-anchor="middle">no measured headroom</text>')
        return f'<svg class="chart hist" width="{W}" height="{H}">{"".join(body)}</svg>'
    lo, hi = _log_axis(min(vals), max(vals) * 1.0001)
    nb = max(1, (hi - lo) * 4)
    counts = [0] * nb
    for v in vals:
        counts[min(nb - 1, int((math.log10(v) - lo) * 4))] += 1
    top = max(counts)
    bw = (W - 2 * PAD) / nb
    for i, c in enumerate(counts):
        if c:
            h = (H - 2 * PAD) * c / top
            body.append(
                f'<rect class="bar" x="{PAD + i * bw:.1f}" y="{H - PAD - h:.1f}" width="{bw - 1:.1f}" '
                f'height="{h:.1f}" fill="#4a7"><title>{c} model(s)</title></rect>'
            )
    for d in range(lo, hi + 1):
        x = PAD + (d - lo) * 4 * bw
        body.append(
            f'<line x1="{x:.1f}" y1="{H - PAD}" x2="{x:.1f}" y2="{H - PAD + 4}" stroke="#000"/>'
            f'<text x="{x:.1f}" y="{H - PAD + 16}" text-anchor="middle">{10.0**d:g}x</text>'
        )
    body.append(f'<line x1="{PAD}" y1="{H - PAD}" x2="{W - PAD}" y2="{H - PAD}" stroke="#000"/>')
    body.append(f'<text x="{W / 2}" y="{H - 8}" text-anchor="middle">measured / fused bound</text>')
    body.append(f'<text x="12" y="{PAD - 8}">models (max {top})</text>')
    return f'<svg class="chart hist" width="{W}" height="{H}">{"".join(body)}</svg>'


Point = tuple  # (label, intensity FLOP/B, attained FLOP/s, filled?, hover text or None)
LABEL_PX = 6.2  # width of a label character at the charts' 11px font (placement only)


def _place_labels(anchors: list[tuple[str, float, float]]) -> list[str]:
    """SVG text for labelled dots: right of the dot when that spot is free, else moved down (then
    up) in 12px steps to the first spot that overlaps no earlier label and stays in the plot, with
    a leader line back to its own dot; a label with no free spot is left out (its dot keeps the
    hover title)."""
    boxes: list[tuple[float, float, float, float]] = []
    out = []
    for text, cx, cy in anchors:
        w = LABEL_PX * len(text)
        x = cx + 6 if cx + 6 + w <= W - 4 else cx - 6 - w
        for dy in (0, 12, -12, 24, -24, 36, -36, 48, -48):
            y = cy + 4 + dy
            box = (x, y - 10, x + w, y + 2)
            if box[1] < PAD - 6 or box[3] > H - PAD + 2:
                continue
            if all(box[2] <= b[0] or box[0] >= b[2] or box[3] <= b[1] or box[1] >= b[3] for b in boxes):
                boxes.append(box)
                if dy:
                    lx = x if x > cx else x + w
                    out.append(f'<line class="leader" x1="{cx:.1f}" y1="{cy:.1f}" x2="{lx:.1f}" '
                               f'y2="{y - 4:.1f}" stroke="#999" stroke-width="0.6"/>')
                out.append(f'<text class="lbl" x="{x:.1f}" y="{y:.1f}">{esc(text)}</text>')
                break
    return out


def roofline(points: list[Point], peak: float | None, bw: float | None, title: str, *, labels: int = 0,
             legend: str = "FLOP/s (filled: measured; open: at the fused bound)",
             xlabel: str = "FLOP per byte (fused)") -> str:
    """points: (label, intensity FLOP/B, attained FLOP/s, filled?, hover text): every dot has a hover
    title (its label and figures); the first `labels` points (the caller orders them, most important
    first) are also labelled on the chart."""
    pts = [p for p in points if p[1] > 0 and p[2] > 0]
    body = [f'<text x="{W / 2}" y="16" text-anchor="middle">{esc(title)}</text>']
    if not pts:
        body.append(f'<text x="{W / 2}" y="{H / 2}" text-anchor="middle">no point with FLOPs</text>')
        return f'<svg class="chart roofline" width="{W}" height="{H}">{"".join(body)}</svg>'
    xs = [p[1] for p in pts]
    ys = [p[2] for p in pts] + ([peak] if peak else [])
    x0, x1 = _log_axis(min(xs), max(xs) * 1.0001)
    y0, y1 = _log_axis(min(ys), max(ys) * 1.0001)

    def X(v: float) -> float:
        return PAD + (math.log10(v) - x0) / (x1 - x0) * (W - 2 * PAD)

    def Y(v: float) -> float:
        return H - PAD - (math.log10(v) - y0) / (y1 - y0) * (H - 2 * PAD)

    if peak and bw:
        knee = peak / bw
        segs = []
        for xv in (10.0**x0, min(max(knee, 10.0**x0), 10.0**x1), 10.0**x1):
            yv = min(peak, bw * xv)
            if 10.0**y0 <= yv <= 10.0**y1 * 1.0001:
                segs.append(f"{X(xv):.1f},{Y(yv):.1f}")
        if len(segs) > 1:
            body.append(
                f'<polyline class="roof" points="{" ".join(segs)}" fill="none" stroke="#c33" '
                f'stroke-width="1.5"/>'
            )
    for p in pts:
        label, xi, yi, meas = p[:4]
        hover = p[4] if len(p) > 4 and p[4] else label
        body.append(
            f'<circle class="pt" cx="{X(xi):.1f}" cy="{Y(yi):.1f}" r="3.5" '
            f'fill="{"#36c" if meas else "none"}" stroke="#36c"><title>{esc(hover)}</title></circle>'
        )
    body += _place_labels([(p[0], X(p[1]), Y(p[2])) for p in pts[:labels]])
    for d in range(x0, x1 + 1):
        body.append(f'<text x="{X(10.0**d):.1f}" y="{H - PAD + 14}" text-anchor="middle">1e{d}</text>')
    for d in range(y0, y1 + 1):
        body.append(f'<text x="{PAD - 4}" y="{Y(10.0**d) + 4:.1f}" text-anchor="end">1e{d}</text>')
    body.append(
        f'<rect x="{PAD}" y="{PAD}" width="{W - 2 * PAD}" height="{H - 2 * PAD}" fill="none" stroke="#000"/>'
    )
    body.append(f'<text x="{W / 2}" y="{H - 8}" text-anchor="middle">{esc(xlabel)}</text>')
    body.append(f'<text x="6" y="{PAD - 8}">{esc(legend)}</text>')
    return f'<svg class="chart roofline" width="{W}" height="{H}">{"".join(body)}</svg>'


TOP_LABELS = 5  # dots labelled on a chart (the rest have hover titles)


def _hw_peaks(reports: list[dict], target: str) -> tuple[float | None, float | None]:
    peak = bw = None
    for r in reports:
        h = (r.get("hw") or {}).get(target) or {}
        for sec in ("matrix", "vector"):
            for fig in (h.get(sec) or {}).values():
                peak = max(peak or 0.0, float(fig.get("value") or 0.0)) or None
        v = (h.get("dram_bw") or {}).get("value")
        bw = float(v) if v else bw
    return peak, bw


# ---- pages ---------------------------------------------------------------------------------------


def write_html(
    out: Path, data: dict[str, Any], units: list[Unit], store: Store, reports: dict[str, dict]
) -> None:
    rows = data["rows"]
    m = data["meta"]
    parts = [
        f"<h1>solar-bench report</h1><p class=meta>{esc(' '.join(m.get('command') or []))}<br>"
        f"{m['models']} models, hw {esc(m['hw'])}, mode {esc(m['mode'])}, "
        f"{esc(m.get('cache_state', 'cold'))} caches, {m['workers']} worker(s) "
        f"({esc(m['backend'])}), wall {m['wall_s']:.1f} s</p>"
    ]
    if m.get("timings_note"):
        parts.append(f"<p class=meta>{esc(m['timings_note'])}</p>")
    gcols = [
        ("group", "text"),
        ("target", "text"),
        ("models", "int"),
        ("bounded", "int"),
        ("validated", "int"),
        ("coverage", "pct"),
        ("failed", "text"),
        ("measured", "int"),
        ("geomean unfused", "x"),
        ("geomean fused", "x"),
        ("geomean cache-aware", "x"),
        ("median fused", "x"),
        ("violations", "int"),
    ]
    grows = []
    for g in data["groups"]:
        gm, dist = g["headroom_geomean"], g["headroom_distribution"].get("fused") or {}
        failed = ", ".join(f"{k} {v}" for k, v in sorted(g["failed"].items()))
        grows.append(
            "<tr>"
            + cell(g["group"])
            + cell(g["target"])
            + cell(g["models"], "int")
            + cell(g["bounded"], "int")
            + cell(g["validated"], "int")
            + cell(g["coverage"], "pct")
            + cell(failed)
            + cell(g["measured"], "int")
            + cell(gm["unfused"], "x")
            + cell(gm["fused"], "x")
            + cell(gm["cache_aware"], "x")
            + cell(dist.get("median"), "x")
            + cell(g["violations"], "int", cls="viol" if g["violations"] else "")
            + "</tr>"
        )
    parts.append("<h2>Groups</h2>" + sortable(gcols, grows, "groups"))
    parts.append("<p class=meta>headroom = measured / bound; coverage = validated bounds / models</p>")
    parts.append("<h2>Charts</h2>")
    for g in data["groups"]:
        sel = [
            r for r in rows if r["group"] == g["group"] and r["target"] == g["target"] and r["status"] == "ok"
        ]
        peak, bw = _hw_peaks([reports[row_key(r)] for r in sel], g["target"])
        pts = []
        for r in sorted(sel, key=lambda r: -(r["measured_s"] or r["fused_s"] or 0.0)):
            if not r["flops"] or not r["bytes_fused"]:
                continue
            t = r["measured_s"] or r["fused_s"]
            if t:
                ai, rate = r["flops"] / r["bytes_fused"], r["flops"] / t
                how = f"measured {fmt_s(r['measured_s'])}" if r["measured_s"] else "at the fused bound"
                hover = (f"{r['model']}: {ai:.3g} FLOP/B, {rate:.3g} FLOP/s ({how}; fused bound "
                         f"{fmt_s(r['fused_s'])})")
                pts.append((r["model"], ai, rate, r["measured_s"] is not None, hover))
        parts.append(
            f"<h3>{esc(g['group'])} on {esc(g['target'])}</h3><div class=charts>"
            + histogram(
                [r["headroom_fused"] for r in sel if r["validated"]],
                f"{g['group']}: fused headroom ({g['target']})",
            )
            + roofline(pts, peak, bw, f"{g['group']}: roofline ({g['target']})", labels=TOP_LABELS)
            + "</div>"
        )
    parts.append(f"<h2>Violations ({len(data['violations'])})</h2>")
    if not data["violations"]:
        parts.append("<p>No measured time beats a bound.</p>")
    for v in data["violations"]:
        bound = max(b for b in (v["fused_s"], v["cache_aware_s"]) if b is not None)
        parts.append(
            f"<h3 class=viol>{esc(v['group'])}/{esc(v['model'])} on {esc(v['target'])}: measured "
            f"{esc(fmt_s(v['measured_min_s']))} &lt; {esc(v['bound'])} bound {esc(fmt_s(bound))}</h3>"
            f"<p>fused bound by {esc(v['fused_bottleneck'])}: "
            + esc(", ".join(f"{k} {fmt_s(t)}" for k, t in (v["fused_terms_s"] or {}).items()))
            + "</p>"
            + op_table(v["ops"], f"viol-{esc(v['model'])}")
        )
    mcols = [
        ("group", "text"),
        ("model", "text"),
        ("target", "text"),
        ("status", "text"),
        ("failed phase", "text"),
        ("error class", "text"),
        ("validated", "text"),
        ("FLOPs", "int"),
        ("fused bytes", "int"),
        ("unfused", "s"),
        ("fused", "s"),
        ("cache-aware", "s"),
        ("measured", "s"),
        ("headroom fused", "x"),
        ("violation", "text"),
        ("pipeline", "s"),
    ]
    mrows = []
    for r in rows:
        phase, status, eclass = failed_phase(r)
        cls = ' class="viol"' if r["violation"] else (' class="failed"' if phase else "")
        mrows.append(
            f"<tr{cls}>"
            + cell(r["group"])
            + cell(r["model"], link=r["report"] or _page_link(store, r))
            + cell(r["target"])
            + cell(status)
            + cell(phase)
            + cell(eclass)
            + cell("yes" if r["validated"] else "no")
            + cell(r["flops"], "int")
            + cell(r["bytes_fused"], "int")
            + cell(r["unfused_s"], "s")
            + cell(r["fused_s"], "s")
            + cell(r["cache_aware_s"], "s")
            + measured_cell(r)
            + cell(r["headroom_fused"], "x")
            + cell("VIOLATION" if r["violation"] else "")
            + cell(r["pipeline_s"], "s")
            + "</tr>"
        )
    parts.append(f"<h2>Models ({len(rows)} rows)</h2>" + sortable(mcols, mrows, "models"))
    (out / "report.html").write_text(page("solar-bench report", "".join(parts)))
    by_key = {row_key(r): r for r in rows}
    for u in units:
        model_page(
            store,
            u,
            reports.get(u.key),
            [r for r in rows if row_key(r) == u.key],
            by_key.get(u.key),
        )


def failed_phase(r: dict[str, Any]) -> tuple[str, str, str]:
    """(failed phase, status text, error class) of a row: a model whose bounds are stored but whose
    timing failed is "measure failed", never "ok" with no time."""
    if r["status"] != "ok":
        return "bounds", r["status"], r["error_class"] or ""
    if r.get("measure_status") == "failed":
        return "measure", "measure failed", r.get("measure_error_class") or "measure"
    return "", "ok", ""


def measured_cell(r: dict[str, Any]) -> str:
    if r.get("measure_status") == "failed":
        return cell(f"failed ({r.get('measure_error_class') or 'measure'})", cls="failed")
    return cell(r["measured_s"], "s")


def _page_link(store: Store, r: dict[str, Any]) -> str:
    stem = r["model"].removesuffix(".py")
    if r.get("workload"):
        stem += "." + "".join(c if c.isalnum() or c in "-_" else "_" for c in r["workload"])
    return f"models/{r['group']}/{stem}.html"


def model_page(store: Store, u: Unit, report: dict | None, rows: list[dict[str, Any]], first) -> None:
    path = store.path(u, "html")
    path.parent.mkdir(parents=True, exist_ok=True)
    back = os.path.relpath(store.out / "report.html", path.parent)
    parts = [
        f'<p><a href="{esc(back)}">&larr; suite report</a></p><h1>{esc(u.key)}</h1>'
        f"<p class=meta>{esc(u.path)} (sha256 {esc(u.sha256[:12])})</p>"
    ]
    if first is not None and first["status"] != "ok":
        parts.append(f"<p class=failed>bounds failed [{esc(first['error_class'])}]: "
                     f"{esc(first['error'])}</p>")
    if first is not None and first.get("measure_status") == "failed":
        parts.append(f"<p class=failed>timing failed [{esc(first['measure_error_class'])}]: "
                     f"{esc(first['measure_error'])} "
                     f"(<a href=\"{esc(u.stem)}.measure.log\">timing log</a>)</p>")
    parts.append(
        f'<p><a href="{esc(u.stem)}.bounds.log">sandbox log</a> &middot; '
        f'<a href="{esc(u.stem)}.report.json">JSON report</a></p>'
    )
    if report is not None:
        v = report.get("validation", {})
        parts.append(
            f"<p>validation: {'validated' if v.get('validated') else 'not validated'} "
            f"({esc(v.get('frontend'))}), samples {esc(v.get('samples'))}, max relative error "
            f"{esc(v.get('max_rel_err'))}, sizes {esc(v.get('sizes'))}"
            + (f"; {esc(v.get('reason'))}" if v.get("reason") else "")
            + "</p>"
        )
        t = report.get("totals", {})
        parts.append(
            f"<p>{t.get('flops', 0):,} FLOPs; {t.get('bytes_unfused', 0):,} bytes unfused, "
            f"{t.get('bytes_fused', 0):,} bytes fused</p>"
        )
        cols = [
            ("target", "text"),
            ("unfused", "s"),
            ("fused", "s"),
            ("fused bound by", "text"),
            ("cache-aware", "s"),
            ("measured", "s"),
            ("headroom unfused", "x"),
            ("headroom fused", "x"),
            ("headroom cache-aware", "x"),
            ("violation", "text"),
        ]
        trs = [
            "<tr>"
            + cell(r["target"])
            + cell(r["unfused_s"], "s")
            + cell(r["fused_s"], "s")
            + cell((report["bounds"].get(r["target"]) or {}).get("fused_bottleneck"))
            + cell(r["cache_aware_s"], "s")
            + cell(r["measured_s"], "s")
            + cell(r["headroom_unfused"], "x")
            + cell(r["headroom_fused"], "x")
            + cell(r["headroom_cache_aware"], "x")
            + cell("VIOLATION" if r["violation"] else "")
            + "</tr>"
            for r in rows
        ]
        parts.append("<h2>Bounds</h2>" + sortable(cols, trs, "bounds"))
        if any(m.get("path") for m in report.get("modules") or []):
            parts.append("<h2>Module tree</h2>" + module_tree(report))
        charts = "".join(kernel_roofline(report, t) for t in report.get("bounds", {}))
        parts.append(f"<h2>Kernels on the roofline</h2><div class=charts>{charts}</div>")
        for target in report.get("bounds", {}):
            ops = op_breakdown(report, target, limit=10**6)
            parts.append(
                f"<h2>Source ops on {esc(target)} (unfused kernels)</h2>"
                + op_table(ops, f"ops-{esc(target)}")
            )
    path.write_text(page(u.key, "".join(parts)))


def module_tree(report: dict[str, Any]) -> str:
    """Every module of the report (depth-first, indented by depth) with its full path, FLOPs, bytes
    and its kernels' unfused bound and share per target: the text report's module tree, unfolded."""
    mods = report.get("modules") or []
    hws = list(report.get("bounds", {}))
    kids: dict[str | None, list[dict[str, Any]]] = {}
    for m in mods:
        kids.setdefault(m.get("parent"), []).append(m)
    cols = [("module", "text"), ("path", "text"), ("FLOPs", "int"), ("bytes", "int")]
    for h in hws:
        cols += [(f"{h} bound", "s"), (f"{h} share", "pct"), (f"{h} bound by", "text")]
    trs: list[str] = []

    def visit(m: dict[str, Any]) -> None:
        name = "&nbsp;" * 4 * m["depth"] + esc(m["name"])
        tds = f"<td>{name}</td>" + cell(m["path"] or "(model)") + cell(m.get("flops"), "int") \
            + cell(m.get("bytes"), "int")
        for h in hws:
            tds += cell((m.get("bound_s") or {}).get(h), "s") + cell((m.get("share") or {}).get(h), "pct") \
                + cell((m.get("bottleneck") or {}).get(h))
        trs.append(f"<tr>{tds}</tr>")
        for k in kids.get(m["path"], []):
            visit(k)

    for root in kids.get(None, []):
        visit(root)
    head = "".join(f"<th>{esc(n)}</th>" for n, _ in cols)
    return f"<table class=tree><thead><tr>{head}</tr></thead><tbody>{''.join(trs)}</tbody></table>"


def kernel_roofline(report: dict[str, Any], target: str) -> str:
    """The model's source ops (unfused kernels) at their bound on `target`: the largest bounds
    labelled with their module and op, every dot with a hover title."""
    peak, bw = _hw_peaks([report], target)
    ops = op_breakdown(report, target, limit=10**6)
    pts = []
    for o in ops:
        if o["flops"] and o["bytes"] and o["bound_s"]:
            where = f"{o['module']}: " if o.get("module") else ""
            hover = (f"{where}{o['op']} @ {o['loc']}: {o['flops']:,} FLOPs, {o['bytes']:,} B, bound "
                     f"{fmt_s(o['bound_s'])} ({100 * o['share']:.1f}%, {o['bottleneck']})")
            pts.append((f"{where}{o['op']}", o["flops"] / o["bytes"], o["flops"] / o["bound_s"], True, hover))
    return roofline(pts, peak, bw, f"kernels at their unfused bound ({target})", labels=TOP_LABELS,
                    legend="FLOP/s at the kernel's bound", xlabel="FLOP per byte (kernel)")
