"""The rows the report's tables share: figures of a set of kernels, and the share below which rows
are folded into one "N more" row (the tables themselves fit the width as `render/fit.py` says)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

#: Rows below this share of the unfused bound are folded when a table has several of them.
TINY = 0.01


@dataclass
class Figures:
    """FLOPs, bytes and per-target bound (seconds), bottleneck and share of a set of kernels."""

    flops: int = 0
    bytes: int = 0
    bound_s: dict[str, float] = field(default_factory=dict)
    by: dict[str, str | None] = field(default_factory=dict)
    share: dict[str, float] = field(default_factory=dict)


def figures(kernels: Sequence[dict[str, Any]], idx: Sequence[int], hws: Sequence[str],
            total: dict[str, float], scale: int = 1) -> Figures:
    """The figures of kernels `idx` (rows of `kernels_unfused`), `scale` times over (a block shown
    once for `scale` identical repeats)."""
    sel = [kernels[i] for i in idx]
    f = Figures(scale * sum(k["flops_matrix"] + k["flops_vector"] for k in sel),
                scale * sum(k["bytes"] for k in sel))
    for h in hws:
        f.bound_s[h] = scale * sum(k["bound_s"][h] for k in sel)
        per: dict[str, float] = {}
        for k in sel:
            per[k["bottleneck"][h]] = per.get(k["bottleneck"][h], 0.0) + k["bound_s"][h]
        f.by[h] = max(per, key=lambda r: per[r]) if per else None
        f.share[h] = f.bound_s[h] / total[h] if total.get(h) else 0.0
    return f


def unfused_totals(r: dict[str, Any]) -> dict[str, float]:
    return {h: sum(k["bound_s"][h] for k in r["kernels_unfused"]) for h in r["bounds"]}
