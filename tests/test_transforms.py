"""The rewrite patterns of `solar_compiler/transforms/` applied directly (PatternRewriteWalker, no
pass around them) to small hand-written programs: the exact IR they leave and the costs it has,
derived by hand (lit_tests/reorder-chains/chain3.loop and lit_tests/narrow-needed/causal_scores.loop
check the same programs through the passes)."""

from __future__ import annotations

from pathlib import Path

from xdsl.context import Context

from solar_compiler.analysis.chain_order import module_chain_plans
from solar_compiler.analysis.costs import module_costs
from solar_compiler.analysis.manager import invalidate_analyses
from solar_compiler.dialects.convert import kernels_to_module, op_to_kernel
from solar_compiler.dialects.einsum import GraphOp
from solar_compiler.dialects.loop import KernelOp
from solar_compiler.dialects.solar import AsWrittenOp
from solar_compiler.loopir.ast import statements
from solar_compiler.loopir.domain import iteration_count
from solar_compiler.passes.lift_einsum import LiftEinsumPass
from solar_compiler.text.parser import parse_kernels
from solar_compiler.transforms.kernels import module_kernels
from solar_compiler.transforms.narrow import narrow_module
from solar_compiler.transforms.reorder_chain import reorder_chains

LIT = Path(__file__).resolve().parent.parent / "lit_tests"


def module_of(path: Path, lifted: bool):
    m = kernels_to_module(parse_kernels(path.read_text(), str(path)))
    if lifted:
        LiftEinsumPass().apply(Context(), m)
    return m


def test_reorder_chains_pattern_rewrites_the_three_matrix_chain():
    """(A @ B) @ C with A 64x8, B 8x64, C 64x4: the pattern replaces T = A @ B and Y = T @ C by
    Y_r0 = B @ C (4x8) and Y = A @ Y_r0 (the root keeps its name). Contraction FLOPs: as written
    2*64*64*8 + 2*64*4*64 = 98,304; after 2*4*8*64 + 2*64*4*8 = 8,192."""
    m = module_of(LIT / "reorder-chains/chain3.loop", lifted=True)
    assert module_costs(m)[0].flops_matrix == 98_304
    plans = [p for p in module_chain_plans(m) if p.better]
    assert [p.tree.nodes for p in plans] == [("S1", "S3")]
    new = reorder_chains(m, plans)
    assert new == {id(plans[0]): ["S3_r0", "S3"]}
    g = next(o for o in m.body.block.ops if isinstance(o, GraphOp))
    g.verify()
    assert [n.sym_name.data for n in g.nodes()] == ["S3_r0", "S3"]  # the fills are the nodes' inits
    assert list(g.tensor_ops()) == ["A", "B", "C", "Y", "Y_r0"]   # T is erased, Y_r0 declared
    assert g.tensor_ops()["Y_r0"].shape.get_values() == (4, 8)
    invalidate_analyses(m)
    assert module_costs(m)[0].flops_matrix == 8_192


def test_narrow_needed_pattern_narrows_causal_scores_and_keeps_the_kernel_as_written():
    """Causal masked scores summed through exp (4 tokens, head size 2): the masked scores are never
    needed, so every statement of S keeps the 10 pairs j <= i of 16: 54 points (as written 84),
    matrix FLOPs 2 * 10 * 2 = 40 (as written 2 * 16 * 2 = 64). The pattern replaces the graph; with
    a snapshot the kernel as written moves there, and a second walk leaves that copy alone."""
    m = module_of(LIT / "narrow-needed/causal_scores.loop", lifted=True)
    assert module_costs(m)[0].flops_matrix == 64
    snap = AsWrittenOp()
    m.body.block.insert_op_before(snap, m.body.block.first_op)
    kernels = {k.name: k for k in module_kernels(m)}
    res = narrow_module(m, kernels, snapshot=snap)
    assert set(res) == {"scores"} and len(res["scores"].changed) == 4
    invalidate_analyses(m)
    g = next(o for o in m.body.block.ops if isinstance(o, GraphOp))
    g.verify()
    (k,) = module_kernels(m)
    assert [iteration_count(c) for c in statements(k)] == [10, 20, 10, 4, 10]
    assert module_costs(m)[0].flops_matrix == 40
    (kept,) = snap.body.block.ops
    assert isinstance(kept, KernelOp)
    assert sum(iteration_count(c) for c in statements(op_to_kernel(kept))) == 84
    again = narrow_module(m, {k.name: k})
    assert again["scores"].changed == () and len(snap.body.block.ops) == 1
