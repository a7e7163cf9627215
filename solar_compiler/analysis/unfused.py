"""Kernels of the unfused bound: which einsum nodes run as one eager kernel, and the DRAM traffic
such a kernel cannot avoid.

A frontend that translates one source op (one eager kernel, e.g. one ATen op) into several
statements says so on each: a node's `origin` (and its folded init's `init_origin`) numbers the op's
instance. The kernels are read from the einsum nodes (`graphs.node_ops`): a node is one or two
statements (its folded init, then its main statement), numbered in node order, and consecutive
statements with the same origin are one kernel of the unfused bound; a transform that splits or
copies a node (`narrow-needed`) keeps its origin, so the grouping survives it. A node whose init
and main statement have two origins joins them into one kernel: a coarser kernel can only lower the
bound. Nodes without an origin (loop-text input) are one kernel each, whose traffic is the node's
own bytes (`costs.py`).

External traffic of a kernel G, tensor by tensor (distinct elements at the tensor's dtype, the
union of footprints as `costs.distinct_elements` counts it):
* reads: the reads of a tensor (the body's block arguments and gathers, at their indexing maps)
  by those statements of G that no earlier statement of G wrote it before (G did not produce it: it
  comes from DRAM), the accumulator of a reduction included; inputs and weights always count. A
  read inside a scan loop (a `sequential` iterator, the loop named by its `scopes` number) of a
  tensor that G writes inside that loop (`h[s - 1]` of an LSTM step, `y[i - 1]` of a scan) is not
  counted: an earlier step of G wrote those elements (all but the first step's, which leaving out
  can only lower the bound); a read at the output map itself is (its first step reads their value
  from before).
* writes: the writes of a tensor by G when it is a graph output or a later kernel reads it
  externally (by the rule above); an intermediate produced and consumed inside G stays on chip.
Both rules only drop traffic a kernel might avoid (a partial write still makes the tensor G's own),
so the bound stays a lower bound, and the kernels' reads of every input and writes of every output
cover the compulsory traffic: unfused >= fused.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from xdsl.dialects.builtin import FusedLoc
from xdsl.ir.affine import AffineMap

from solar_compiler.analysis.costs import Access, GraphCosts, NodeSites, Site, Slot, accesses, node_slots
from solar_compiler.analysis.graphs import node_ops
from solar_compiler.dialects.einsum import GraphOp, NodeOp, TensorOp
from solar_compiler.dialects.loop import OriginAttr, location_text
from solar_compiler.errors import SolarError

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
    phase: str | None = None    # training step: forward, backward or optimizer (the origin's phase)

    @property
    def bytes(self) -> int:
        return sum(a.bytes for a in self.reads) + sum(a.bytes for a in self.writes)


def node_kernels(g: GraphCosts) -> list[UnfusedKernel]:
    """Every node its own kernel, with the node's own traffic (no origins)."""
    return [UnfusedKernel(o.name, None, o.loc, (i,), (), o.reads, o.writes) for i, o in enumerate(g.ops)]


def has_origins(graph: GraphOp) -> bool:
    return any(n.origin is not None or n.init_origin is not None for n in node_ops(graph))


def unfused_kernels(graph: GraphOp, g: GraphCosts, indirect: str = "traced") -> list[UnfusedKernel]:
    """The kernels of the unfused bound of one program: per source op when its statements carry
    origins, else one per node. `indirect` counts indirect accesses as `costs.program_costs` does
    (the costs `g` must have been computed the same way)."""
    return source_kernels(graph, g, indirect) if has_origins(graph) else node_kernels(g)


# ---- grouping and traffic -----------------------------------------------------------------------------
def _origin(n: NodeOp, init: bool) -> OriginAttr | None:
    return n.init_origin if init else n.origin


def source_kernels(graph: GraphOp, g: GraphCosts, indirect: str = "traced") -> list[UnfusedKernel]:
    """The unfused kernels of one costed program (`g` computed from `graph`), one per run of its nodes'
    statements (folded init, main) with the same origin; a statement without one is a kernel of
    its own."""
    nodes = node_ops(graph)
    if g.kernel != graph.kernel_name or [n.sym_name.data for n in nodes] != [o.name for o in g.ops]:
        raise SolarError(f"unfused kernels: costs of {g.kernel} do not belong to program {graph.kernel_name}")
    slots = node_slots(nodes)
    origins = [_origin(nodes[s.node], s.init) for s in slots]
    # runs of statements with the same origin id, in program order
    run_of: list[int] = []
    for i, o in enumerate(origins):
        prev = origins[i - 1] if i else None
        same = i > 0 and o is not None and prev is not None and o.instance == prev.instance
        run_of.append(run_of[-1] if same else (run_of[-1] + 1 if run_of else 0))
    nruns = run_of[-1] + 1 if run_of else 0
    # a node in two runs joins them (runs stay contiguous: a node's statements are consecutive)
    root = list(range(nruns))
    for i, s in enumerate(slots):
        if s.init:
            root[run_of[i + 1]] = root[run_of[i]]
    members: dict[int, list[int]] = {}
    for r in range(nruns):
        members.setdefault(root[r], []).append(r)
    groups: list[_Group] = []
    for runs in members.values():
        stmts = tuple(i for i in range(len(slots)) if run_of[i] in runs)
        os_ = [origins[i] for i in stmts]
        names = list(dict.fromkeys(o.op.data for o in os_ if o is not None))
        ops = tuple(dict.fromkeys(slots[i].node for i in stmts if not slots[i].init))
        if not names:  # no origin: the node's own name
            names = [nodes[ops[0]].sym_name.data] if ops else ["?"]
        locs = list(dict.fromkeys(x for i in stmts if (x := _loc(nodes[slots[i].node], slots[i].init))))
        mods = list(dict.fromkeys(o.module.data for o in os_ if o is not None and o.module.data))
        phases = list(dict.fromkeys(o.phase.data for o in os_ if o is not None and o.phase.data))
        groups.append((" + ".join(names), locs[0] if locs else None, stmts, ops, mods[0] if mods else None,
                       phases[0] if phases else None))
    return _with_traffic(graph, nodes, slots, groups, indirect)


def _loc(n: NodeOp, init: bool) -> str | None:
    """The source position of the node's init (its fused location's first part) or main statement."""
    loc = n.location
    if isinstance(loc, FusedLoc) and len(loc.locations.data) == 2:
        return location_text(loc.locations.data[0 if init else 1])
    return location_text(loc)


def _loops(n: NodeOp, s: Slot) -> list[tuple[int, bool]]:
    """(scope number, sequential) of the loops around statement `s` of node `n`."""
    nloops = NodeOp.ints(n.init_depth)[0] if s.init else n.get_num_loops()
    kinds = [k.data for k in n.get_iterator_types().data]
    return [(sc, kinds[d] == "sequential") for d, sc in enumerate(NodeOp.ints(n.scopes)[:nloops])]


def produced_in(written: set[str], tensor: str) -> bool:
    """Whether an earlier statement of the kernel produced `tensor` (by name, in node order: with SSA
    operands this becomes "the operand's owner is a node of the kernel")."""
    return tensor in written


def _external_reads(decls: Mapping[str, TensorOp], sites: NodeSites,
                    slots: Sequence[Slot]) -> dict[str, list[Site]]:
    """Read sites of tensors the statements `slots` (one kernel, in order) did not produce first:
    a tensor an earlier statement of the kernel wrote, or that a statement of the kernel writes
    inside a scan loop (a `sequential` iterator) around the read (an earlier step wrote what the
    read sees), is on chip. `decls`: the graph's tensors (looked up once per graph, not per kernel)."""
    nodes = sites.nodes
    carried: dict[int, set[str]] = {}  # scope number of a scan loop -> tensors the kernel writes in it
    for s in slots:
        for sc, seq in _loops(nodes[s.node], s):
            if seq:
                carried.setdefault(sc, set()).add(nodes[s.node].output_name)
    written: set[str] = set()
    out: dict[str, list[Site]] = {}
    for s in slots:
        n = nodes[s.node]
        target, omap = n.output_name, n.get_indexing_maps().data[-1].data
        own = set().union(*(carried[sc] for sc, seq in _loops(n, s) if seq))
        rd: list[tuple[str, AffineMap, bool]] = []
        if not s.init:
            rd = [(t, m, False) for t, m, _ in sites.leaves(s.node)]
            if n.reduce.data != "none":
                rd.append((target, omap, True))  # the accumulator's current value
        for t, m, acc in rd:
            # a read of the very elements the statement writes sees their value from before the
            # scan at its first step: external unless an earlier statement wrote them
            same = acc or (t == target and m.num_symbols == 0 and omap.num_symbols == 0 and m == omap)
            carried_in = t in own and not same
            if decls[t].role.data in ("input", "weight") or not (produced_in(written, t) or carried_in):
                out.setdefault(t, []).append(sites.site(s, m, t, acc))
        written.add(target)
    return out


def _with_traffic(graph: GraphOp, nodes: Sequence[NodeOp], slots: Sequence[Slot],
                  groups: Sequence[_Group], indirect: str) -> list[UnfusedKernel]:
    sites = NodeSites(nodes, indirect)
    decls = graph.tensor_ops()
    reads = [_external_reads(decls, sites, [slots[i] for i in stmts]) for _, _, stmts, _, _, _ in groups]
    outputs = {name for name, t in decls.items() if t.role.data == "output"}
    last_read: dict[str, int] = {}  # tensor -> the last kernel that reads it from memory
    for gi, r in enumerate(reads):
        for t in r:
            last_read[t] = gi
    out = []
    for gi, (op, loc, stmts, ops, module, phase) in enumerate(groups):
        wr: dict[str, list[Site]] = {}
        for i in stmts:
            n = nodes[slots[i].node]
            t = n.output_name
            if t in outputs or last_read.get(t, -1) > gi:  # a later kernel reads it
                omap = n.get_indexing_maps().data[-1].data
                wr.setdefault(t, []).append(sites.site(slots[i], omap, t, True))
        name = f"{op} @ {loc}" if loc else op
        out.append(UnfusedKernel(name, op, loc, ops, stmts, accesses(decls, reads[gi]),
                                 accesses(decls, wr), module, phase))
    return out
