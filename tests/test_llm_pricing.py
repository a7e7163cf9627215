"""An LLM's loop nest is validated, not priced as written (docs/llm-frontend.md section 7): statements
whose origin carries the `llm` mark keep only their plain contractions' products; every other FLOP
of theirs is dropped, their traffic is not. Figures derived by hand."""

from __future__ import annotations

from dataclasses import replace

import pytest
from xdsl.context import Context
from xdsl.dialects.builtin import Builtin, StringAttr
from xdsl.parser import Parser
from xdsl.printer import Printer
from xdsl.utils.exceptions import VerifyException

from dialects.loop import Loop, OriginAttr
from solar_compiler.loopir.ast import Origin, statements
from solar_compiler.text.parser import parse_kernel
from solar_compiler.transforms.kernels import kernel_costs

RANK_SORT = """
kernel sort(x: f32[8, 16] input, values: f32[8, 16] output, order: i64[8, 16] output):
    local rank: i64[8, 16]
    for i in range(8):
        for j in range(16):
            rank[i, j] = 0
            for k in range(16):
                rank[i, j] += i64(x[i, k] < x[i, j] or (x[i, k] == x[i, j] and k < j))
            values[i, rank[i, j]] = x[i, j]
            order[i, rank[i, j]] = j
"""

# a matmul with a scaled epilogue: the products are the contraction's; the scale is vector work
MATMUL = """
kernel mm(a: f32[4, 8] input, b: f32[8, 2] input, out: f32[4, 2] output):
    local acc: f32[4, 2]
    for i in range(4):
        for j in range(2):
            acc[i, j] = 0.0
            for k in range(8):
                acc[i, j] += a[i, k] * b[k, j]
    for i in range(4):
        for j in range(2):
            out[i, j] = acc[i, j] * 3.0
"""

# a gather written as a one-hot product: a factor is computed (a comparison), so not a plain contraction
ONE_HOT = """
kernel emb(idx: i64[4] input, table: f32[16, 8] input, out: f32[4, 8] output):
    for i in range(4):
        for d in range(8):
            out[i, d] = 0.0
            for r in range(16):
                out[i, d] += f32(idx[i] == r) * table[r, d]
"""


# the same gather with the one-hot matrix materialised first: its product reads a value the LLM computed
ONE_HOT_LOCAL = """
kernel emb(idx: i64[4] input, table: f32[16, 8] input, out: f32[4, 8] output):
    local hot: f32[4, 16]
    for i in range(4):
        for r in range(16):
            hot[i, r] = f32(idx[i] == r)
    for i in range(4):
        for d in range(8):
            out[i, d] = 0.0
            for r in range(16):
                out[i, d] += hot[i, r] * table[r, d]
"""


# an MLP written by the LLM: relu's select keeps a computed branch, so h is no indicator
MLP = """
kernel mlp(x: f32[4, 8] input, w1: f32[8, 16] weight, w2: f32[16, 2] weight, out: f32[4, 2] output):
    local h: f32[4, 16]
    local r: f32[4, 16]
    for i in range(4):
        for j in range(16):
            h[i, j] = 0.0
            for k in range(8):
                h[i, j] += x[i, k] * w1[k, j]
    for i in range(4):
        for j in range(16):
            r[i, j] = h[i, j] if h[i, j] > 0.0 else 0.0
    for i in range(4):
        for j in range(2):
            out[i, j] = 0.0
            for k in range(16):
                out[i, j] += r[i, k] * w2[k, j]
"""

# a prefix sum written as a product by a triangle of ones built from indices: N^2 products for N adds
SCAN = """
kernel scan(x: f32[16] input, out: f32[16] output):
    local tri: f32[16, 16]
    for i in range(16):
        for k in range(16):
            tri[i, k] = 1.0 if k <= i else 0.0
    for i in range(16):
        out[i] = 0.0
        for k in range(16):
            out[i] += tri[i, k] * x[k]
"""


def _by_llm(text: str):
    k = parse_kernel(text)
    for c in statements(k):
        c.stmt.origin = Origin(0, "aten.op.default", None, None, by="llm")
    return k


def _plain(text: str):
    k = parse_kernel(text)
    for c in statements(k):
        c.stmt.origin = Origin(0, "aten.op.default")
    return k


@pytest.mark.parametrize("distinct", [False, True])
def test_an_llm_rank_sort_has_no_compute_term_and_its_traffic(distinct):
    written = kernel_costs(_plain(RANK_SORT), distinct=distinct)
    llm = kernel_costs(_by_llm(RANK_SORT), distinct=distinct)
    # as written: 8 x 16 x 16 points of 2 comparisons, and, or and the += (the cast is free), and
    # k < j once per (j, k) (vector_work.py): 10,240 + 256
    assert sum(o.flops for o in written.ops) == 10_496
    assert sum(o.flops for o in llm.ops) == 0
    assert sum(o.llm_flops for o in llm.ops) == 10_496
    assert all(o.unit == "memory" and o.flops_vector_literal == 0 for o in llm.ops)
    # the traffic is the nest's: x (512 B) in; the scatters to values and order, with no traced
    # sample, at their fewest elements over all ranks: one per row (8 x 4 B, 8 x 8 B)
    assert llm.compulsory_bytes == written.compulsory_bytes == 512 + 32 + 64
    assert [o.bytes for o in llm.ops] == [o.bytes for o in written.ops]


def test_an_llm_plain_contraction_keeps_its_products_only():
    g = kernel_costs(_by_llm(MATMUL))
    assert sum(o.flops_matrix for o in g.ops) == 2 * 4 * 2 * 8  # the products
    assert sum(o.flops_vector for o in g.ops) == 0              # the * 3.0 is the LLM's: not priced
    assert sum(o.llm_flops for o in g.ops) == 2 * 4 * 2 * 8 + 4 * 2
    assert {o.matrix_dtype for o in g.ops if o.flops_matrix} == {"f32"}


@pytest.mark.parametrize("text", [ONE_HOT, ONE_HOT_LOCAL])
def test_an_llm_one_hot_gather_is_not_a_contraction_of_its_semantics(text):
    plain = kernel_costs(_plain(text))
    llm = kernel_costs(_by_llm(text))
    assert sum(o.flops_matrix for o in plain.ops) == 2 * 4 * 8 * 16  # a template would be priced
    assert sum(o.flops for o in llm.ops) == 0
    assert llm.compulsory_bytes == plain.compulsory_bytes


def test_the_origin_attribute_carries_the_mark_through_its_text_form():
    attr = OriginAttr(Origin(3, "aten.sort.default", None, None, by="llm"))
    ctx = Context()
    ctx.load_dialect(Builtin)
    ctx.load_dialect(Loop)
    import io

    out = io.StringIO()
    Printer(stream=out).print_attribute(attr)
    assert out.getvalue() == '#loop.origin<3, "aten.sort.default", "", "", "llm">'
    back = Parser(ctx, out.getvalue()).parse_attribute()
    assert back == attr and back.origin.by == "llm"
    plain = OriginAttr(replace(attr.origin, by=None))
    out = io.StringIO()
    Printer(stream=out).print_attribute(plain)
    assert out.getvalue() == '#loop.origin<3, "aten.sort.default", "">'
    with pytest.raises(VerifyException, match="the author"):
        OriginAttr.new([*attr.parameters[:4], StringAttr("gpt")])


def test_the_reuse_theorem_skips_an_llm_nest_that_is_not_a_plain_contraction():
    """io_bounds' reuse bound assumes every point's products are needed: true of a plain contraction,
    whoever wrote it, but not of an LLM's one-hot product (a gather needs none)."""
    from solar_compiler.analysis.graphs import node_ops
    from solar_compiler.analysis.io_bounds import recognise
    from solar_compiler.dialects.graph_convert import lift_kernel

    def contraction_views(kernel):
        nodes = node_ops(lift_kernel(kernel))
        return [recognise(n, i) is not None for i, n in enumerate(nodes) if n.reduce.data == "add"]

    assert contraction_views(_plain(ONE_HOT_LOCAL)) == [True]
    assert contraction_views(_by_llm(ONE_HOT_LOCAL)) == [False]
    assert contraction_views(_by_llm(MATMUL)) == [True]


def test_an_llm_mlp_keeps_both_products_and_a_scan_by_a_triangle_none():
    mlp = kernel_costs(_by_llm(MLP))
    assert sum(o.flops_matrix for o in mlp.ops) == 2 * 4 * 8 * 16 + 2 * 4 * 16 * 2
    assert sum(o.flops_vector for o in mlp.ops) == 0
    scan = kernel_costs(_by_llm(SCAN))
    assert sum(o.flops for o in scan.ops) == 0
    assert sum(o.llm_flops for o in scan.ops) == 2 * 16 * 16 + 2 * 16 * 16  # products; compare, select
