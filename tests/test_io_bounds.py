"""Cache-aware traffic bounds (docs/bounds.md): recognition, Theorem R's formula, the four table
workloads, the tiled upper curve against an islpy simulation, and properties over random shapes."""

from __future__ import annotations

import itertools
import math

import islpy as isl
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from solar_compiler.analysis import io_bounds as io
from solar_compiler.analysis import tiling
from solar_compiler.analysis.costs import program_costs
from solar_compiler.analysis.structured import isl_expr, linear_form
from solar_compiler.dialects.graph_convert import lift_kernel
from solar_compiler.errors import SolarError
from solar_compiler.hw import MemoryLevel
from solar_compiler.loopir.ast import typecheck
from solar_compiler.loopir.grouping import group_statements
from solar_compiler.text.parser import parse_kernel

MIB = 2 ** 20


def mm(m: int, n: int, k: int, dt: str = "f32", batch: int = 0) -> str:
    b, bi = (f"{batch}, ", "b, ") if batch else ("", "")
    head = (f"kernel mm(A: {dt}[{b}{m}, {k}] input, B: {dt}[{b}{k}, {n}] weight, "
            f"C: {dt}[{b}{m}, {n}] output):\n")
    body = [f"for i in range({m}):", f"    for j in range({n}):", f"        C[{bi}i, j] = 0.0",
            f"        for k in range({k}):", f"            C[{bi}i, j] += A[{bi}i, k] * B[{bi}k, j]"]
    if batch:
        body = [f"for b in range({batch}):"] + ["    " + x for x in body]
    return head + "".join(f"    {x}\n" for x in body)


CONV = """kernel conv(X: f32[32, 64, 56, 56] input, W: f32[64, 64, 3, 3] weight,
            Y: f32[32, 64, 56, 56] output):
    for n in range(32):
        for o in range(64):
            for p in range(56):
                for q in range(56):
                    Y[n, o, p, q] = 0.0
                    for c in range(64):
                        for r in range(3):
                            for s in range(3):
                                if p + r >= 1 and p + r <= 56 and q + s >= 1 and q + s <= 56:
                                    Y[n, o, p, q] += X[n, c, p + r - 1, q + s - 1] * W[o, c, r, s]
"""

MLP = """kernel mlp(X: f32[8192, 8192] input, W1: f32[8192, 8192] weight, W2: f32[8192, 8192] weight,
           Y: f32[8192, 8192] output):
    local H: f32[8192, 8192]
    for b in range(8192):
        for h in range(8192):
            H[b, h] = 0.0
            for d in range(8192):
                H[b, h] += X[b, d] * W1[d, h]
            H[b, h] = max(H[b, h], 0.0)
    for b in range(8192):
        for e in range(8192):
            Y[b, e] = 0.0
            for h in range(8192):
                Y[b, e] += H[b, h] * W2[h, e]
"""

ATTN = """kernel attn(Q: f32[4096, 128] input, K: f32[4096, 128] input, V: f32[4096, 128] input,
            O: f32[4096, 128] output):
    local S: f32[4096, 4096]
    local M: f32[4096]
    local L: f32[4096]
    for i in range(4096):
        M[i] = -inf
        for j in range(i + 1):
            S[i, j] = 0.0
            for d in range(128):
                S[i, j] += Q[i, d] * K[j, d]
            S[i, j] = S[i, j] * 0.088388
            M[i] max= S[i, j]
        L[i] = 0.0
        for j in range(i + 1):
            S[i, j] = exp(S[i, j] - M[i])
            L[i] += S[i, j]
        for d in range(128):
            O[i, d] = 0.0
            for j in range(i + 1):
                O[i, d] += S[i, j] * V[j, d]
            O[i, d] = O[i, d] / L[i]
"""

LEVELS = [MemoryLevel.given("chip", 120e6, 3.35e12), MemoryLevel.given("sm", 0.5 * MIB, 16.7e12)]


def contraction(text: str, precision: str = "fp32") -> io.Contraction | None:
    """The first `+=` statement's contraction view (its init folded when lift-einsum folds it).
    Under the `fp32` policy by default: the figures here are derived with 4-byte f32 operands (under
    `auto` an f32 operand may be a 19-bit TF32 value: `test_operand_bytes_follow_the_policy`)."""
    k = parse_kernel(text, "t.loop")
    found = list(io.view(lift_kernel(k), precision=precision).contractions.values())
    if found:
        return found[0]
    return recognise_at(k, lambda g: g.main.stmt.kind == "+=", precision)


def recognise_at(k, which, precision: str = "auto") -> io.Contraction | None:
    """`recognise` on the first node whose group satisfies `which`, read from the program's graph."""
    i = next(i for i, g in enumerate(group_statements(typecheck(k))) if which(g))
    return io.recognise(lift_kernel(k).nodes()[i], i, precision)


# ---- recognition ------------------------------------------------------------------------------------
def test_matmul_is_a_projection_contraction():
    c = contraction(mm(64, 16, 32))
    assert c is not None
    assert (c.a.tensor, c.b.tensor, c.c.tensor) == ("A", "B", "C")
    assert c.slice_vars == () and c.rho == 1 and not c.window
    assert c.work == 64 * 16 * 32
    assert c.k_min == 32
    assert c.weight == 1 / 64  # rho / (4 * 4 * 4) bytes


def test_batched_and_transposed_operands():
    c = contraction(mm(8, 4, 6, batch=3))
    assert c is not None and c.rho == 1 and c.work == 3 * 8 * 4 * 6
    t = contraction("""kernel t(A: f32[8, 6] input, B: f32[4, 6] input, C: f32[8, 4] output):
    for i in range(8):
        for j in range(4):
            for k in range(6):
                C[i, j] += A[i, k] * B[j, k]
""")
    assert t is not None and t.rho == 1 and t.slice_vars == ()


def test_conv_slices_the_filter_taps():
    # examples/loop/conv2d.loop: 3x3, stride 2, padding 1, 7x7 -> 4x4, N=2, O=4, C=3.
    c = contraction(open("examples/loop/conv2d.loop").read())
    assert c is not None and c.window
    assert set(c.slice_vars) == {"r", "s"}
    # X[n, c, 2p + r - 1, 2q + s - 1]: stride 2 fixes r mod 2, so ceil(3/2) = 2 taps per dim share an
    # element: rho_X = 4; W holds r, s: rho_W = 1; Y lacks them: rho_Y = 9. rho = 1 * 4.
    assert c.rho == 4
    # valid (p, r) pairs: p=0: r in {1,2}; p=1,2: 3; p=3: r in {0,1} -> 10; same for (q, s).
    assert c.work == 2 * 4 * 3 * 10 * 10
    # fewest taps of one output: corner, 2 x 2 taps x 3 channels.
    assert c.k_min == 3 * 2 * 2
    s1 = contraction(CONV)
    assert s1 is not None and s1.rho == 9 and s1.k_min == 64 * 2 * 2


@pytest.mark.parametrize("body", [
    "Y[i, j] += X[i, j] * 2.0",                      # one operand
    "Y[i, j] += X[i, j] + Z[i, j]",                 # a sum: distributes over the reduction
    "Y[i, j] = X[i, j] * Z[i, j]",                  # not a reduction
    "Y[i, j] += X[i, j] * X[j, i]",                 # same tensor twice
    "Y[i, j] += X[0, j] * Z[0, j]",                 # i in neither operand: a shared product
    "Y[i, j] += X[idx[i], j] * Z[i, j]",            # a gather
])
def test_no_reuse_theorem(body: str):
    text = f"""kernel k(X: f32[4, 4] input, Z: f32[4, 4] input, idx: i64[4] input, Y: f32[4, 4] output):
    for i in range(4):
        for j in range(4):
            {body}
"""
    assert recognise_at(parse_kernel(text, "t.loop"), lambda g: True) is None


# ---- Theorem R, by hand -----------------------------------------------------------------------------
def test_per_segment_and_bound_at_one_h():
    # 64^3 f32 matmul: w = 1/64, lam = w/4 = 1/256, so F(T) = 2 sqrt(1/256) (T/3)^1.5 = (T/3)^1.5 / 8.
    f = io.single(contraction(mm(64, 64, 64)))
    assert (f.work, f.lam, f.m_c, f.sunk, f.delta) == (262144, 1 / 256, 1, True, 4)
    assert f.per_segment(3072.0) == 4096.0      # (1024)^1.5 / 8
    assert f.per_segment(6912.0) == 13824.0     # (2304)^1.5 / 8
    # h = 3064, S = 1920, slack 2 * delta = 8: T = h + 8 = 3072 and 2S + h + 8 = 6912.
    assert f.at(3064, 1920) == pytest.approx(3064 * (2 * 262144 / (4096 + 13824) - 1), rel=1e-12)
    assert f.at(3064, 1920, units=4) == pytest.approx(3064 * (2 * 262144 / (4096 + 13824) - 4), rel=1e-12)
    assert f.lower_bound(1920) >= f.at(3064, 1920)


def test_leading_constant_is_1_927():
    # Q ~ max_t 2t / ((t/3)^1.5 + ((2+t)/3)^1.5) * W / sqrt(S_words), max 1.92687 at t = 4/sqrt(3).
    t = 4 / math.sqrt(3)
    c_star = 2 * t / ((t / 3) ** 1.5 + ((2 + t) / 3) ** 1.5)
    assert c_star == pytest.approx(1.92687, abs=1e-5)
    n, s = 2 ** 15, MIB
    q = io.single(contraction(mm(n, n, n))).lower_bound(s)
    words = q / 4
    assert words / (n ** 3 / math.sqrt(s / 4)) == pytest.approx(c_star, rel=2e-3)
    assert words < 2 * n ** 3 / math.sqrt(s / 4)  # below the tight bound of Smith et al.


def test_units_subtract_one_segment_each():
    f = io.single(contraction(mm(1024, 1024, 1024)))
    assert f.lower_bound(0.5 * MIB, 132) < f.lower_bound(0.5 * MIB, 1)
    h = io.H_GRID
    assert f.lower_bound(0.5 * MIB, 132) == pytest.approx(max(0.0, float(f.at(h, 0.5 * MIB, 132).max())))


def theorem_r(work: float, s: float, w: float = 1 / 64, delta: int = 4, units: int = 1) -> float:
    """Theorem R written out independently: F(T) = sqrt(w) (T/3)^1.5, best h on a fine grid."""
    h = s * np.geomspace(0.05, 50, 200001)
    f = lambda t: math.sqrt(w) * (t / 3) ** 1.5  # noqa: E731
    return float((h * (2 * work / (f(h + 2 * delta) + f(2 * s + h + 2 * delta)) - units)).max())


# ---- matmuls around the crossover -------------------------------------------------------------------
def graph(text: str, levels=LEVELS, **kw) -> tuple[io.CacheAwareResult, int, io.KernelView]:
    """Cache-aware traffic of a program under the `fp32` policy (4-byte f32 operands) by default."""
    kw.setdefault("precision", "fp32")
    p = lift_kernel(parse_kernel(text, "t.loop"))
    costs = program_costs(p)
    return io.cache_aware(p, costs, levels, 0.0, **kw), costs.compulsory_bytes, io.view(p, **kw)


def test_square_matmul_below_and_above_the_crossover():
    r, comp, v = graph(mm(1024, 1024, 1024))
    assert comp == 3 * 1024 * 1024 * 4 == 12582912
    assert r.per_level["chip"] == comp          # 120 MB holds everything: compulsory only
    reuse = io.graph_lower_bound(v, 0.5 * MIB)[0]
    # leading term 1.927 W / sqrt(S_words) words = 2.29e7 B, minus h ~ 2.3 S = 1.2e6 B: 2.17e7 B
    assert reuse == pytest.approx(theorem_r(2 ** 30, 0.5 * MIB), rel=1e-3)
    assert reuse == pytest.approx(1.92687 * 2 ** 30 / math.sqrt(2 ** 17) * 4 - 4 / math.sqrt(3) * 0.5 * MIB,
                                  rel=5e-3)
    assert r.per_level["sm"] == reuse > comp
    assert r.bytes_dram == comp


def test_rectangular_matmul_both_sides():
    # tall-skinny: same W = 2^30 but compulsory 69206016 B > 2.29e7 B of reuse: compulsory wins
    r, comp, _ = graph(mm(4096, 64, 4096))
    assert comp == (4096 * 4096 + 4096 * 64 * 2) * 4 == 69206016
    assert r.per_level["sm"] == comp
    # 2048 x 2048 x 1024: W = 2^32, compulsory 33554432 B; reuse ~9.1e7 B at 0.5 MiB; the bound
    # crosses compulsory near S = 4 (1.927 * 4 * 2^32 / 33554432)^2 B = 3.9 MB.
    lv = [MemoryLevel.given(n, s, 1.0) for n, s in (("a", 2 * MIB), ("b", 16 * MIB), ("c", 0.5 * MIB))]
    r, comp, _ = graph(mm(2048, 2048, 1024), lv)
    assert comp == 33554432
    assert r.per_level["b"] == comp
    assert r.per_level["a"] > comp and r.per_level["c"] > r.per_level["a"]
    assert r.per_level["c"] == pytest.approx(theorem_r(2 ** 32, 0.5 * MIB), rel=1e-3)
    assert r.per_level["a"] == pytest.approx(theorem_r(2 ** 32, 2 * MIB), rel=1e-3)


# ---- conv, attention, MLP, elementwise ---------------------------------------------------------------
def test_conv_is_compulsory_unless_direct():
    r, comp, v = graph(CONV)
    assert comp == (2 * 32 * 64 * 56 * 56 + 64 * 64 * 9) * 4 == 51527680
    assert r.per_level == {"chip": comp, "sm": comp}
    assert io.op_lower_bound(v, "S1", 16 * 1024) == 0.0  # a window: no reuse term by default
    _, _, vd = graph(CONV, direct_conv=True)
    # direct convolution: W = 32*64*64 * (56*3 - 2)^2, rho = 9 -> 1.927 W / (3 sqrt(S_words)) words
    w = 32 * 64 * 64 * (56 * 3 - 2) ** 2
    assert vd.contractions["S1"].work == w
    q = io.op_lower_bound(vd, "S1", 16 * 1024)
    assert q > comp
    assert q == pytest.approx(theorem_r(w, 16 * 1024, w=9 / 64), rel=1e-3)
    assert io.op_lower_bound(vd, "S1", 0.5 * MIB) < comp  # compulsory still wins at one SM


def test_causal_attention_is_compulsory_bound():
    r, comp, v = graph(ATTN)
    assert comp == 4 * 4096 * 128 * 4 == 8388608
    assert v.eligible == ("S2",)             # Q K^T; P V reads P, produced on chip
    assert v.sunk == {"S2": False, "S9": True}
    assert v.contractions["S2"].work == 128 * 4096 * 4097 // 2
    assert r.per_level == {"chip": comp, "sm": comp}


def test_mlp_hidden_activation_is_not_counted():
    # H is 256 MiB > 120 MB, yet a row-blocked schedule keeps it on chip: nothing extra is counted.
    r, comp, v = graph(MLP)
    assert comp == 4 * 8192 * 8192 * 4 == 1073741824
    assert v.eligible == ("S1",) and v.sunk == {"S1": False, "S4": True}
    assert r.per_level["chip"] == comp
    fused, who = io.graph_lower_bound(v, 0.5 * MIB)
    assert who == ("S1",) and r.per_level["sm"] == fused
    # layer 1's H is consumed on chip (Theorem R'): weaker than the same matmul written to memory
    alone = io.op_lower_bound(v, "S1", 0.5 * MIB)
    assert comp < fused < alone
    assert alone == pytest.approx(theorem_r(8192 ** 3, 0.5 * MIB), rel=1e-3)


def test_elementwise_chain_is_compulsory():
    text = """kernel ew(X: f32[1024, 1024] input, Y: f32[1024, 1024] output):
    local T: f32[1024, 1024]
    for i in range(1024):
        for j in range(1024):
            T[i, j] = X[i, j] * 2.0 + 1.0
    for i in range(1024):
        for j in range(1024):
            Y[i, j] = max(T[i, j], 0.0)
"""
    r, comp, v = graph(text, LEVELS + [MemoryLevel.given("tiny", 64, 1.0)])
    assert v.contractions == {}
    assert comp == 2 * 1024 * 1024 * 4
    assert r.per_level == {"chip": comp, "sm": comp, "tiny": comp}


def test_cache_aware_time_and_binding_level():
    k = lift_kernel(parse_kernel(mm(1024, 1024, 1024), "t.loop"))
    costs = program_costs(k)
    chip = MemoryLevel.given("chip", 120e6, 1e12)
    r = io.cache_aware(k, costs, [chip, MemoryLevel.given("sm", 0.5 * MIB, 1e13, 4, "sm")], 1e-9,
                       precision="fp32")
    q_sm = r.per_level["sm"]
    assert q_sm == pytest.approx(theorem_r(2 ** 30, 0.5 * MIB, units=4), rel=1e-3)
    assert r.per_level["chip"] == 12582912
    assert r.time_s == max(12582912 / 1e12, q_sm / 1e13)
    assert r.binding_level == ("chip" if 12582912 / 1e12 >= q_sm / 1e13 else "sm")
    (name, per, bind), = r.per_op
    assert name == "S1" and per["chip"] == costs.ops[0].bytes
    slow = io.cache_aware(k, costs, [chip], 1.0)
    assert slow.time_s == 1.0 and slow.binding_level == "compute"
    with pytest.raises(SolarError, match="memory level chip: capacity, bandwidth and units must be positive"):
        io.cache_aware(k, costs, [MemoryLevel.given("chip", 120e6, 1e12, units=0)], 0.0)




# ---- the tiled upper curve --------------------------------------------------------------------------
def simulate(c: io.Contraction, tiles: dict[str, int], order: tuple[str, ...]) -> int:
    """Bytes moved by the tiled schedule, tile by tile, with islpy footprints (unguarded boxes)."""
    trips = {v: range(0, c.extents[v], tiles[v]) for v in order}
    cur: dict[str, tuple | None] = {"a": None, "b": None, "c": None}
    seen_c: set[tuple] = set()
    total = 0
    last_c_fp = 0
    for starts in itertools.product(*(trips[v] for v in order)):
        at = dict(zip(order, starts, strict=True))
        dims = [f"d{i}" for i in range(len(c.ivs))]  # the maps' names for the loop variables
        box = " and ".join(f"{at[v]} <= {d} < {at[v] + tiles[v]}" for v, d in zip(c.ivs, dims, strict=True))
        dom = isl.Set(f"{{ S[{', '.join(dims)}] : {box} }}")
        for key, op in (("a", c.a), ("b", c.b), ("c", c.c)):
            used = tuple(sorted(c.ivs[d] for r in op.map.results for d in linear_form(r)[0]))
            tile_id = tuple(at[v] for v in used)
            if cur[key] == tile_id:
                continue
            idx = ", ".join(isl_expr(r) for r in op.map.results)
            fp = isl.Map(f"{{ S[{', '.join(dims)}] -> T[{idx}] }}") \
                .intersect_domain(dom).range().count_val().to_python()
            if key == "c":
                total += last_c_fp * op.nbytes if cur[key] is not None else 0   # write the old tile
                if tile_id in seen_c or not c.init_folded:                        # read back a partial
                    total += fp * op.nbytes
                seen_c.add(tile_id)
                last_c_fp = fp
            else:
                total += fp * op.nbytes
            cur[key] = tile_id
    return total + last_c_fp * c.c.nbytes


@pytest.mark.parametrize("text, tiles, order", [
    (mm(6, 4, 8), {"i": 3, "j": 2, "k": 4}, ("i", "j", "k")),
    (mm(6, 4, 8), {"i": 3, "j": 2, "k": 4}, ("k", "i", "j")),
    (mm(6, 4, 8), {"i": 2, "j": 4, "k": 2}, ("j", "k", "i")),
    ("""kernel c1(X: f32[15] input, W: f32[3] weight, Y: f32[7] output):
    for p in range(7):
        for r in range(3):
            Y[p] += X[2 * p + r] * W[r]
""", {"p": 7, "r": 1}, ("r", "p")),
])
def test_tiled_closed_form_matches_islpy(text: str, tiles: dict[str, int], order: tuple[str, ...]):
    c = contraction(text)
    assert c is not None
    # the closed form, evaluated for this one tiling by restricting the search to it
    assert tiled_for(c, tiles, order) == simulate(c, tiles, order)


def tiled_for(c: io.Contraction, tiles: dict[str, int], order: tuple[str, ...]) -> float:
    dims = range(len(c.ivs))  # the tiling works on loop dims (positions), the maps' own names
    t = {d: np.array([float(tiles[c.ivs[d]])]) for d in dims}
    trips = {d: np.ceil(c.extents[c.ivs[d]] / t[d]) for d in dims}
    fp = {k: tiling._tile_footprint(op.map, t) for k, op in (("a", c.a), ("b", c.b), ("c", c.c))}
    uses = {k: tiling.map_dims(op.map) for k, op in (("a", c.a), ("b", c.b), ("c", c.c))}
    at = [c.ivs.index(v) for v in order]
    vis = {k: float(x[0]) for k, x in tiling._visits(at, trips, uses, t[0]).items()}
    distinct = float(np.prod([trips[d] for d in dims if d in uses["c"]]))
    moves = 2 * vis["c"] - (distinct if c.init_folded else 0)
    return float(c.a.nbytes * fp["a"][0] * vis["a"] + c.b.nbytes * fp["b"][0] * vis["b"]
                 + c.c.nbytes * fp["c"][0] * moves)


def test_tiled_traffic_square_matmul():
    c = contraction(mm(4096, 4096, 4096))
    big = tiling.tiled_traffic(c, 120e6)
    assert big is not None and big.bytes == 3 * 4096 * 4096 * 4  # C (64 MiB) stays: compulsory
    small = tiling.tiled_traffic(c, 0.5 * MIB)
    assert small is not None
    lb = io.single(c).lower_bound(0.5 * MIB)
    assert lb <= small.bytes <= 1.2 * lb


# ---- properties ---------------------------------------------------------------------------------------
dims = st.integers(1, 40)
caps = st.integers(48, 2 ** 16)


@settings(max_examples=60, deadline=None)
@given(dims, dims, dims, st.sampled_from([0, 3]), st.sampled_from(["f32", "bf16"]), caps, caps)
def test_matmul_properties(m: int, n: int, k: int, batch: int, dt: str, s1: int, s2: int):
    text = mm(m, n, k, dt, batch)
    c = contraction(text)
    assert c is not None
    lo, hi = sorted((s1, s2))
    f = io.single(c)
    assert f.lower_bound(lo) >= f.lower_bound(hi)                     # monotone in S
    for s in (lo, hi):
        tiled = tiling.tiled_traffic(c, s)
        if tiled is not None:
            assert f.lower_bound(s) <= tiled.bytes                     # bound <= attainable
    r, comp, _ = graph(text, [MemoryLevel.given("x", lo, 1.0), MemoryLevel.given("y", hi, 1.0)])
    assert r.per_level["x"] >= r.per_level["y"] >= comp                # compulsory <= cache-aware


@settings(max_examples=30, deadline=None)
@given(st.integers(1, 3), st.integers(1, 4), st.integers(1, 4), st.integers(3, 9), st.integers(1, 3),
       st.integers(1, 2), caps)
def test_direct_conv_bound_below_tiled(n: int, o: int, ci: int, hw: int, f: int, stride: int, s: int):
    out = (hw - f) // stride + 1
    text = f"""kernel cv(X: f32[{n}, {ci}, {hw}] input, W: f32[{o}, {ci}, {f}] weight,
          Y: f32[{n}, {o}, {out}] output):
    for a in range({n}):
        for b in range({o}):
            for p in range({out}):
                for c in range({ci}):
                    for r in range({f}):
                        Y[a, b, p] += X[a, c, {stride} * p + r] * W[b, c, r]
"""
    c = contraction(text)
    assert c is not None
    tiled = tiling.tiled_traffic(c, s)
    if tiled is not None:
        assert io.single(c).lower_bound(s) <= tiled.bytes
