"""The kernels of the unfused bound sorted by bound (the default report's second table, and the
points of the plot): one row per kernel, named by its module path and op; the same kernel of
identical repeated blocks (`h.0` .. `h.11`) is one row with its count; the rows past `top` are
folded into one "N more" row with their share of the unfused bound."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from solar_compiler.analysis.modules import ancestors
from solar_compiler.render.fit import Col, Fit
from solar_compiler.render.fmt import fmt_pct, fmt_si, fmt_time, short_loc, short_op
from solar_compiler.render.tables import Figures, figures, unfused_totals


@dataclass
class KernelGroup:
    """Kernels shown as one row: identical kernels of repeated blocks (`count` of them)."""

    module: str          # display path, a repeated block's index as a range: 'h.0-11.attn.c_attn'
    op: str
    loc: str | None
    kernels: list[int]   # indices into kernels_unfused
    fig: Figures
    flops_matrix: int
    flops_vector: int

    @property
    def count(self) -> int:
        return len(self.kernels)

    @property
    def intensity(self) -> float | None:
        return self.fig.flops / self.fig.bytes if self.fig.bytes else None


def run_labels(r: dict[str, Any]) -> dict[str, str]:
    """Module path of each member of a run of identical repeated blocks -> the run's range as its
    last component (`h.3` -> '0-11')."""
    rows = r.get("modules") or []
    members: dict[str, list[str]] = {}
    for m in rows:
        if m["same_as"] is not None:
            members.setdefault(m["same_as"], []).append(m["path"])
    out: dict[str, str] = {}
    for head, rest in members.items():
        run = [head, *rest]
        label = f"{head.rpartition('.')[2]}-{run[-1].rpartition('.')[2]}"
        for p in run:
            out[p] = label
    return out


def display_path(module: str | None, labels: dict[str, str]) -> str:
    """The module path with each repeated block's index replaced by its run's range."""
    if not module:
        return "model"
    parts = module.split(".")
    for i, p in enumerate(ancestors(module)[1:]):
        if p in labels:
            parts[i] = labels[p]
    return ".".join(parts)


def _place_in_run(r: dict[str, Any]) -> dict[int, tuple]:
    """Kernel index -> (the run's first block, the kernel's position in its block) for every kernel
    of a run of identical blocks (the outermost run it is in): kernels at one position of identical
    blocks are one kernel repeated (`modules.py` checked their ops, FLOPs and bytes)."""
    rows = r.get("modules") or []
    head = {m["path"]: m["same_as"] for m in rows if m["same_as"] is not None}
    heads = set(head.values())
    out: dict[int, tuple] = {}
    for m in rows:  # parents first: the outermost run wins
        if m["path"] not in head and m["path"] not in heads:
            continue
        first = head.get(m["path"], m["path"])
        for pos, k in enumerate(m["kernels"]):
            out.setdefault(k, (first, pos))
    return out


def kernel_groups(r: dict[str, Any]) -> list[KernelGroup]:
    """Every kernel, identical repeats merged, sorted by bound on the first target (largest first)."""
    hws = list(r["bounds"])
    kernels = r["kernels_unfused"]
    total = unfused_totals(r)
    labels = run_labels(r)
    place = _place_in_run(r)
    keyed: dict[tuple, list[int]] = {}
    for i in range(len(kernels)):
        keyed.setdefault(place.get(i, (i,)), []).append(i)
    groups = []
    for idx in keyed.values():
        k = kernels[idx[0]]
        groups.append(KernelGroup(display_path(k.get("module"), labels), k["op"] or k["name"], k["loc"],
                                  idx, figures(kernels, idx, hws, total),
                                  sum(kernels[i]["flops_matrix"] for i in idx),
                                  sum(kernels[i]["flops_vector"] for i in idx)))
    first = hws[0] if hws else None
    groups.sort(key=lambda g: -(g.fig.bound_s[first] if first else 0.0))
    return groups


def kernel_table(r: dict[str, Any], top: int) -> Fit:
    """The kernels by bound, `top` rows (0: all) and one row for the rest (fitted to the width as
    `render/fit.py` says: module paths break after a dot, the line and FLOP/B go first)."""
    hws = list(r["bounds"])
    groups = kernel_groups(r)
    shown = groups if top <= 0 else groups[:top]
    rest = groups[len(shown):]
    n = len(r["kernels_unfused"])
    sourced = any(k["op"] for k in r["kernels_unfused"])
    what = "one per source op, its intermediates on chip" if sourced else "one per statement"
    title = f"kernels by bound on {hws[0]} ({n}: {what}"
    ranged = next((g for g in groups if g.count > 1), None)
    if ranged is not None:
        title += f"; {ranged.module}: {ranged.count} identical kernels of repeated blocks, summed"
    title += ")"
    named = any(k.get("module") for k in r["kernels_unfused"])  # else every row would say 'model'
    cols = [Col("module", key=True, breaks=".")] if named else []
    cols += [Col("op", key=True, breaks=" "), Col("line", rank=2), Col("FLOPs", right=True, rank=1),
             Col("bytes", right=True, rank=1), Col("FLOP/B", right=True, rank=2)]
    for i, h in enumerate(hws):
        cols.append(Col(f"{h}\nbound", right=True, group=h))
        if i == 0:
            cols.append(Col("share", right=True, group=h))
        cols.append(Col("bound by", group=h))
    t = Fit(title, cols)
    for g in shown:
        op = short_op(g.op)
        ai = "inf" if g.intensity is None else f"{g.intensity:.3g}"
        cells = [g.module] if named else []
        cells += [op, short_loc(g.loc, r["source"]), fmt_si(g.fig.flops), fmt_si(g.fig.bytes, "B"), ai]
        for i, h in enumerate(hws):
            cells.append(fmt_time(g.fig.bound_s[h]))
            if i == 0:
                cells.append(fmt_pct(g.fig.share[h]))
            cells.append(g.fig.by[h] or "-")
        t.add_row(*cells)
    if rest:
        t.add_row(*_more_row(rest, hws, named))
    return t


def _more_row(rest: Sequence[KernelGroup], hws: Sequence[str], named: bool) -> list[str]:
    """The folded rows: their count (in the first column) and summed figures."""
    count = sum(g.count for g in rest)
    cells = [f"({count} more)"] + ([""] if named else [])
    cells += ["", fmt_si(sum(g.fig.flops for g in rest)), fmt_si(sum(g.fig.bytes for g in rest), "B"), ""]
    for i, h in enumerate(hws):
        cells.append(fmt_time(sum(g.fig.bound_s[h] for g in rest)))
        if i == 0:
            cells.append(fmt_pct(sum(g.fig.share[h] for g in rest)))
        cells.append("")
    return cells
