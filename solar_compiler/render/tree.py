"""The module tree (the default view of a report): per `nn.Module` path, the FLOPs, bytes and bound
of the kernels that ran in it, its share of the unfused bound and what binds it (like DeepSpeed's
flops profiler or fvcore's `flop_count_table`). Shown to a depth (`--depth N`; by default the
deepest that fits the row budget); identical indexed siblings (transformer layers: `same_as` in the
module rows) are shown once with their count and their summed figures; a module's own ops beside
its submodules are the row "(self)"; small siblings are folded into one "N more" row."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from solar_compiler.render.fit import Col, Fit
from solar_compiler.render.fmt import fmt_pct, fmt_si, fmt_time
from solar_compiler.render.tables import TINY, Figures, figures, unfused_totals


@dataclass
class Entry:
    label: str
    level: int
    fig: Figures
    folded: int = 0  # rows folded into this one ("N more")


def module_entries(r: dict[str, Any], depth: int) -> list[Entry]:
    """The rows of the tree down to `depth` (root = 0)."""
    rows = r.get("modules") or []
    if not rows:
        return []
    hws = list(r["bounds"])
    kernels = r["kernels_unfused"]
    total = unfused_totals(r)
    by_path = {m["path"]: m for m in rows}
    children: dict[str, list[dict[str, Any]]] = {}
    for m in rows:
        if m["parent"] is not None:
            children.setdefault(m["parent"], []).append(m)
    out: list[Entry] = []

    def visit(m: dict[str, Any], level: int, scale: int, label: str) -> None:
        kids = children.get(m["path"], [])
        if m["path"] and not m["own_kernels"] and kids and all(
                k["same_as"] == kids[0]["path"] for k in kids[1:]) and kids[0]["same_as"] is None:
            # a container of one run of identical blocks (a ModuleList): one row, 'h.0-11 (x12)'
            n = len(kids)
            first = kids[0]["name"]
            tail = first if n == 1 else f"{first}-{_last_index(by_path, kids[0], n)} (x{n})"
            visit(kids[0], level, scale * n, f"{label}.{tail}")
            return
        out.append(Entry(label, level, figures(kernels, m["kernels"], hws, total, scale)))
        if level >= depth:
            return
        items: list[tuple[str, dict[str, Any] | None, int, Figures]] = []  # label, module, count, figures
        for kid in children.get(m["path"], []):
            if kid["same_as"] is not None and items and items[-1][1] is not None \
                    and items[-1][1]["path"] == kid["same_as"]:
                lab, head, n, _ = items[-1]
                items[-1] = (lab, head, n + 1, figures(kernels, head["kernels"], hws, total, scale * (n + 1)))
                continue
            items.append((kid["name"], kid, 1, figures(kernels, kid["kernels"], hws, total, scale)))
        if items and m["own_kernels"]:
            items.append(("(self)", None, 1, figures(kernels, m["own_kernels"], hws, total, scale)))
        tiny = [i for i, it in enumerate(items) if it[3].share.get(hws[0], 0.0) < TINY] if hws else []
        fold = set(tiny) if len(tiny) >= 2 else set()
        for i, (lab, kid, n, fig) in enumerate(items):
            if i in fold:
                continue
            if n > 1:
                lab = f"{lab}-{_last_index(by_path, kid, n)} (x{n})"
            if kid is None:
                out.append(Entry(lab, level + 1, fig))
            else:
                visit(kid, level + 1, scale * n, lab)
        if fold:
            fig = _sum_figures([items[i][3] for i in sorted(fold)], hws, total)
            out.append(Entry(f"({len(fold)} more, each < {TINY:.0%})", level + 1, fig, folded=len(fold)))

    visit(by_path[""], 0, 1, "model")
    return out


def _last_index(by_path: dict[str, dict[str, Any]], head: dict[str, Any] | None, n: int) -> str:
    """The index of the last of `n` repeats starting at `head` (`h.0` x12 -> '11')."""
    assert head is not None
    return str(int(head["name"]) + n - 1)


def _sum_figures(figs: Sequence[Figures], hws: Sequence[str], total: dict[str, float]) -> Figures:
    out = Figures(sum(f.flops for f in figs), sum(f.bytes for f in figs))
    for h in hws:
        out.bound_s[h] = sum(f.bound_s[h] for f in figs)
        out.share[h] = out.bound_s[h] / total[h] if total.get(h) else 0.0
        out.by[h] = "-"
    return out


def max_depth(r: dict[str, Any]) -> int:
    return max((m["depth"] for m in r.get("modules") or []), default=0)


def auto_depth(r: dict[str, Any], budget: int) -> int:
    """The deepest tree whose rows fit `budget` (at least the top-level modules)."""
    best = 1
    for d in range(1, max_depth(r) + 1):
        if len(module_entries(r, d)) > budget:
            break
        best = d
    return best


def module_table(r: dict[str, Any], depth: int) -> Fit:
    hws = list(r["bounds"])
    entries = module_entries(r, depth)
    deepest = max_depth(r)
    more = f"; deeper: --depth {depth + 1}" if depth < deepest else ""
    cols = [Col("module", key=True, breaks=". "), Col("FLOPs", right=True, rank=1),
            Col("bytes", right=True, rank=1)]
    for h in hws:
        cols += [Col(f"{h}\nbound", right=True, group=h), Col("share", right=True, group=h),
                 Col("bound by", group=h)]
    t = Fit(f"modules (depth {depth} of {deepest}{more}): their kernels' part of the unfused bound", cols)
    for e in entries:
        cells = ["  " * e.level + e.label, fmt_si(e.fig.flops), fmt_si(e.fig.bytes, "B")]
        for h in hws:
            cells += [fmt_time(e.fig.bound_s[h]), fmt_pct(e.fig.share[h]), e.fig.by[h] or "-"]
        t.add_row(*cells)
    return t
