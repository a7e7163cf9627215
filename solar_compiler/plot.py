"""Roofline chart of a `solar-report/1` dict for people: one log-log panel per hardware target.

Roofs: DRAM bandwidth x intensity, and one flat compute roof per unit and dtype the program uses.
Points are the kernels of the unfused bound (one per source op, the view of a fused op that eager
runs; not its statements priced alone), the same kernel of identical repeated blocks once
(`render/kernels.py`): each sits at (its FLOPs / its DRAM traffic, FLOPs / its bound), its area
proportional to its share of the unfused bound, its colour what binds it. The largest are labelled
by module path and op, each label placed where it overlaps no other label, point or the legend, with
a leader line to its own point; a kernel with no FLOPs or no bytes has no place on a
log-log chart and is counted below the panel. The whole model is drawn as two stars: fused (its
compulsory bytes, its fused bound) and unfused (its kernels' traffic and bound); measured times
(`--measured`) are drawn at the model's (or module's) intensity and the FLOP rate they achieved.
matplotlib (Agg canvas, no pyplot) is imported only here, only when a plot is asked for.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from solar_compiler.errors import SolarError
from solar_compiler.render.fmt import fmt_pct, fmt_time, short_op
from solar_compiler.render.kernels import kernel_groups

FORMATS = (".png", ".svg")
LABELLED = 12          # kernels labelled per panel, largest bound first
FONT = 9
COLOURS = {"memory": "tab:blue", "matrix": "tab:red", "vector": "tab:green"}
RC = {"svg.fonttype": "none", "font.size": FONT + 1}  # SVG text stays text (searchable module names)


def write_plot(report: dict[str, Any], path: str) -> None:
    out = Path(path)
    if out.suffix.lower() not in FORMATS:
        raise SolarError(f"{path}: plot file must end in .png or .svg")
    import matplotlib

    with matplotlib.rc_context(RC):
        fig = roofline_figure(report)
        try:
            fig.savefig(out, dpi=120)
        except OSError as e:
            raise SolarError(f"{path}: cannot write plot: {e.strerror or e}") from None


def roofline_figure(report: dict[str, Any]) -> Any:
    """The chart as a matplotlib Figure (an Agg canvas attached, so text can be measured)."""
    import matplotlib
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure  # no pyplot: no global figure state, no GUI backend

    with matplotlib.rc_context(RC):
        hws = list(report["bounds"])
        fig = Figure(figsize=(9.5 * len(hws), 7.2))
        FigureCanvasAgg(fig)
        axes = fig.subplots(1, len(hws), squeeze=False)
        groups = kernel_groups(report)
        for i, (ax, h) in enumerate(zip(axes[0], hws, strict=True)):
            _panel(ax, report, h, sorted(groups, key=lambda g: -g.fig.bound_s[h]), legend=i == 0)
        fig.suptitle(f"roofline: {report['source']} (precision {report['precision']})", fontsize=FONT + 3)
        fig.tight_layout()
        for ax in axes[0]:
            _place_labels(fig, ax, getattr(ax, "_solar_labels", []))
    return fig


def _panel(ax: Any, report: dict[str, Any], h: str, groups: list, legend: bool) -> None:
    hw = report["hw"][h]
    bw = hw["dram_bw"]["value"]
    tot = report["totals"]
    bounds = report["bounds"][h]
    placed = [g for g in groups if g.fig.flops > 0 and g.fig.bytes > 0 and g.fig.bound_s[h] > 0]
    roofs = [(f"matrix {d}", f["value"]) for d, f in hw["matrix"].items()]
    roofs += [(f"vector {d}", f["value"]) for d, f in hw["vector"].items()]
    peak = max([v for _, v in roofs] + [bw])
    points: list[tuple[float, float, float]] = []  # x, y, the marker's radius in points
    model = []
    for name, nbytes, t, marker in (("fused", tot["bytes_fused"], bounds["fused_s"], "*"),
                                    ("unfused", tot["bytes_unfused"], bounds["unfused_s"], "P")):
        if tot["flops"] and nbytes and t:
            model.append((f"model, {name} {fmt_time(t)}", tot["flops"] / nbytes, tot["flops"] / t, marker))
    measured = _measured_points(report, h)
    xs = [g.intensity for g in placed] + [m[1] for m in model] + [m[1] for m in measured]
    ys = [g.fig.flops / g.fig.bound_s[h] for g in placed] + [m[2] for m in model] + [m[2] for m in measured]
    lo = min([*xs, 1.0]) / 4
    hi = max([*xs, peak / bw]) * 6
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.plot([lo, peak / bw], [bw * lo, peak], color="black", lw=1.5, label=f"DRAM {bw / 1e12:.3g} TB/s")
    for label, v in roofs:
        ax.plot([v / bw, hi], [v, v], lw=1.2, ls="--", label=f"{label} {v / 1e12:.4g} TFLOP/s")
    labels = []
    if placed:  # one collection for every kernel: a network has hundreds
        kx = [g.intensity for g in placed]
        ky = [g.fig.flops / g.fig.bound_s[h] for g in placed]
        sizes = [20 + 600 * g.fig.share[h] for g in placed]  # marker areas, points^2
        ax.scatter(kx, ky, s=sizes, zorder=3, alpha=0.75,
                   c=[COLOURS.get(g.fig.by[h] or "", "tab:gray") for g in placed], edgecolors="black",
                   linewidths=0.5)
        points += [(x, y, math.sqrt(s) / 2) for x, y, s in zip(kx, ky, sizes, strict=True)]
    named = any(k.get("module") for k in report["kernels_unfused"])
    names = [f"{g.module} {short_op(g.op)}" if named else short_op(g.op) for g in placed[:LABELLED]]
    for g, name in zip(placed, names, strict=False):
        if names.count(name) > 1 and g.loc:  # two kernels of one module and op: their lines tell them apart
            name += f" :{g.loc.rpartition(':')[2]}"
        rate = g.fig.flops / g.fig.bound_s[h]
        labels.append((f"{name} ({fmt_pct(g.fig.share[h])})", g.intensity, rate, True))
    for name, x, y, marker in model:
        ax.scatter([x], [y], s=220, marker=marker, zorder=4, color="gold", edgecolors="black", linewidths=0.8)
        labels.insert(0, (name, x, y, False))
        points.append((x, y, math.sqrt(220) / 2))
    for name, x, y in measured:
        ax.scatter([x], [y], s=90, marker="X", zorder=4, color="black")
        labels.insert(0, (name, x, y, False))
        points.append((x, y, math.sqrt(90) / 2))
    ax.set_xlim(lo, hi)
    ax.set_ylim(min([*ys, bw * lo]) / 4, peak * 4)
    ax.set_xlabel("arithmetic intensity (FLOP per DRAM byte)")
    ax.set_ylabel("FLOP/s at the bound")
    ax.set_title(f"{h}: fused {fmt_time(bounds['fused_s'])}, unfused {fmt_time(bounds['unfused_s'])}",
                 fontsize=FONT + 2)
    ax.grid(True, which="major", alpha=0.3)
    if legend:
        for res, col in COLOURS.items():
            ax.scatter([], [], s=40, color=col, label=f"kernel bound by {res}")
    ax.legend(fontsize=FONT - 1, loc="lower right", framealpha=0.9)
    ax._solar_kernels = (len(placed), len(groups) - len(placed))  # placed, not placeable
    ax._solar_labels = labels  # placed after tight_layout fixed the axes
    ax._solar_points = points
    ax._solar_lines = [((lo, bw * lo), (peak / bw, peak))] + [((v / bw, v), (hi, v)) for _, v in roofs]


def _measured_points(report: dict[str, Any], h: str) -> list[tuple[str, float, float]]:
    m = report.get("measured")
    if not m:
        return []
    tot = report["totals"]
    out = []
    if m["total_s"] and tot["flops"] and tot["bytes_fused"]:
        sol = m["sol"][h].get("fused") if m["sol"] else None
        pct = f", {fmt_pct(sol['percent_of_sol'] / 100)} of fused SOL" if sol else ""
        out.append((f"measured {fmt_time(m['total_s'])}{pct}", tot["flops"] / tot["bytes_fused"],
                    tot["flops"] / m["total_s"]))
    rows = {r["path"]: r for r in report.get("modules") or []}
    for row in m["modules"]:
        mod = rows[row["path"]]
        if mod["flops"] and mod["bytes"]:
            out.append((f"measured {row['path']} {fmt_time(row['measured_s'])}", mod["flops"] / mod["bytes"],
                        mod["flops"] / row["measured_s"]))
    return out


def _place_labels(fig: Any, ax: Any, labels: list[tuple[str, float, float, bool]]) -> None:
    """Each label beside its point where its box overlaps no placed label, no point (its marker's
    whole area), no roof and not the legend, trying rings of offsets farther out; every label has a
    leader line that ends at the centre of its own point and crosses no other label, so that a
    label beside a crowd of dots still names one (issue 25). A label that fits nowhere is left out,
    and a note counts the kernels left unlabelled."""
    import numpy as np

    renderer = fig.canvas.get_renderer()
    boxes: list[tuple[float, float, float, float]] = []  # what a label may not overlap: x0, y0, x1, y1
    texts: list[Any] = []  # placed labels' boxes, which a leader line may not cross
    legend = ax.get_legend()
    if legend is not None:
        lb = legend.get_window_extent(renderer)
        boxes.append((lb.x0, lb.y0, lb.x1, lb.y1))
    axbox = ax.get_window_extent(renderer)
    scale = fig.dpi / 72.0
    for x, y, rad in getattr(ax, "_solar_points", []):
        px, py = ax.transData.transform((x, y))
        d = max(5.0, rad * scale + 2)
        boxes.append((px - d, py - d, px + d, py + d))
    for a, b in getattr(ax, "_solar_lines", []):  # the roofs: a label does not sit on a line
        (ax0, ay0), (ax1, ay1) = ax.transData.transform(a), ax.transData.transform(b)
        steps = max(1, int(math.hypot(ax1 - ax0, ay1 - ay0) / 6))
        for i in range(steps + 1):
            qx, qy = ax0 + (ax1 - ax0) * i / steps, ay0 + (ay1 - ay0) * i / steps
            boxes.append((qx - 1.5, qy - 1.5, qx + 1.5, qy + 1.5))
    taken = np.array(boxes, dtype=float).reshape(-1, 4)
    labelled = 0
    for text, x, y, kernel in labels:
        t = ax.text(0, 0, text, fontsize=FONT)
        ext = t.get_window_extent(renderer)
        t.remove()
        w, hgt = ext.width, ext.height
        px, py = ax.transData.transform((x, y))
        spot = None
        own = next((rad for qx, qy, rad in getattr(ax, "_solar_points", []) if (qx, qy) == (x, y)), 5.0)
        for r in (own + 6, own + 20, 40 + own, 65 + own, 95 + own):
            for dx, dy in _ring(r, w / scale, hgt / scale):
                x0, y0 = px + dx * scale, py + dy * scale
                box = _box(x0, y0, x0 + w, y0 + hgt)
                if box.x0 < axbox.x0 or box.x1 > axbox.x1 or box.y0 < axbox.y0 or box.y1 > axbox.y1:
                    continue
                if len(taken) and np.any((taken[:, 0] < box.x1) & (box.x0 < taken[:, 2])
                                         & (taken[:, 1] < box.y1) & (box.y0 < taken[:, 3])):
                    continue
                if _crosses(px, py, box, texts):
                    continue
                spot = (dx, dy, r, box)
                break
            if spot:
                break
        if spot is None:
            continue
        labelled += kernel
        dx, dy, r, box = spot
        taken = np.vstack([taken, [box.x0, box.y0, box.x1, box.y1]])
        texts.append(box)
        arrow = {"arrowstyle": "-", "color": "0.3", "lw": 0.7, "shrinkA": 0, "shrinkB": 0}
        ax.annotate(text, (x, y), xytext=(dx, dy), textcoords="offset points", fontsize=FONT,
                    ha="left", va="bottom", arrowprops=arrow, zorder=5)
    placed, unplaceable = getattr(ax, "_solar_kernels", (0, 0))
    notes = []
    if placed > labelled:
        notes.append(f"{placed - labelled} kernel(s) unlabelled (smaller, or no room)")
    if unplaceable:
        notes.append(f"{unplaceable} kernel(s) with no FLOPs or no bytes not placed")
    if notes:
        ax.text(0.01, 0.99, "; ".join(notes), transform=ax.transAxes, va="top", fontsize=FONT - 1)


def _crosses(px: float, py: float, box: Any, others: list) -> bool:
    """Whether the leader line from the point towards the label's centre (where matplotlib aims it)
    crosses another label."""
    tx, ty = (box.x0 + box.x1) / 2, (box.y0 + box.y1) / 2
    steps = max(1, int(math.hypot(tx - px, ty - py) / 3))
    for i in range(1, steps):
        qx, qy = px + (tx - px) * i / steps, py + (ty - py) * i / steps
        if any(b.contains(qx, qy) for b in others):
            return True
    return False


def _ring(r: float, w: float, h: float) -> list[tuple[float, float]]:
    """Offsets (points, lower-left corner of the label) around a point at distance about `r`:
    right, left, above, below, then the diagonals."""
    return [(r, -h / 2), (-r - w, -h / 2), (-w / 2, r), (-w / 2, -r - h),
            (r, r), (-r - w, r), (r, -r - h), (-r - w, -r - h),
            (r, r * 0.5), (r, -r * 0.5 - h), (-r - w, r * 0.5), (-r - w, -r * 0.5 - h)]


def _box(x0: float, y0: float, x1: float, y1: float) -> Any:
    from matplotlib.transforms import Bbox

    return Bbox([[x0, y0], [x1, y1]])


__all__ = ["FORMATS", "roofline_figure", "write_plot"]
