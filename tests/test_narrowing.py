"""Needed-work narrowing (docs/bounds.md section 5): hand-derived iteration counts and FLOPs of the
narrowed kernels, and the outputs of original and narrowed kernels on random inputs."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from programs import TRIL
from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp

from solar_compiler.analysis.costs import module_costs
from solar_compiler.analysis.graphs import module_graphs
from solar_compiler.analysis.summary import as_written_record
from solar_compiler.dialects.convert import kernels_to_module, op_to_kernel
from solar_compiler.dialects.solar import AsWrittenOp
from solar_compiler.executor.run import execute
from solar_compiler.loopir.ast import Kernel, LoopIRError, statements
from solar_compiler.loopir.domain import iteration_count
from solar_compiler.passes import all_passes
from solar_compiler.text.parser import parse_kernel
from solar_compiler.text.printer import print_assign, print_kernel
from solar_compiler.transforms.kernels import kernel_costs
from solar_compiler.transforms.narrow import narrow

# masked_fill style: a bool mask filled from the loop indices, scores replaced by -inf where it is
# False, then max / exp / sum / P @ V over all 8 keys as written.
CAUSAL = """kernel attn(Q: f32[2, 8, 4] input, K: f32[2, 8, 4] input, V: f32[2, 8, 4] input,
             O: f32[2, 8, 4] output):
    local mask: bool[8, 8]
    local S: f32[2, 8, 8]
    local M: f32[2, 8]
    local L: f32[2, 8]
    for i in range(8):
        for j in range(8):
            mask[i, j] = j <= i
    for h in range(2):
        for i in range(8):
            for j in range(8):
                S[h, i, j] = 0.0
                for d in range(4):
                    S[h, i, j] += Q[h, i, d] * K[h, j, d]
                S[h, i, j] = S[h, i, j] * 0.5 if mask[i, j] else -inf
    for h in range(2):
        for i in range(8):
            M[h, i] = -inf
            for j in range(8):
                M[h, i] max= S[h, i, j]
            L[h, i] = 0.0
            for j in range(8):
                S[h, i, j] = exp(S[h, i, j] - M[h, i])
                L[h, i] += S[h, i, j]
            for d in range(4):
                O[h, i, d] = 0.0
                for j in range(8):
                    O[h, i, d] += S[h, i, j] * V[h, j, d]
                O[h, i, d] = O[h, i, d] / L[h, i]
"""

SLICE = """kernel sl(A: f32[16, 8] input, B: f32[8, 16] input, Y: f32[4, 16] output):
    local C: f32[16, 16]
    for i in range(16):
        for j in range(16):
            C[i, j] = 0.0
            for k in range(8):
                C[i, j] += A[i, k] * B[k, j]
    for i in range(4):
        for j in range(16):
            Y[i, j] = C[i + 4, j]
"""

PAD = """kernel pad(X: f32[2, 6, 6] input, W: f32[3, 2, 3, 3] weight, Y: f32[3, 6, 6] output):
    local P: f32[2, 8, 8]
    for c in range(2):
        for h in range(8):
            for w in range(8):
                P[c, h, w] = 0.0
    for c in range(2):
        for h in range(6):
            for w in range(6):
                P[c, h + 1, w + 1] = X[c, h, w]
    for o in range(3):
        for p in range(6):
            for q in range(6):
                Y[o, p, q] = 0.0
                for c in range(2):
                    for r in range(3):
                        for s in range(3):
                            Y[o, p, q] += P[c, p + r, q + s] * W[o, c, r, s]
"""


def counts(k: Kernel) -> dict[str, int]:
    """Iterations per statement text (summed over copies of a guarded statement)."""
    out: dict[str, int] = {}
    for c in statements(k):
        key = print_assign(k, c.stmt)
        out[key] = out.get(key, 0) + iteration_count(c)
    return out


def run_both(text: str, exact: bool) -> tuple[Kernel, Kernel]:
    k = parse_kernel(text, "t.loop")
    n = narrow(k).kernel
    rng = np.random.default_rng(7)
    ins = {t.name: rng.standard_normal(t.shape).astype(np.float32) for t in k.by_role("input", "weight")}
    a, b = execute(k, ins), execute(n, ins)
    for name in a:
        assert np.isfinite(a[name]).all()
        if exact:
            np.testing.assert_array_equal(a[name], b[name])
        else:  # the executor may sum a guarded contraction in another order: last-bit differences
            np.testing.assert_allclose(a[name], b[name], rtol=1e-5, atol=1e-6)
    return k, n


def test_tril_of_a_matmul_costs_the_lower_triangle():
    k, n = run_both(TRIL, exact=True)
    # 36 pairs j <= i of 64; 28 strict-upper outputs become stores of 0.0, the select disappears
    assert counts(n) == {"C[i, j] = 0.0": 36, "C[i, j] += A[i, k] * B[k, j]": 36 * 5,
                         "Y[i, j] = C[i, j]": 36, "Y[i, j] = 0.0": 28}
    before, after = kernel_costs(k), kernel_costs(n)
    assert (before.flops_matrix, before.flops_vector) == (2 * 64 * 5, 2 * 64)   # cmp + select
    assert (after.flops_matrix, after.flops_vector) == (2 * 36 * 5, 0)


def test_causal_attention_with_a_mask_skips_the_masked_half():
    k, n = run_both(CAUSAL, exact=False)
    pairs = 2 * 36                    # heads x (j <= i) of 8 tokens
    assert counts(n) == {
        "S[h, i, j] = 0.0": pairs,
        "S[h, i, j] += Q[h, i, d] * K[h, j, d]": pairs * 4,
        "S[h, i, j] = S[h, i, j] * 0.5": pairs,          # the select is gone under j <= i
        "M[h, i] = -inf": 16,
        "M[h, i] max= S[h, i, j]": pairs,                # -inf contributions dropped
        "L[h, i] = 0.0": 16,
        "S[h, i, j] = exp(S[h, i, j] - M[h, i])": pairs,  # exp(-inf - m) = 0 never computed
        "L[h, i] += S[h, i, j]": pairs,                  # += 0 dropped
        "O[h, i, d] = 0.0": 64,
        "O[h, i, d] += S[h, i, j] * V[h, j, d]": pairs * 4,   # 0 * V dropped
        "O[h, i, d] = O[h, i, d] / L[h, i]": 64,
    }                                 # the mask itself is no longer read, hence gone
    assert "mask" not in print_kernel(n).split("local mask: bool[8, 8]")[1]
    before, after = kernel_costs(k), kernel_costs(n)
    assert before.flops_matrix == 2 * (2 * 2 * 8 * 8 * 4) == 2048
    assert after.flops_matrix == 2 * (2 * pairs * 4) == 1152


def test_slice_of_a_matmul_computes_the_sliced_rows():
    k, n = run_both(SLICE, exact=True)
    assert counts(n) == {"C[i, j] = 0.0": 4 * 16, "C[i, j] += A[i, k] * B[k, j]": 4 * 16 * 8,
                         "Y[i, j] = C[i + 4, j]": 64}
    assert kernel_costs(n).flops_matrix == 2 * 4 * 16 * 8


def test_padding_taps_are_not_work():
    k, n = run_both(PAD, exact=False)
    # valid taps per spatial dim: p = 0 and 5 see 2 of 3, p = 1..4 all 3: 2 + 4*3 + 2 = 16
    assert counts(n) == {"P[c, h + 1, w + 1] = X[c, h, w]": 2 * 36, "Y[o, p, q] = 0.0": 3 * 36,
                         "Y[o, p, q] += P[c, p + r, q + s] * W[o, c, r, s]": 3 * 2 * 16 * 16}
    assert counts(k)["Y[o, p, q] += P[c, p + r, q + s] * W[o, c, r, s]"] == 3 * 2 * 36 * 9
    assert "P[c, h, w] = 0.0" not in print_kernel(n)    # the fill: border unread, interior overwritten


def test_value_dependent_mask_is_not_narrowed():
    text = """kernel vm(A: f32[4, 3] input, B: f32[3, 4] input, G: f32[4, 4] input, Y: f32[4, 4] output):
    local C: f32[4, 4]
    for i in range(4):
        for j in range(4):
            C[i, j] = 0.0
            for k in range(3):
                C[i, j] += A[i, k] * B[k, j]
            Y[i, j] = C[i, j] if G[i, j] > 0.0 else 0.0
"""
    r = narrow(parse_kernel(text, "t.loop"))
    assert r.changed == ()
    assert print_kernel(r.kernel) == print_kernel(parse_kernel(text, "t.loop"))


def test_masked_output_becomes_constant_stores():
    text = """kernel mo(X: f32[6, 6] input, Y: f32[6, 6] output):
    for i in range(6):
        for j in range(6):
            Y[i, j] = exp(X[i, j] if j <= i else -inf)
"""
    k, n = run_both(text, exact=True)
    assert counts(n) == {"Y[i, j] = exp(X[i, j])": 21, "Y[i, j] = 0.0": 15}
    assert kernel_costs(n).flops_vector == 21      # one exp per kept point (was 3 per point)
    assert kernel_costs(k).flops_vector == 3 * 36


def test_overwritten_fill_is_dead():
    text = """kernel ow(X: f32[5] input, Y: f32[5] output):
    for i in range(5):
        Y[i] = 0.0
    for i in range(5):
        Y[i] = X[i] * 2.0
"""
    k, n = run_both(text, exact=True)
    assert counts(n) == {"Y[i] = X[i] * 2.0": 5}


def test_slices_written_apart_kill_nothing_and_an_overlap_kills_its_part():
    """A concatenation's slices (Y[0:4], Y[4:8]) are written by separate nests: their boxes are
    disjoint, so no isl intersection is needed to see that neither kills the other; a later nest
    overwriting Y[2:6] kills the last two points of the first slice and the first two of the
    second, exactly."""
    text = """kernel cat(X: f32[8] input, Y: f32[8] output):
    for i in range(4):
        Y[i] = X[i] * 2.0
    for i in range(4):
        Y[i + 4] = X[i] * 3.0
    for i in range(4):
        Y[i + 2] = X[i] + 1.0
"""
    from solar_compiler.transforms import needed_points

    k, n = run_both(text, exact=True)
    assert counts(n) == {"Y[i] = X[i] * 2.0": 2, "Y[i + 4] = X[i] * 3.0": 2, "Y[i + 2] = X[i] + 1.0": 4}
    assert needed_points._disjoint([(0, 3)], [(4, 7)]) and not needed_points._disjoint([(0, 3)], [(2, 5)])
    assert not needed_points._disjoint(None, [(4, 7)])


def test_scan_and_examples_unchanged():
    for name in ("cumsum", "softmax", "layernorm", "matmul", "conv2d", "causal_attention"):
        k = parse_kernel(open(f"examples/loop/{name}.loop").read(), f"{name}.loop")
        assert narrow(k).changed == (), name


# a non-scan loop carrying a dependence (T[i - 1]): narrowing refuses it
CARRIED = """kernel bad(X: f32[5] input, Y: f32[5] output):
    local T: f32[5]
    for i in range(5):
        T[i] = X[i]
        if i >= 1:
            T[i] = T[i - 1] + X[i]
        Y[i] = T[i]
"""


def test_loop_carried_dependence_is_rejected():
    with pytest.raises(LoopIRError):
        narrow(parse_kernel(CARRIED, "t.loop"))


# ---- the pass ----------------------------------------------------------------------------------------
def run_pass(text: str, passes: str) -> ModuleOp:
    module = kernels_to_module([parse_kernel(text, "t.loop")])
    for name in passes.split(","):
        all_passes()[name]()().apply(Context(), module)
    return module


def test_pass_keeps_the_program_as_written_beside_it():
    m = run_pass(TRIL, "narrow-needed,narrow-needed")
    (snap,) = [o for o in m.body.block.ops if isinstance(o, AsWrittenOp)]  # a second run keeps the first
    (written,) = [op_to_kernel(k) for k in snap.body.block.ops]
    assert print_kernel(written) == print_kernel(parse_kernel(TRIL, "t.loop"))
    rec = as_written_record(m)["tril"]
    assert rec["flops_matrix"] == 640 and rec["flops_vector"] == 128
    assert rec["compulsory_bytes"] == (40 + 40 + 64) * 4
    assert [g.kernel_name for g in module_graphs(m)] == ["tril"]  # the snapshot is not a program


def test_pass_after_lift_einsum_narrows_the_graph():
    lifted_first = run_pass(TRIL, "lift-einsum,narrow-needed")
    narrowed_first = run_pass(TRIL, "narrow-needed,lift-einsum")
    assert [type(o).__name__ for o in lifted_first.body.block.ops] == ["AsWrittenOp", "GraphOp"]
    a, b = module_costs(lifted_first)[0], module_costs(narrowed_first)[0]
    assert (a.flops_matrix, a.flops_vector) == (b.flops_matrix, b.flops_vector) == (360, 0)
    assert [(o.flops, o.bytes) for o in a.ops] == [(o.flops, o.bytes) for o in b.ops]
    assert as_written_record(lifted_first) == as_written_record(narrowed_first)


def test_reduction_is_never_split():
    # j == 2 contributes 0 (dropped) but {j != 2} is not convex: one copy on the hull, i.e. all j,
    # and no pair of statements accumulating into one element (which would not be distributable).
    text = """kernel ns(X: f32[3, 4] input, Y: f32[3] output):
    for i in range(3):
        Y[i] = 0.0
        for j in range(4):
            Y[i] += X[i, j] * (0.0 if j == 2 else 1.0)
"""
    k, n = run_both(text, exact=True)
    assert counts(n) == counts(k)
    assert len(statements(n)) == 2


def test_a_reduction_whose_pieces_write_apart_is_split():
    # a block-diagonal B (torch.block_diag): the products with its two zero blocks add 0; the kept
    # points are two blocks, not convex, whose writes (j < 4, j >= 4) are disjoint: two guarded copies
    # of the contraction, half its products (the hull would keep all of them)
    text = """kernel bd(x: f32[8, 8] input, w: f32[4, 4] input, v: f32[4, 4] input, Y: f32[8, 8] output):
    local B: f32[8, 8]
    for i in range(4):
        for j in range(8):
            if j < 4:
                B[i, j] = w[i, j]
            if j >= 4:
                B[i, j] = 0.0
    for i in range(4):
        for j in range(8):
            if j < 4:
                B[i + 4, j] = 0.0
            if j >= 4:
                B[i + 4, j] = v[i, j - 4]
    for i in range(8):
        for j in range(8):
            Y[i, j] = 0.0
            for k in range(8):
                Y[i, j] += x[i, k] * B[k, j]
"""
    k, n = run_both(text, exact=False)
    assert counts(n)["Y[i, j] += x[i, k] * B[k, j]"] == 8 * 8 * 4
    assert kernel_costs(n).flops_matrix == 2 * 8 * 8 * 4 == kernel_costs(k).flops_matrix // 2


@settings(max_examples=25, deadline=None)
@given(st.integers(2, 7), st.integers(2, 7), st.integers(1, 4), st.integers(-3, 3), st.integers(0, 3),
       st.sampled_from(["ge", "lt"]))
def test_random_masks_and_slices_keep_outputs(n: int, m: int, k: int, off: int, lo: int, pred: str):
    lo = min(lo, n - 1)
    cond = f"j <= i + {off}" if pred == "ge" else f"j > i + {off}"
    text = f"""kernel rnd(A: f32[{n}, {k}] input, B: f32[{k}, {m}] input, Y: f32[{n - lo}, {m}] output):
    local C: f32[{n}, {m}]
    local P: f32[{n}, {m}]
    for i in range({n}):
        for j in range({m}):
            C[i, j] = 0.0
            for q in range({k}):
                C[i, j] += A[i, q] * B[q, j]
            P[i, j] = C[i, j] if {cond} else -inf
    for i in range({n - lo}):
        for j in range({m}):
            Y[i, j] = exp(P[i + {lo}, j])
"""
    k0, n0 = run_both(text, exact=False)
    # every product kept belongs to a row >= lo whose column passes the mask
    want = sum(1 for i in range(lo, n) for j in range(m) if (j <= i + off) == (pred == "ge")) * k
    got = counts(n0).get("C[i, j] += A[i, q] * B[q, j]", 0)
    assert got == want


def test_narrowing_out_of_cpu_budget_counts_only_the_output_writes_and_says_so():
    """`narrow(seconds=...)`: a budget already spent (0 s) gives the kernel's floor (`output_floor`),
    the reason in `gave_up`, not the kernel as written (which counts work no output may need: a
    bound must err low when an analysis gives up). The pass puts the reason in the module's notes
    and snapshots the kernel as written; the costs are the floor's: no arithmetic, no reads, the
    64 f32 elements of Y written once (256 B), against the written 2 * 64 * 5 matrix FLOPs (the
    narrowed kernel has 2 * 36 * 5)."""
    k = parse_kernel(TRIL, "tril.loop")
    res = narrow(k, seconds=0.0)
    assert print_kernel(res.kernel).splitlines()[-3:] == [
        "    for i in range(8):", "        for j in range(8):", "            Y[i, j] = 0.0"]
    assert res.origin == (2,)
    assert res.changed == ("S0 C[i, j] = 0.0: removed (output floor)",
                           "S1 C[i, j] += A[i, k] * B[k, j]: removed (output floor)",
                           "S2 Y[i, j] = C[i, j] if i >= j else 0.0: output floor, a constant store")
    assert res.gave_up == ("narrowing tril took over 0 s of CPU: only its output writes are counted "
                           "(a sound floor); its work as written is in the as-written figures")
    assert narrow(k, seconds=60.0).gave_up is None

    from solar_compiler.passes.narrow_needed import NarrowNeededPass
    from solar_compiler.records import program_info

    m = kernels_to_module([k])
    NarrowNeededPass(seconds=1e-9, statement_seconds=0.0).apply(Context(), m)
    assert program_info(m).notes == [res.gave_up.replace("over 0 s", "over 1e-09 s")]
    ((g,),) = [module_costs(m)]
    assert (g.flops_matrix, g.flops_vector) == (0, 0)
    assert g.compulsory_bytes == g.bytes_unfused == 64 * 4
    assert as_written_record(m)["tril"]["flops_matrix"] == 2 * 64 * 5


FLOOR = """kernel parts(A: f32[4] input, Y: f32[8] output, Z: f32[2] output, S: f32[1] output):
    local T: f32[4]
    for i in range(4):
        T[i] = A[i] * 2.0
    for i in range(4):
        Y[i] = T[i] + 1.0
    for i in range(4):
        Y[i + 4] = A[i] - 1.0
    for i in range(2):
        Z[i] = A[i]
    for i in range(2):
        Z[i] = A[i + 2] * A[i]
    S[0] = 0.0
    for i in range(4):
        S[0] += T[i]
"""


def test_the_output_floor_keeps_the_writes_narrowing_keeps_whole():
    """The floor keeps an output write that no later write may overwrite (the two halves of Y:
    their write boxes [0, 3] and [4, 7] are apart), drops one that a later write overwrites (the
    first Z), the reduction into S (its init stays: it writes every element) and the local T.
    Every kept write is kept whole by narrowing too, so the floor is at or below it."""
    from solar_compiler.transforms.narrow import output_floor

    k = parse_kernel(FLOOR, "parts.loop")
    floor, origin, notes = output_floor(k)
    assert [print_assign(floor, c.stmt) for c in statements(floor)] == [
        "Y[i] = 0.0", "Y[i + 4] = 0.0", "Z[i] = 0.0", "S[0] = 0.0"]
    assert origin == (1, 2, 4, 5)
    assert len(notes) == 6  # T, the first Z and the reduction removed; three stores made constant
    narrowed = kernel_costs(narrow(k).kernel)
    low = kernel_costs(floor)
    assert (low.flops_matrix, low.flops_vector) == (0, 0)
    assert low.compulsory_bytes == low.bytes_unfused == (8 + 2 + 1) * 4  # no reads, each element once
    assert low.bytes_unfused <= narrowed.bytes_unfused and low.compulsory_bytes <= narrowed.compulsory_bytes


def test_cpu_budget_holds_inside_one_long_library_call(monkeypatch):
    """The budget is checked between isl operations, but one isl call on a window partition's
    div/mod sets ran for minutes (KernelBench L3 29_SwinMLP, 30_SwinTransformerV2) and holds the GIL,
    so no Python check runs. narrow(seconds=...) computes in a forked child that the kernel stops
    (RLIMIT_CPU): here one C call that never returns to Python (an endless `sum`) stands in for the
    isl call, and the kernel comes back as written, with the reason. (A kernel of div/mod
    arithmetic: only such a kernel's isl calls can stall, so only such a kernel narrows in a child.)"""
    from solar_compiler.transforms import narrow as narrowing

    def stuck(k):
        return sum(range(10**15))

    monkeypatch.setattr(narrowing, "_once", stuck)
    monkeypatch.setattr(narrowing, "CPU_SLACK", 0.0)
    k = parse_kernel(WINDOWS, "swin.loop")
    res = narrow(k, seconds=0.5)
    assert res.gave_up == ("narrowing swin took over 0.5 s of CPU: only its output writes are counted "
                           "(a sound floor); its work as written is in the as-written figures")
    assert [print_assign(res.kernel, c.stmt) for c in statements(res.kernel)] == [
        "y[i, c] = 0.0", "z[i] = 0.0"]


def test_narrowing_in_the_child_gives_the_same_kernel_and_raises_its_errors(monkeypatch):
    """With a budget, a kernel of div/mod arithmetic is narrowed in a forked child and pickled back:
    the same narrowed kernel, notes and origins as without one; an error in the child is raised in
    the caller."""
    from solar_compiler.transforms import narrow as narrowing

    forks = []
    fork = narrowing.call_with_cpu_limit
    monkeypatch.setattr(narrowing, "call_with_cpu_limit", lambda fn, s: forks.append(s) or fork(fn, s))
    k = parse_kernel(WINDOWS, "swin.loop")
    a, b = narrow(k), narrow(k, seconds=60.0)
    assert forks == [60.0 + narrowing.CPU_SLACK]
    assert print_kernel(a.kernel) == print_kernel(b.kernel) and a.changed == b.changed
    assert a.origin == b.origin and b.gave_up is None and b.changed
    bad = parse_kernel(CARRIED.replace("X[i]\n", "X[i % 5]\n"), "t.loop")
    with pytest.raises(LoopIRError) as direct:
        narrow(bad)
    with pytest.raises(LoopIRError) as forked:
        narrow(bad, seconds=60.0)
    assert str(forked.value) == str(direct.value)
    assert len(forks) == 2


def test_plain_affine_kernels_narrow_in_this_process(monkeypatch):
    """Only div/mod index arithmetic or a strided loop gives isl sets existential variables, where
    one isl call can run for minutes; any other kernel narrows in this process with its budget
    checked between isl calls (no fork of a large process), with the same result."""
    from solar_compiler.transforms import narrow as narrowing

    def no_fork(fn, seconds):
        raise AssertionError("forked")

    want = narrow(parse_kernel(TRIL, "tril.loop"))
    monkeypatch.setattr(narrowing, "call_with_cpu_limit", no_fork)
    got = narrow(parse_kernel(TRIL, "tril.loop"), seconds=60.0)
    assert print_kernel(got.kernel) == print_kernel(want.kernel) and got.changed == want.changed
    assert not narrowing._may_stall_isl(parse_kernel(TRIL, "tril.loop"))
    assert narrowing._may_stall_isl(parse_kernel(WINDOWS, "swin.loop"))
    strided = TRIL.replace("range(8)", "range(0, 8, 2)", 1)
    assert strided != TRIL and narrowing._may_stall_isl(parse_kernel(strided, "s.loop"))


WINDOWS = """kernel swin(x: f32[16, 2] input, y: f32[16, 2] output, z: f32[8] output):
    local w: f32[4, 4, 2]
    local t: f32[16]
    for n in range(4):
        for p in range(4):
            for c in range(2):
                w[n, p, c] = x[(8*(n // 2) + 4*(p // 2) + 2*(n % 2) + p % 2 + 5) % 16, c] * 2.0
    for i in range(16):
        for c in range(2):
            y[i, c] = w[2*((i // 4) // 2) + (i % 4) // 2, 2*((i // 4) % 2) + (i % 4) % 2, c] + 1.0
    for i in range(16):
        t[i] = x[i, 0] * 3.0
    for i in range(8):
        z[i] = t[i // 4]
"""


def test_a_view_read_of_a_whole_tensor_needs_the_whole_tensor_as_a_box(monkeypatch):
    """A window partition of a rolled 4x4 image (w) read back through the window arithmetic (y):
    the div/mod read covers all 32 elements of w from its whole domain (an injective map with 32
    points), so w's needed set is its box, not isl's union of existential pieces that made
    inclusion tests run for minutes on Swin Transformer V2; everything is kept. z = t[i // 4]
    reads t[0] and t[1] only (16 elements, 8 points): not the whole tensor, so t is computed for
    i < 2 only (2 of 16 points), and the outputs are unchanged."""
    from solar_compiler.executor import needed

    seen = []
    reads_all = needed._reads_all
    monkeypatch.setattr(needed, "_reads_all",
                        lambda k, st, r, pts: seen.append((r.tensor, got := reads_all(k, st, r, pts))) or got)
    k, n = run_both(WINDOWS, exact=True)
    assert ("w", True) in seen and ("t", False) in seen and ("x", True) in seen
    assert narrow(k).changed == ("S2 t[i] = x[i, 0] * 3.0: guarded",)
    assert list(counts(n).values()) == [32, 32, 2, 8]


SHUFFLED = """kernel shuffled(X: f32[6, 8] input, W: f32[6, 3, 3] weight, Y: f32[6, 6] output,
                  Z: f32[4, 3, 3] output, V: f32[3, 4] output):
    for g in range(2):
        for o in range(3):
            for p in range(6):
                Y[3*g + o, p] = 0.0
                for c in range(3):
                    for r in range(3):
                        Y[3*g + o, p] += X[2*((c + 3*g) % 3) + (c + 3*g) // 3, p + r] * W[3*g + o, c, r]
    for w in range(4):
        for i in range(3):
            for j in range(3):
                Z[w, i, j] = X[3*(w // 2) + i, 3*(w % 2) + j]
    for b in range(3):
        for q in range(4):
            V[b, q] = X[2*(b % 3), 2*q]
"""


@pytest.mark.parametrize("index, box", [(0, True), (1, True), (2, False)],
                         ids=["channel shuffle", "window partition", "strided"])
def test_a_div_mod_read_of_a_whole_domain_is_its_box_when_it_fills_one(index, box):
    """`executor/needed.py` `_separable_image`: the elements a div/mod read touches from a whole box
    domain, enumerated per group of indices that share loop variables, equal isl's image (a grouped
    convolution reading a channel-shuffled input; a window partition whose row and column share the
    window number); a read whose values do not fill a box (even channels and columns only) is left to
    isl (None)."""
    from solar_compiler.executor.needed import _access, _separable_image, _Stmt
    from solar_compiler.loopir.ast import Read
    from solar_compiler.loopir.domain import domain

    k = parse_kernel(SHUFFLED, "shuffled.loop")
    ctx = statements(k)[1 + index]  # Y's reduction, Z, V
    st_ = _Stmt(ctx, domain(ctx))
    (read,) = [x for x in ctx.stmt.value.walk() if isinstance(x, Read) and x.tensor == "X"]
    got = _separable_image(st_, read, st_.dom)
    want = _access(ctx, "X", read.indices).intersect_domain(st_.dom).range()
    if box:
        assert got is not None and got.is_equal(want)
    else:  # 3 x 4 elements, not the 5 x 7 of their box
        assert got is None and want.count_val().to_python() == 12
    narrowed = narrow(k)
    assert narrowed.changed == () and print_kernel(narrowed.kernel) == print_kernel(k)


@pytest.mark.parametrize("index", [
    "5 * (((j + 3) % 12) // 4) + j % 4",                     # a rolled window partition
    "(7 * (((j + 5) % 12) // 3) + (j + 5) % 3) // 2",         # and a division of it
])
def test_a_kept_set_with_existential_divisions_becomes_guards(index):
    """A needed set whose isl form has divisions with no floor expression of their own ("some divs are
    unknown" before: an internal error) is given explicit ones (`compute_divs`) before it becomes
    guards: the producer keeps exactly the distinct elements the read touches, 1 FLOP each."""
    k = parse_kernel(f"""
kernel k(x: f32[60] input, out: f32[12] output):
    local t: f32[60]
    for i in range(60):
        t[i] = x[i] * 2.0
    for j in range(12):
        out[j] = t[{index}]
""", "rolled.loop")
    touched = {eval(index, {"j": j}) for j in range(12)}  # noqa: S307 (a literal of this test)
    narrowed = narrow(k)
    assert narrowed.changed
    assert sum(o.flops for o in kernel_costs(narrowed.kernel).ops) == len(touched)
    x = np.arange(60, dtype=np.float32)
    assert np.array_equal(execute(narrowed.kernel, {"x": x})["out"], execute(k, {"x": x})["out"])


def test_a_div_mod_image_is_a_box_only_when_every_cell_is_touched():
    """`_separable_image`'s test: index tuples (repeats allowed) fill their bounding box, or not."""
    from solar_compiler.executor.needed import _fills_box

    c = np.arange(120)
    shuffled = [40 * (c % 3) + c // 3]  # a channel shuffle touches every channel below 120
    assert _fills_box(shuffled, [0], [119])
    rows, cols = np.divmod(np.arange(64), 8)
    assert _fills_box([np.repeat(rows, 2), np.repeat(cols, 2)], [0, 0], [7, 7])  # repeats: still a box
    assert not _fills_box([rows[:-1], cols[:-1]], [0, 0], [7, 7])  # the last cell missing
    assert not _fills_box([2 * c], [0], [238])  # every other row
