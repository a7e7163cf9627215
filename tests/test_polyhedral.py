"""islpy domains, factored counts and footprints against brute-force enumeration in Python."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from xdsl.utils.exceptions import VerifyException

from solar_compiler.dialects.graph_convert import kernel_to_graph
from solar_compiler.loopir.affine import AffCond, AffExpr
from solar_compiler.loopir.ast import (
    Assign,
    Const,
    For,
    If,
    Kernel,
    LoopIRError,
    StmtContext,
    TensorDecl,
    statements,
)
from solar_compiler.loopir.domain import access_map, check_bounds, domain, footprint, iteration_count
from solar_compiler.text.parser import parse_kernel

REPO = Path(__file__).resolve().parent.parent


# ---- brute force --------------------------------------------------------------------------------
def points(ctx: StmtContext) -> Iterator[dict[str, int]]:
    """Every iteration of the statement, by running its loops and guards as Python."""

    def go(depth: int, env: dict[str, int]) -> Iterator[dict[str, int]]:
        if depth == len(ctx.loops):
            if all(g.evaluate(env) for g in ctx.guards):
                yield dict(env)
            return
        f = ctx.loops[depth]
        for x in range(f.lb.evaluate(env), f.ub.evaluate(env), f.step):
            env[f.iv] = x
            yield from go(depth + 1, env)
        env.pop(f.iv, None)

    return go(0, {})


def brute_count(ctx: StmtContext) -> int:
    return sum(1 for _ in points(ctx))


def brute_footprint(ctx: StmtContext, indices: tuple[AffExpr, ...]) -> int:
    return len({tuple(e.evaluate(p) for e in indices) for p in points(ctx)})


# ---- random loop nests ---------------------------------------------------------------------------
IVS = ["a", "b", "c", "d"]


@st.composite
def outer_affine(draw, outer: list[str], lo: int, hi: int) -> AffExpr:
    e = AffExpr.lit(draw(st.integers(lo, hi)))
    for v in outer:
        e = e + AffExpr.var(v) * draw(st.integers(-1, 1))
    return e


@st.composite
def condition(draw, ivs: list[str]) -> AffCond:
    e = AffExpr.lit(draw(st.integers(-2, 6)))
    for v in ivs:
        e = e + AffExpr.var(v) * draw(st.integers(-1, 2))
    if draw(st.integers(0, 3)) == 0:  # quasi-affine: floor division or modulo of a sum of variables
        inner = AffExpr.var(draw(st.sampled_from(ivs))) + AffExpr.var(draw(st.sampled_from(ivs)))
        den = draw(st.integers(2, 3))
        e = e + (inner // den if draw(st.booleans()) else inner % den) * draw(st.sampled_from([-1, 1]))
    return AffCond(e, draw(st.sampled_from([">="] * 5 + ["=="])))


@st.composite
def nest(draw) -> StmtContext:
    depth = draw(st.integers(1, 4))
    ivs = IVS[:depth]
    loops = []
    for d, v in enumerate(ivs):
        lb = draw(outer_affine(ivs[:d], -2, 2))
        ub = draw(outer_affine(ivs[:d], 2, 7))
        loops.append(For(v, lb, ub, draw(st.sampled_from([1, 1, 1, 2, 3]))))
    guards = tuple(draw(st.lists(condition(ivs), max_size=2)))
    stmt = Assign("T", (AffExpr.lit(0),), "=", Const(0.0, "f32"))
    return StmtContext(stmt, tuple(loops), guards, 0)


@st.composite
def indices(draw, ivs: tuple[str, ...]) -> tuple[AffExpr, ...]:
    out = []
    for _ in range(draw(st.integers(1, 3))):
        e = AffExpr.lit(draw(st.integers(-2, 2)))
        for v in draw(st.lists(st.sampled_from(list(ivs)), min_size=1, max_size=3)):
            e = e + AffExpr.var(v) * draw(st.integers(-2, 2))
        if draw(st.integers(0, 4)) == 0:
            e = e // 2 if draw(st.booleans()) else e % 3
        out.append(e)
    return tuple(out)


@settings(max_examples=200, deadline=None)
@given(nest())
def test_iteration_count_matches_enumeration(ctx: StmtContext) -> None:
    n = brute_count(ctx)
    assert iteration_count(ctx) == n
    assert domain(ctx).count_val().to_python() == n


@settings(max_examples=200, deadline=None)
@given(st.data())
def test_footprint_matches_enumeration(data) -> None:
    ctx = data.draw(nest())
    idx = data.draw(indices(ctx.ivs))
    assert footprint(ctx, idx) == brute_footprint(ctx, idx)
    assert access_map(ctx, "T", idx).range().count_val().to_python() == brute_footprint(ctx, idx)


@settings(max_examples=100, deadline=None)
@given(st.data())
def test_check_bounds_matches_enumeration(data) -> None:
    ctx = data.draw(nest())
    idx = data.draw(indices(ctx.ivs))
    shape = tuple(data.draw(st.integers(1, 8)) for _ in idx)
    body: list = [Assign("T", idx, "=", Const(0.0, "f32"), pos="t.loop:9:9")]
    if ctx.guards:
        body = [If(ctx.guards, body)]
    for f in reversed(ctx.loops):
        body = [For(f.iv, f.lb, f.ub, f.step, False, body)]
    k = Kernel("k", [TensorDecl("T", shape, "f32", "output")], body)
    inside = all(0 <= e.evaluate(p) < n for p in points(ctx) for e, n in zip(idx, shape, strict=True))
    if inside:
        check_bounds(k)
    else:
        with pytest.raises(LoopIRError, match=r"^t\.loop:9:9: index \d of 'T' .* leaves the range \[0, \d\)"):
            check_bounds(k)


@settings(max_examples=100, deadline=None)
@given(st.data())
def test_node_verifier_matches_enumeration(data) -> None:
    """The `einsum.node` verifier decides the same as enumeration on the same random nests (intervals
    where they suffice, isl on the exact domain where they do not): it never rejects a valid graph."""
    ctx = data.draw(nest())
    idx = data.draw(indices(ctx.ivs))
    shape = tuple(data.draw(st.integers(1, 8)) for _ in idx)
    body: list = [If(ctx.guards, [Assign("T", idx, "=", Const(0.0, "f32"))])] if ctx.guards else \
        [Assign("T", idx, "=", Const(0.0, "f32"))]
    for f in reversed(ctx.loops):
        body = [For(f.iv, f.lb, f.ub, f.step, False, body)]
    graph = kernel_to_graph(Kernel("k", [TensorDecl("T", shape, "f32", "output")], body))
    inside = all(0 <= e.evaluate(p) < n for p in points(ctx) for e, n in zip(idx, shape, strict=True))
    if inside:
        graph.verify()
    else:
        pattern = r"node S0: index \d of 'T' .* leaves the range \[0, \d\) on the node's domain"
        with pytest.raises(VerifyException, match=pattern):
            graph.verify()


def test_node_verifier_checks_a_folded_init_on_its_own_domain() -> None:
    """The init runs outside the guard that keeps the reduction inside C: its write of C[8], C[9] is
    out of bounds although every point of the node's own domain is in. Under the guard it is valid."""
    text = """kernel k(A: f32[10, 4] input, C: f32[8] output):
    for i in range(10):
{init}
        for j in range(4):
            if i <= 7:
                C[i] += A[i, j]
"""
    outside = parse_kernel(text.format(init="        C[i] = 0.0"))
    with pytest.raises(LoopIRError, match=r"index 0 of 'C' \(i\) leaves the range \[0, 8\)"):
        check_bounds(outside)
    with pytest.raises(VerifyException, match=r"node S1: index 0 of 'C' \(i\) leaves the range \[0, 8\) on "
                                              r"the domain of its init"):
        kernel_to_graph(outside).verify()
    inside = parse_kernel(text.format(init="        if i <= 7:\n            C[i] = 0.0"))
    check_bounds(inside)
    kernel_to_graph(inside).verify()


# ---- the examples, by hand and by enumeration ------------------------------------------------------
def _stmts(name: str) -> list[StmtContext]:
    return statements(parse_kernel((REPO / "examples" / "loop" / f"{name}.loop").read_text()))


def test_conv2d_counts_and_footprints() -> None:
    init, tap = _stmts("conv2d")
    assert iteration_count(init) == 2 * 4 * 4 * 4
    assert iteration_count(tap) == 2 * 4 * 3 * 10 * 10 == brute_count(tap)  # 10 valid (p, r) of 12
    x_read, w_read = [r for r in tap.stmt.value.walk() if hasattr(r, "tensor")]
    assert footprint(tap, x_read.indices) == 2 * 3 * 7 * 7  # the guard keeps every input pixel in use
    assert footprint(tap, w_read.indices) == 4 * 3 * 3 * 3
    assert footprint(tap, tap.stmt.indices) == 2 * 4 * 4 * 4


def test_causal_attention_counts_and_footprints() -> None:
    ss = _stmts("causal_attention")
    assert [iteration_count(s) for s in ss] == [16, 72, 1152, 72, 72, 16, 72, 72, 256, 1152, 256]
    qk = ss[2]
    assert brute_count(qk) == 1152
    q_read, k_read = [r for r in qk.stmt.value.walk() if hasattr(r, "tensor")]
    assert footprint(qk, q_read.indices) == 2 * 8 * 16
    assert footprint(qk, k_read.indices) == 2 * 8 * 16  # j <= i still reaches every key row
    assert footprint(qk, qk.stmt.indices) == 72          # only the lower triangle of S is written


def test_cumsum_reads_shifted_window() -> None:
    _, step = _stmts("cumsum")
    prev = next(r for r in step.stmt.value.walk() if getattr(r, "tensor", None) == "Y")
    assert footprint(step, prev.indices) == 4 * 63  # Y[b, 0..62]
    assert iteration_count(step) == 252


def test_empty_and_constant_guards() -> None:
    k = parse_kernel("kernel k(C: f32[4] output):\n    for i in range(3, 3):\n        C[i] = 0.0\n"
                     "    for i in range(4):\n        if 1 >= 2:\n            C[i] = 1.0\n")
    a, b = statements(k)
    assert iteration_count(a) == 0 and iteration_count(b) == 0
    assert footprint(a, a.stmt.indices) == 0 and footprint(b, b.stmt.indices) == 0
    check_bounds(k)  # nothing executes, so nothing is out of range


def test_large_factored_domain_is_fast() -> None:
    """A 7-deep padded conv that islpy's enumeration cannot count whole (domain-notes §4)."""
    k = parse_kernel("""\
kernel big(X: f32[16, 32, 256, 256] input, W: f32[64, 32, 3, 3] weight, Y: f32[16, 64, 256, 256] output):
    for n in range(16):
        for o in range(64):
            for p in range(256):
                for q in range(256):
                    for c in range(32):
                        for r in range(3):
                            for s in range(3):
                                if p + r >= 1 and p + r <= 256 and q + s >= 1 and q + s <= 256:
                                    Y[n, o, p, q] += X[n, c, p + r - 1, q + s - 1] * W[o, c, r, s]
""")
    (ctx,) = statements(k)
    per_axis = 256 * 3 - 2  # every (p, r) pair except the two that fall on padding
    assert iteration_count(ctx) == 16 * 64 * 32 * per_axis * per_axis
    check_bounds(k)


@settings(max_examples=200, deadline=None)
@given(st.data())
def test_footprint_of_plain_variables_matches_enumeration(data) -> None:
    """Distinct plain variables over a box domain are counted as a product of trip counts (a fast
    path the reuse bounds take for every subset of a convolution's loops)."""
    ctx = data.draw(nest())
    names = data.draw(st.lists(st.sampled_from(ctx.ivs), unique=True))
    idx = tuple(AffExpr.var(v) for v in names)
    assert footprint(ctx, idx) == brute_footprint(ctx, idx)


def test_footprint_of_a_box_is_the_product_of_trip_counts() -> None:
    loops = (For("a", AffExpr.lit(0), AffExpr.lit(4)), For("b", AffExpr.lit(1), AffExpr.lit(7)),
             For("c", AffExpr.lit(2), AffExpr.lit(2)))
    stmt = Assign("T", (AffExpr.lit(0),), "=", Const(0.0, "f32"))
    box = StmtContext(stmt, loops[:2], (), 0)
    assert footprint(box, (AffExpr.var("b"), AffExpr.var("a"))) == 24
    assert footprint(box, (AffExpr.var("b"),)) == 6
    assert footprint(StmtContext(stmt, loops, (), 0), (AffExpr.var("a"),)) == 0  # `c` never runs
