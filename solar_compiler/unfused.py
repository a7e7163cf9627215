"""Kernels of the unfused bound: which einsum nodes run as one eager kernel, and the DRAM traffic
such a kernel cannot avoid.

A frontend that translates one source op (one eager kernel, e.g. one ATen op) into several
statements records the runs in the module attribute `solar.source_ops`: a JSON list of
`{"op", "loc", "first", "count"}` over the statement indices of the (single) kernel, in program
order. Each entry is one kernel of the unfused bound. `narrow-needed` rewrites the record when it
adds, splits or removes statements (`remap_source_ops`), so it always describes the kernel as
costed; a record that does not cover the kernel's statements exactly is an error, never ignored.
A node whose statements (a folded init and its reduction) lie in two entries joins them into one
kernel: a coarser kernel can only lower the bound. Without a record (loop-text input) every node
is a kernel and its traffic is the node's own bytes (`costs.py`), so those numbers are unchanged.

External traffic of a kernel G, tensor by tensor (distinct elements at the tensor's dtype, the
union of footprints as `costs.distinct_elements` counts it):
* reads: the reads of a tensor by those statements of G that no earlier statement of G wrote it
  before (G did not produce it: it comes from DRAM), the accumulator of a reduction included;
  inputs and weights always count. A statement in a scan loop reading its own target (`y[i - 1]`)
  is not counted for that tensor: those elements are mostly its own results, and leaving them out
  can only lower the bound.
* writes: the writes of a tensor by G when it is a graph output or a later kernel reads it
  externally (by the rule above); an intermediate produced and consumed inside G stays on chip.
Both rules only drop traffic a kernel might avoid (a partial write still makes the tensor G's own),
so the bound stays a lower bound, and the kernels' reads of every input and writes of every output
cover the compulsory traffic: unfused >= fused.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from solar_compiler.costs import Access, GraphCosts, Site, distinct_elements
from solar_compiler.errors import SolarError
from solar_compiler.loopir.affine import AffExpr
from solar_compiler.loopir.ast import DTYPES, Kernel, StmtContext, statements, stmt_reads
from solar_compiler.passes.lift_einsum import group_statements
from solar_compiler.polyhedral import domain_constraints

if TYPE_CHECKING:
    from xdsl.dialects.builtin import ModuleOp

SOURCE_OPS_ATTR = "solar.source_ops"
_Group = tuple[str, str | None, tuple[int, ...], tuple[int, ...]]  # op, loc, statements, node indices


@dataclass(frozen=True)
class UnfusedKernel:
    """One kernel of the unfused bound: some ops of one costed graph and the traffic they need."""

    name: str                   # "aten.softmax.int @ m.py:12", or the node's name (no record)
    op: str | None              # the source op(s), None without a record
    loc: str | None
    ops: tuple[int, ...]        # indices into the graph's ops
    stmts: tuple[int, ...]      # statement indices (empty when costed without the kernel)
    reads: tuple[Access, ...]   # external reads
    writes: tuple[Access, ...]  # external writes

    @property
    def bytes(self) -> int:
        return sum(a.bytes for a in self.reads) + sum(a.bytes for a in self.writes)


def node_kernels(g: GraphCosts) -> list[UnfusedKernel]:
    """Every node its own kernel, with the node's own traffic (no source-op record)."""
    return [UnfusedKernel(o.name, None, o.loc, (i,), (), o.reads, o.writes) for i, o in enumerate(g.ops)]


# ---- the record ---------------------------------------------------------------------------------------
def module_source_ops(module: ModuleOp) -> list[dict] | None:
    """The `solar.source_ops` record of a module, checked for shape; None when there is none."""
    from xdsl.dialects.builtin import StringAttr

    attr = module.attributes.get(SOURCE_OPS_ATTR)
    if attr is None:
        return None
    if not isinstance(attr, StringAttr):
        raise SolarError(f"module attribute {SOURCE_OPS_ATTR}: expected a JSON string")
    try:
        ops = json.loads(attr.data)
    except json.JSONDecodeError as e:
        raise SolarError(f"module attribute {SOURCE_OPS_ATTR}: invalid JSON ({e.msg})") from None
    good = isinstance(ops, list) and all(
        isinstance(o, dict) and isinstance(o.get("op"), str) and isinstance(o.get("first"), int)
        and isinstance(o.get("count"), int) and o["count"] > 0 and isinstance(o.get("loc"), str | None)
        for o in ops)
    if not good:
        raise SolarError(f"module attribute {SOURCE_OPS_ATTR}: expected a list of "
                         '{"op", "loc", "first", "count"} objects with count > 0')
    return ops


def _check_cover(ops: Sequence[dict], n: int, kernel: str) -> None:
    at = 0
    for o in ops:
        if o["first"] != at:
            break
        at += o["count"]
    if at != n or len(ops) == 0 and n:
        raise SolarError(f"kernel {kernel}: {SOURCE_OPS_ATTR} does not cover its {n} statements in order "
                         f"(was the kernel rewritten by a pass that does not update the record?)")


def remap_source_ops(ops: Sequence[dict], origin: Sequence[int]) -> list[dict]:
    """The record for a rewritten kernel whose statement j came from old statement `origin[j]`
    (statements in the old order; an op whose statements all went away is dropped)."""
    out = []
    for o in ops:
        lo, hi = o["first"], o["first"] + o["count"]
        new = [j for j, src in enumerate(origin) if lo <= src < hi]
        if not new:
            continue
        if new != list(range(new[0], new[-1] + 1)):
            raise SolarError(f"{SOURCE_OPS_ATTR}: the statements of {o['op']} are no longer contiguous")
        out.append({**o, "first": new[0], "count": len(new)})
    return out


# ---- grouping and traffic -----------------------------------------------------------------------------
def source_kernels(kernel: Kernel, g: GraphCosts, source_ops: Sequence[dict]) -> list[UnfusedKernel]:
    """The unfused kernels of one costed graph (`g` computed from `kernel`) under a source-op record."""
    if g.kernel != kernel.name:
        raise SolarError(f"unfused kernels: costs of {g.kernel} do not belong to kernel {kernel.name}")
    ctxs = statements(kernel)
    _check_cover(source_ops, len(ctxs), kernel.name)
    nodes = group_statements(kernel)
    if [n.name for n in nodes] != [o.name for o in g.ops]:
        raise SolarError(f"kernel {kernel.name}: costed ops do not match its statements")
    entry = [i for i, o in enumerate(source_ops) for _ in range(o["count"])]
    # a node in two entries joins them (union-find over entries, kept contiguous by program order)
    root = list(range(len(source_ops)))
    for n in nodes:
        es = sorted({entry[c.index] for c in n.stmts})
        for e in range(es[0] + 1, es[-1] + 1):
            root[e] = root[es[0]]
    members: dict[int, list[int]] = {}
    for i in range(len(source_ops)):
        members.setdefault(root[i], []).append(i)
    of_node = {ni: root[entry[n.main.index]] for ni, n in enumerate(nodes)}
    groups: list[_Group] = []
    for r, es in members.items():
        stmts = tuple(s for e in es for s in range(source_ops[e]["first"],
                                                   source_ops[e]["first"] + source_ops[e]["count"]))
        names = list(dict.fromkeys(source_ops[e]["op"] for e in es))
        locs = list(dict.fromkeys(source_ops[e]["loc"] for e in es if source_ops[e]["loc"]))
        groups.append((" + ".join(names), locs[0] if locs else None, stmts,
                       tuple(ni for ni in range(len(nodes)) if of_node[ni] == r)))
    return _with_traffic(kernel, ctxs, groups)


def _site(ctx: StmtContext, indices: Sequence[object]) -> Site:
    ivs, cons, _ = domain_constraints(ctx)
    return Site(ivs, tuple(cons), tuple(i if isinstance(i, AffExpr) else None for i in indices))


def _accesses(kernel: Kernel, sites: dict[str, list[Site]]) -> tuple[Access, ...]:
    out = []
    for name, ss in sites.items():
        dt = kernel.tensor(name).dtype
        n = distinct_elements(ss)
        out.append(Access(name, dt, n, n * DTYPES[dt], any(s.indirect for s in ss)))
    return tuple(out)


def _external_reads(kernel: Kernel, ctxs: Sequence[StmtContext]) -> dict[str, list[Site]]:
    """Read sites of tensors the statements `ctxs` (one kernel, in order) did not produce first."""
    roles = {t.name: t.role for t in kernel.tensors}
    written: set[str] = set()
    out: dict[str, list[Site]] = {}
    for c in ctxs:
        s = c.stmt
        scan = any(f.sequential for f in c.loops)
        rd = [(r.tensor, r.indices, scan and r.tensor == s.target) for r in stmt_reads(s)]
        if s.kind != "=":
            rd.append((s.target, s.indices, False))  # the accumulator's current value
        for t, idx, self_dep in rd:
            if roles[t] in ("input", "weight") or not (t in written or self_dep):
                out.setdefault(t, []).append(_site(c, idx))
        written.add(s.target)
    return out


def _with_traffic(kernel: Kernel, ctxs: Sequence[StmtContext],
                  groups: Sequence[_Group]) -> list[UnfusedKernel]:
    reads = [_external_reads(kernel, [ctxs[i] for i in stmts]) for _, _, stmts, _ in groups]
    outputs = {t.name for t in kernel.tensors if t.role == "output"}
    out = []
    for gi, (op, loc, stmts, ops) in enumerate(groups):
        needed = outputs | {t for later in reads[gi + 1:] for t in later}
        wr: dict[str, list[Site]] = {}
        for i in stmts:
            s = ctxs[i].stmt
            if s.target in needed:
                wr.setdefault(s.target, []).append(_site(ctxs[i], s.indices))
        name = f"{op} @ {loc}" if loc else op
        out.append(UnfusedKernel(name, op, loc, ops, stmts, _accesses(kernel, reads[gi]),
                                 _accesses(kernel, wr)))
    return out
