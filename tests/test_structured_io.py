"""The structured interface the cache-aware analyses read (`analysis/structured.py`: `linear_form`,
`access_map`, `domain_groups`) and the contraction view built on einsum nodes (`io_bounds.recognise`):
hand-derived figures on conv2d and matmul, and a rewrite of a node's bound changing the view."""

from __future__ import annotations

from pathlib import Path

import pytest
from xdsl.dialects.builtin import AffineMapAttr
from xdsl.ir.affine import AffineExpr, AffineMap

from solar_compiler.analysis import io_bounds as io
from solar_compiler.analysis import structured as st
from solar_compiler.analysis.manager import invalidate_op_analyses
from solar_compiler.dialects.graph_convert import lift_kernel
from solar_compiler.loopir.ast import typecheck
from solar_compiler.text.parser import parse_kernel

ROOT = Path(__file__).resolve().parent.parent
d0, d1, d2 = (AffineExpr.dimension(i) for i in range(3))


def test_linear_form_reads_coefficients():
    assert st.linear_form(d0 * 2 + d1 - 3) == ({0: 2, 1: 1}, -3)
    assert st.linear_form((d0 + d1) * 3 + d2 * 0) == ({0: 3, 1: 3}, 0)
    assert st.linear_form(d0 - d0 + 5) == ({}, 5)          # cancelled terms are dropped
    assert st.linear_form(d0 % 4) is None and st.linear_form(d1 // 2 + d0) is None
    assert st.linear_form(AffineExpr.symbol(0) + d0) is None  # a loaded position


def _conv():
    k = parse_kernel((ROOT / "examples/loop/conv2d.loop").read_text(), "conv2d.loop")
    g = lift_kernel(k)
    return g, next(n for n in g.nodes() if n.reduce.data == "add")


def test_access_maps_of_conv2d():
    _, tap = _conv()
    acc = {(a.tensor, a.write): a for a in st.accesses(tap)}
    count = {t: st.access_map(tap, a).range().count_val().to_python() for (t, w), a in acc.items() if not w}
    # the guard (padding) keeps every input pixel in use; W and Y are read whole
    assert count == {"X": 2 * 3 * 7 * 7, "W": 4 * 3 * 3 * 3}
    out = st.access_map(tap, acc[("Y", True)])
    assert out.range().count_val().to_python() == 2 * 4 * 4 * 4
    # the relation's domain is the guarded iteration domain: 10 valid (p, r) of 12, same for (q, s)
    assert out.domain().count_val().to_python() == st.points(tap) == 2 * 4 * 3 * 10 * 10


def test_access_map_refuses_an_indirect_access():
    k = parse_kernel("""kernel g(E: f32[8, 4] input, idx: i64[3] input, O: f32[3, 4] output):
    for i in range(3):
        for j in range(4):
            O[i, j] = E[idx[i], j]
""", "g.loop")
    (n,) = lift_kernel(k).nodes()
    (gather,) = [a for a in st.accesses(n) if a.indirect]
    with pytest.raises(ValueError, match="access of 'E' is indirect"):
        st.access_map(n, gather)


def test_domain_groups_split_uncoupled_dims():
    _, tap = _conv()  # loops n, o, p, q, c, r, s: the guards couple p with r and q with s
    assert [g for g, _ in st.domain_groups(tap)] == [(0,), (1,), (2, 5), (3, 6), (4,)]
    assert [st.set_points(g, cons) for g, cons in st.domain_groups(tap)] == [2, 4, 10, 10, 3]


MM = """kernel mm(A: f32[8, 6] input, B: f32[6, 4] weight, C: f32[8, 4] output):
    for i in range(8):
        for j in range(4):
            C[i, j] = 0.0
            for k in range(6):
                C[i, j] += A[i, k] * B[k, j]
"""


def test_recognise_reads_the_node_of_a_rewritten_graph():
    g = lift_kernel(typecheck(parse_kernel(MM, "mm.loop")))
    (c,) = io.view(g, precision="fp32").contractions.values()
    assert (c.work, c.k_min, c.extents, c.init_folded) == (8 * 4 * 6, 6, {"i": 8, "j": 4, "k": 6}, True)
    assert [str(r) for r in c.a.map.results] == ["d0", "d2"] and c.c.map.results == (d0, d1)
    node = g.nodes()[0]
    ubs = node.upper_bounds.data  # k < 3: half the reduction
    node.upper_bounds = AffineMapAttr(AffineMap(ubs.num_dims, ubs.num_symbols, (*ubs.results[:2],
                                                                               AffineExpr.constant(3))))
    invalidate_op_analyses(g)  # a rewrite outside a pass says so (a pass invalidates its module)
    (half,) = io.view(g, precision="fp32").contractions.values()
    assert (half.work, half.k_min, half.extents["k"]) == (8 * 4 * 3, 3, 3)


@pytest.mark.parametrize("after, sunk", [
    ("C[i, j] = C[i, j] * 2.0", True),       # an in-place elementwise update: C still reaches memory
    ("C[i, j] = C[j % 4, i % 4] * 2.0", False),  # reads other elements: C can be consumed on chip
    ("D[i, j] = C[i, j] * 2.0", False),      # another node consumes C
    ("C[i, j] += 1.0", False),               # accumulates into C again
])
def test_sunk_is_read_from_the_later_nodes(after: str, sunk: bool):
    text = MM.replace("C: f32[8, 4] output", "C: f32[8, 4] output, D: f32[8, 4] output") + f"""
    for i in range(8):
        for j in range(4):
            {after}
"""
    v = io.view(lift_kernel(parse_kernel(text, "mm.loop")), precision="fp32")
    (name,) = v.contractions
    assert v.sunk == {name: sunk}
