"""Indirect writes (scatters) through the whole core: text and MLIR forms, verifier, executor
against NumPy's `ufunc.at`, dependence checks, mutants, hand-derived costs, lifting, narrowing and
the cache-aware model (compulsory traffic only)."""

from __future__ import annotations

import io

import numpy as np
import pytest
from xdsl.context import Context
from xdsl.dialects.builtin import Builtin
from xdsl.parser import Parser
from xdsl.printer import Printer
from xdsl.utils.exceptions import VerifyException

from solar_compiler.analysis.io_bounds import view
from solar_compiler.dialects.convert import kernels_to_module, module_kernels
from solar_compiler.dialects.einsum import Einsum
from solar_compiler.dialects.graph_convert import graph_to_kernel, lift_kernel
from solar_compiler.dialects.loop import Loop, StmtOp
from solar_compiler.executor import execute
from solar_compiler.loopir.affine import AffExpr
from solar_compiler.loopir.ast import (
    Assign,
    Cmp,
    Const,
    Kernel,
    LoopIRError,
    Read,
    Select,
    TensorDecl,
    statements,
    stmt_reads,
    typecheck,
)
from solar_compiler.loopir.domain import check_bounds
from solar_compiler.mutate import mutants
from solar_compiler.text.equation import equation
from solar_compiler.text.parser import parse_kernel
from solar_compiler.text.printer import print_kernel
from solar_compiler.transforms.kernels import kernel_costs
from solar_compiler.transforms.narrow import narrow

v = AffExpr.var

HIST = """kernel hist(ids: i64[16] input, dY: f32[16, 64] input, G: f32[10, 64] output):
    for r in range(10):
        for d in range(64):
            G[r, d] = 0.0
    for t in range(16):
        for d in range(64):
            G[ids[t], d] += dY[t, d] @ "emb.py:9"
"""

# every reduction kind, a computed (select) index and a scatter with two dynamic dims
KINDS = """kernel kinds(I: i64[6] input, J: i64[6] input, A: f32[6] input, B: f32[4, 3] output):
    for r in range(4):
        for c in range(3):
            B[r, c] = 1.0
    for k in range(6):
        B[I[k], 0] += A[k]
    for k in range(6):
        B[I[k], 1] max= A[k]
    for k in range(6):
        B[I[k], 2] min= A[k]
    for k in range(6):
        B[I[k], J[k]] *= A[k]
    for k in range(6):
        B[I[k] if A[k] > 0.0 else 3, 0] = A[k]
"""


def k_of(src: str, name: str = "t.loop") -> Kernel:
    return parse_kernel(src, name)


def _ctx() -> Context:
    ctx = Context()
    ctx.load_dialect(Builtin)
    ctx.load_dialect(Loop)
    ctx.load_dialect(Einsum)
    return ctx


def _print(op, generic: bool = False) -> str:
    buf = io.StringIO()
    Printer(stream=buf, print_generic_format=generic, print_debuginfo=True).print_op(op)
    return buf.getvalue()


# ---- text and AST ------------------------------------------------------------------------------------
def test_parse_gives_an_indirect_assign_and_prints_back():
    k = k_of(HIST)
    s = statements(k)[1].stmt
    assert s == Assign("G", (Read("ids", (v("t"),), "i64"), v("d")), "+=",
                       Read("dY", (v("t"), v("d")), "f32"), "emb.py:9")
    assert s.indirect and not statements(k)[0].stmt.indirect
    assert s.dynamic_indices == (Read("ids", (v("t"),), "i64"),)
    assert s.target_vars == {"t", "d"}  # `t` reaches the element through ids[t]
    assert [r.tensor for r in stmt_reads(s)] == ["dY", "ids"]
    text = print_kernel(k)
    assert "            G[ids[t], d] += dY[t, d] @ \"emb.py:9\"\n" in text
    assert k_of(text) == k and print_kernel(k_of(text)) == text


def test_select_index_and_typed_literals_round_trip():
    k = k_of(KINDS)
    last = statements(k)[-1].stmt
    assert last.indices[0] == Select(Cmp("gt", Read("A", (v("k"),), "f32"), Const(0.0, "f32"), "bool"),
                                     Read("I", (v("k"),), "i64"), Const(3, "i64"), "i64")
    assert k_of(print_kernel(k)) == k


@pytest.mark.parametrize(("index", "message"), [
    ("A[k]", "t.loop:4:9: indirect index into 'C' must be an integer, got f32"),
    ("A[k] > 0.0", "t.loop:4:9: indirect index into 'C' must be an integer, got bool"),
    ("I[k] + 0.5", "t.loop:4:9: float literal 0.5 where i64 is expected (write an integer, or cast)"),
    ("I[k, 0]", "t.loop:4:11: 'I' has rank 1 but is indexed with 2 indices"),
])
def test_bad_indirect_indices_are_one_line_errors(index: str, message: str):
    src = ("kernel k(I: i64[4] input, A: f32[4] input, C: f32[8] output):\n"
           f"    for k in range(4):\n        C[k] = 0.0\n        C[{index}] = A[k]\n")
    with pytest.raises(LoopIRError) as e:
        k_of(src)
    assert str(e.value) == message


def test_check_bounds_skips_dynamic_dims_but_checks_the_affine_ones_and_index_reads():
    check_bounds(k_of(HIST))  # ids[t] may hold anything: only the executor can check it
    bad = HIST.replace("G[ids[t], d] += dY[t, d]", "G[ids[t + 1], d] += dY[t, d]")
    with pytest.raises(LoopIRError, match=r"index 0 of 'ids' \(t \+ 1\) leaves the range \[0, 16\)"):
        check_bounds(k_of(bad))
    bad = HIST.replace("G[ids[t], d] += dY[t, d]", "G[ids[t], d + 1] += dY[t, d]")
    with pytest.raises(LoopIRError, match=r"index 1 of 'G' \(d \+ 1\) leaves the range \[0, 64\)"):
        check_bounds(k_of(bad))


# ---- MLIR -----------------------------------------------------------------------------------------------
@pytest.mark.parametrize("src", [HIST, KINDS], ids=["hist", "kinds"])
@pytest.mark.parametrize("generic", [False, True], ids=["custom", "generic"])
def test_mlir_round_trip(src: str, generic: bool):
    kernels = [k_of(src)]
    module = kernels_to_module(kernels)
    module.verify()
    text = _print(module, generic)
    back = Parser(_ctx(), text, "in.mlir").parse_module()
    back.verify()
    assert _print(back, generic) == text
    assert module_kernels(back) == kernels


def test_stmt_op_holds_positions_and_the_yield_the_index_values():
    module = kernels_to_module([k_of(KINDS)])
    stmts = [o for o in module.walk() if isinstance(o, StmtOp)]
    assert [o.dynamic_positions for o in stmts] == [(), (0,), (0,), (0,), (0, 1), (0,)]
    two = stmts[4]
    assert str(two.indices) == "affine_map<(d0) -> (0, 0)>"  # the placeholders of the two positions
    assert len(two.body.block.last_op.dyn_indices) == 2
    assert '"*=" dynamic array<i64: 0, 1> {' in _print(module)


def _verify(body: str) -> str:
    src = ('loop.kernel "k" {\n  loop.tensor "I" : i64 array<i64: 4> "input"\n'
           '  loop.tensor "C" : f32 array<i64: 8> "output"\n'
           '  loop.for "i" = affine_map<() -> (0)> to affine_map<() -> (4)> step 1 : i64 {\n' + body
           + "  }\n}\n")
    module = Parser(_ctx(), src, "v.mlir").parse_module()
    with pytest.raises(VerifyException) as e:
        module.verify()
    return str(e.value)


def test_verifier_errors():
    stmt = ('    loop.stmt "C" affine_map<(d0) -> ({idx})> "=" dynamic array<i64: {pos}> {{\n'
            '      %0 = loop.const 1.0 : f64 : f32\n'
            '      %1 = loop.read "I" affine_map<(d0) -> (d0)> dynamic array<i64> : i64\n'
            '      loop.yield %0 : f32{tail}\n    }}\n')
    assert "1 dynamic positions but loop.yield passes 0 index values" in \
        _verify(stmt.format(idx="0", pos="0", tail=""))
    assert "dynamic positions must be distinct dimensions in increasing order, got [1]" in \
        _verify(stmt.format(idx="0", pos="1", tail=" index(%1 : i64)"))
    assert "dynamic position 0 must hold the placeholder index 0" in \
        _verify(stmt.format(idx="d0", pos="0", tail=" index(%1 : i64)"))
    assert "indirect index into 'C' must be an integer" in \
        _verify(stmt.format(idx="0", pos="0", tail=" index(%0 : f32)"))


# ---- executor ---------------------------------------------------------------------------------------------
def test_executor_matches_numpy_ufunc_at_for_every_kind():
    rng = np.random.default_rng(3)
    ids = np.array([2, 0, 2, 3, 2, 1])  # 2 repeats three times
    jj = np.array([0, 2, 0, 1, 0, 2])
    a = rng.standard_normal(6).astype(np.float32)
    got = execute(k_of(KINDS), {"I": ids, "J": jj, "A": a})["B"]
    ref = np.ones((4, 3), np.float32)
    np.add.at(ref[:, 0], ids, a)
    np.maximum.at(ref[:, 1], ids, a)
    np.minimum.at(ref[:, 2], ids, a)
    np.multiply.at(ref, (ids, jj), a)
    for k in range(6):  # `=`: the last write in program order wins
        ref[ids[k] if a[k] > 0 else 3, 0] = a[k]
    np.testing.assert_allclose(got, ref, rtol=1e-6)


def test_executor_scatter_add_with_a_contraction_keeps_the_indexed_variable():
    # G[ids[t], j] += sum_k X[t, k] * W[k, j]: t must not be summed before scattering
    src = """kernel k(ids: i64[5] input, X: f32[5, 3] input, W: f32[3, 4] input, G: f32[2, 4] output):
    for r in range(2):
        for j in range(4):
            G[r, j] = 0.0
    for t in range(5):
        for j in range(4):
            for k in range(3):
                G[ids[t], j] += X[t, k] * W[k, j]
"""
    rng = np.random.default_rng(0)
    x, w = rng.standard_normal((5, 3)).astype(np.float32), rng.standard_normal((3, 4)).astype(np.float32)
    ids = np.array([1, 0, 1, 1, 0])
    ref = np.zeros((2, 4))
    np.add.at(ref, ids, x.astype(np.float64) @ w)
    got = execute(k_of(src), {"ids": ids, "X": x, "W": w})["G"]
    np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-6)


def test_out_of_range_dynamic_index_names_tensor_and_statement():
    ids = np.array([0, 1, 10, 2] * 4)
    with pytest.raises(LoopIRError) as e:
        execute(k_of(HIST, "h.loop"), {"ids": ids, "dY": np.zeros((16, 64), np.float32)})
    assert str(e.value) == ("h.loop:7:13: index 0 of 'G' is 10, outside [0, 10), at t=2 in the "
                            "statement writing 'G' (emb.py:9)")


def test_a_read_of_a_tensor_scattered_in_the_same_loop_is_rejected():
    src = """kernel k(I: i64[4] input, A: f32[4] input, C: f32[4] output):
    for i in range(4):
        C[i] = 0.0
    for i in range(4):
        C[I[i]] = A[i]
        C[i] += C[i]
"""
    with pytest.raises(LoopIRError, match="touch the same element of 'C' in different iterations of non-scan "
                                          "loop 'i'"):
        execute(k_of(src), {"I": np.arange(4), "A": np.ones(4, np.float32)})
    # the same program with a scan loop runs point by point in order
    got = execute(k_of(src.replace("for i in range(4):\n        C[I", "for i in scan(0, 4):\n        C[I")),
                  {"I": np.array([1, 0, 3, 2]), "A": np.arange(4, dtype=np.float32)})["C"]
    # i=0: C[1] = 0, C[0] += C[0] -> 0; i=1: C[0] = 1, C[1] -> 0; i=2: C[3] = 2, C[2] -> 0;
    # i=3: C[2] = 3, C[3] += C[3] -> 4
    np.testing.assert_array_equal(got, [1, 0, 3, 4])


# ---- mutants ----------------------------------------------------------------------------------------------
def test_mutants_of_a_scatter_mutate_its_loaded_index():
    descs = [d for d, _ in mutants(k_of(HIST, "h.loop")) if d.startswith("emb.py:9: ")]
    assert "emb.py:9: dynamic write index 0 of 'G': read index 0 of 'ids' +1" in descs
    assert "emb.py:9: dynamic write index 0 of 'G': read index 0 of 'ids' -1" in descs
    assert "emb.py:9: write index 1 of 'G' +1" in descs
    assert "emb.py:9: write index 0 of 'G' +1" not in descs  # a loaded index is not shifted


# ---- costs ----------------------------------------------------------------------------------------------
def test_costs_of_a_scatter_add_by_hand():
    g = kernel_costs(k_of(HIST))
    fill, acc = g.ops
    # S0: 10 x 64 fill, memory only, G written 640 * 4 = 2560 bytes
    assert (fill.unit, fill.flops, fill.bytes, fill.indirect) == ("memory", 0, 2560, False)
    # S1: 16 x 64 points, one add each; reads dY 16*64*4 = 4096 and ids 16*8 = 128; the accumulator
    # G read and written at the fewest elements it can touch: the affine dim d (64) x 1 = 256 each
    assert (acc.unit, acc.iterations, acc.flops_vector, acc.flops_matrix) == ("vector", 1024, 1024, 0)
    assert {a.tensor: (a.bytes, a.indirect) for a in acc.reads} == \
        {"dY": (4096, False), "ids": (128, False), "G": (256, True)}
    assert {a.tensor: (a.bytes, a.indirect) for a in acc.writes} == {"G": (256, True)}
    assert acc.indirect and acc.equation == "t d, t -> [ids[t]] d"
    # compulsory: ids 128 + dY 4096 + G 2560 (the fill writes every element) = 6784
    assert g.compulsory == {"ids": 128, "dY": 4096, "G": 2560} and g.compulsory_bytes == 6784


def test_costs_of_a_scatter_only_output_and_of_index_arithmetic():
    # No affine write of O: its compulsory bytes are the fewest elements the scatter can touch,
    # 1 (dim 0 loaded) x 3 (dim 1) = 3 elements * 4 = 12. The select, compare and add of the index
    # are 3 vector FLOPs per point as written (45) besides the value's multiply (15), but depend on
    # t alone: a legal implementation computes them once per t (15; analysis/vector_work.py).
    src = """kernel k(I: i64[5] input, A: f32[5, 3] input, O: f32[7, 3] output):
    for t in range(5):
        for c in range(3):
            O[I[t] + 1 if A[t, 0] > 0.0 else 0, c] = A[t, c] * 2.0
"""
    g = kernel_costs(k_of(src))
    (o,) = g.ops
    assert (o.flops_vector, o.iterations) == (3 * 5 + 15, 15)  # select, add, cmp per t + the multiply
    assert o.flops_vector_literal == 3 * 15 + 15
    assert g.compulsory == {"I": 40, "A": 60, "O": 12}


def test_a_contraction_scattered_by_rows_is_matrix_work():
    # out[ids[t], j] += X[t, k] * W[k, j]: k is reduced, t and j are kept -> 2 * 5 * 4 * 3 matrix FLOPs
    src = """kernel k(ids: i64[5] input, X: f32[5, 3] input, W: f32[3, 4] input, G: f32[2, 4] output):
    for r in range(2):
        for j in range(4):
            G[r, j] = 0.0
    for t in range(5):
        for j in range(4):
            for k in range(3):
                G[ids[t], j] += X[t, k] * W[k, j]
"""
    kk = typecheck(k_of(src))
    o = kernel_costs(kk).ops[1]
    assert (o.unit, o.flops_matrix, o.flops_vector, o.matrix_dtype) == ("matrix", 120, 0, "f32")
    # no reuse theorem for a scatter: compulsory traffic only
    assert view(lift_kernel(kk)).contractions == {}


# ---- lifting ----------------------------------------------------------------------------------------------
def test_lift_shows_the_loaded_index_and_never_folds_an_init_into_a_scatter():
    src = """kernel k(I: i64[4] input, A: f32[4] input, C: f32[8] output):
    for i in range(4):
        C[I[i]] = 0.0
        C[I[i]] += A[i]
    for i in range(8):
        C[i] = 0.0
"""
    graph = lift_kernel(typecheck(k_of(src)))
    nodes = graph.nodes()
    kernel, groups = graph_to_kernel(graph)
    got = [(n.sym_name.data, equation(kernel, g.main), n.dynamic_positions, n.init)
           for n, g in zip(nodes, groups, strict=True)]
    assert got == [("S0", "i -> [I[i]]", (0,), None), ("S1", "i, i -> [I[i]]", (0,), None),
                   ("S2", "-> i", (), None)]
    assert nodes[1].input_names == ["A", "I"]
    assert str(nodes[1].indexing_maps.data[-1].data) == "(d0)[s0] -> (s0)"  # the scatter's symbol


# ---- narrowing --------------------------------------------------------------------------------------------
SCATTER_THEN_READ = """kernel k(I: i64[4] input, A: f32[4] input, O: f32[8] output):
    local T: f32[8]
    for i in range(8):
        T[i] = 0.0
    for i in range(4):
        T[I[i]] += A[i]
    for i in range(4):
        O[i] = T[i]
    for i in range(4, 8):
        O[i] = 1.0
"""


def test_narrowing_keeps_a_scatter_whole_and_forgets_what_it_may_overwrite():
    k = k_of(SCATTER_THEN_READ)
    res = narrow(k)
    # nothing may change: T is no longer known to be 0 anywhere (else O[i] = T[i] would become a
    # constant store), the scatter keeps its whole domain, and since it accumulates into any row
    # of T, all 8 rows of the init are needed (not just the 4 that O reads)
    assert print_kernel(res.kernel) == print_kernel(typecheck(k)) and res.changed == ()
    feed = {"I": np.array([5, 1, 1, 2]), "A": np.array([1, 2, 3, 4], np.float32)}
    np.testing.assert_array_equal(execute(res.kernel, feed)["O"], [0, 5, 4, 0, 1, 1, 1, 1])


def test_narrowing_an_indirect_overwrite_neither_kills_nor_is_killed():
    src = """kernel k(I: i64[4] input, A: f32[4] input, O: f32[8] output):
    for i in range(8):
        O[i] = 1.0
    for i in range(4):
        O[I[i]] = A[i]
    for i in range(8):
        O[i] = O[i] * 2.0
"""
    k = k_of(src)
    res = narrow(k)
    assert print_kernel(res.kernel) == print_kernel(typecheck(k))
    feed = {"I": np.array([6, 0, 6, 3]), "A": np.array([1, 2, 3, 4], np.float32)}
    np.testing.assert_array_equal(execute(res.kernel, feed)["O"], [4, 2, 2, 8, 2, 2, 6, 2])


def test_a_scatter_built_in_python_is_typed_and_converts():
    k = Kernel("k", [TensorDecl("I", (4,), "i64", "input"), TensorDecl("O", (4,), "f32", "output")],
               [Assign("O", (Read("I", (AffExpr.lit(0),)),), "=", Const(1.0))])
    t = typecheck(k)
    assert t.body[0].indices[0] == Read("I", (AffExpr.lit(0),), "i64")
    assert module_kernels(kernels_to_module([k])) == [t]
