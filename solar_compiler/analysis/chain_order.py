"""Association orders of a contraction tree (`chains.py`), priced exactly, and the cheapest one.

opt_einsum chooses the paths (`optimal` up to OPTIMAL_MAX tensor factors, `dp` up to DP_MAX, and
`greedy` always; nothing here searches): it prices a dense box, so each path it returns is then
emitted as an einsum graph (one node per step: a new local per intermediate, the tree's masks as
guards on every step whose variables they constrain) and priced by `costs.py` exactly as the
program will be after the rewrite, guards included. The steps are stated as product nests and
built by `dialects/einsum_build.py`, which gives the graph that lifting the same loop nests would
give (names, attributes, body ops), without writing a loop-IR kernel: analyses read and build
einsum ops, not the loop AST (issue 20). Orders with equal nests are one program, priced once.
Literals go to a contraction step, where `costs.py` counts them free (they fold into the MMA or
its epilogue); a second variant of each path folds its elementwise steps (no summed variable) into
their consumer. The cheapest priced order is `ChainPlan.best` (its graph is what `reorder-chains`
inserts); it replaces the tree only when it needs strictly fewer FLOPs than the tree as written
(`ChainPlan.better`). docs/reorder-chains.md proves that every emitted order computes the tree's
value.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from functools import cached_property
from typing import Any

from xdsl.dialects.builtin import ModuleOp
from xdsl.utils.exceptions import VerifyException

from solar_compiler.analysis.chains import Factor, Tree, program_trees, summed_alone
from solar_compiler.analysis.costs import GraphCosts, free_twins, module_costs, program_costs
from solar_compiler.analysis.distinct import duplicates
from solar_compiler.analysis.graphs import module_graphs, node_ops
from solar_compiler.analysis.manager import get_analysis
from solar_compiler.analysis.order_prices import shape_key, shared_price
from solar_compiler.dialects.einsum import GraphOp, NodeOp, TensorOp
from solar_compiler.dialects.einsum_build import IfBlock, ProductNest, product_graph
from solar_compiler.errors import SolarError
from solar_compiler.loopir.affine import AffCond, AffExpr
from solar_compiler.records import ChainsRecord

OPTIMAL_MAX = 8    # opt_einsum's exhaustive search: 0.1 s at 8 factors, 0.5 s at 9
DP_MAX = 32        # its dynamic programme beyond that, greedy beyond this


@dataclass(frozen=True)
class Step:
    """One node of an association order: the product (and sum) of its children, a step or the
    index of a tensor factor of the tree."""

    children: tuple[Step | int, ...]


@dataclass(frozen=True)
class Cost:
    flops: int
    flops_matrix: int
    flops_vector: int
    bytes: int
    nodes: int


@dataclass(frozen=True)
class Order:
    """One association order, emitted and priced."""

    optimizer: str                      # the opt_einsum optimiser whose path this is
    path: tuple[tuple[int, ...], ...]   # as an opt_einsum contraction path over the tensor factors
    words: str                          # `((q * w_uk) * c_kv)`
    new_tensors: tuple[str, ...]        # the new locals' names
    cost: Cost
    kernel: str
    nests: Nests

    @cached_property
    def graph(self) -> GraphOp:
        """Its steps: the tree's leaves (inputs), new locals, its output (built when asked: only a
        plan's best order is ever inserted; the same nests verified when it was priced)."""
        return product_graph(self.kernel, self.nests.tensors, self.nests.nests)


@dataclass(frozen=True)
class ChainPlan:
    tree: Tree
    written: Cost
    best: Order | None
    note: str | None = None    # why no order was priced

    @property
    def better(self) -> bool:
        return self.best is not None and self.best.cost.flops < self.written.flops

    @property
    def ratio(self) -> float | None:
        return self.written.flops / self.best.cost.flops if self.best and self.best.cost.flops else None

    def row(self, applied: bool, nodes: Sequence[str] = ()) -> dict[str, Any]:
        """The report's record of this tree (`chains[]` in the JSON report)."""
        t, b = self.tree, self.best
        return {
            "kernel": t.kernel, "root": t.root, "output": t.output, "nodes": list(t.nodes),
            "locs": list(t.locs),
            "equation": t.equation(), "order_as_written": t.written,
            "flops_as_written": self.written.flops, "bytes_as_written": self.written.bytes,
            "order_best": b.words if b else None, "path_best": [list(s) for s in b.path] if b else None,
            "optimizer": b.optimizer if b else None,
            "flops_best": b.cost.flops if b else None, "bytes_best": b.cost.bytes if b else None,
            "ratio": self.ratio, "better": self.better, "applied": applied, "nodes_best": list(nodes),
            "note": self.note,
        }


# ---- planning -----------------------------------------------------------------------------------------
def listed(p: ChainPlan) -> bool:
    """Whether the report lists a tree: it sums something (a contraction), or it improves."""
    return p.tree.sums > 0 or p.better


def worth_pricing(t: Tree) -> bool:
    """A tree of one node with at most two tensor factors has no other order, unless it sums over
    a variable only one factor reads (`summed_alone`)."""
    return len(t.nodes) > 1 or len(t.tensor_factors) > 2 or summed_alone(t.factors, t.out_index)


def plan_program(graph: GraphOp, costs: GraphCosts) -> list[ChainPlan]:
    """A plan for every tree of the graph that has more than one order (`costs`: the graph's). A
    node identical to an earlier one costs no arithmetic as written (`_without_duplicates`), unless
    that earlier one belongs to a tree a cheaper order replaces: a product recomputed for each of
    two sums (`split_parts`) is then computed by the second tree, which is priced as such."""
    nodes = node_ops(graph)
    twins = duplicates(nodes, layouts=True)
    trees = [t for t in program_trees(graph, reorderable_only=True) if worth_pricing(t)]
    plans = _plans(graph, costs, nodes, twins, trees)
    names = [n.sym_name.data for n in nodes]
    gone = {n for p in plans if p.better for n in (*p.tree.nodes, *p.tree.fills)}
    kept = {d: o for d, o in twins.items() if names[o] not in gone}
    again = [i for i, p in enumerate(plans) if not p.better and
             any(names[d] in (*p.tree.nodes, *p.tree.fills) for d in set(twins) - set(kept))]
    if again:
        redone = _plans(graph, costs, nodes, kept, [plans[i].tree for i in again],
                        {t for p in plans for t in (p.best.new_tensors if p.best else ())})
        for i, p in zip(again, redone, strict=True):
            plans[i] = p
    return plans


def _plans(graph: GraphOp, costs: GraphCosts, nodes: Sequence[NodeOp], twins: dict[int, int],
           trees: Sequence[Tree], taken_too: Iterable[str] = ()) -> list[ChainPlan]:
    """The plans of `trees`, with the nodes of `twins` (duplicate -> original) costing no arithmetic
    as written; the new tensors' names avoid `taken_too` (an earlier round's)."""
    ops_now = list(costs.ops)
    if twins:
        free_twins(ops_now, twins)
    by_name = {o.name: o for o in ops_now}  # written and orders alike
    tensors = graph.tensor_ops()
    taken = set(tensors) | set(taken_too)
    plans = []
    for t in trees:
        ops = [by_name[n] for n in (*t.nodes, *t.fills)]
        written = Cost(sum(o.flops for o in ops), sum(o.flops_matrix for o in ops),
                       sum(o.flops_vector for o in ops), sum(o.bytes for o in ops), len(ops))
        try:
            best = best_order(t, tensors, taken)
        except SolarError as e:  # an order the loop IR cannot express: the tree stays as written, said so
            plans.append(ChainPlan(t, written, None, f"not priced: {' '.join(str(e).split())}"))
            continue
        if best is not None:
            taken |= set(best.new_tensors)
        plans.append(ChainPlan(t, written, best, None if best else "no order applies every mask"))
    return plans


def best_order(t: Tree, tensors: Mapping[str, TensorOp], taken: set[str]) -> Order | None:
    """The cheapest of the orders opt_einsum proposes, priced exactly (None: none applies). Each
    path comes plain and with its elementwise steps folded, and, where a factor has variables no other
    factor or the output has (a pooling window after a 1x1 convolution), also with those summed
    first, on the factor alone (numpy's einsum does the same; opt_einsum's paths never do it)."""
    out_vars = set().union(*(i.vars() for i in t.out_index)) if t.out_index else set()
    facs = t.tensor_factors
    own = [f.vars() - out_vars - set().union(*(g.vars() for j, g in enumerate(facs) if j != i))
           for i, f in enumerate(facs)]
    orders: dict[tuple, Order] = {}
    for drop in ([set()] * len(facs), own) if any(own) else ([set()] * len(facs),):
        leaves = [Step((i,)) if d else i for i, d in enumerate(drop)]
        for optimizer, path in candidate_paths(t, drop):
            root = step_tree(path, leaves)
            for variant in (root, fold_elementwise(root, t)):
                n = order_nests(t, variant, tensors, taken)
                if n is not None and n.key not in orders:  # the same program is priced once
                    orders[n.key] = priced(t, optimizer, n)
    if not orders:
        return None
    return min(orders.values(), key=lambda o: (o.cost.flops, o.cost.bytes, o.cost.nodes))


def candidate_paths(t: Tree, drop: Sequence[set[str]]) -> list[tuple[str, tuple[tuple[int, ...], ...]]]:
    """opt_einsum's paths over the tensor factors, without the variables `drop` sums first."""
    import opt_einsum

    ranges = t.range_of()
    letter = {v: opt_einsum.get_symbol(i) for i, v in enumerate(t.vars)}
    idx = [f.vars() - d for f, d in zip(t.tensor_factors, drop, strict=True)]
    terms = ["".join(letter[v] for v in t.vars if v in vs) for vs in idx]
    out_vars = set().union(*(i.vars() for i in t.out_index)) if t.out_index else set()
    out = "".join(letter[v] for v in t.vars if v in out_vars)
    shapes = [tuple(ranges[v][1] - ranges[v][0] + 1 for v in t.vars if v in vs) for vs in idx]
    n = len(terms)
    main = "optimal" if n <= OPTIMAL_MAX else "dp" if n <= DP_MAX else "greedy"
    out_paths: list[tuple[str, tuple[tuple[int, ...], ...]]] = []
    for opt in dict.fromkeys((main, "greedy")):
        path, _ = opt_einsum.contract_path(f"{','.join(terms)}->{out}", *shapes, shapes=True, optimize=opt)
        key = tuple(tuple(s) for s in path)
        if all(key != k for _, k in out_paths):
            out_paths.append((opt, key))
    return out_paths


def step_tree(path: Sequence[Sequence[int]], leaves: Sequence[Step | int] | int) -> Step:
    """The order an opt_einsum path describes (positions in a list that each step shrinks), over
    `leaves` (the tensor factors' indices, or steps summing a factor alone; an int n: range(n))."""
    items: list[Step | int] = list(range(leaves)) if isinstance(leaves, int) else list(leaves)
    for s in path:
        picked = tuple(items[i] for i in sorted(s))
        items = [x for i, x in enumerate(items) if i not in s] + [Step(picked)]
    if len(items) != 1:
        raise ValueError(f"opt_einsum path {path} leaves {len(items)} operands")
    root = items[0]
    return root if isinstance(root, Step) else Step((root,))


def fold_elementwise(root: Step, t: Tree) -> Step:
    """`root` with every inner step that sums no variable folded into the step that consumes it."""
    out_vars = set().union(*(i.vars() for i in t.out_index)) if t.out_index else set()
    facs = t.tensor_factors

    def letters(x: Step | int) -> set[str]:
        return facs[x].vars() if isinstance(x, int) else set().union(*(letters(c) for c in x.children))

    def go(x: Step | int, outside: set[str], top: bool) -> list[Step | int]:
        if isinstance(x, int):
            return [x]
        kids: list[Step | int] = []
        own: set[str] = set()
        for i, c in enumerate(x.children):
            rest = outside | set().union(*(letters(d) for j, d in enumerate(x.children) if j != i))
            kids += go(c, rest, False)
            own |= letters(c) if isinstance(c, int) else letters(c) & rest  # this step's loops
        node = Step(tuple(kids))
        return [node] if top or own - outside else list(node.children)

    return go(root, out_vars, True)[0]  # type: ignore[return-value]


# ---- emitting an order as einsum nodes -----------------------------------------------------------------
def emit(t: Tree, root: Step, optimizer: str, tensors: Mapping[str, TensorOp], taken: set[str]) \
        -> Order | None:
    """The nodes of an order and their exact costs (None when a mask constrains variables that
    no single step holds together: that order cannot apply it). `tensors`: the graph's declarations."""
    nests = order_nests(t, root, tensors, taken)
    return None if nests is None else priced(t, optimizer, nests)


@dataclass(frozen=True)
class Nests:
    """An order stated as product nests (`dialects/einsum_build.py`), before it is built and priced;
    equal nests are the same program (`best_order` prices each once)."""

    words: str
    path: tuple[tuple[int, ...], ...]
    tensors: tuple[tuple[str, tuple[int, ...], str, str], ...]   # leaves, new locals, the output
    new_tensors: tuple[str, ...]
    nests: tuple[ProductNest, ...]

    @property
    def key(self) -> tuple:
        return self.tensors, self.nests


def order_nests(t: Tree, root: Step, tensors: Mapping[str, TensorOp], taken: set[str]) -> Nests | None:
    """An order's steps as product nests, one per step in post-order: a new local per inner step,
    the masks each step holds as its guards (None when some mask no step holds)."""
    ranges = t.range_of()
    facs = t.tensor_factors
    consts = [f for f in t.factors if f.tensor is None]
    out_vars = set().union(*(i.vars() for i in t.out_index)) if t.out_index else set()
    order = {v: i for i, v in enumerate(t.vars)}
    steps: list[Step] = []

    def post(x: Step | int) -> None:
        if isinstance(x, Step):
            for c in x.children:
                post(c)
            steps.append(x)

    post(root)
    letters: dict[int, set[str]] = {}   # the variables of a step's own loops
    under: dict[int, set[int]] = {}
    result: dict[int, list[str]] = {}   # those it keeps (its output's dimensions)
    for s in steps:
        under[id(s)] = set().union(*({c} if isinstance(c, int) else under[id(c)] for c in s.children))
        letters[id(s)] = set().union(*(facs[c].vars() if isinstance(c, int) else set(result[id(c)])
                                       for c in s.children))
        outside = out_vars | set().union(*(facs[j].vars() for j in range(len(facs)) if j not in under[id(s)]))
        result[id(s)] = sorted(letters[id(s)] & outside, key=order.__getitem__)
    if set(result[id(root)]) != out_vars:
        return None
    covered = {c for s in steps for c in t.constraints if c.vars() <= letters[id(s)]}
    if len(covered) != len(t.constraints):
        return None
    holder = _const_holder(steps, letters, result, facs, ranges) if consts else None
    names: dict[int, str] = {}
    decls: list[tuple[str, tuple[int, ...], str, str]] = []
    nests: list[ProductNest] = []
    used = set(taken)
    texts: dict[int, str] = {}
    for s in steps:
        is_root = s is root
        if not is_root:
            name = _fresh(f"{t.output}_r", used)
            names[id(s)] = name
            decls.append((name, tuple(ranges[v][1] - ranges[v][0] + 1 for v in result[id(s)]), t.dtype,
                          "local"))
        product: list[Factor] = []
        parts: list[str] = []
        for c in s.children:
            if isinstance(c, int):
                f = facs[c]
                product.append(f)
                parts.append(("1 / " if f.divide else "") + str(f.tensor))
            else:
                idx = tuple(AffExpr.var(v) - ranges[v][0] for v in result[id(c)])
                product.append(Factor(names[id(c)], idx))
                parts.append(texts[id(c)])
        if s is holder:
            for f in consts:
                product.append(f)
                parts.append(("1 / " if f.divide else "") + f"{f.value:g}")
        texts[id(s)] = "(" + " * ".join(parts) + ")" if len(parts) > 1 else f"sum({parts[0]})"
        par = result[id(s)]
        summed = [v for v in t.vars if v in letters[id(s)] and v not in par]
        cons = [c for c in t.constraints if c.vars() <= letters[id(s)]]
        if is_root:
            nests.append(_root_nest(t, tuple(product), par, summed, cons, ranges))
        else:
            target = (names[id(s)], tuple(AffExpr.var(v) - ranges[v][0] for v in par))
            nests.append(_nest(target, tuple(product), par, summed, cons,
                               [c for c in cons if c.vars() <= set(par)], ranges, t.loc,
                               "none" if not summed else "folded"))
    out = tensors[t.output]
    all_decls = (*_leaf_decls(t, tensors), *decls, (t.output, out.dims, out.dtype, "output"))
    return Nests(texts[id(root)], _path_of(steps, len(facs)), all_decls, tuple(d[0] for d in decls),
                 tuple(nests))


def priced(t: Tree, optimizer: str, n: Nests) -> Order:
    """The order's graph (verified: an index out of its tensor is refused, as the lift refuses it)
    and its exact costs, computed once per shape of order (`order_prices.py`: the layers of a model
    share them)."""
    def price() -> Cost | str:
        graph = product_graph(t.kernel, n.tensors, n.nests)
        try:
            graph.verify()
        except VerifyException as e:
            return str(e).splitlines()[0]
        g = _graph_costs(graph)
        return Cost(sum(o.flops for o in g.ops), g.flops_matrix, g.flops_vector, sum(o.bytes for o in g.ops),
                    len(g.ops))

    cost = shared_price(shape_key(n.tensors, n.nests), price)
    if isinstance(cost, str):
        raise SolarError(f"{t.loc or f'kernel {t.kernel!r}'}: cannot lift to an einsum node: {cost}")
    return Order(optimizer, n.path, n.words, n.new_tensors, cost, t.kernel, n)


def _graph_costs(graph: GraphOp) -> GraphCosts:
    """The one place an order's graph is priced (the analyses' cost entry point): a step identical to
    an earlier one (the same product of the same tensors, loops renamed) costs no arithmetic, as the
    default model prices the program after the rewrite (`distinct.duplicates`): `x @ x @ x @ x`
    associated as `(x x)(x x)` is two products, as repeated squaring computes it."""
    return _without_duplicates(program_costs(graph), node_ops(graph))


def _without_duplicates(g: GraphCosts, nodes: Sequence[NodeOp]) -> GraphCosts:
    """`g` with no arithmetic for a node that duplicates an earlier one (`distinct.duplicates`)."""
    twins = duplicates(nodes, layouts=True)
    if not twins:
        return g
    ops = list(g.ops)
    free_twins(ops, twins)
    return replace(g, ops=ops)


def _const_holder(steps: list[Step], letters: dict[int, set[str]], result: dict[int, list[str]],
                  facs: Sequence[Factor], ranges: dict[str, tuple[int, int]]) -> Step:
    """Where the literals go: a contraction step (two children with a summed variable: `costs.py`
    counts its other factors free), the root first; else the step with the smallest domain."""
    def contraction(s: Step) -> bool:
        summed = letters[id(s)] - set(result[id(s)])
        kids = [facs[c].vars() if isinstance(c, int) else letters[id(c)] for c in s.children]
        return sum(bool(k & summed) for k in kids) >= 2

    for s in reversed(steps):
        if contraction(s):
            return s
    return min(steps, key=lambda s: math.prod(ranges[v][1] - ranges[v][0] + 1 for v in letters[id(s)]))


def _loops(vs: Sequence[str], ranges: dict[str, tuple[int, int]]) -> tuple[tuple[str, int, int], ...]:
    return tuple((v, ranges[v][0], ranges[v][1] + 1) for v in vs)


def _ifs(*blocks: tuple[int, Sequence[AffCond]]) -> tuple[IfBlock, ...]:
    return tuple(IfBlock(d, tuple(cs)) for d, cs in blocks if cs)


def _nest(target: tuple[str, tuple[AffExpr, ...]], product: tuple[Factor, ...], par: Sequence[str],
          summed: Sequence[str], cons: Sequence[AffCond], init_conds: Sequence[AffCond],
          ranges: dict[str, tuple[int, int]], loc: str | None, init: str, origin: Any = None,
          init_origin: Any = None) -> ProductNest:
    """One step's loop nest: `=` (no init), `+=` (init elsewhere) or a zero init then `+=`, the init
    under `init_conds` (inside the parallel loops) and the reduction under the rest of `cons`
    (inside the summed loops too)."""
    name, idx = target
    p, n = len(par), len(par) + len(summed)
    if init == "none":
        return ProductNest(name, idx, "=", product, _loops(par, ranges), _ifs((p, cons)), None, loc, origin)
    loops = _loops([*par, *summed], ranges)
    if init == "separate":
        return ProductNest(name, idx, "+=", product, loops, _ifs((n, cons)), None, loc, origin)
    rest = [c for c in cons if c not in init_conds]
    return ProductNest(name, idx, "+=", product, loops, _ifs((p, init_conds), (n, rest)),
                       (p, 1 if init_conds else 0), loc, origin, init_origin)


def _root_nest(t: Tree, product: tuple[Factor, ...], par: Sequence[str], summed: Sequence[str],
               cons: Sequence[AffCond], ranges: dict[str, tuple[int, int]]) -> ProductNest:
    """The root step writes the tree's output where and how the root node did: `+=` onto a separate
    init, else its own zero init under the root's own conditions (so elements a mask of an inner
    node removes still read 0), or `=` when nothing else constrains it and nothing is summed."""
    target = (t.output, t.out_index)
    if t.init == "separate":
        return _nest(target, product, par, summed, cons, (), ranges, t.loc, "separate", t.origin)
    own = list(t.init_conds)
    if t.init == "none" and not summed and all(c in own for c in cons):
        return _nest(target, product, par, summed, own, own, ranges, t.loc, "none", t.origin)
    return _nest(target, product, par, summed, [*own, *(c for c in cons if c not in own)], own, ranges,
                 t.loc, "folded", t.origin, t.init_origin or t.origin)


def _leaf_decls(t: Tree, tensors: Mapping[str, TensorOp]) -> list[tuple[str, tuple[int, ...], str, str]]:
    """The tree's leaves as inputs of the order's graph (weights stay weights)."""
    out = []
    for n in dict.fromkeys(str(f.tensor) for f in t.tensor_factors):
        d = tensors[n]
        role = d.role.data if d.role.data in ("input", "weight") else "input"
        out.append((n, d.dims, d.dtype, role))
    return out


def _fresh(base: str, used: set[str]) -> str:
    k = 0
    while f"{base}{k}" in used:
        k += 1
    used.add(f"{base}{k}")
    return f"{base}{k}"


def _path_of(steps: Sequence[Step], n: int) -> tuple[tuple[int, ...], ...]:
    """The opt_einsum path (positions in the shrinking operand list) of an order."""
    items: list[Step | int] = list(range(n))
    out = []
    for s in steps:
        pos = tuple(sorted(next(i for i, x in enumerate(items) if x is c or (isinstance(c, int) and x == c))
                           for c in s.children))
        out.append(pos)
        items = [x for i, x in enumerate(items) if i not in pos] + [s]
    return tuple(out)


def chains_section(module: ModuleOp) -> dict[str, Any]:
    """The report's `chains`: what `reorder-chains` recorded when it ran (`applied`), else the trees
    of the module as it is, priced but not applied."""
    rec = ChainsRecord.load(module)
    if rec is not None:
        return {"applied": True, "trees": [t.to_json() for t in rec.trees], "validation": rec.validation}
    return {"applied": False, "trees": [p.row(False) for p in module_chain_plans(module) if listed(p)],
            "validation": None}


def module_chain_plans(module: ModuleOp) -> list[ChainPlan]:
    """The plans of every program of a module (cached until the module changes, `manager.py`)."""
    return get_analysis(module, _module_chain_plans)


def _module_chain_plans(module: ModuleOp) -> list[ChainPlan]:
    out: list[ChainPlan] = []
    for graph, g in zip(module_graphs(module), module_costs(module), strict=True):
        out += plan_program(graph, g)
    return out
