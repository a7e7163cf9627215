"""The module tree of a report: the kernels of the unfused bound summed per `nn.Module` path.

Each statement carries the module path its source op ran in (`Assign.origin.module`, `attn.c_attn`;
None at the top level), and so does each kernel of the unfused bound (`unfused.UnfusedKernel.module`).
A module's figures are those of the kernels that ran in it or in its submodules: FLOPs, their
external traffic (each kernel through DRAM), and the sum of their bounds per target, i.e. what the
unfused bound charges to that module. This is the figure to hold beside a per-module eager profile
(one kernel per op); the fused and cache-aware bounds are whole-program figures.

`share` is the module's part of the unfused bound (0..1); `bottleneck` the resource binding the
kernels that take most of its time. Sibling modules named by an index (`h.0`, `h.1`: a ModuleList or
Sequential) whose kernels are identical (same relative paths, ops, FLOPs and bytes, in order) are
repeats: `same_as` names the first of the run, so that a report shows the block once with a count.
Rows are in program order, a parent before its children; the root (path "") is the whole program.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

ROOT = ""


def ancestors(path: str | None) -> list[str]:
    """'h.0.attn' -> ['', 'h', 'h.0', 'h.0.attn'] (the root first)."""
    if not path:
        return [ROOT]
    parts = path.split(".")
    return [ROOT, *(".".join(parts[:i]) for i in range(1, len(parts) + 1))]


def module_rows(kernels: Sequence[dict[str, Any]], targets: Sequence[str]) -> list[dict[str, Any]]:
    """One row per module path that holds a kernel (its ancestors included); `kernels` are the
    report's `kernels_unfused` rows (keys module, op, flops_matrix, flops_vector, bytes, bound_s,
    bottleneck)."""
    members: dict[str, list[int]] = {}
    own: dict[str, list[int]] = {}
    for i, k in enumerate(kernels):
        chain = ancestors(k.get("module"))
        for p in chain:
            members.setdefault(p, []).append(i)
        own.setdefault(chain[-1], []).append(i)
    total = {h: sum(k["bound_s"][h] for k in kernels) for h in targets}
    rows: list[dict[str, Any]] = []
    for path, ks in _tree_order(members):
        rows.append(_row(path, ks, own.get(path, []), kernels, targets, total))
    _mark_repeats(rows, kernels)
    return rows


def _tree_order(members: dict[str, list[int]]) -> list[tuple[str, list[int]]]:
    """Depth-first, children in the order their first kernel ran."""
    children: dict[str, list[str]] = {}
    for p in members:
        if p != ROOT:
            children.setdefault(_parent(p), []).append(p)
    out: list[tuple[str, list[int]]] = []
    stack = [ROOT] if ROOT in members else []
    while stack:
        p = stack.pop()
        out.append((p, members[p]))
        stack.extend(sorted(children.get(p, []), key=lambda c: members[c][0], reverse=True))
    return out


def _parent(path: str) -> str:
    return path.rpartition(".")[0]


def _row(path: str, ks: list[int], own: list[int], kernels: Sequence[dict[str, Any]],
         targets: Sequence[str], total: dict[str, float]) -> dict[str, Any]:
    sel = [kernels[i] for i in ks]
    bound = {h: sum(k["bound_s"][h] for k in sel) for h in targets}
    by: dict[str, str | None] = {}
    for h in targets:
        per: dict[str, float] = {}
        for k in sel:
            per[k["bottleneck"][h]] = per.get(k["bottleneck"][h], 0.0) + k["bound_s"][h]
        by[h] = max(per, key=lambda r: per[r]) if per else None
    fm, fv = sum(k["flops_matrix"] for k in sel), sum(k["flops_vector"] for k in sel)
    return {"path": path, "name": path.rpartition(".")[2] if path else "model",
            "parent": None if path == ROOT else _parent(path),
            "depth": 0 if path == ROOT else path.count(".") + 1,
            "kernels": list(ks), "own_kernels": list(own),
            "flops": fm + fv, "flops_matrix": fm, "flops_vector": fv,
            "bytes": sum(k["bytes"] for k in sel),
            "bound_s": bound, "bottleneck": by,
            "share": {h: bound[h] / total[h] if total[h] else 0.0 for h in targets},
            "same_as": None}


def _signature(row: dict[str, Any], kernels: Sequence[dict[str, Any]]) -> tuple:
    n = len(row["path"])
    return tuple(((kernels[i].get("module") or "")[n:], kernels[i]["op"], kernels[i]["flops_matrix"],
                  kernels[i]["flops_vector"], kernels[i]["bytes"]) for i in row["kernels"])


def _mark_repeats(rows: list[dict[str, Any]], kernels: Sequence[dict[str, Any]]) -> None:
    """`same_as` on each indexed sibling identical to the first of its run of identical siblings."""
    by_parent: dict[str | None, list[dict[str, Any]]] = {}
    for r in rows:
        by_parent.setdefault(r["parent"], []).append(r)
    for sibs in by_parent.values():
        head: dict[str, Any] | None = None
        head_sig: tuple | None = None
        for r in sibs:
            if not r["name"].isdigit():
                head = head_sig = None
                continue
            sig = _signature(r, kernels)
            if head is not None and sig == head_sig:
                r["same_as"] = head["path"]
            else:
                head, head_sig = r, sig
