"""Kernels of the unfused bound: which einsum nodes run as one eager kernel, and the DRAM traffic
such a kernel cannot avoid.

A frontend that translates one source op (one eager kernel, e.g. one ATen op) into several
statements says so on each statement: its `origin` (`loop.stmt`/`einsum.node` property; the AST's
`Assign.origin`) numbers the op's instance. Consecutive statements with the same origin are one
kernel of the unfused bound; a transform that splits or copies a statement (`narrow-needed`) keeps
its origin, so the grouping survives it. A node whose statements (a folded init and its reduction)
have two origins joins them into one kernel: a coarser kernel can only lower the bound. Statements
without an origin (loop-text input) are one kernel per node, whose traffic is the node's own bytes
(`costs.py`).

External traffic of a kernel G, tensor by tensor (distinct elements at the tensor's dtype, the
union of footprints as `costs.distinct_elements` counts it):
* reads: the reads of a tensor by those statements of G that no earlier statement of G wrote it
  before (G did not produce it: it comes from DRAM), the accumulator of a reduction included;
  inputs and weights always count. A read inside a scan loop of a tensor that G writes inside that
  loop (`h[s - 1]` of an LSTM step, `y[i - 1]` of a scan) is not counted: an earlier step of G wrote
  those elements (all but the first step's, which leaving out can only lower the bound); a read
  of exactly the elements the statement writes is (its first step reads their value from before).
* writes: the writes of a tensor by G when it is a graph output or a later kernel reads it
  externally (by the rule above); an intermediate produced and consumed inside G stays on chip.
Both rules only drop traffic a kernel might avoid (a partial write still makes the tensor G's own),
so the bound stays a lower bound, and the kernels' reads of every input and writes of every output
cover the compulsory traffic: unfused >= fused.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from solar_compiler.analysis.costs import Access, GraphCosts, Site, accesses, traced_elements
from solar_compiler.analysis.polyhedral import domain_constraints, iteration_count
from solar_compiler.analysis.program import Program
from solar_compiler.errors import SolarError
from solar_compiler.loopir.affine import AffExpr
from solar_compiler.loopir.ast import Kernel, StmtContext, statements, stmt_reads

# op, loc, stmts, nodes, module, phase
_Group = tuple[str, str | None, tuple[int, ...], tuple[int, ...], str | None, str | None]


@dataclass(frozen=True)
class UnfusedKernel:
    """One kernel of the unfused bound: some ops of one costed graph and the traffic they need."""

    name: str                   # "aten.softmax.int @ m.py:12", or the node's name (no origins)
    op: str | None              # the source op(s), None without origins
    loc: str | None
    ops: tuple[int, ...]        # indices into the graph's ops
    stmts: tuple[int, ...]      # statement indices (empty when costed without the kernel)
    reads: tuple[Access, ...]   # external reads
    writes: tuple[Access, ...]  # external writes
    module: str | None = None   # the module path of the source op (`attn.c_attn`)
    phase: str | None = None    # training step: forward, backward or optimizer (Origin.phase)

    @property
    def bytes(self) -> int:
        return sum(a.bytes for a in self.reads) + sum(a.bytes for a in self.writes)


def node_kernels(g: GraphCosts) -> list[UnfusedKernel]:
    """Every node its own kernel, with the node's own traffic (no origins)."""
    return [UnfusedKernel(o.name, None, o.loc, (i,), (), o.reads, o.writes) for i, o in enumerate(g.ops)]


def has_origins(p: Program) -> bool:
    return any(c.stmt.origin is not None for n in p.nodes for c in n.stmts)


def unfused_kernels(p: Program, g: GraphCosts, indirect: str = "traced") -> list[UnfusedKernel]:
    """The kernels of the unfused bound of one program: per source op when its statements carry
    origins, else one per node. `indirect` counts indirect accesses as `costs.program_costs` does
    (the costs `g` must have been computed the same way)."""
    return source_kernels(p, g, indirect) if has_origins(p) else node_kernels(g)


# ---- grouping and traffic -----------------------------------------------------------------------------
def source_kernels(p: Program, g: GraphCosts, indirect: str = "traced") -> list[UnfusedKernel]:
    """The unfused kernels of one costed program (`g` computed from `p`), one per run of statements
    with the same origin; a statement without one is a kernel of its own."""
    kernel = p.kernel
    if g.kernel != kernel.name or [n.name for n in p.nodes] != [o.name for o in g.ops]:
        raise SolarError(f"unfused kernels: costs of {g.kernel} do not belong to program {kernel.name}")
    ctxs = [c for n in p.nodes for c in n.stmts]  # the program's own contexts, with their memos
    if [c.index for c in ctxs] != list(range(len(ctxs))):
        ctxs = statements(kernel)
    # runs of statements with the same origin id, in program order
    run_of: list[int] = []
    for i, c in enumerate(ctxs):
        o = c.stmt.origin
        prev = ctxs[i - 1].stmt.origin if i else None
        same = i > 0 and o is not None and prev is not None and o.id == prev.id
        run_of.append(run_of[-1] if same else (run_of[-1] + 1 if run_of else 0))
    nruns = run_of[-1] + 1 if run_of else 0
    # a node in two runs joins them (runs stay contiguous: nodes are consecutive statements)
    root = list(range(nruns))
    for n in p.nodes:
        rs = sorted({run_of[c.index] for c in n.stmts})
        for r in range(rs[0] + 1, rs[-1] + 1):
            root[r] = root[rs[0]]
    members: dict[int, list[int]] = {}
    for r in range(nruns):
        members.setdefault(root[r], []).append(r)
    of_node = {ni: root[run_of[n.main.index]] for ni, n in enumerate(p.nodes)}
    groups: list[_Group] = []
    for r, runs in members.items():
        stmts = tuple(i for i in range(len(ctxs)) if run_of[i] in runs)
        origins = [ctxs[i].stmt.origin for i in stmts]
        names = list(dict.fromkeys(o.op for o in origins if o is not None))
        nodes = tuple(ni for ni in range(len(p.nodes)) if of_node[ni] == r)
        if not names:  # no origin: the node's own name
            names = [p.nodes[nodes[0]].name] if nodes else ["?"]
        locs = list(dict.fromkeys(ctxs[i].stmt.loc for i in stmts if ctxs[i].stmt.loc))
        mods = list(dict.fromkeys(o.module for o in origins if o is not None and o.module))
        phases = list(dict.fromkeys(o.phase for o in origins if o is not None and o.phase))
        groups.append((" + ".join(names), locs[0] if locs else None, stmts, nodes, mods[0] if mods else None,
                       phases[0] if phases else None))
    return _with_traffic(kernel, ctxs, groups, indirect)


def _site(ctx: StmtContext, indices: Sequence[object], tensor: str | None = None, write: bool = False,
          indirect: str = "traced") -> Site:
    ivs, cons, _ = domain_constraints(ctx)
    idx = tuple(i if isinstance(i, AffExpr) else None for i in indices)
    traced = None
    if tensor is not None and None in idx:
        traced = traced_elements(ctx, tensor, write, iteration_count(ctx), indirect)
    return Site(ivs, tuple(cons), idx, traced)


def _external_reads(kernel: Kernel, ctxs: Sequence[StmtContext], indirect: str) -> dict[str, list[Site]]:
    """Read sites of tensors the statements `ctxs` (one kernel, in order) did not produce first:
    a tensor an earlier statement of the kernel wrote, or that a statement of the kernel writes
    inside a scan loop around the read (an earlier step wrote what the read sees), is on chip."""
    roles = {t.name: t.role for t in kernel.tensors}
    carried: dict[int, set[str]] = {}  # id(scan loop) -> tensors the kernel writes inside it
    for c in ctxs:
        for f in c.loops:
            if f.sequential:
                carried.setdefault(id(f), set()).add(c.stmt.target)
    written: set[str] = set()
    out: dict[str, list[Site]] = {}
    for c in ctxs:
        s = c.stmt
        own = set().union(*(carried[id(f)] for f in c.loops if f.sequential))
        rd = [(r.tensor, r.indices, False) for r in stmt_reads(s)]
        if s.kind != "=":
            rd.append((s.target, s.indices, True))  # the accumulator's current value
        for t, idx, acc in rd:
            # a read of the very elements the statement writes sees their value from before the
            # scan at its first step: external unless an earlier statement wrote them
            carried_in = t in own and (t, tuple(idx)) != (s.target, tuple(s.indices))
            if roles[t] in ("input", "weight") or not (t in written or carried_in):
                out.setdefault(t, []).append(_site(c, idx, t, acc, indirect))
        written.add(s.target)
    return out


def _with_traffic(kernel: Kernel, ctxs: Sequence[StmtContext],
                  groups: Sequence[_Group], indirect: str) -> list[UnfusedKernel]:
    reads = [_external_reads(kernel, [ctxs[i] for i in stmts], indirect) for _, _, stmts, _, _, _ in groups]
    outputs = {t.name for t in kernel.tensors if t.role == "output"}
    last_read: dict[str, int] = {}  # tensor -> the last kernel that reads it from memory
    for gi, r in enumerate(reads):
        for t in r:
            last_read[t] = gi
    out = []
    for gi, (op, loc, stmts, ops, module, phase) in enumerate(groups):
        wr: dict[str, list[Site]] = {}
        for i in stmts:
            s = ctxs[i].stmt
            if s.target in outputs or last_read.get(s.target, -1) > gi:  # a later kernel reads it
                wr.setdefault(s.target, []).append(_site(ctxs[i], s.indices, s.target, True, indirect))
        name = f"{op} @ {loc}" if loc else op
        out.append(UnfusedKernel(name, op, loc, ops, stmts, accesses(kernel, reads[gi]),
                                 accesses(kernel, wr), module, phase))
    return out
