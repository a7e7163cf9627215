"""`reorder-chains`: trees found, orders priced with FLOPs derived by hand (docs/reorder-chains.md
section 6), the rewrite (IR, costs after it, MLIR round trip), the execution check, the report, and
every torch example: nothing changes where no order is better, and every rewrite validates."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest
from translated import UNSUPPORTED_TORCH_EXAMPLES, driver_options, ensure_translated, using_cache
from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp

from solar_compiler.analysis.chain_order import (
    emit,
    module_chain_plans,
    plan_program,
    step_tree,
    worth_pricing,
)
from solar_compiler.analysis.costs import module_costs, program_costs
from solar_compiler.analysis.graphs import module_graphs
from solar_compiler.dialects.convert import kernels_to_module
from solar_compiler.dialects.einsum import GraphOp
from solar_compiler.dialects.graph_convert import graph_to_kernel, lift_kernel
from solar_compiler.driver import main, with_reorder_chains
from solar_compiler.errors import SolarError
from solar_compiler.passes.lift_einsum import LiftEinsumPass
from solar_compiler.passes.reorder_chains import ReorderChainsPass
from solar_compiler.records import ChainsRecord, ProgramInfo
from solar_compiler.text.parser import parse_kernels
from solar_compiler.text.printer import print_kernel
from solar_compiler.transforms import chain_check
from solar_compiler.transforms.kernels import module_kernels

ROOT = Path(__file__).resolve().parent.parent
CTX = Context()


def kernel(text: str):
    (k,) = parse_kernels(textwrap.dedent(text), "t.loop")
    return k


def plans_of(text: str):
    g = lift_kernel(kernel(text))
    return plan_program(g, program_costs(g))


def lifted(text: str) -> ModuleOp:
    m = kernels_to_module([kernel(text)])
    ProgramInfo("t.loop", "loop-text").store(m)
    LiftEinsumPass().apply(CTX, m)
    return m


def reordered(text: str, **kw) -> ModuleOp:
    m = lifted(text)
    ReorderChainsPass(**kw).apply(CTX, m)
    return m


def graphs_text(m: ModuleOp) -> str:
    return "\n".join(str(o) for o in m.body.block.ops if isinstance(o, GraphOp))


CHAIN = """\
    kernel chain(A: f32[256, 32] input, B: f32[32, 256] input, C: f32[256, 16] input, Y: f32[256, 16] output):
        local T: f32[256, 256]
        for i in range(256):
            for j in range(256):
                T[i, j] = 0.0
        for i in range(256):
            for j in range(256):
                for k in range(32):
                    T[i, j] += A[i, k] * B[k, j]
        for i in range(256):
            for l in range(16):
                Y[i, l] = 0.0
        for i in range(256):
            for l in range(16):
                for j in range(256):
                    Y[i, l] += T[i, j] * C[j, l]
    """

# LoRA as the torch frontend writes it: x flattened by a view, then unflattened by the scale.
LORA = """\
    kernel lora(x: f32[2, 32, 1024] input, A: f32[1024, 16] weight, B: f32[16, 1024] weight,
                Y: f32[2, 32, 1024] output):
        local W: f32[1024, 1024]
        local U: f32[64, 1024]
        for i in range(1024):
            for j in range(1024):
                W[i, j] = 0.0
                for r in range(16):
                    W[i, j] += A[i, r] * B[r, j]
        for t in range(64):
            for j in range(1024):
                U[t, j] = 0.0
                for k in range(1024):
                    U[t, j] += x[t // 32, t % 32, k] * W[k, j]
        for b in range(2):
            for s in range(32):
                for j in range(1024):
                    Y[b, s, j] = U[32*b + s, j] * 2.0
    """


# ---- hand-derived FLOPs --------------------------------------------------------------------------------
def test_three_matrix_chain_both_orders_by_hand():
    (plan,) = plans_of(CHAIN)
    M, K, N, P = 256, 32, 256, 16
    assert plan.tree.written == "((A * B) * C)"
    assert plan.written.flops == 2 * M * K * N + 2 * M * N * P == 6_291_456
    assert plan.best.words == "(A * (B * C))" and plan.best.optimizer == "optimal"
    assert plan.best.cost.flops == 2 * K * N * P + 2 * M * K * P == 524_288
    assert plan.best.path == ((1, 2), (0, 1)) and plan.better and plan.ratio == 12
    # bytes, each node alone (f32): fill of T, A @ B reading T's accumulator, T @ C reading Y's
    assert plan.written.bytes == 4 * (M * N + (M * K + K * N + 2 * M * N) + (M * N + N * P + 2 * M * P))
    assert plan.best.cost.bytes == 4 * ((K * N + N * P + K * P) + (M * K + K * P + 2 * M * P))


def test_lora_both_orders_by_hand_through_a_flattening_view():
    (plan,) = plans_of(LORA)
    T, D, R = 64, 1024, 16
    # the view is delinearised: x is indexed by the two variables of the flattened t again
    assert plan.tree.equation() == "Y[b, s, j] = sum(k, r) x[b, s, k] * A[k, r] * B[r, j] * 2"
    assert plan.written.flops == 2 * D * R * D + 2 * T * D * D + T * D == 167_837_696
    assert plan.best.cost.flops == 2 * T * D * R + 2 * T * R * D == 4_194_304  # the scale folds in free
    assert plan.best.words == "(B * (x * A) * 2)"


def test_absorbed_order_under_a_mask_keeps_the_narrowed_domain():
    text = """\
        kernel latent(Q: f32[4, 16] input, W: f32[16, 32] weight, L: f32[64, 32] input, S: f32[4, 64] output):
            local K: f32[64, 16]
            for t in range(64):
                for d in range(16):
                    K[t, d] = 0.0
                    for c in range(32):
                        K[t, d] += L[t, c] * W[d, c]
            for s in range(4):
                for t in range(64):
                    S[s, t] = 0.0
                    if t <= s + 60:
                        for d in range(16):
                            S[s, t] += Q[s, d] * K[t, d]
        """
    (plan,) = plans_of(text)
    pairs = 61 + 62 + 63 + 64  # (s, t) with t <= s + 60
    assert plan.written.flops == 2 * 64 * 16 * 32 + 2 * 16 * pairs == 73_536
    assert plan.best.cost.flops == 2 * 4 * 16 * 32 + 2 * 32 * pairs == 20_096
    out = print_kernel(graph_to_kernel(plan.best.graph)[0])
    assert "if s + 60 >= t:" in out and out.count("if ") == 1


def test_a_mask_no_step_can_hold_is_not_emitted():
    """`A[a, x] B[x, y] C[y, b]` under `a <= b`, output x: no order of two steps holds a and b."""
    text = """\
        kernel m(A: f32[8, 4] input, B: f32[4, 4] input, C: f32[4, 8] input, Y: f32[4] output):
            local T: f32[8, 4]
            for a in range(8):
                for y in range(4):
                    T[a, y] = 0.0
                    for x in range(4):
                        T[a, y] += A[a, x] * B[x, y]
            for y in range(4):
                Y[y] = 0.0
                for a in range(8):
                    for b in range(8):
                        if a <= b:
                            Y[y] += T[a, y] * C[y, b]
        """
    k = kernel(text)
    g = lift_kernel(k)
    (plan,) = plan_program(g, program_costs(g))
    t = plan.tree
    decls = g.tensor_ops()
    assert [f.tensor for f in t.tensor_factors] == ["A", "B", "C"]
    assert [str(c) for c in t.constraints] == ["b >= a"]
    # (A * C) first holds a and b together; (A * B) first sums a away before C brings b, and (B * C)
    # sums b away before A brings a: neither can apply the mask, so neither is emitted
    assert emit(t, step_tree([(0, 2), (0, 1)], 3), "test", decls, set()) is not None
    assert emit(t, step_tree([(0, 1), (0, 1)], 3), "test", decls, set()) is None
    assert emit(t, step_tree([(1, 2), (0, 1)], 3), "test", decls, set()) is None


def test_written_order_already_best_is_left_alone():
    text = """\
        kernel c(A: f32[4, 64] input, B: f32[64, 8] input, C: f32[8, 64] input, Y: f32[4, 64] output):
            local T: f32[4, 8]
            for i in range(4):
                for j in range(8):
                    T[i, j] = 0.0
                    for k in range(64):
                        T[i, j] += A[i, k] * B[k, j]
            for i in range(4):
                for l in range(64):
                    Y[i, l] = 0.0
                    for j in range(8):
                        Y[i, l] += T[i, j] * C[j, l]
        """
    (plan,) = plans_of(text)
    assert plan.written.flops == plan.best.cost.flops == 2 * 4 * 64 * 8 * 2 and not plan.better
    m1, m2 = lifted(text), reordered(text)
    assert graphs_text(m1) == graphs_text(m2)
    rec = ChainsRecord.load(m2)
    assert rec.applied and rec.validation is None and rec.trees[0].better is False


def test_ties_are_not_rewritten():
    """RMSNorm-like scaling and a sum of squares: the same FLOPs in any order."""
    text = """\
        kernel n(X: f32[8, 64] input, r: f32[8] input, w: f32[64] weight, Y: f32[8, 64] output,
                 S: f32[8] output):
            local T: f32[8, 64]
            local P: f32[8, 64]
            for i in range(8):
                for j in range(64):
                    T[i, j] = X[i, j] * r[i]
            for i in range(8):
                for j in range(64):
                    Y[i, j] = T[i, j] * w[j]
            for i in range(8):
                for j in range(64):
                    P[i, j] = X[i, j] * X[i, j]
            for i in range(8):
                S[i] = 0.0
                for j in range(64):
                    S[i] += P[i, j]
        """
    plans = plans_of(text)
    assert [p.written.flops for p in plans] == [2 * 8 * 64, 2 * 8 * 64]
    assert not any(p.better for p in plans)


def test_scale_between_contractions_commutes_and_folds_in():
    text = """\
        kernel s(A: f32[16, 8] input, B: f32[8, 16] input, g: f32[16] weight, Y: f32[16, 16] output):
            local T: f32[16, 16]
            local U: f32[16, 16]
            for i in range(16):
                for j in range(16):
                    T[i, j] = 0.0
                    for k in range(8):
                        T[i, j] += A[i, k] * B[k, j]
            for i in range(16):
                for j in range(16):
                    U[i, j] = T[i, j] / 4.0
            for i in range(16):
                for j in range(16):
                    Y[i, j] = -U[i, j] * g[j]
        """
    (plan,) = plans_of(text)
    assert plan.written.flops == 2 * 16 * 16 * 8 + 16 * 16 + 2 * 16 * 16  # div; neg and mul
    assert plan.best.cost.flops == 2 * 16 * 16 * 8 and plan.best.cost.nodes == 1
    m = reordered(text)
    assert ChainsRecord.load(m).validation["validated"]


# ---- the rewrite --------------------------------------------------------------------------------------
def test_rewrite_declares_erases_and_the_costs_follow():
    m = reordered(CHAIN)
    (g,) = [o for o in m.body.block.ops if isinstance(o, GraphOp)]
    assert list(g.tensor_ops()) == ["A", "B", "C", "Y", "Y_r0"]          # T erased, Y_r0 declared
    assert [n.sym_name.data for n in g.nodes()] == ["S3_r0", "S2", "S3"]  # the fill of T is gone
    g.verify()
    scopes = [set(n.ints(n.scopes)) for n in g.nodes()]
    assert not scopes[0] & scopes[2]                                      # fresh loops for the new step
    (costs,) = module_costs(m)
    assert sum(o.flops for o in costs.ops) == 524_288                     # every later analysis sees it
    rec = ChainsRecord.load(m)
    assert rec.validation["validated"] and rec.validation["how"] == "whole program"
    assert rec.validation["max_rel_err"] < 1e-12 and rec.trees[0].nodes_best == ("S3_r0", "S3")


def test_rewritten_module_round_trips_through_mlir(capsys, tmp_path):
    src = tmp_path / "c.loop"
    src.write_text(textwrap.dedent(CHAIN))
    assert main([str(src), "-p", "lift-einsum,reorder-chains", "-o", str(tmp_path / "c.mlir")]) == 0
    assert main([str(tmp_path / "c.mlir"), "-t", "loop"]) == 0
    out = capsys.readouterr().out
    assert "local Y_r0: f32[16, 32]" in out and "Y_r0[l, k] += B[k, j] * C[j, l]" in out


def test_bias_root_keeps_its_init_and_one_unfused_kernel():
    text = """\
        kernel b(A: f32[64, 4] input, B: f32[4, 64] input, C: f32[64, 4] input, c: f32[4] weight,
                 Y: f32[64, 4] output):
            local T: f32[64, 64]
            for i in range(64):
                for j in range(64):
                    T[i, j] = 0.0
                    for k in range(4):
                        T[i, j] += A[i, k] * B[k, j]
            for i in range(64):
                for l in range(4):
                    Y[i, l] = c[l]
            for i in range(64):
                for l in range(4):
                    for j in range(64):
                        Y[i, l] += T[i, j] * C[j, l]
        """
    m = reordered(text)
    (k,) = module_kernels(m)
    out = print_kernel(k)
    steps = ["Y_r0[l, k] +=", "Y[i, l] = c[l]", "Y[i, l] += A[i, k] * Y_r0[l, k]"]
    assert [out.index(x) for x in steps] == sorted(out.index(x) for x in steps)
    assert ChainsRecord.load(m).validation["validated"]


def test_a_wrong_rewrite_is_caught_by_execution(monkeypatch):
    import solar_compiler.analysis.chain_order as co

    real = co._nest

    def drop_last(target, product, *args, **kw):  # every step loses its last factor
        return real(target, product[:-1] or product, *args, **kw)

    monkeypatch.setattr(co, "_nest", drop_last)
    with pytest.raises(SolarError, match="does not reproduce the original .*bug in reorder-chains"):
        reordered(CHAIN)


def test_too_large_for_the_whole_program_checks_each_tree(monkeypatch):
    text = textwrap.dedent(CHAIN).replace("kernel chain(", "kernel chain(Z: f32[512, 512] input, "
                                                           "ZZ: f32[512, 512] output, ") \
        + textwrap.indent(textwrap.dedent("""\
        for i in range(512):
            for j in range(512):
                ZZ[i, j] = 0.0
                for k in range(512):
                    ZZ[i, j] += Z[i, k] * Z[k, j]
        """), "    ")
    monkeypatch.setattr(chain_check, "BUDGET_S", 0.2)   # the 512^3 product alone is ~0.27 s at 2e9/s
    m = reordered(text)
    v = ChainsRecord.load(m).validation
    assert v["validated"] and v["how"] == "each tree"
    monkeypatch.setattr(chain_check, "BUDGET_S", 1e-6)
    v = ChainsRecord.load(reordered(text)).validation
    assert not v["validated"]
    assert v["reason"] == ("too large for the executor budget, and so is tree S3 of kernel 'chain' even on a "
                           "sample of its outputs")


POOL = """\
    kernel trans(X: f32[2, 64, 16, 16] input, W: f32[32, 64] weight, Y: f32[2, 32, 8, 8] output):
        local C: f32[2, 32, 16, 16]
        for n in range(2):
            for o in range(32):
                for h in range(16):
                    for w in range(16):
                        C[n, o, h, w] = 0.0
                        for c in range(64):
                            C[n, o, h, w] += X[n, c, h, w] * W[o, c]
        for n in range(2):
            for o in range(32):
                for p in range(8):
                    for q in range(8):
                        Y[n, o, p, q] = 0.0
                        for r in range(2):
                            for s in range(2):
                                Y[n, o, p, q] += C[n, o, 2*p + r, 2*q + s] * 0.25
    """


def test_pooling_after_a_1x1_convolution_pools_first():
    """A DenseNet transition: 2x2 average pooling commutes with the 1x1 convolution before it, and
    summing the window on the input alone (a step over one factor) does 4x less convolution."""
    (plan,) = plans_of(POOL)
    conv, pool_points = 2 * 2 * 32 * 16 * 16 * 64, 2 * 32 * 8 * 8 * 4
    assert plan.written.flops == conv + 2 * pool_points                  # scale and accumulate per tap
    assert plan.best.words == "(sum(X) * W * 0.25)" and plan.best.path == ((0,), (0, 1))
    assert plan.best.cost.flops == 2 * 64 * 8 * 8 * 4 + conv // 4 == 557_056


def test_a_tree_too_large_to_run_is_checked_on_a_sample_of_its_outputs(monkeypatch):
    monkeypatch.setattr(chain_check, "BUDGET_S", 0.005)  # the tree: ~4 x 3 ms (rate model); a sample: less
    v = ChainsRecord.load(reordered(POOL)).validation
    assert v["validated"] and v["how"] == "each tree, sampled outputs" and v["max_rel_err"] < 1e-12


def test_errors():
    m = kernels_to_module([kernel(CHAIN)])
    with pytest.raises(SolarError, match="run lift-einsum first"):
        ReorderChainsPass().apply(CTX, m)
    m = reordered(CHAIN)
    with pytest.raises(SolarError, match="ran twice"):
        ReorderChainsPass().apply(CTX, m)


def test_driver_places_the_pass_after_lift_einsum():
    assert with_reorder_chains(["translate"]) == ["translate", "lift-einsum", "reorder-chains"]
    assert with_reorder_chains(["narrow-needed", "lift-einsum"]) == ["narrow-needed", "lift-einsum",
                                                                      "reorder-chains"]
    assert with_reorder_chains(["lift-einsum,annotate-costs"]) == ["lift-einsum", "reorder-chains",
                                                                   "annotate-costs"]


def test_report_header_json_and_table(capsys, tmp_path):
    src = tmp_path / "c.loop"
    src.write_text(textwrap.dedent(CHAIN))
    assert main([str(src), "--roofline=fused", "--hw", "H100_SXM", "--format=json", "--algorithms",
                 "classical"]) == 0
    r = json.loads(capsys.readouterr().out)
    assert r["reorder_chains"] is False and r["totals"]["flops"] == 6_291_456
    (row,) = r["chains"]
    assert (row["flops_as_written"], row["flops_best"], row["applied"], row["better"]) == (6_291_456, 524_288,
                                                                                          False, True)
    # the default model prices the best order without rewriting the IR, and carries the classical figures
    assert main([str(src), "--roofline=fused", "--hw", "H100_SXM", "--format=json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["reorder_chains"] is False and d["totals"]["flops"] == 524_288 and not d["chains"][0]["applied"]
    assert d["classical"]["totals"]["flops"] == 6_291_456 and d["classical"]["bounds"] == r["bounds"]
    assert [w["what"] for w in d["rewrites"]] == ["(A * (B * C))"]
    assert main([str(src), "--roofline=fused", "--hw", "H100_SXM", "--reorder-chains", "--format=json"]) == 0
    r = json.loads(capsys.readouterr().out)
    assert r["reorder_chains"] is True and r["totals"]["flops"] == 524_288 and r["chains"][0]["applied"]
    assert r["validation"]["reorder_chains"]["validated"]
    assert main([str(src), "--roofline=fused", "--hw", "H100_SXM", "--reorder-chains"]) == 0
    out = capsys.readouterr().out
    assert ("chains:     best orders used (reorder-chains): 1 of 1 tree(s) rewritten, 6,291,456 -> 524,288 "
            "FLOPs "
            "in them (12x)") in out
    assert "reorder-chains: the rewritten graph reproduces the original (whole program, 2 random" in out
    assert "| S3   | -   | ((A * B) * C)    | 6,291,456 |" in out


# ---- the torch examples ---------------------------------------------------------------------------------
torch = pytest.importorskip("torch")


@pytest.fixture(scope="module")
def cache(translation_cache):
    """The session's shared translation cache (`translated.py`), which other modules may have filled."""
    with using_cache(translation_cache):
        yield


def example_json(capsys, name: str, *extra: str) -> dict:
    rc = main([f"examples/torch/{name}.py", "--translate", "--roofline=fused", "--hw", "H100_SXM",
               "--format=json", *extra])
    out = capsys.readouterr()
    assert rc == 0, out.err
    return json.loads(out.out)


def test_examples_by_hand(cache, capsys, monkeypatch):
    monkeypatch.chdir(ROOT)
    r = example_json(capsys, "matrix_chain", "--reorder-chains")
    assert [(c["flops_as_written"], c["flops_best"]) for c in r["chains"]] == [(6_291_456, 524_288)]
    assert r["validation"]["validated"] and r["validation"]["reorder_chains"]["validated"]
    r = example_json(capsys, "lora", "--reorder-chains")
    assert [(c["flops_as_written"], c["flops_best"]) for c in r["chains"]] == [(167_837_696, 4_194_304)]
    assert r["validation"]["reorder_chains"]["validated"]
    r = example_json(capsys, "attention_shared_kv", "--reorder-chains")
    assert [(c["flops_as_written"], c["flops_best"]) for c in r["chains"]] == [(73_433_088, 37_748_736),
                                                                              (73_400_320, 37_748_736)]
    assert r["validation"]["reorder_chains"]["validated"]


H, DH, DR, DV, DC, E = 16, 128, 64, 128, 512, 2048


def test_mla_decode_by_hand(cache, capsys, monkeypatch):
    monkeypatch.chdir(ROOT)
    s, t = 1, 1024
    r = example_json(capsys, "mla_decode", "--reorder-chains")
    rows = {c["output"]: c for c in r["chains"] if c["better"]}
    scores = rows["einsum_2"]
    assert scores["flops_as_written"] == 2 * t * H * DH * DC + 2 * H * s * t * DH == 2_151_677_952
    assert scores["flops_best"] == 2 * s * H * DH * DC + 2 * H * s * t * DC == 18_874_368
    assert scores["ratio"] == 114.0
    out = rows["linear_2"]
    assert out["flops_as_written"] == 2 * t * H * DV * DC + 2 * H * s * t * DV + 2 * s * H * DV * E
    assert out["flops_best"] == 2 * H * s * t * DC + 2 * s * H * DC * DV + 2 * s * H * DV * E == 27_262_976
    assert len(rows) == 2 and r["reorder_chains"]
    v = r["validation"]["reorder_chains"]
    assert v["validated"] and v["how"] == "whole program" and v["max_rel_err"] < 1e-10


def test_mla_prefill_by_hand_keeps_the_written_order(cache, capsys, monkeypatch):
    monkeypatch.chdir(ROOT)
    s = t = 256
    pairs = s * (s + 1) // 2      # causal: narrowing keeps t <= s
    r = example_json(capsys, "mla_prefill", "--reorder-chains")
    rows = {c["output"]: c for c in r["chains"] if c["nodes"] and len(c["nodes"]) > 1}
    scores, out = rows["einsum_2"], rows["linear_2"]
    assert scores["flops_as_written"] == 2 * t * H * DH * DC + 2 * H * DH * pairs == 671_612_928
    assert out["flops_as_written"] == 2 * t * H * DV * DC + 2 * H * DV * pairs + 2 * s * H * DV * E \
        == 2_819_096_576
    assert not scores["better"] and not out["better"] and not any(c["applied"] for c in r["chains"])


def test_mla_prefill_absorbed_order_priced_with_the_causal_guards(cache, capsys, monkeypatch):
    """The absorbed order at prefill, emitted and priced with the mask: more FLOPs than written."""
    monkeypatch.chdir(ROOT)
    s = 256
    pairs = s * (s + 1) // 2
    m = ModuleOp([])
    ProgramInfo("examples/torch/mla_prefill.py").store(m)
    from solar_compiler.passes import all_passes

    for name in ("translate", "narrow-needed", "lift-einsum"):
        all_passes()[name]()().apply(CTX, m)
    (p,) = module_graphs(m)
    plan = next(x for x in module_chain_plans(m) if x.tree.output == "einsum_2")
    facs = [f.tensor for f in plan.tree.tensor_factors]
    q, w = facs.index("linear"), facs.index("wkv_b_weight")
    absorbed = emit(plan.tree, step_tree([(q, w), (0, 1)], 3), "test", p.tensor_ops(), set())
    assert absorbed.words == "(mul_5 * (linear * wkv_b_weight))"       # q W_UK first, then against c_kv
    assert absorbed.cost.flops == 2 * s * H * DH * DC + 2 * H * DC * pairs == 1_075_838_976


# ---- every torch example: only what a better order improves changes, and every rewrite validates ----
EXAMPLES = sorted(p.stem for p in (ROOT / "examples" / "torch").glob("*.py")
                  if p.name not in UNSUPPORTED_TORCH_EXAMPLES)
# The examples with a tree that has an order with strictly fewer FLOPs (the others must not change).
IMPROVED = {"attention_shared_kv", "causal_attention_buffer_mask", "causal_attention_manual",
            "cosine_similarity", "lora", "matrix_chain", "mla_decode", "transformer_encoder_manual"}


@pytest.fixture(scope="module")
def translations(translation_cache):
    """Each example's Translation (validated), or its error, from the session's shared translation
    cache (`translated.py`: translated there by two worker processes where not yet done)."""
    from solar_compiler.frontends.cache import cache_load
    from solar_compiler.frontends.torch import frontend as fe

    paths = {name: f"examples/torch/{name}.py" for name in EXAMPLES}
    errors = ensure_translated(translation_cache, paths.values())
    with using_cache(translation_cache):
        opts = driver_options()
        return {name: errors[p] or cache_load(fe.cache_key(p, opts)) for name, p in paths.items()}


def _total_flops(m: ModuleOp) -> int:
    return sum(o.flops for g in module_costs(m) for o in g.ops)


@pytest.mark.parametrize("name", EXAMPLES)
def test_example_changes_only_where_a_better_order_exists(name, translations):
    from solar_compiler.passes.narrow_needed import NarrowNeededPass
    from solar_compiler.passes.translate import stamp_origins

    t = translations[name]
    assert not isinstance(t, str), t
    stamp_origins(t.kernels, t.source_ops)
    m = kernels_to_module(t.kernels)
    ProgramInfo(f"examples/torch/{name}.py", "torch").store(m)
    NarrowNeededPass().apply(CTX, m)
    LiftEinsumPass().apply(CTX, m)
    before, flops = graphs_text(m), _total_flops(m)
    ReorderChainsPass().apply(CTX, m)
    rec = ChainsRecord.load(m)
    better = [r for r in rec.trees if r.better]
    assert (name in IMPROVED) == bool(better)
    if not better:
        assert graphs_text(m) == before and rec.validation is None
        return
    assert all(r.applied and r.flops_best < r.flops_as_written for r in better)
    assert not any(r.applied for r in rec.trees if not r.better)
    # the figures the report claims are those of the rewritten graph
    assert _total_flops(m) == flops - sum(r.flops_as_written - r.flops_best for r in better)
    assert rec.validation["validated"], rec.validation
    assert rec.validation["max_rel_err"] <= 1e-10


def _trees(text: str):
    from solar_compiler.analysis.chains import program_trees

    return program_trees(lift_kernel(kernel(text)))


SMALL_CHAIN = CHAIN.replace("f32", "F").replace("256", "8").replace("32", "4").replace("16", "2") \
    .replace("F", "f32").rstrip(" ")


def test_private_intermediates_follow_the_use_def_chains():
    """T is private to the chain while `A @ B` is its only writer after the fill and `T @ C` its only
    reader; a second reader, a later writer of T, or a write of a leaf before the root undoes it."""
    (t,) = [x for x in _trees(SMALL_CHAIN) if x.output == "Y"]
    assert t.intermediates == ("T",) and len(t.nodes) == 2 and len(t.fills) == 1
    assert t.equation() == "Y[i, l] = sum(j, k) A[i, k] * B[k, j] * C[j, l]"
    copy = "        for i in range(8):\n            for j in range(8):\n                Z[i, j] = T[i, j]\n"
    z = SMALL_CHAIN.replace("Y: f32[8, 2] output):", "Y: f32[8, 2] output, Z: f32[8, 8] output):")
    assert all(not x.intermediates for x in _trees(z + copy))
    written_again = SMALL_CHAIN + "        for i in range(8):\n            for j in range(8):\n" \
                                  "                T[i, j] = 1.0\n"
    assert all(not x.intermediates for x in _trees(written_again))
    leaf_written = SMALL_CHAIN.replace("B: f32[4, 8] input", "B0: f32[4, 8] input").replace(
        "        local T: f32[8, 8]\n",
        "        local T: f32[8, 8]\n        local B: f32[4, 8]\n        for k in range(4):\n"
        "            for j in range(8):\n                B[k, j] = B0[k, j]\n").replace(
        "        for i in range(8):\n            for l in range(2):\n                Y[i, l] = 0.0\n",
        "        for k in range(4):\n            for j in range(8):\n                B[k, j] = 0.0\n"
        "        for i in range(8):\n            for l in range(2):\n                Y[i, l] = 0.0\n")
    assert "B[k, j] = 0.0" in leaf_written
    trees = _trees(leaf_written)
    assert trees and all(x.output != "Y" and not x.intermediates for x in trees)


def test_reorderable_only_leaves_out_the_trees_with_one_order():
    """`program_trees(reorderable_only=True)` (what chain planning asks for) gives the trees
    `worth_pricing` keeps and no other: the chain `(A @ B) @ C` (2 nodes, 3 tensor factors) and the
    one-node triple product `W[i] += A * B * C` (3 tensor factors), not the one-node `Z = A * 2.0`
    (1 tensor factor), whose joint form is then never built."""
    text = SMALL_CHAIN.replace("Y: f32[8, 2] output):", "Y: f32[8, 2] output, Z: f32[8, 4] output, "
                               "W: f32[8] output):") + \
        "        for i in range(8):\n            for k in range(4):\n" \
        "                Z[i, k] = A[i, k] * 2.0\n" \
        "        for i in range(8):\n            W[i] = 0.0\n            for k in range(4):\n" \
        "                for j in range(8):\n                    for l in range(2):\n" \
        "                        W[i] += A[i, k] * B[k, j] * C[j, l]\n"
    from solar_compiler.analysis.chains import program_trees

    g = lift_kernel(kernel(text))
    every = [(t.output, len(t.nodes), len(t.tensor_factors)) for t in program_trees(g)]
    assert every == [("Y", 2, 3), ("Z", 1, 1), ("W", 1, 3)]
    kept = [(t.output, len(t.nodes), len(t.tensor_factors)) for t in program_trees(g, reorderable_only=True)]
    assert kept == [("Y", 2, 3), ("W", 1, 3)]
    assert [t.root for t in program_trees(g, reorderable_only=True)] == \
        [t.root for t in program_trees(g) if worth_pricing(t)]


def test_the_catalogue_copy_verifies_the_nodes_it_built():
    """The catalogue's copy verifies the ops the rewrites built as a whole (a new step with a zero
    step is rejected, naming the step's rule) and the graph's own checks over every op (an op it did
    not build is a clone of one verified when it was built)."""
    from xdsl.dialects.builtin import DenseArrayBase, i64
    from xdsl.utils.exceptions import VerifyException

    from solar_compiler.transforms.catalogue import _verify_rewritten

    g = lift_kernel(kernel(SMALL_CHAIN))
    _verify_rewritten(g, {n.sym_name.data for n in g.nodes()}, set(g.tensor_ops()))
    built = g.nodes()[1]
    built.properties["steps"] = DenseArrayBase.from_list(i64, [0] * len(built.iv_names))
    with pytest.raises(VerifyException, match="steps must give one positive step per loop variable"):
        _verify_rewritten(g, {built.sym_name.data}, set())
