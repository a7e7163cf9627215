"""The catalogue of rewrites the default model of computation allows (docs/bounds.md, section 0).

A bound covers every implementation a production library, a compiler or a kernel writer would
produce, not only the arithmetic as written: the roofline prices the program after every rewrite of
the catalogue that needs strictly less work, and keeps the program as written for `--algorithms
classical` (SOLAR's "same products as written" model) beside it. The rewrites (patterns of this
layer) are applied to a copy of the module, so the IR the user sees (and `-t mlir`) stays as
written; `reorder-chains` remains the pass that rewrites the IR itself.

Entries (each a general rule on the einsum graph, with its proof in the cited section):

* **association** of contraction trees (chains of products and the sums over them, a sum being a
  contraction with ones; one product of two tensors that sums a variable only one reads):
  every tree whose cheapest association order (`chain_order.py`, priced exactly as emitted) needs
  strictly fewer FLOPs than the tree as written is rewritten to it (`transforms/reorder_chain.py`;
  proof in docs/reorder-chains.md).
* **reads split per part**: a contraction over a local assembled by copies into slices is split
  per copied part, reading the copies' sources, and a producer whose readers read disjoint parts is
  computed per part (overlapping parts, per reader, where each reader is a sum), and a sum over an
  element-wise sum is one sum per term (`(x @ w + b).sum(0)`:
  the product's sum joins its tree; `transforms/split_parts.py`), kept only where the association
  entry then finds a cheaper order through the new nodes: MLA's absorbed decode (`q W_UK` against
  the latent cache).
* **scans**: a sum over ranges nested along an output variable its summand ignores shares its
  partial sums (`tril(ones) @ x` is `cumsum(x)`; `prefix_sums.py`, applied by the distinct costs).
* **deduplication**: repeated products of broadcast, `repeat`ed and `expand`ed operands, symmetric
  products (SYRK, and SYRKX through an element-wise scale: `(x * d) @ x.t()`), identical nodes
  (CSE) and pieces of one source in a concatenated operand (`cat([x, x.flip(0)]) @ w`) are priced
  once (`distinct.py`, applied by the costs
  when asked for `distinct` costs).
* **one-hot contractions as gathers**: a contraction with an indicator factor of a reduced variable
  (`F.one_hot(idx, V).float() @ W`) is the gather of the rows the keys select
  (`transforms/indicator_gather.py`, applied first: the association orders are planned on the
  products that remain).
* **gathered elements computed alone**: each gather of a local that one node computes and only
  gathers read reads a producer of its gathered elements only (`relu(x @ w)[idx]` is
  `relu(x[idx] @ w)`; a whole-cache cast gathered per request is a cast of each request's pages;
  `transforms/gather_hoist.py`, with the one-hot entry, before the association orders).
* **an operand repeated along the reduced variables**: the other operand summed over its copies
  first (`x.repeat(1, 2) @ w = x @ (w[:n] + w[n:])`; `distinct.presummed`, applied by the distinct
  costs).
* **value-dependent selects**: of two contractions only an element-wise select on tensor values
  reads, one per element suffices, and so for the arithmetic select `g * A + (1 - g) * B` of a bool
  `g` (`distinct.py`).
* **fast convolution**: a 3 x 3 stride-1 convolution in a dtype cuDNN ships Winograd for is priced
  at the products of Winograd F(2x2,3x3) or F(4x4,3x3), the fewer (`fast_conv.py`, applied by the
  distinct costs too); the report names the op ("Winograd F(4x4,3x3) for conv").
* **polynomial expansion** of a summed body: a sum whose body is a polynomial in its reads (through
  the element-wise locals only it reads) is priced as its monomials: `sum_k (x_ik - y_jk)^2` as two
  norms and one product on the matrix unit, what `torch.cdist` computes, and vector work alone by
  distributivity (`(a[:, None] + b[None, :]).sum(1)` is `n a + b.sum()`); where it trades matrix
  work for more vector work (`(x[None] + c[:, None, None]) @ w`), each target may compute any share
  as written instead (`OpCost.revert_matrix`; `poly_expand.py`, applied by the distinct costs); the
  report names the op ("polynomial expansion (...) for sum").
* **factors folded through contractions** (vector work): a scale of a contraction's result is
  applied to its smaller operand, a factor of a contraction's operand constant along its reduced
  variables to its output (SDPA: the scale on Q, the softmax division on O, not P;
  `vector_work.py`, with `fold` in the distinct costs).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from xdsl.dialects.builtin import ModuleOp

from solar_compiler.analysis.chain_order import ChainPlan, module_chain_plans
from solar_compiler.analysis.costs import GraphCosts
from solar_compiler.analysis.distinct import FACTORED, PRESUMMED, SELECT, duplicates
from solar_compiler.analysis.fast_conv import FFT, WINOGRAD
from solar_compiler.analysis.graphs import module_graphs, node_ops
from solar_compiler.analysis.manager import invalidate_analyses
from solar_compiler.analysis.poly_expand import POLY
from solar_compiler.analysis.prefix_sums import SCAN
from solar_compiler.analysis.step_functions import STEP
from solar_compiler.analysis.structured import NodeCounts, node_counts
from solar_compiler.analysis.vector_work import FOLDED
from solar_compiler.dialects.einsum import GraphOp, NodeOp, TensorOp
from solar_compiler.dialects.graph_convert import NodeText
from solar_compiler.errors import SolarError
from solar_compiler.text.printer import print_assign
from solar_compiler.transforms.gather_hoist import HOISTED, hoist_gather, hoist_matches
from solar_compiler.transforms.indicator_gather import GATHERED, indicator_matches, rewrite_indicator
from solar_compiler.transforms.reorder_chain import reorder_chains
from solar_compiler.transforms.split_parts import (
    SPLIT,
    Applied,
    forward_matches,
    split_matches,
    split_parts,
    term_matches,
)

ALGORITHMS = ("default", "classical")


@dataclass(frozen=True)
class Rewrite:
    """One rewrite of the catalogue that the default bound was priced with."""

    kind: str       # the catalogue entry: "reassociated", "symmetric product", "Winograd F(4x4,3x3)"
    kernel: str
    loc: str        # the source position of the rewritten work
    what: str       # the program as priced, e.g. "(a * (b * v))"
    flops_before: int
    flops_after: int

    def row(self) -> dict[str, Any]:
        return {"kind": self.kind, "kernel": self.kernel, "loc": self.loc, "what": self.what,
                "flops_before": self.flops_before, "flops_after": self.flops_after, "words": self.words()}

    def words(self) -> str:
        """How the report says it: "reassociated: (a * (b * v))", "Winograd F(4x4,3x3) for conv"."""
        joint = " for " if names_op(self.kind) else ": "
        return f"{self.kind}{joint}{self.what}"


def names_op(kind: str) -> bool:
    """Whether the report names an entry's source op ("Winograd F(4x4,3x3) for conv") rather than
    what the rewritten node computes."""
    return kind.startswith((WINOGRAD, FFT, POLY, STEP)) or kind in (FOLDED, SELECT, FACTORED, SCAN, PRESUMMED)


def check_algorithms(name: str) -> str:
    if name not in ALGORITHMS:
        raise SolarError(f"roofline: unknown algorithms {name!r}; expected default or classical")
    return name


def catalogue_module(module: ModuleOp, within_source_ops: bool = False) -> tuple[ModuleOp, list[Rewrite]]:
    """The module as the default model prices it: a copy with every catalogue rewrite applied that
    saves work, and the rewrites (the module itself, unchanged, when none applies).
    `within_source_ops`: only the rewrites whose nodes all belong to one source op (one eager
    kernel, which may evaluate its own output in any order): the unfused fidelity's program.
    Indicator contractions become gathers first, so that the association orders are planned on
    the products that remain."""
    allowed = _one_source_op_nodes if within_source_ops else None
    base, done = module, []
    if any(indicator_matches(g, allowed) or hoist_matches(g, allowed) for g in module_graphs(module)):
        base = module.clone()
        done = _gathers(base, allowed)
    if not within_source_ops:  # a split crosses source ops: the reads it splits are other ops'
        split = _split_for_orders(base)
        if split is not None:
            base, more = split
            done += more
    lifted = catalogue_plans(base, within_source_ops)
    if not lifted:
        return base, done
    copy = base if base is not module else module.clone()
    graphs = {g.kernel_name: g for g in copy.body.block.ops if isinstance(g, GraphOp)}
    new_nodes = reorder_chains(copy, lifted)
    invalidate_analyses(copy)  # the plans were read off `base` before the rewrite, when it is the copy
    for p in lifted:
        assert p.best is not None
        loc = p.tree.locs[0] if p.tree.locs else ""
        done.append(Rewrite("reassociated", p.tree.kernel, loc, p.best.words, p.written.flops,
                            p.best.cost.flops))
    for g in graphs.values():
        _verify_rewritten(g, {n for p in lifted if p.tree.kernel == g.kernel_name for n in new_nodes[id(p)]},
                          {t for p in lifted if p.tree.kernel == g.kernel_name for t in p.best.new_tensors})
    return copy, done


def _gathers(module: ModuleOp, allowed: Callable[[Sequence[NodeOp]], bool] | None) -> list[Rewrite]:
    """Rewrite every indicator contraction of the module's graphs as its gather, and hoist every
    gather of a computed local into the node that computes it (in place: the module is the
    catalogue's copy), one at a time, since each rewrite relinks its graph."""
    done = []
    for g in module_graphs(module):
        for _ in range(4 * len(g.nodes())):
            matches = indicator_matches(g, allowed)
            if matches:
                before = node_counts(matches[0].node)
                new, _gathered = rewrite_indicator(g, matches[0])
                done.append(_rewrite_record(g, GATHERED, new, _flops(before), _flops(node_counts(new))))
                continue
            hoists = hoist_matches(g, allowed)
            if not hoists:
                break
            before = _flops(node_counts(hoists[0].producer))
            for i, new in enumerate(hoist_gather(g, hoists[0])):  # P's work: the first reader's "before"
                after = _flops(node_counts(new))
                done.append(_rewrite_record(g, HOISTED, new, before if i == 0 else 0, after))
    return done


def _split_for_orders(module: ModuleOp) -> tuple[ModuleOp, list[Rewrite]] | None:
    """A copy of the module with reads split per part (`split_parts.py`) where the association entry
    then finds a cheaper order through the new nodes, and the records; None where no split helps.
    A split that no cheaper order uses is not kept, so that it moves no other figure. A split per
    term computes a product once per term (`(x + a) @ w` is `x @ w + a @ w`): the splits are kept
    only when the program's work after them and the cheaper orders is below its work with the
    cheaper orders alone, else without the splits per term, else none."""
    if not any(forward_matches(g) or split_matches(g) or term_matches(g) for g in module_graphs(module)):
        return None
    trial = module.clone()
    applied = {g.kernel_name: split_parts(g) for g in module_graphs(trial)}
    helpful = {k: _helpful(a, [p for p in module_chain_plans(trial) if p.better and p.tree.kernel == k])
               for k, a in applied.items()}
    if not any(helpful.values()):
        return None
    before = None
    for keep in (helpful, {k: h - applied[k].adding_work for k, h in helpful.items()}):
        if not any(keep.values()):
            return None
        if any(keep[k] != set(a.built) for k, a in applied.items()):
            trial = module.clone()
            applied = {g.kernel_name: split_parts(g, keep[g.kernel_name].__contains__)
                       for g in module_graphs(trial)}
        before = _work(module) if before is None else before
        if _work(trial) < before:
            return trial, [Rewrite(SPLIT, k, a.locs[key], a.words[key], 0, 0)
                           for k, a in applied.items() for key in a.built]
    return None


def _work(module: ModuleOp) -> int:
    """The FLOPs of the module with the cheaper orders of its trees: the orders', and the other
    nodes' as written, a node identical to an earlier one free (CSE) unless that one is replaced by
    an order, as `plan_program` prices them. (A split per reader makes such copies: counting them
    at full cost would reject the split that lets each copy's tree reassociate.)"""
    plans = [p for p in module_chain_plans(module) if p.better and p.best is not None]
    gone = {(p.tree.kernel, n) for p in plans for n in (*p.tree.nodes, *p.tree.fills)}
    work = sum(p.best.cost.flops for p in plans)  # type: ignore[union-attr]
    for g in module_graphs(module):
        nodes = node_ops(g)
        names = [(g.kernel_name, n.sym_name.data) for n in nodes]
        free = {d for d, o in duplicates(nodes, layouts=True).items() if names[o] not in gone}
        work += sum(_flops(node_counts(n)) for i, n in enumerate(nodes)
                    if names[i] not in gone and i not in free)
    return work


def _helpful(applied: Applied, plans: Sequence[ChainPlan]) -> set[str]:
    """The splits (by the node they split) that built a node of a tree with a cheaper order."""
    in_trees = {n for p in plans for n in (*p.tree.nodes, *p.tree.fills)}
    return {key for key, built in applied.built.items() if built & in_trees}


def _flops(c: NodeCounts) -> int:
    return c.flops_matrix + c.flops_vector_literal


def _rewrite_record(g: GraphOp, kind: str, new: NodeOp, before: int, after: int) -> Rewrite:
    """The record of a rewrite that built `new`: its main statement as the report says it."""
    text = NodeText(g)
    _, _, loc = text.describe(new)
    main = text.statements(new)[-1]  # without the folded init before it
    return Rewrite(kind, g.kernel_name, loc or "", print_assign(text.kernel, replace(main, loc=None)),
                   before, after)


def _one_source_op_nodes(nodes: Sequence[NodeOp]) -> bool:
    ids = set().union(*(_source_ops(n) for n in nodes))
    return len(ids) == 1 and None not in ids


def _verify_rewritten(graph: GraphOp, nodes: set[str], tensors: set[str]) -> None:
    """Verify a graph of the catalogue's copy: the ops the rewrites built (`nodes`, `tensors`: their
    names), each as a whole, and the graph's own checks over all its ops (declarations, tensor uses,
    use-def edges, every access in bounds). The copy's other ops are clones of the module's, which
    were verified when built (lift-einsum and the passes after it verify what they build), and
    keep their properties and bodies: verifying them again op by op cost seconds on a large
    network (KernelBench's DenseNet201)."""
    for o in graph.body.block.ops:
        if (isinstance(o, NodeOp) and o.sym_name.data in nodes) or \
                (isinstance(o, TensorOp) and o.sym_name.data in tensors):
            o.verify()
    graph.verify_()


def catalogue_plans(module: ModuleOp, within_source_ops: bool = False) -> list[ChainPlan]:
    """The plans `catalogue_module` applies (one rewrite each), without building the copy: a caller
    can tell whether two selections rewrite the same trees."""
    plans = [p for p in module_chain_plans(module) if p.better]
    if within_source_ops:
        origins = {g.kernel_name: {n.sym_name.data: _source_ops(n) for n in node_ops(g)}
                   for g in module_graphs(module)}
        plans = [p for p in plans if _one_source_op(origins.get(p.tree.kernel, {}), p)]
    if not plans:
        return []
    graphs_here = {g.kernel_name for g in module.body.block.ops if isinstance(g, GraphOp)}
    lifted = [p for p in plans if p.tree.kernel in graphs_here]
    if len(lifted) != len(plans):
        missing = sorted({p.tree.kernel for p in plans} - graphs_here)
        raise SolarError("roofline: the catalogue of rewrites (--algorithms default) rewrites einsum "
                         f"graphs; kernel(s) {', '.join(missing)} are not lifted: run lift-einsum first, or "
                         "price the program as written with --algorithms classical")
    return lifted


def _source_ops(n: NodeOp) -> set[int | None]:
    """The source-op instances of the node's statements (its folded init's, its main statement's)."""
    attrs = (n.init_origin, n.origin) if n.init is not None else (n.origin,)
    return {a.instance.data if a is not None else None for a in attrs}


def _one_source_op(origins: dict[str, set[int | None]], plan: ChainPlan) -> bool:
    ids = set().union(*(origins.get(n, {None}) for n in (*plan.tree.nodes, *plan.tree.fills)))
    return len(ids) == 1 and None not in ids


def deduplicated(graphs: Sequence[GraphCosts]) -> list[Rewrite]:
    """The nodes the default model's costs price below their work as written (`distinct.py`)."""
    out = []
    for g in graphs:
        for o in g.ops:
            if o.algorithm is not None:
                what = (o.source or o.name) if names_op(o.algorithm) else o.name
                out.append(Rewrite(o.algorithm, g.kernel, o.loc or "", what, 0, o.flops))
    return out
