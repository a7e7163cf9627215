"""Exact costs (`solar_compiler.analysis.costs`) against numbers derived by hand in the comments.

Bytes are elements x dtype width (f32 = 4, i32 = 4, bool = 1). A MAC is 2 FLOPs.
"""

from __future__ import annotations

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from xdsl.context import Context
from xdsl.rewriter import Rewriter

from solar_compiler.analysis.costs import GraphCosts, OpCost, module_costs, program_costs
from solar_compiler.analysis.manager import invalidate_analyses
from solar_compiler.dialects.convert import kernels_to_module
from solar_compiler.dialects.einsum import GraphOp, link_edges
from solar_compiler.dialects.loop import KernelOp
from solar_compiler.loopir.ast import LoopIRError
from solar_compiler.passes.lift_einsum import LiftEinsumPass
from solar_compiler.text.parser import parse_kernel
from solar_compiler.transforms.kernels import kernel_costs


def costs(text: str) -> GraphCosts:
    return kernel_costs(parse_kernel(text, "t.loop"))


def by_name(g: GraphCosts) -> dict[str, OpCost]:
    return {o.name: o for o in g.ops}


def rw(o: OpCost) -> tuple[dict[str, int], dict[str, int]]:
    return {a.tensor: a.bytes for a in o.reads}, {a.tensor: a.bytes for a in o.writes}


MATMUL = """
kernel matmul(A: f32[64, 32] input, B: f32[32, 16] weight, C: f32[64, 16] output):
    for i in range(64):
        for j in range(16):
            C[i, j] = 0.0
            for k in range(32):
                C[i, j] += A[i, k] * B[k, j] @ "mm.py:7"
"""


def test_matmul():
    g = costs(MATMUL)
    (o,) = g.ops  # the 0.0 init is the identity of += and folds into the reduction's node
    assert o.name == "S1" and o.unit == "matrix" and o.loc == "mm.py:7"
    assert o.iterations == 64 * 16 * 32
    assert o.flops_matrix == 2 * 64 * 16 * 32 == 65536
    assert o.flops_vector == 0 and o.flops_transcendental == 0
    assert o.matrix_dtype == "f32" and o.vector_dtype == "f32"
    # A 64*32*4 = 8192, B 32*16*4 = 2048, C 64*16*4 = 4096; the folded accumulator is not re-read
    assert rw(o) == ({"A": 8192, "B": 2048}, {"C": 4096})
    assert o.bytes == g.compulsory_bytes == 14336
    assert g.compulsory == {"A": 8192, "B": 2048, "C": 4096}


CONV = """
kernel conv(X: f32[2, 3, 9, 9] input, W: f32[4, 3, 3, 3] weight, Y: f32[2, 4, 5, 5] output):
    for n in range(2):
        for o in range(4):
            for p in range(5):
                for q in range(5):
                    Y[n, o, p, q] = 0.0
                    for c in range(3):
                        for r in range(3):
                            for s in range(3):
                                if 2*p + r >= 1 and 2*p + r <= 9 and 2*q + s >= 1 and 2*q + s <= 9:
                                    Y[n, o, p, q] += X[n, c, 2*p + r - 1, 2*q + s - 1] * W[o, c, r, s]
"""


def test_strided_padded_conv_excludes_padding_taps():
    # Stride 2, pad 1, 3x3 on 9x9 -> 5x5. Tap (p, r) is real when 0 <= 2p + r - 1 <= 8:
    # p=0: r in {1,2} (2); p=1,2,3: all 3 (9); p=4: r in {0,1} (2)  -> 13 (p, r) pairs, likewise (q, s).
    # iterations = n 2 * o 4 * c 3 * 13 * 13 = 4056 (an unguarded count would be 2*4*3*25*9 = 5400).
    (o,) = costs(CONV).ops
    assert o.iterations == 4056
    assert o.flops_matrix == 2 * 4056 == 8112 and o.flops_vector == 0
    # Rows touched 2p + r - 1: {0,1} {1,2,3} {3,4,5} {5,6,7} {7,8} = all 9, so X is read whole:
    # 2*3*9*9 = 486 elements = 1944 B; W 4*3*3*3 = 108 -> 432 B; Y 2*4*5*5 = 200 -> 800 B.
    assert rw(o) == ({"X": 1944, "W": 432}, {"Y": 800})


def test_unpadded_stride_2_footprint_skips_last_row():
    # Stride 2, no padding, 3x3 on 8x8 -> 3x3 outputs; rows 2p + r for p < 3, r < 3 are 0..6: row 7
    # and column 7 are never read, so X costs 7*7 = 49 elements (196 B), not 64.
    g = costs("""
kernel conv(X: f32[8, 8] input, W: f32[3, 3] weight, Y: f32[3, 3] output):
    for p in range(3):
        for q in range(3):
            Y[p, q] = 0.0
            for r in range(3):
                for s in range(3):
                    Y[p, q] += X[2*p + r, 2*q + s] * W[r, s]
""")
    (o,) = g.ops
    assert o.iterations == 81 and o.flops_matrix == 162
    assert rw(o) == ({"X": 196, "W": 36}, {"Y": 36})
    assert g.compulsory == {"X": 196, "W": 36, "Y": 36}


SOFTMAX = """
kernel softmax(x: f32[4, 8] input, y: f32[4, 8] output):
    local m: f32[4]
    local e: f32[4, 8]
    local s: f32[4]
    for i in range(4):
        m[i] = -inf
        for j in range(8):
            m[i] max= x[i, j]
        for j in range(8):
            e[i, j] = exp(x[i, j] - m[i])
        s[i] = 0.0
        for j in range(8):
            s[i] += e[i, j]
        for j in range(8):
            y[i, j] = e[i, j] / s[i]
"""


def test_softmax_counts_every_statement():
    g = costs(SOFTMAX)
    ops = by_name(g)
    assert list(ops) == ["S1", "S2", "S4", "S5"]  # -inf folds into max=, 0.0 into +=
    # S1 max-reduce: 4*8 = 32 iterations, 0 ops + 1 accumulation -> 32 vector FLOPs
    assert (ops["S1"].flops_vector, ops["S1"].unit) == (32, "vector")
    assert rw(ops["S1"]) == ({"x": 128}, {"m": 16})
    # S2 exp(x - m): sub + exp = 2 FLOPs x 32; exp is transcendental (32)
    assert (ops["S2"].flops_vector, ops["S2"].flops_transcendental) == (64, 32)
    assert rw(ops["S2"]) == ({"x": 128, "m": 16}, {"e": 128})
    # S4 sum: 1 accumulation x 32 (one factor only: not a contraction)
    assert (ops["S4"].flops_vector, ops["S4"].flops_matrix, ops["S4"].unit) == (32, 0, "vector")
    # S5 divide: 1 x 32
    assert ops["S5"].flops_vector == 32
    assert rw(ops["S5"]) == ({"e": 128, "s": 16}, {"y": 128})
    assert g.flops_vector == 32 + 64 + 32 + 32 == 160 and g.flops_matrix == 0
    assert g.compulsory_bytes == 128 + 128  # x and y; m, e, s are locals


LAYERNORM = """
kernel layernorm(x: f32[4, 8] input, gamma: f32[8] weight, beta: f32[8] weight, y: f32[4, 8] output):
    local mu: f32[4]
    local d: f32[4, 8]
    local var: f32[4]
    local rstd: f32[4]
    for i in range(4):
        mu[i] = 0.0
        for j in range(8):
            mu[i] += x[i, j]
        mu[i] = mu[i] / 8.0
        for j in range(8):
            d[i, j] = x[i, j] - mu[i]
        var[i] = 0.0
        for j in range(8):
            var[i] += d[i, j] * d[i, j]
        rstd[i] = rsqrt(var[i] / 8.0 + 1e-05)
        for j in range(8):
            y[i, j] = d[i, j] * rstd[i] * gamma[j] + beta[j]
"""


def test_layernorm():
    g = costs(LAYERNORM)
    ops = by_name(g)
    assert list(ops) == ["S1", "S2", "S3", "S5", "S6", "S7"]
    assert ops["S1"].flops_vector == 32                      # row sum: 1 accumulation x 32
    assert ops["S2"].flops_vector == 4                       # mean: 1 div x 4 rows
    assert rw(ops["S2"]) == ({"mu": 16}, {"mu": 16})
    assert ops["S3"].flops_vector == 32                      # centre: 1 sub x 32
    # sum of d*d over j: both factors depend on the reduced j -> a dot product: 2 x 32 matrix FLOPs
    assert (ops["S5"].flops_matrix, ops["S5"].flops_vector, ops["S5"].unit) == (64, 0, "matrix")
    assert rw(ops["S5"]) == ({"d": 128}, {"var": 16})        # d read once: the two reads are one access
    assert (ops["S6"].flops_vector, ops["S6"].flops_transcendental) == (12, 4)  # div, add, rsqrt x 4
    assert ops["S7"].flops_vector == 96                      # mul, mul, add x 32
    assert rw(ops["S7"]) == ({"d": 128, "rstd": 16, "gamma": 32, "beta": 32}, {"y": 128})
    assert g.flops_vector == 32 + 4 + 32 + 12 + 96 and g.flops_matrix == 64
    assert g.compulsory == {"x": 128, "gamma": 32, "beta": 32, "y": 128}


MLP = """
kernel mlp(x: f32[4, 8] input, W1: f32[16, 8] weight, b1: f32[16] weight, W2: f32[2, 16] weight,
           b2: f32[2] weight, y: f32[4, 2] output):
    local h: f32[4, 16]
    for i in range(4):
        for n in range(16):
            h[i, n] = 0.0
            for k in range(8):
                h[i, n] += x[i, k] * W1[n, k]
            h[i, n] = max(h[i, n] + b1[n], 0.0)
        for m in range(2):
            y[i, m] = b2[m]
            for n in range(16):
                y[i, m] += h[i, n] * W2[m, n]
"""


def test_two_layer_mlp():
    g = costs(MLP)
    ops = by_name(g)
    assert list(ops) == ["S1", "S2", "S3", "S4"]  # `y = b2` is not an identity: no fold
    assert ops["S1"].flops_matrix == 2 * 4 * 16 * 8 == 1024
    assert ops["S2"].flops_vector == 2 * 4 * 16 == 128        # add + max per element
    assert (ops["S3"].unit, ops["S3"].flops_vector) == ("memory", 0)  # the bias copy
    assert ops["S4"].flops_matrix == 2 * 4 * 2 * 16 == 256
    # S4 is an unfolded +=: it reads its accumulator y (4*2*4 = 32 B) besides h and W2
    assert rw(ops["S4"]) == ({"h": 256, "W2": 128, "y": 32}, {"y": 32})
    # compulsory = x 128 + W1 512 + b1 64 + W2 128 + b2 8 + y 32; h is local
    assert g.compulsory == {"x": 128, "W1": 512, "b1": 64, "W2": 128, "b2": 8, "y": 32}
    assert g.compulsory_bytes == 872
    assert g.bytes_unfused == (128 + 512 + 256) + (256 + 64 + 256) + (8 + 32) + (256 + 128 + 32 + 32)


ATTENTION = """
kernel causal(Q: f32[8, 4] input, K: f32[8, 4] input, V: f32[8, 4] input, O: f32[8, 4] output):
    local S: f32[8, 8]
    for i in range(8):
        for j in range(8):
            if j <= i:
                S[i, j] = 0.0
                for d in range(4):
                    S[i, j] += Q[i, d] * K[j, d]
    for i in range(8):
        for d in range(4):
            O[i, d] = 0.0
            for j in range(8):
                if j <= i:
                    O[i, d] += S[i, j] * V[j, d]
"""


def test_causal_attention_counts_only_the_unmasked_half():
    g = costs(ATTENTION)
    scores, out = g.ops
    # pairs j <= i for i < 8: 1 + 2 + ... + 8 = 36 (not 64); x 4 head dims = 144 MACs
    assert scores.iterations == 144 and scores.flops_matrix == 288
    assert rw(scores) == ({"Q": 128, "K": 128}, {"S": 36 * 4})
    assert out.iterations == 144 and out.flops_matrix == 288
    assert rw(out) == ({"S": 144, "V": 128}, {"O": 128})
    assert g.compulsory_bytes == 4 * 128


def test_bool_mask_is_one_byte_per_element():
    g = costs("""
kernel masked(x: f32[4, 8] input, mask: bool[4, 8] input, y: f32[4, 8] output, pos: bool[4, 8] output):
    for i in range(4):
        for j in range(8):
            y[i, j] = x[i, j] if mask[i, j] else 0.0
            pos[i, j] = x[i, j] > 0.0
""")
    sel, cmp = g.ops
    assert sel.flops_vector == 32 and cmp.flops_vector == 32   # one select / one compare per element
    assert rw(sel) == ({"x": 128, "mask": 32}, {"y": 128})
    assert rw(cmp) == ({"x": 128}, {"pos": 32})
    assert g.compulsory == {"x": 128, "mask": 32, "y": 128, "pos": 32}


def test_weight_through_transpose_is_counted_once():
    # y1 = x @ W^T and y2 = x @ W: W is 8x8 = 256 B, read whole by each node, compulsory once.
    g = costs("""
kernel tied(x: f32[2, 8] input, W: f32[8, 8] weight, y1: f32[2, 8] output, y2: f32[2, 8] output):
    for i in range(2):
        for n in range(8):
            y1[i, n] = 0.0
            for k in range(8):
                y1[i, n] += x[i, k] * W[n, k]
            y2[i, n] = 0.0
            for k in range(8):
                y2[i, n] += x[i, k] * W[k, n]
""")
    a, b = g.ops
    assert rw(a)[0]["W"] == rw(b)[0]["W"] == 256
    assert g.compulsory == {"x": 64, "W": 256, "y1": 64, "y2": 64}


def test_two_accesses_to_one_tensor_count_their_union():
    # S0 reads x[i] and x[i + 1] for i < 7: union {0..7} = 8 elements = 32 B (not 28 + 28);
    # S1 reads x[i + 4] for i < 4: {4..7}. Compulsory x is the union over both: 32 B once.
    g = costs("""
kernel shifts(x: f32[8] input, y: f32[7] output, z: f32[4] output):
    for i in range(7):
        y[i] = x[i + 1] - x[i]
    for i in range(4):
        z[i] = x[i + 4]
""")
    d, c = g.ops
    assert rw(d) == ({"x": 32}, {"y": 28}) and d.flops_vector == 7
    assert rw(c) == ({"x": 16}, {"z": 16}) and c.unit == "memory"
    assert g.compulsory == {"x": 32, "y": 28, "z": 16}


def test_union_of_strided_halves_by_inclusion_exclusion():
    # x[2i, j] and x[j, 2i + 1] differ in both dims: rows {0,2,4,6} x cols 0..7 (32) and rows 0..7 x
    # cols {1,3,5,7} (32) overlap in the 4 x 4 = 16 (even row, odd col) elements: union 48.
    g = costs("""
kernel two(x: f32[8, 8] input, y: f32[4, 8] output):
    for i in range(4):
        for j in range(8):
            y[i, j] = x[2*i, j] + x[j, 2*i + 1]
""")
    assert rw(g.ops[0])[0] == {"x": 48 * 4}


def test_rnn_weight_counted_once_over_the_scan():
    # 4 time steps reuse U (4x4 = 64 B): compulsory U is 64 B, not 4 x 64.
    g = costs("""
kernel rnn(h0: f32[4] input, U: f32[4, 4] weight, hs: f32[5, 4] output):
    for n in range(4):
        hs[0, n] = h0[n]
    for t in scan(1, 5):
        for n in range(4):
            hs[t, n] = 0.0
            for k in range(4):
                hs[t, n] += hs[t - 1, k] * U[n, k]
""")
    copy, step = g.ops
    assert step.sequential and not copy.sequential
    assert step.flops_matrix == 2 * 4 * 4 * 4
    assert rw(step) == ({"hs": 4 * 4 * 4, "U": 64}, {"hs": 4 * 4 * 4})  # reads rows 0..3, writes 1..4
    assert g.compulsory == {"h0": 16, "U": 64, "hs": 80}


def test_gather_counts_its_affine_positions():
    # E[ids[t], d]: the row is loaded, so only the 64 distinct d positions are certain: 64 x 4 = 256 B
    # (a lower bound: at least one row). ids: 16 x 8 B = 128 B. P is read whole: 16*64*4 = 4096 B.
    g = costs("""
kernel embedding(ids: i64[16] input, E: f32[1000, 64] weight, P: f32[16, 64] weight, Y: f32[16, 64] output):
    for t in range(16):
        for d in range(64):
            Y[t, d] = E[ids[t], d] + P[t, d]
""")
    (o,) = g.ops
    assert o.indirect and o.flops_vector == 16 * 64
    assert rw(o) == ({"E": 256, "ids": 128, "P": 4096}, {"Y": 4096})
    assert [a.indirect for a in o.reads] == [True, False, False]
    assert g.compulsory == {"ids": 128, "E": 256, "P": 4096, "Y": 4096}


def test_mixed_precision_contraction_is_priced_at_operand_dtype():
    # bf16 x bf16 accumulated in f32: matrix dtype bf16; the two casts are 0 FLOPs, and the constant
    # scale folds into the MMA's epilogue (or an operand), so it adds no FLOPs to the lower bound.
    g = costs("""
kernel mm(A: bf16[4, 8] input, B: bf16[8, 2] weight, C: f32[4, 2] output):
    for i in range(4):
        for j in range(2):
            C[i, j] = 0.0
            for k in range(8):
                C[i, j] += f32(A[i, k]) * f32(B[k, j]) * 0.5
""")
    (o,) = g.ops
    assert (o.matrix_dtype, o.vector_dtype) == ("bf16", "f32")
    assert (o.flops_matrix, o.flops_vector) == (2 * 64, 0)
    assert rw(o) == ({"A": 64, "B": 32}, {"C": 32})


def test_contraction_factor_ops_run_once_per_factor_point():
    # exp(A[i, k]) depends on (i, k) only: 64*32 evaluations, not 64*16*32; a 3-factor contraction
    # E[x, o] += a[x, p] * W[o, p, q] * b[x, q] costs min(2 per iteration, cheapest pairwise order):
    # 2*8*4*16*32 = 32768 per iteration vs W.b then a.t = 32768 + 1024, so 32768; the squared
    # difference (A - m)^2 is one factor evaluated once per (i, k): 2048 subtractions.
    g = costs("""
kernel k(a: f32[8, 16] input, W: f32[4, 16, 32] weight, b: f32[8, 32] input, A: f32[64, 32] input,
         B: f32[32, 16] input, m: f32[64] input, C: f32[64, 16] output, E: f32[8, 4] output,
         V: f32[64] output):
    for i in range(64):
        for j in range(16):
            C[i, j] = 0.0
            for k in range(32):
                C[i, j] += exp(A[i, k]) * B[k, j]
    for x in range(8):
        for o in range(4):
            E[x, o] = 0.0
            for p in range(16):
                for q in range(32):
                    E[x, o] += a[x, p] * W[o, p, q] * b[x, q]
    for i in range(64):
        V[i] = 0.0
        for k in range(32):
            V[i] += (A[i, k] - m[i]) * (A[i, k] - m[i])
""")
    assert [(o.flops_matrix, o.flops_vector) for o in g.ops] == [
        (2 * 64 * 16 * 32, 64 * 32), (2 * 8 * 4 * 16 * 32, 0), (2 * 64 * 32, 64 * 32)]


def test_three_factor_contraction_takes_the_cheaper_pairwise_order():
    # y[l] += a[i] * b[j] * c[j, l] over (l, i, j): one MAC per iteration would be 2*8*64*64, but
    # sum_i a[i] and sum_j b[j] * c[j, l] can be formed separately: about 64 + 2*64*8 + 8 FLOPs,
    # opt_einsum's optimal pairwise order. The bound takes the cheaper.
    g = costs("""
kernel k(a: f32[64] input, b: f32[64] input, c: f32[64, 8] input, y: f32[8] output):
    for l in range(8):
        y[l] = 0.0
        for i in range(64):
            for j in range(64):
                y[l] += a[i] * b[j] * c[j, l]
""")
    import opt_einsum

    _, info = opt_einsum.contract_path("i,j,jl->l", (64,), (64,), (64, 8), shapes=True, optimize="optimal")
    (o,) = g.ops
    assert o.flops_matrix == int(info.opt_cost) < 2 * 64 * 64 * 8


def test_output_never_written_is_an_error():
    with pytest.raises(LoopIRError, match="output tensor 'z' of kernel 'k' is never written"):
        costs("""
kernel k(x: f32[4] input, y: f32[4] output, z: f32[4] output):
    for i in range(4):
        y[i] = x[i]
""")


# ---- properties -------------------------------------------------------------------------------------
def _matmul_text(m: int, n: int, k: int, split: str, h: int) -> str:
    head = f"kernel mm(A: f32[{m}, {k}] input, B: f32[{k}, {n}] weight, C: f32[{m}, {n}] output):\n"
    body = "C[i, j] += A[i, kk] * B[kk, j]"
    if split == "none":
        ranges = [(f"range({m})", f"range({k})", True)]
    elif split == "i":
        ranges = [(f"range({h})", f"range({k})", True), (f"range({h}, {m})", f"range({k})", True)]
    else:  # split the reduction: the second half accumulates onto the first half's result
        ranges = [(f"range({m})", f"range({h})", True), (f"range({m})", f"range({h}, {k})", False)]
    out = head
    for ri, rk, init in ranges:
        out += f"    for i in {ri}:\n        for j in range({n}):\n"
        if init:
            out += "            C[i, j] = 0.0\n"
        out += f"            for kk in {rk}:\n                {body}\n"
    return out


@settings(max_examples=40, deadline=None)
@given(st.integers(2, 9), st.integers(1, 9), st.integers(2, 9), st.sampled_from(["i", "k"]), st.data())
def test_split_matmul_keeps_flops_and_compulsory(m, n, k, split, data):
    h = data.draw(st.integers(1, (m if split == "i" else k) - 1))
    whole = costs(_matmul_text(m, n, k, "none", 0))
    parts = costs(_matmul_text(m, n, k, split, h))
    assert whole.flops_matrix == parts.flops_matrix == 2 * m * n * k
    assert whole.flops_vector == parts.flops_vector == 0
    assert whole.compulsory_bytes == parts.compulsory_bytes == 4 * (m * k + k * n + m * n)
    for g in (whole, parts):
        assert g.compulsory_bytes <= g.bytes_unfused


@settings(max_examples=40, deadline=None)
@given(st.integers(1, 9), st.integers(2, 12), st.data())
def test_split_elementwise_keeps_flops_and_compulsory(r, c, data):
    h = data.draw(st.integers(1, c - 1))
    head = f"kernel ew(x: f32[{r}, {c}] input, y: f32[{r}, {c}] output):\n"
    stmt = "y[i, j] = exp(x[i, j]) * 2.0 + x[i, j]\n"

    def loop(rng: str) -> str:
        return f"    for i in range({r}):\n        for j in {rng}:\n            {stmt}"

    whole = costs(head + loop(f"range({c})"))
    parts = costs(head + loop(f"range({h})") + loop(f"range({h}, {c})"))
    assert whole.flops_vector == parts.flops_vector == 3 * r * c        # exp, mul, add
    assert sum(o.flops_transcendental for o in parts.ops) == r * c
    assert whole.compulsory_bytes == parts.compulsory_bytes == 2 * 4 * r * c
    assert parts.compulsory_bytes <= parts.bytes_unfused == whole.bytes_unfused


_AFF = st.tuples(st.integers(0, 2), st.integers(0, 2), st.integers(0, 3))  # a*i + b*j + c


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 6), st.integers(1, 6), st.lists(st.tuples(_AFF, _AFF), min_size=3, max_size=3),
       st.sampled_from(["j <= i", "i + j >= 2", "2*j <= i + 1", None]))
def test_footprints_match_enumeration(a_n, b_n, accs, guard):
    # Oracle: enumerate the domain in Python and collect the elements of x each access touches.
    # y[i, j] = x[p] + x[q] under the guard, then z[i, j] = x[r] unguarded.
    def text(e: tuple[int, int, int]) -> str:
        return f"{e[0]}*i + {e[1]}*j + {e[2]}"

    def val(e: tuple[int, int, int], i: int, j: int) -> int:
        return e[0] * i + e[1] * j + e[2]

    box = [(i, j) for i in range(a_n) for j in range(b_n)]
    dom = [(i, j) for i, j in box if guard is None or eval(guard, {"i": i, "j": j})]
    assume(dom)  # y must be written somewhere
    n0 = max(val(d0, a_n - 1, b_n - 1) for d0, _ in accs) + 1
    n1 = max(val(d1, a_n - 1, b_n - 1) for _, d1 in accs) + 1
    (p0, p1), (q0, q1), (r0, r1) = accs
    body = f"y[i, j] = x[{text(p0)}, {text(p1)}] + x[{text(q0)}, {text(q1)}]"
    inner = f"            if {guard}:\n                {body}\n" if guard else f"            {body}\n"
    shape = f"[{a_n}, {b_n}]"
    g = costs(f"kernel k(x: f32[{n0}, {n1}] input, y: f32{shape} output, z: f32{shape} output):\n"
              f"    for i in range({a_n}):\n        for j in range({b_n}):\n{inner}"
              f"    for i in range({a_n}):\n        for j in range({b_n}):\n"
              f"            z[i, j] = x[{text(r0)}, {text(r1)}]\n")
    s1 = {(val(d0, i, j), val(d1, i, j)) for d0, d1 in accs[:2] for i, j in dom}
    s2 = {(val(r0, i, j), val(r1, i, j)) for i, j in box}
    first, second = g.ops
    assert rw(first)[0]["x"] == 4 * len(s1)
    assert rw(first)[1]["y"] == 4 * len(dom)
    assert rw(second)[0]["x"] == 4 * len(s2)
    assert g.compulsory["x"] == 4 * len(s1 | s2)


def test_costs_read_the_graph_and_a_rewrite_of_it_changes_them():
    k = parse_kernel(SOFTMAX, "t.loop")
    m = kernels_to_module([k])
    before = module_costs(m)  # no graph yet: read from the loop.kernel
    LiftEinsumPass().apply(Context(), m)
    assert not [o for o in m.walk() if isinstance(o, KernelOp)]  # the graph replaced the kernel
    (graph,) = [g for g in m.walk() if isinstance(g, GraphOp)]
    assert program_costs(graph) == kernel_costs(k) == before[0] == module_costs(m)[0]
    assert before[0].ops[1].label == "e[i, j] = exp(x[i, j] - m[i])"
    # delete the exp node by a rewrite: the FLOPs drop by exactly its count
    exp_node = graph.nodes()[1]
    assert exp_node.sym_name.data == "S2"
    Rewriter.erase_op(exp_node, safe_erase=False)  # its readers now read e's earlier value:
    link_edges(graph)                               # the edges are relinked by name
    graph.verify()
    invalidate_analyses(m)
    after = module_costs(m)[0]
    assert [o.name for o in after.ops] == ["S1", "S4", "S5"]
    assert after.flops_vector == before[0].flops_vector - before[0].ops[1].flops_vector
    assert after.flops_matrix == before[0].flops_matrix


SSA_REUSE = """
builtin.module {
  loop.kernel "k" {
    loop.tensor "x" : f32 array<i64: 8> "input"
    loop.tensor "y" : f32 array<i64: 8> "output"
    loop.for "i" = affine_map<() -> (0)> to affine_map<() -> (8)> step 1 : i64 {
      loop.stmt "y" affine_map<(d0) -> (d0)> "=" {
        %x = loop.read "x" affine_map<(d0) -> (d0)> dynamic array<i64> : f32
        %e = loop.unary "exp" %x : f32 -> f32
        %s = loop.binary "add" %e, %e : f32, f32, -> f32
        loop.yield %s : f32
      }
    }
  }
}
"""


def test_an_ssa_value_used_twice_is_costed_once():
    """`%e = exp(x); y = %e + %e`: one exp and one add per point (8 + 8 vector FLOPs, 8 transcendental),
    not two exps as the expanded tree `exp(x) + exp(x)` would count."""
    from xdsl.dialects.builtin import Builtin
    from xdsl.parser import Parser

    from solar_compiler.dialects.loop import Loop

    ctx = Context()
    ctx.load_dialect(Builtin)
    ctx.load_dialect(Loop)
    m = Parser(ctx, SSA_REUSE.replace("f32, f32, -> f32", "f32, f32 -> f32")).parse_module()
    m.verify()
    (g,) = module_costs(m)
    (op,) = g.ops
    assert (op.flops_vector, op.flops_transcendental) == (16, 8)
    # the same value written as a tree in the text form is two exps as written (the literal count);
    # the minimal vector work (analysis/vector_work.py) shares the common subexpression
    k = parse_kernel("kernel k(x: f32[8] input, y: f32[8] output):\n    for i in range(8):\n"
                     "        y[i] = exp(x[i]) + exp(x[i])\n", "t.loop")
    (tree,) = kernel_costs(k).ops
    assert (tree.flops_vector, tree.flops_vector_literal) == (16, 24)


def test_window_partition_of_a_padded_image_counts_its_image_exactly(monkeypatch):
    # A Swin-style view chain: a 6x6 image padded by 1 on each side is stored as 4 windows of 3x3
    # (P[window, position, channel]); y reads the 4x4 interior back through the window arithmetic
    # (row r = i // 4 + 1, col q = i % 4 + 1, window 2*(r // 3) + q // 3, position 3*(r % 3) + q % 3).
    # The map is injective (isl proves it), so the image has one element per point: 16 rows x 2
    # channels = 32 elements = 128 B, never the whole P (4*9*2 = 72 elements). z reads x[i // 2]: not
    # injective, 8 points touch 4 elements = 16 B. Only that image is enumerated by isl: enumerating
    # a window partition's image took a minute for KernelBench L3 29_SwinMLP's 3e6 points.
    from solar_compiler.analysis import costs as mod

    enumerated = []
    piece_set = mod._piece_set.__wrapped__
    monkeypatch.setattr(mod, "_piece_set", lambda p: enumerated.append(p.dims) or piece_set(p))
    mod._piece_count.cache_clear()
    g = costs("""
kernel win(P: f32[4, 9, 2] input, x: f32[4] input, y: f32[16, 2] output, z: f32[8] output):
    for i in range(16):
        for c in range(2):
            y[i, c] = P[2*((i // 4 + 1) // 3) + (i % 4 + 1) // 3, 3*((i // 4 + 1) % 3) + (i % 4 + 1) % 3, c]
    for i in range(8):
        z[i] = x[i // 2]
""")
    want = {(2 * ((i // 4 + 1) // 3) + (i % 4 + 1) // 3, 3 * ((i // 4 + 1) % 3) + (i % 4 + 1) % 3, c)
            for i in range(16) for c in range(2)}
    assert len(want) == 32
    y, z = g.ops
    assert rw(y) == ({"P": 32 * 4}, {"y": 32 * 4})
    assert rw(z) == ({"x": 4 * 4}, {"z": 8 * 4})
    assert [[d.to_isl() for d in dims] for dims in enumerated] == [["floor((i + 0)/2) + 0"]]


# ---- the union of boxes (a concatenation's slices) ------------------------------------------------------
intervals = st.tuples(st.integers(-3, 6), st.integers(0, 5), st.sampled_from([">=", "=="]))


def _pieces(box: list[tuple[int, int, str]]) -> tuple:
    """One site's per-dimension pieces: `v + off` over `0 <= v < n` (or `v == 0` for `==`)."""
    from solar_compiler.analysis.costs import _Piece
    from solar_compiler.loopir.affine import AffCond, AffExpr

    out = []
    for d, (off, n, op) in enumerate(box):
        v = AffExpr.var(f"i{d}")
        upper = AffCond(AffExpr.lit(n - 1) - v, ">=")
        conds = (AffCond(v, ">="), upper) if op == ">=" else (AffCond(v, "=="),)
        out.append(_Piece((f"i{d}",), conds, (v + off,)))
    return tuple(out)


@settings(max_examples=150, deadline=None)
@given(st.integers(1, 3).flatmap(lambda d: st.lists(st.lists(intervals, min_size=d, max_size=d),
                                                     min_size=2, max_size=7)))
def test_union_of_boxes_counts_exactly(boxes):
    """The arithmetic union of product-of-interval images equals isl's count (the fast path off)
    and a brute-force enumeration, empty boxes (`n = 0`) and identical ones included."""
    import itertools

    from solar_compiler.analysis import costs as c

    pieces = [_pieces(b) for b in boxes]
    points = set()
    for b in boxes:
        ranges = [range(off, off + n) if op == ">=" else range(off, off + 1) for off, n, op in b]
        points |= set(itertools.product(*ranges))
    assert c._union_of_products(pieces) == len(points)
    assert c._box_union([tuple(c._interval(p) for p in ps) for ps in pieces], [1]) in (None, len(points))
    interval = c._interval
    try:
        c._interval = lambda p: None
        assert c._union_of_products(pieces) == len(points)
    finally:
        c._interval = interval
