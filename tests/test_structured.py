"""The structured-op interface of `einsum.node` (`analysis/structured.py`, `dialects/einsum.py`):
its counts equal what `analysis/costs.py` computes on every node of every bundled example, a node
rewritten by an xDSL `RewritePattern` changes them by the hand-derived amount, and the verifier
checks `iterator_types` against the accesses."""

from __future__ import annotations

import os
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import pytest
from translated import UNSUPPORTED_TORCH_EXAMPLES, driver_options, ensure_translated, using_cache
from xdsl.context import Context
from xdsl.dialects.builtin import AffineMapAttr, ArrayAttr, ModuleOp, StringAttr
from xdsl.ir.affine import AffineExpr, AffineMap
from xdsl.pattern_rewriter import (
    PatternRewriter,
    PatternRewriteWalker,
    RewritePattern,
    op_type_rewrite_pattern,
)
from xdsl.utils.exceptions import VerifyException

from passes.lift_einsum import LiftEinsumPass
from passes.roofline import RooflinePass
from solar_compiler.analysis import structured as st
from solar_compiler.analysis.costs import GraphCosts, program_costs
from solar_compiler.analysis.manager import invalidate_analyses
from solar_compiler.analysis.summary import module_report
from solar_compiler.dialects.convert import kernels_to_module
from solar_compiler.dialects.einsum import GraphOp, NodeOp
from solar_compiler.dialects.graph_convert import graph_to_kernel, lift_kernel
from solar_compiler.loopir.ast import TRANSCENDENTAL, Binary, Kernel, SExpr, Unary
from solar_compiler.text.parser import parse_kernels

ROOT = Path(__file__).resolve().parent.parent
LOOPS = sorted([*ROOT.glob("examples/loop/*.loop"), *ROOT.glob("examples/loop/bounds/*.loop"),
                ROOT / "lit_tests/loop/everything.loop"])
TORCH = sorted(str(p.relative_to(ROOT)) for p in (*(ROOT / "examples/torch").glob("*.py"),
                                                   *(ROOT / "examples/models").glob("*.py"))
               if p.name not in UNSUPPORTED_TORCH_EXAMPLES)
JAX = sorted(p.name for p in (ROOT / "examples/jax").glob("*.py"))


def _jax_kernels(name: str) -> list[Kernel]:
    """The kernels of a JAX example, unvalidated (the figures compared here do not depend on it)."""
    from solar_compiler.frontends import FrontendOptions
    from solar_compiler.frontends.jax.job import translate_job

    old = os.getcwd()
    os.chdir(ROOT)  # the examples' paths (in every loc) are relative to the repository root
    try:
        return translate_job(f"examples/jax/{name}", FrontendOptions(validate=False)).kernels
    finally:
        os.chdir(old)


@pytest.fixture(scope="module")
def torch_kernels(translation_cache) -> dict[str, list[Kernel] | str]:
    """Per torch example, its kernels or its translation's error, read from the session's shared
    translation cache (`translated.py`): the suite translates (and validates) every example once, for
    test_torch_frontend, test_reorder_chains and the others, and the figures compared here are those
    of the kernels the driver prices."""
    from solar_compiler.frontends.cache import cache_load
    from solar_compiler.frontends.torch import frontend as fe

    errors = ensure_translated(translation_cache, TORCH)
    out: dict[str, list[Kernel] | str] = {}
    with using_cache(translation_cache):
        for name in TORCH:
            hit = None if errors[name] else cache_load(fe.cache_key(name, driver_options()))
            out[name] = errors[name] or (hit.kernels if hit is not None else f"{name}: not in the cache")
    return out


def _transcendentals(e: SExpr) -> int:
    """Transcendental ops of one evaluation of a loop-AST expression (a shared subexpression once):
    the statement-side count the node's literal count is checked against."""
    seen: set[int] = set()
    stack, n = [e], 0
    while stack:
        x = stack.pop()
        if id(x) in seen:
            continue
        seen.add(id(x))
        n += (isinstance(x, Unary) and x.fn in TRANSCENDENTAL) or (isinstance(x, Binary) and x.fn == "pow")
        stack.extend(x.children)
    return n


def check_graph(graph: GraphOp, costs: GraphCosts) -> int:
    """Every node's interface counts equal its OpCost; the number of nodes checked."""
    kernel, groups = graph_to_kernel(graph)
    nodes = graph.nodes()
    assert [n.sym_name.data for n in nodes] == [o.name for o in costs.ops]
    for n, o, g in zip(nodes, costs.ops, groups, strict=True):
        c = st.node_counts(n)
        assert (c.points, c.unit, c.flops_matrix, c.flops_vector_literal, c.sequential, c.indirect) == \
            (o.iterations, o.unit, o.flops_matrix, o.vector_literal, o.sequential, o.indirect), o.name
        s = g.main.stmt
        n_tr = _transcendentals(s.value) + sum(_transcendentals(i) for i in s.dynamic_indices)
        assert c.flops_transcendental_literal == n_tr * o.iterations, o.name
        if o.unit == "matrix":
            assert c.flops_transcendental_literal == o.flops_transcendental, o.name
        reads = {(a.tensor, a.indirect) for a in st.accesses(n) if not a.write}
        writes = {(a.tensor, a.indirect) for a in st.accesses(n) if a.write}
        assert {a.tensor for a in o.reads} == {t for t, _ in reads}, o.name
        assert {a.tensor for a in o.writes} == {t for t, _ in writes}, o.name
        assert all(a.indirect == any(i for t, i in reads if t == a.tensor) for a in o.reads), o.name
        if not o.indirect or not any(a.traced for a in (*o.reads, *o.writes)):
            reads, writes = st.node_bytes(n)
            assert reads == {a.tensor: a.bytes for a in o.reads}, o.name
            assert writes == {a.tensor: a.bytes for a in o.writes}, o.name
        assert st.domain(n).count_val().to_python() == c.points if c.points < 10**6 else True
        assert all(k.data in ("sequential", d) for k, d in
                   zip(n.iterator_types.data, n.derived_iterator_types(), strict=True)), o.name
    return len(nodes)


def _graphs(kernels: list[Kernel]) -> list[GraphOp]:
    return [lift_kernel(k) for k in kernels]


@pytest.mark.parametrize("path", LOOPS, ids=lambda p: p.stem)
def test_counts_equal_costs_loop_examples(path):
    checked = 0
    for k in parse_kernels(path.read_text(), path.name):
        for g in _graphs([k]):
            checked += check_graph(g, program_costs(g))
    assert checked


@pytest.mark.parametrize("name", TORCH)
def test_counts_equal_costs_torch_examples(name, torch_kernels):
    kernels = torch_kernels[name]
    assert not isinstance(kernels, str), kernels
    checked = 0
    for g in _graphs(kernels):
        checked += check_graph(g, program_costs(g))
    assert checked


@pytest.mark.parametrize("name", JAX)
def test_counts_equal_costs_jax_examples(name):
    pytest.importorskip("jax")
    checked = 0
    for g in _graphs(_jax_kernels(name)):
        checked += check_graph(g, program_costs(g))
    assert checked


# ---- a rewrite through xDSL's pattern machinery -----------------------------------------------------
@dataclass(frozen=True)
class SetUpperBound(RewritePattern):
    """Sets the constant upper bound of loop `loop` of node `node` (idempotent: the walker stops)."""

    node: str
    loop: int
    bound: int

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: NodeOp, rewriter: PatternRewriter) -> None:
        ubs = op.upper_bounds.data
        if op.sym_name.data != self.node or ubs.results[self.loop] == AffineExpr.constant(self.bound):
            return
        results = list(ubs.results)
        results[self.loop] = AffineExpr.constant(self.bound)
        op.upper_bounds = AffineMapAttr(AffineMap(ubs.num_dims, ubs.num_symbols, tuple(results)))
        rewriter.notify_op_modified(op)


def _matmul_module() -> ModuleOp:
    path = ROOT / "examples/loop/matmul.loop"
    module = kernels_to_module(parse_kernels(path.read_text(), path.name))
    LiftEinsumPass().apply(Context(), module)
    return module


def _report(module: ModuleOp) -> dict:
    invalidate_analyses(module)
    RooflinePass(hw="H100_SXM").apply(Context(), module)
    r = module_report(module)
    assert r is not None
    return r


def _figures(r: dict) -> dict[str, int]:
    """FLOPs and bytes of every fidelity (unfused, fused, cache-aware) and of the node."""
    t, k, op = r["totals"], r["kernels_unfused"][0], r["ops"][0]
    return {"flops": t["flops"], "flops_matrix": t["flops_matrix"], "bytes_unfused": t["bytes_unfused"],
            "bytes_fused": t["bytes_fused"], "bytes_cache_aware": t["bytes_cache_aware"],
            "hw_bytes_cache_aware": r["bounds"]["H100_SXM"]["bytes_cache_aware"],
            "kernel_flops": k["flops_matrix"] + k["flops_vector"], "kernel_bytes": k["bytes"],
            "op_flops": op["flops"], "op_bytes": op["bytes"]}


def test_rewrite_pattern_halving_a_domain_changes_every_count():
    """matmul C[64, 16] = A[64, 32] @ B[32, 16] (f32), one node S1 over (i, j, k) with C's init
    folded in. Halving i's bound (64 -> 32) through a RewritePattern applied by PatternRewriteWalker:
    points 64*16*32 = 32768 -> 32*16*32 = 16384; matrix FLOPs 2 per point: 65536 -> 32768.
    Bytes, every fidelity: A 64*32*4 = 8192 -> 32*32*4 = 4096, B 32*16*4 = 2048 unchanged,
    C 64*16*4 = 4096 -> 32*16*4 = 2048: 14336 -> 8192."""
    module = _matmul_module()
    (node,) = [o for o in module.walk() if isinstance(o, NodeOp)]
    before = st.node_counts(node)
    assert (before.points, before.flops_matrix, before.unit) == (32768, 65536, "matrix")
    assert node.get_static_loop_ranges() == (64, 16, 32)
    assert _figures(_report(module)) == {
        "flops": 65536, "flops_matrix": 65536, "bytes_unfused": 14336, "bytes_fused": 14336,
        "bytes_cache_aware": 14336, "hw_bytes_cache_aware": 14336, "kernel_flops": 65536,
        "kernel_bytes": 14336, "op_flops": 65536, "op_bytes": 14336}

    PatternRewriteWalker(SetUpperBound("S1", 0, 32)).rewrite_module(module)
    module.verify()
    after = st.node_counts(node)  # the same op object: the domain cache is keyed on its attributes
    assert (after.points, after.flops_matrix) == (16384, 32768)
    assert after.per_point == before.per_point == Counter({"loop.binary:mul": 1})
    assert node.get_static_loop_ranges() == (32, 16, 32)
    assert st.domain(node).count_val().to_python() == 16384
    assert _figures(_report(module)) == {
        "flops": 32768, "flops_matrix": 32768, "bytes_unfused": 8192, "bytes_fused": 8192,
        "bytes_cache_aware": 8192, "hw_bytes_cache_aware": 8192, "kernel_flops": 32768,
        "kernel_bytes": 8192, "op_flops": 32768, "op_bytes": 8192}


def test_iterator_types_are_checked_against_the_accesses():
    """k indexes no dim of C: a `parallel` k is rejected; `sequential` (a scan's mark) is allowed."""
    module = _matmul_module()
    (node,) = [o for o in module.walk() if isinstance(o, NodeOp)]
    assert node.derived_iterator_types() == ("parallel", "parallel", "reduction")
    assert [a.data for a in node.get_iterator_types().data] == ["parallel", "parallel", "reduction"]
    assert [(a.tensor, a.write, a.indirect, a.kind) for a in st.accesses(node)] == [
        ("A", False, False, "input"), ("B", False, False, "input"), ("C", True, False, "output")]
    node.iterator_types = ArrayAttr([StringAttr(k) for k in ("parallel", "parallel", "parallel")])
    with pytest.raises(VerifyException, match="iterator_types: 'k' is parallel, but the accesses make it "
                                              "reduction"):
        node.verify()
    node.iterator_types = ArrayAttr([StringAttr(k) for k in ("parallel", "parallel", "sequential")])
    node.verify()
    assert st.node_counts(node).sequential


def test_module_graphs_are_the_same_before_and_after_the_lift() -> None:
    """`graphs.module_graphs` (what the analyses read) gives one node per statement group, in
    order, named after the group: the graph in place after `lift-einsum`, a kernel's lifted form
    before it, the same nodes either way."""
    from solar_compiler.analysis.graphs import module_graphs
    from solar_compiler.loopir.ast import typecheck
    from solar_compiler.loopir.grouping import group_statements

    text = (ROOT / "examples/loop/causal_attention.loop").read_text()
    for k in parse_kernels(text, "causal_attention.loop"):
        module = kernels_to_module([k])
        (before,) = module_graphs(module)
        assert before.parent is None  # read, not inserted
        LiftEinsumPass().apply(Context(), module)
        invalidate_analyses(module)
        (after,) = module_graphs(module)
        assert after.parent_op() is module
        names = [g.name for g in group_statements(typecheck(k))]
        assert [n.sym_name.data for n in before.nodes()] == names
        assert [n.sym_name.data for n in after.nodes()] == names
        assert [st.points(n) for n in before.nodes()] == [st.points(n) for n in after.nodes()]


# ---- indirect accesses: traced footprints, read order ----------------------------------------------
def _node_of(text: str, traced: tuple = (), at: int = -1) -> NodeOp:
    """The `at`-th node of the one-kernel program `text`, its statement carrying `traced`."""
    from solar_compiler.loopir.ast import statements

    (k,) = parse_kernels(text, "t.loop")
    statements(k)[at].stmt.traced = traced
    return lift_kernel(k).nodes()[at]


GATHER2 = """kernel g(ids: i64[16] input, E: f32[1000, 64] weight, P: f32[16, 64] weight,
         Y: f32[16, 64] output):
    for t in range(16):
        for d in range(64):
            Y[t, d] = P[t, d] * E[ids[t], d] + E[ids[t], d]
"""


def test_gathers_read_in_statement_order_and_counted_as_a_tree():
    """The reads come in the statement's order (P, then the gather of E, then its index ids), and
    the two gathers of E count twice, as the statement reads E twice."""
    node = _node_of(GATHER2)
    assert st.read_tensors(node) == ["P", "E", "ids"]
    assert (st.gather_count(node, "E"), st.gather_count(node, "P"), st.gather_count(node, "ids")) == (2, 0, 0)
    # fewest over all index values: one row of E (64 elements); the traced sample touched 7 rows
    assert st.tensor_elements(node, "E", False) == 64
    assert st.traced_elements(node, "E", False) is None  # no trace recorded
    from solar_compiler.loopir.ast import Traced

    node = _node_of(GATHER2, (Traced("E", False, 7 * 64, 16 * 64, 2),))
    assert st.traced_elements(node, "E", False) == 7 * 64
    assert (st.tensor_elements(node, "E", False, traced=True), st.tensor_elements(node, "E", False)) == \
        (7 * 64, 64)
    for stale in (Traced("E", False, 7 * 64, 8 * 64, 2), Traced("E", False, 7 * 64, 16 * 64, 1)):
        node = _node_of(GATHER2, (stale,))  # taken on another domain, or with another number of reads
        assert st.traced_elements(node, "E", False) is None
        assert st.tensor_elements(node, "E", False, traced=True) == 64


def test_scatter_traced_footprint_prices_its_write_and_its_accumulator():
    """examples/loop/scatter_add.loop: G[ids[t], d] += dY[t, d]; the trace of the write (7 of the 10
    rows) counts the accumulator read of G as well; without it, one row (64 elements) each way."""
    from solar_compiler.loopir.ast import Traced
    from solar_compiler.transforms.kernels import kernel_costs

    text = (ROOT / "examples/loop/scatter_add.loop").read_text()
    node = _node_of(text, (Traced("G", True, 7 * 64, 16 * 64, 1),))
    assert st.read_tensors(node) == ["dY", "ids", "G"]
    assert st.traced_elements(node, "G", True) == 7 * 64
    assert st.tensor_elements(node, "G", True, traced=True) == 7 * 64
    assert st.tensor_elements(node, "G", False, traced=True) == 7 * 64
    assert (st.tensor_elements(node, "G", True), st.tensor_elements(node, "G", False)) == (64, 64)
    (k,) = parse_kernels(text, "t.loop")
    from solar_compiler.loopir.ast import statements

    statements(k)[-1].stmt.traced = (Traced("G", True, 7 * 64, 16 * 64, 1),)
    o = kernel_costs(k).ops[-1]
    assert [(a.tensor, a.elements, a.bytes, a.indirect, a.traced) for a in o.reads] == [
        ("dY", 16 * 64, 16 * 64 * 4, False, False), ("ids", 16, 16 * 8, False, False),
        ("G", 7 * 64, 7 * 64 * 4, True, True)]
    assert [(a.tensor, a.elements, a.indirect, a.traced) for a in o.writes] == [("G", 7 * 64, True, True)]
    o = kernel_costs(k, "min").ops[-1]
    assert [(a.tensor, a.elements, a.traced) for a in o.writes] == [("G", 64, False)]


TRI = """kernel t(A: f32[8, 8] input, Y: f32[8, 8] output):
    for i in range(8):
        for j in range(8):
            if i >= j:
                Y[i, j] = A[i, j] + A[j, i]
"""


def test_footprints_of_a_triangle():
    """36 points (i >= j): each access of A reads off both loops (36 elements; counted as the points),
    their union is all 64 elements of A, and Y is written on the 36."""
    node = _node_of(TRI)
    assert st.points(node) == 36
    assert [st.image_count(node, a.map.results) for a in st.accesses(node)] == [36, 36, 36]
    assert st.image_count(node, st.accesses(node)[0].map.results[:1]) == 8  # the distinct i
    assert [(f.tensor, f.write, f.elements, f.indirect, f.traced) for f in st.footprints(node, True)] == [
        ("A", False, 64, False, False), ("Y", True, 36, False, False)]


def test_a_div_mod_image_is_counted_from_its_domain_when_injective():
    """A window partition (div/mod indices, SwinMLP's over 7x7 windows shifted by 4) that isl proves
    injective touches one element per point; a many-to-one div/mod image is counted as a range."""
    from xdsl.ir.affine import AffineExpr

    from solar_compiler.analysis.structured import Constraint, _image

    d0, d1, d2 = (AffineExpr.dimension(i) for i in range(3))
    extents = (4, 784, 64)
    cons = tuple(Constraint(t, frozenset({i}))
                 for i, e in enumerate(extents) for t in (f"d{i} >= 0", f"d{i} < {e}"))
    window = (25 * d0 + ((d1 % 28) + 4) // 7 + 5 * ((d1 // 28 + 4) // 7),
              ((d1 % 28) + 4) % 7 + 7 * ((d1 // 28 + 4) % 7) + 49 * (d2 // 32), d2 % 32)
    assert _image((0, 1, 2), cons, window) == 4 * 784 * 64
    assert _image((0, 1, 2), cons, (d1 // 4, d2 % 8)) == 196 * 8
