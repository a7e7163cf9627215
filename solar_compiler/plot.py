"""Roofline chart of a `solar-report/1` dict: one log-log panel per hardware target.

Roofs: DRAM bandwidth x intensity, and one flat compute roof per unit and dtype the program uses.
Each op sits at (its arithmetic intensity, FLOPs / its bound): the best rate it could attain alone.
Ops with no FLOPs or no bytes have no place on a log-log chart; the panel lists them by name.
matplotlib (Agg canvas, no pyplot) is imported only here, only when a plot is asked for.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from solar_compiler.errors import SolarError

FORMATS = (".png", ".svg")


def write_plot(report: dict[str, Any], path: str) -> None:
    out = Path(path)
    if out.suffix.lower() not in FORMATS:
        raise SolarError(f"{path}: plot file must end in .png or .svg")
    import matplotlib
    from matplotlib.figure import Figure  # no pyplot: no global figure state, no GUI backend

    # SVG text stays text (searchable op names), not glyph paths
    with matplotlib.rc_context({"svg.fonttype": "none"}):
        hws = list(report["bounds"])
        fig = Figure(figsize=(6.5 * len(hws), 5))
        axes = fig.subplots(1, len(hws), squeeze=False)
        for ax, h in zip(axes[0], hws, strict=True):
            _panel(ax, report, h)
        fig.suptitle(f"roofline: {report['source']} (precision {report['precision']})")
        fig.tight_layout()
        try:
            fig.savefig(out)
        except OSError as e:
            raise SolarError(f"{path}: cannot write plot: {e.strerror or e}") from None


def _panel(ax: Any, report: dict[str, Any], h: str) -> None:
    hw = report["hw"][h]
    bw = hw["dram_bw"]["value"]
    placed = [o for o in report["ops"] if o["flops"] > 0 and o["bytes"] > 0 and o["bound_s"][h] > 0]
    left_out = [o["name"] for o in report["ops"] if o not in placed]
    roofs = [(f"matrix {d}", f["value"]) for d, f in hw["matrix"].items()]
    roofs += [(f"vector {d}", f["value"]) for d, f in hw["vector"].items()]
    peak = max([v for _, v in roofs] + [bw])
    ais = [o["intensity"] for o in placed]
    lo = min([*ais, 1.0]) / 4
    hi = max([*ais, peak / bw]) * 4
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.plot([lo, peak / bw], [bw * lo, peak], color="black", lw=1.5, label=f"DRAM {bw / 1e12:.3g} TB/s")
    for label, v in roofs:
        ax.plot([v / bw, hi], [v, v], lw=1.2, ls="--", label=f"{label} {v / 1e12:.4g} TFLOP/s")
    for o in placed:
        y = o["flops"] / o["bound_s"][h]
        ax.scatter([o["intensity"]], [y], s=18, zorder=3, color="tab:red")
        ax.annotate(o["name"], (o["intensity"], y), textcoords="offset points", xytext=(4, 4), fontsize=7)
    ax.set_xlim(lo, hi)
    ax.set_ylim(top=peak * 3)
    ax.set_xlabel("arithmetic intensity (FLOP/byte)")
    ax.set_ylabel("attainable FLOP/s at the op's bound")
    ax.set_title(h)
    ax.legend(fontsize=7, loc="lower right")
    if left_out:
        ax.text(0.01, 0.99, "not placed (0 FLOPs or 0 bytes): " + ", ".join(left_out),
                transform=ax.transAxes, va="top", fontsize=7)
