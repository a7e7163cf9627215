"""Scatter-form reductions cut into taps (`executor/statement.py`, "scatters by taps"): a reduction
whose target index mixes loop variables (a transposed convolution's `y[i*s + r*d - pad]`) runs as one
vectorised piece per tap combination, each a strided view inside the target. Checked against values
derived by hand, torch's conv_transpose1d/2d/3d (stride, padding, dilation, output_padding, groups),
the point-by-point interpreter (same summation order: bit-identical where no BLAS call reassociates)
and the general per-point path; plus the validation estimate of such a statement."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from executor_reference import interpret

from solar_compiler.executor import compare, execute, statement
from solar_compiler.executor.compare import output_dtypes
from solar_compiler.executor.grid import Axis, Grid, build_grid
from solar_compiler.executor.numeric import quantize
from solar_compiler.frontends import validation
from solar_compiler.loopir.affine import AffCond, AffExpr
from solar_compiler.loopir.ast import LoopIRError, statements
from solar_compiler.loopir.domain import iteration_count
from solar_compiler.text.parser import parse_kernel

torch = pytest.importorskip("torch")

# y = conv_transpose1d(x, w, stride=2, padding=1): y[2i + r - 1] += x[i] * w[r] where it lands in [0, 5)
CT1 = """kernel ct1(x: f32[3] input, w: f32[3] input, y: f32[5] output):
    for q in range(5):
        y[q] = 0.0
    for i in range(3):
        for r in range(3):
            if 2*i + r >= 1 and 2*i + r <= 5:
                y[2*i + r - 1] += x[i] * w[r]
"""


def run(src: str, inputs: dict, *, taps: bool = True, **kw) -> dict:
    """Execute `src`; taps=False forces the general per-point path (offsets and ufunc.at)."""
    k = parse_kernel(src, "t.loop")
    if taps:
        return execute(k, inputs, **kw)
    orig = statement.tap_pieces
    statement.tap_pieces = lambda *a: None
    try:
        return execute(k, inputs, **kw)
    finally:
        statement.tap_pieces = orig


def conv_transpose_src(n: int, c: int, o: int, isp, ksp, stride, pad, dil, opad, groups: int,
                       dtype: str = "f32", kind: str = "+=") -> tuple[str, list[int]]:
    """The loop IR of torch's conv_transposeNd as the torch frontend emits it (`builder/conv.py`):
    `y = 0`, then `y[n, Og*g + o, i*s + r*d - pad] += x[n, Cg*g + c, i] * w[Cg*g + c, o, r]`, guarded."""
    nd = len(isp)
    osp = [(isp[d] - 1) * stride[d] - 2 * pad[d] + dil[d] * (ksp[d] - 1) + opad[d] + 1 for d in range(nd)]
    cg, og = c // groups, o // groups

    def sh(xs):
        return ", ".join(map(str, xs))

    lines = [f"kernel ct(x: {dtype}[{sh([n, c, *isp])}] input, w: {dtype}[{sh([c, og, *ksp])}] weight, "
             f"y: {dtype}[{sh([n, o, *osp])}] output):"]
    init = [f"n in range({n})", f"o in range({o})"] + [f"q{d} in range({osp[d]})" for d in range(nd)]
    for k, loop in enumerate(init):
        lines.append("    " * (k + 1) + f"for {loop}:")
    lines.append("    " * (len(init) + 1) + f"y[n, o, {sh([f'q{d}' for d in range(nd)])}] = 0.0")
    loops = [f"n in range({n})", f"g in range({groups})", f"o in range({og})"] + \
        [f"i{d} in range({isp[d]})" for d in range(nd)] + [f"c in range({cg})"] + \
        [f"r{d} in range({ksp[d]})" for d in range(nd)]
    for k, loop in enumerate(loops):
        lines.append("    " * (k + 1) + f"for {loop}:")
    idx = [f"{stride[d]}*i{d} + {dil[d]}*r{d} - {pad[d]}" for d in range(nd)]
    conds = [f"{idx[d]} >= 0 and {osp[d] - 1} >= {idx[d]}" for d in range(nd)]
    lines.append("    " * (len(loops) + 1) + "if " + " and ".join(conds) + ":")
    ivs, rvs = sh([f"i{d}" for d in range(nd)]), sh([f"r{d}" for d in range(nd)])
    lines.append("    " * (len(loops) + 2) + f"y[n, {og}*g + o, {sh(idx)}] {kind} x[n, {cg}*g + c, {ivs}] "
                 f"* w[{cg}*g + c, o, {rvs}]")
    return "\n".join(lines) + "\n", osp


# ---- hand-derived --------------------------------------------------------------------------------
def test_transposed_conv_1d_hand_values():
    """x = [1, 2, 3], w = [1, 10, 100]: y[0] = 1*10 (i=0, r=1); y[1] = 1*100 + 2*1 (i=0, r=2; i=1,
    r=0); y[2] = 2*10; y[3] = 2*100 + 3*1; y[4] = 3*10; i=0, r=0 and i=2, r=2 fall outside."""
    x = np.array([1, 2, 3], np.float32)
    w = np.array([1, 10, 100], np.float32)
    got = run(CT1, {"x": x, "w": w})["y"]
    assert got.tolist() == [10, 102, 20, 203, 30]
    ref = torch.nn.functional.conv_transpose1d(torch.from_numpy(x)[None, None],
                                               torch.from_numpy(w)[None, None], stride=2, padding=1)
    assert ref[0, 0].tolist() == [10, 102, 20, 203, 30]


def test_tap_split_of_the_1d_case():
    """i (3 values) and r (3 values) share an index: the earlier loop is kept, r is the tap; the taps
    run in the order the unsplit loop nest adds them to one element: for y[1], i=0 (r=2) before i=1
    (r=0), so r descends; each tap's piece is cut to the i its guard allows."""
    k = parse_kernel(CT1, "t.loop")
    ctx = statements(k)[1]
    grid = build_grid(ctx.loops, {}, ctx.guards)
    assert statement.tap_axes(ctx.stmt, grid) == [1]
    assert [p[1] for p in statement.tap_order(ctx.stmt, grid, [1])] == [2, 1, 0]
    pieces = statement.tap_pieces(ctx.stmt, grid, np.zeros(5, np.float32))
    assert [(g.axes[0].start, g.axes[0].count, g.axes[1].start) for g in pieces] == \
        [(0, 2, 2), (0, 3, 1), (1, 2, 0)]   # r=2: i in {0, 1}; r=1: i in {0, 1, 2}; r=0: i in {1, 2}
    assert all(not g.masks for g in pieces)   # the guard holds on the whole box


def test_scatter_form_and_tap_vars():
    v = AffExpr.var
    counts = {"i": 8, "r": 3, "c": 4}
    assert statement.tap_vars((v("i") * 2 + v("r") - 1,), counts) == ["r"]
    assert statement.scatter_form((v("i") * 2 + v("r") - 1,), counts) == "taps"
    assert statement.scatter_form((v("i"), v("r")), counts) is None              # one-to-one
    assert statement.scatter_form((v("i") + v("r"), v("i")), counts) == "points"  # i kept twice
    assert statement.scatter_form((v("i") // 2,), counts) == "points"            # quasi-affine
    # 12 tap combinations of 4 points each: not cut
    assert statement.tap_vars((v("i") + v("r") + v("c"),), {"i": 4, "r": 3, "c": 4}) is None


# ---- against torch ---------------------------------------------------------------------------------
CASES = [  # n, c, o, input sizes, kernel sizes, stride, padding, dilation, output_padding, groups
    (2, 4, 6, [5], [3], [2], [1], [1], [1], 1),
    (2, 4, 6, [7], [4], [3], [2], [2], [2], 2),
    (2, 4, 6, [5, 6], [3, 2], [2, 3], [1, 0], [1, 2], [1, 0], 2),
    (1, 2, 2, [7, 7], [4, 4], [3, 3], [2, 2], [2, 1], [2, 1], 1),
    (2, 4, 4, [4, 5, 3], [3, 2, 3], [2, 1, 2], [1, 1, 0], [1, 1, 2], [1, 0, 1], 2),
    (3, 6, 6, [5, 4, 6], [3, 3, 3], [1, 1, 1], [1, 1, 1], [1, 1, 1], [0, 0, 0], 3),
    (2, 3, 6, [3, 4, 5], [3, 3, 3], [2, 2, 2], [1, 1, 1], [1, 1, 1], [1, 1, 1], 3),  # depthwise-like: Cg = 1
]


@pytest.mark.parametrize("case", CASES,
                         ids=lambda c: f"{len(c[3])}d-s{c[5]}-p{c[6]}-d{c[7]}-op{c[8]}-g{c[9]}")
def test_transposed_conv_vs_torch(case):
    n, c, o, isp, ksp, stride, pad, dil, opad, groups = case
    src, osp = conv_transpose_src(*case)
    rng = np.random.default_rng(len(isp))
    x = rng.standard_normal([n, c, *isp]).astype(np.float32)
    w = rng.standard_normal([c, o // groups, *ksp]).astype(np.float32)
    fn = getattr(torch.nn.functional, f"conv_transpose{len(isp)}d")
    ref = fn(torch.from_numpy(x).double(), torch.from_numpy(w).double(), stride=stride, padding=pad,
             output_padding=opad, groups=groups, dilation=dil).numpy()
    assert list(ref.shape[2:]) == osp
    kernel = parse_kernel(src, "t.loop")
    ctx = statements(kernel)[1]
    grid = build_grid(ctx.loops, {}, ctx.guards)
    assert statement.tap_pieces(ctx.stmt, grid, np.zeros(ref.shape)) is not None
    for taps in (True, False):
        got = run(src, {"x": x, "w": w}, taps=taps)
        res = compare({"y": ref}, got, output_dtypes(kernel))
        assert res.ok, res.first_mismatch
    # a small memory budget chunks every tap's piece: the same result
    chunked = run(src, {"x": x, "w": w}, budget=2048)["y"]
    np.testing.assert_allclose(chunked, ref, rtol=1e-5, atol=1e-5)


# ---- summation order --------------------------------------------------------------------------------
def _wide(rng, shape):
    """Values over twelve orders of magnitude, both signs: an f32 sum of them depends on its order."""
    return (rng.standard_normal(shape) * 10.0 ** rng.integers(-6, 6, shape)).astype(np.float32)


@pytest.mark.parametrize("case", [c for c in CASES if c[1] // c[9] == 1] +
                         [(2, 2, 4, [6, 5], [3, 4], [1, 2], [1, 2], [2, 1], [0, 1], 2)])
def test_taps_add_in_program_order(case):
    """One input channel per group: no contraction, every product is one f32 rounding, so the taps
    summed in `tap_order` give exactly what the loop nest gives point by point (the interpreter)."""
    src, _ = conv_transpose_src(*case)
    rng = np.random.default_rng(7)
    n, c, o, isp, ksp, *_, groups = case
    ins = {"x": _wide(rng, [n, c, *isp]), "w": _wide(rng, [c, o // groups, *ksp])}
    ref = interpret(parse_kernel(src, "t.loop"), ins)["y"]
    assert np.array_equal(run(src, ins)["y"], ref)
    assert np.array_equal(run(src, ins, taps=False)["y"], ref)


def test_tap_order_with_taps_outer_and_negative_coefficients():
    """The tap loop outside the kept one, which enters with a negative coefficient: y[5 - i + r]
    takes (r, i) in loop order, so one element gets its larger r (and larger i) later; up to four
    contributions per element, so a wrong order shows."""
    src = """kernel k(x: f32[6] input, w: f32[4] input, y: f32[8] output):
    for q in range(8):
        y[q] = 0.0
    for r in range(4):
        for i in range(6):
            if 5 - i + r <= 7:
                y[5 - i + r] += x[i] * w[r]
"""
    rng = np.random.default_rng(3)
    ins = {"x": _wide(rng, [6]), "w": _wide(rng, [4])}
    ref = interpret(parse_kernel(src, "t.loop"), ins)["y"]
    assert np.array_equal(run(src, ins)["y"], ref)


def test_interior_guard_stays_a_mask():
    """A guard that cuts points inside the box (i % 2 == 0 drops i = 1) is not lost when the pieces
    are tightened."""
    src = CT1.replace("if 2*i + r >= 1 and 2*i + r <= 5:", "if 2*i + r >= 1 and 2*i + r <= 5 and i % 2 == 0:")
    x = np.array([1, 2, 3], np.float32)
    w = np.array([1, 10, 100], np.float32)
    assert run(src, {"x": x, "w": w})["y"].tolist() == [10, 100, 0, 3, 30]


def test_max_scatter_vs_interpreter():
    src = CT1.replace("+= x[i] * w[r]", "max= x[i] * w[r]").replace("y[q] = 0.0", "y[q] = -inf")
    rng = np.random.default_rng(5)
    ins = {"x": rng.standard_normal(3).astype(np.float32), "w": rng.standard_normal(3).astype(np.float32)}
    assert np.array_equal(run(src, ins)["y"], interpret(parse_kernel(src, "t.loop"), ins)["y"])


def test_bf16_target_rounds_once_after_every_tap():
    """A narrow-float target accumulates every tap in float32 and is rounded once, as the per-point
    path (ufunc.at, then rounding of the touched elements) does."""
    src, _ = conv_transpose_src(2, 3, 6, [4, 5], [3, 3], [2, 2], [1, 1], [1, 1], [1, 1], 3, dtype="bf16")
    rng = np.random.default_rng(11)
    ins = {"x": quantize(rng.standard_normal([2, 3, 4, 5]).astype(np.float32), "bf16"),
           "w": quantize(rng.standard_normal([3, 2, 3, 3]).astype(np.float32), "bf16")}
    got, general = run(src, ins)["y"], run(src, ins, taps=False)["y"]
    assert np.array_equal(got, general)
    assert np.array_equal(quantize(got, "bf16"), got)


def test_write_outside_the_target_is_still_an_error():
    """Without its upper guard the scatter writes y[5] at i=2, r=2: the error names that point."""
    src = CT1.replace(" and 2*i + r <= 5", "")
    with pytest.raises(LoopIRError, match=r"index 0 of 'y' is 5, outside \[0, 5\).*i=2.*r=2"):
        run(src, {"x": np.ones(3, np.float32), "w": np.ones(3, np.float32)})


# ---- the validation estimate --------------------------------------------------------------------------
def test_estimate_of_a_transposed_conv_counts_its_updates():
    """The 2-d case (n=2, C=4, O=6, 5x6 input, 3x2 kernel, stride 2x3, padding 1x0, dilation 1x2,
    output_padding 1x0, 2 groups): 10x18 output. In-domain points: per dim the (i, r) pairs landing
    in the output: dim 0: 2i + r - 1 in [0, 10) for i < 5, r < 3: 15 - 1 (i=0, r=0) = 14; dim 1:
    3i + 2r in [0, 18): all 6*2 = 12. Points = n * groups * O/g * C/g * 14 * 12 = 2*2*3*2*168 = 4032;
    reduction length C/g = 2, so 2016 target updates, in 12 tap combinations (g: 2, r0: 3, r1: 2),
    each with its own overhead, per run of the statement (per piece of a slice)."""
    src, osp = conv_transpose_src(*CASES[2])
    assert osp == [10, 18]
    ctx = statements(parse_kernel(src, "t.loop"))[1]
    points = 4032
    assert iteration_count(ctx) == points
    v = validation
    work = points / v.MATRIX_RATE + 2016 / v.TAP_UPDATE_RATE
    assert v.statement_seconds(ctx, points) == pytest.approx(work + v.STATEMENT_SECONDS + 12 * v.TAP_SECONDS)
    assert v.statement_seconds(ctx, points, runs=5) == pytest.approx(
        work + 5 * v.STATEMENT_SECONDS + 60 * v.TAP_SECONDS)


def test_estimate_of_a_stride_1_transposed_conv_updates_at_the_unit_step_rate():
    """Stride 1: the innermost target index i2 + r2 - 1 steps by one, so a tap's update walks the
    target contiguously (UNIT_TAP_UPDATE_RATE). 3-d, 3 groups of 2 channels: the channel index
    2*g + o keeps g (3 values) and taps o (2), so 2 * 27 = 54 taps."""
    src, _ = conv_transpose_src(*CASES[5])
    ctx = statements(parse_kernel(src, "t.loop"))[1]
    points = iteration_count(ctx)
    v = validation
    work = points / v.MATRIX_RATE + points / 2 / v.UNIT_TAP_UPDATE_RATE
    assert v.statement_seconds(ctx, points) == pytest.approx(work + v.STATEMENT_SECONDS + 54 * v.TAP_SECONDS)


def test_estimate_of_other_statements():
    """An initialisation runs at the vector rate; a pooling written as a quasi-affine scatter
    (`y[i // 2] += x[i]`: 8 points, no reduction loop, so 8 updates) goes point by point."""
    v = validation
    init = statements(parse_kernel(CT1, "t.loop"))[0]
    assert v.statement_seconds(init, 5) == pytest.approx(5 / v.VECTOR_RATE + v.STATEMENT_SECONDS)
    pool = statements(parse_kernel("""kernel k(x: f32[8] input, y: f32[4] output):
    for q in range(4):
        y[q] = 0.0
    for i in range(8):
        y[i // 2] += x[i]
""", "t.loop"))[1]
    assert v.statement_seconds(pool, 8, runs=2) == pytest.approx(
        8 / v.VECTOR_RATE + 8 / v.POINT_UPDATE_RATE + 2 * v.STATEMENT_SECONDS)


# ---- grid pieces ----------------------------------------------------------------------------------
def _points(g: Grid) -> set[tuple[int, ...]]:
    """The points of a grid, as tuples of loop-variable values."""
    if g.empty:
        return set()
    m = g.mask()
    where = np.argwhere(np.ones(g.shape, bool) if m is None else np.broadcast_to(m, g.shape))
    return {tuple(g.axes[d].start + g.axes[d].step * int(x) for d, x in enumerate(p)) for p in where}


def test_window_slices_the_masks_a_fresh_grid_would_evaluate():
    """A window of a grid (positions of some axes) has the points and emptiness of the grid built
    anew on those axes: a triangular bound, a band and a stride guard, cut several ways."""
    v = AffExpr.var
    conds = [AffCond.compare(v("j"), "<=", v("i")), AffCond.compare(v("i") + v("k"), ">=", AffExpr.lit(3)),
             AffCond((v("k") - 1) % 2, "==")]
    grid = Grid([Axis("i", 0, 1, 6), Axis("j", 2, 3, 4), Axis("k", 1, 1, 5)], {}, conds)
    for ranges in ({0: (2, 3)}, {1: (1, 2), 2: (0, 1)}, {0: (0, 1), 1: (3, 1)}, {2: (1, 1)}):
        win = grid.window(ranges)
        axes = [replace(a, start=a.start + a.step * ranges[k][0], count=ranges[k][1]) if k in ranges else a
                for k, a in enumerate(grid.axes)]
        fresh = Grid(axes, {}, conds)
        assert win.empty == fresh.empty
        assert _points(win) == _points(fresh)
        assert all(not m.all() for _, m in win.masks)   # a group every point satisfies is dropped
    assert grid.window({2: (1, 1)}).empty               # k = 2 fails the stride guard
    # k = 1: i >= 2 and j <= i, so i in 2..5 and j in {2, 5}
    piece = grid.fix({2: 0})
    tight = piece.tight()
    assert _points(tight) == _points(piece)
    assert [(a.start, a.count) for a in tight.axes] == [(2, 4), (2, 2), (1, 1)]
