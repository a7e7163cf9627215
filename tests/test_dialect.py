"""The `loop` dialect: AST <-> ops conversion, MLIR custom and generic round trips, verifiers."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from xdsl.context import Context
from xdsl.dialects.builtin import Builtin, ModuleOp
from xdsl.parser import Parser
from xdsl.printer import Printer
from xdsl.utils.exceptions import VerifyException

from solar_compiler.dialects.convert import kernels_to_module, module_kernels
from solar_compiler.dialects.loop import (
    ConstOp,
    ForOp,
    IfOp,
    KernelOp,
    Loop,
    ReadOp,
    StmtOp,
    TensorOp,
    YieldOp,
    map_attr,
    map_exprs,
    set_attr,
    set_conds,
)
from solar_compiler.loopir.affine import AffCond, AffExpr
from solar_compiler.loopir.ast import statements
from solar_compiler.text.parser import parse_kernel, parse_kernels

REPO = Path(__file__).resolve().parent.parent
EXAMPLES = sorted((REPO / "examples" / "loop").rglob("*.loop"))  # every bundled .loop program
EVERYTHING = (REPO / "lit_tests/loop/everything.loop").read_text()  # every construct of the text form


def _ctx() -> Context:
    ctx = Context()
    ctx.load_dialect(Builtin)
    ctx.load_dialect(Loop)
    return ctx


def _print(op, generic: bool) -> str:
    buf = io.StringIO()
    Printer(stream=buf, print_generic_format=generic, print_debuginfo=True).print_op(op)
    return buf.getvalue()


def _examples() -> list[tuple[str, str]]:
    loops = REPO / "examples" / "loop"
    named = [(str(p.relative_to(loops).with_suffix("")), p.read_text()) for p in EXAMPLES]
    return [*named, ("everything", EVERYTHING)]


@pytest.mark.parametrize(("name", "text"), _examples(), ids=[n for n, _ in _examples()])
def test_ast_to_ops_and_back(name: str, text: str) -> None:
    kernels = parse_kernels(text, f"{name}.loop")
    module = kernels_to_module(kernels)
    module.verify()
    assert module_kernels(module) == kernels


@pytest.mark.parametrize(("name", "text"), _examples(), ids=[n for n, _ in _examples()])
@pytest.mark.parametrize("generic", [False, True], ids=["custom", "generic"])
def test_mlir_round_trip(name: str, text: str, generic: bool) -> None:
    kernels = parse_kernels(text, f"{name}.loop")
    module = kernels_to_module(kernels)
    src = _print(module, generic)
    back = Parser(_ctx(), src, "in.mlir").parse_module()
    back.verify()
    assert _print(back, generic) == src
    assert _print(back, False) == _print(module, False)
    assert back.is_structurally_equivalent(module)
    assert module_kernels(back) == kernels


def test_no_op_of_the_dialects_sizes_its_segments() -> None:
    """`LocatedOp.__init__` builds ops from flat operand lists (what `IRDLOperation.__init__` does
    generically): right only for ops with no segment-size or same-variadic-size option, or for ops
    that set their segment sizes themselves (`einsum.node`: inputs and init; `einsum.gather`: source
    and indices; `tests/test_einsum.py` compares them with the parser's, structurally). The round
    trips above show that the ops it builds print and compare equal to the parser's."""
    from xdsl.irdl import AttrSizedSegments, SameVariadicSize

    from solar_compiler.dialects.einsum import Einsum
    from solar_compiler.dialects.loop import LocatedOp

    ops = [op for d in (Loop, Einsum) for op in d.operations if issubclass(op, LocatedOp)]
    assert len(ops) >= 18
    segmented = {"einsum.node", "einsum.gather"}
    for op in ops:
        assert op.name in segmented or not [o for o in op.get_irdl_definition().options
                                            if isinstance(o, AttrSizedSegments | SameVariadicSize)], op.name


def test_matmul_ops() -> None:
    k = parse_kernel((REPO / "examples/loop/matmul.loop").read_text())
    (kop,) = kernels_to_module([k]).ops
    assert isinstance(kop, KernelOp) and kop.sym_name.data == "matmul"
    tensors = [o for o in kop.body.block.ops if isinstance(o, TensorOp)]
    assert [(t.sym_name.data, t.dims, t.dtype, t.role.data) for t in tensors] == [
        ("A", (64, 32), "f32", "input"), ("B", (32, 16), "f32", "weight"), ("C", (64, 16), "f32", "output")]
    stmts = [o for o in kop.walk() if isinstance(o, StmtOp)]
    assert [(s.target.data, s.kind.data) for s in stmts] == [("C", "="), ("C", "+=")]
    assert [f.iv.data for f in kop.walk() if isinstance(f, ForOp)] == ["i", "j", "k"]
    reads = [o for o in kop.walk() if isinstance(o, ReadOp)]
    assert [(r.tensor.data, str(r.indices)) for r in reads] == [
        ("A", "affine_map<(d0, d1, d2) -> (d0, d2)>"), ("B", "affine_map<(d0, d1, d2) -> (d2, d1)>")]
    ivs = ("i", "j", "k")
    assert [[str(e) for e in map_exprs(r.indices, ivs)] for r in reads] == [["i", "k"], ["k", "j"]]


def test_a_loaded_index_is_an_operand_not_a_map_result() -> None:
    """What an affine map cannot hold (an index loaded from a tensor) keeps its representation: an
    operand of the read, its position in `dynamic`, the placeholder 0 in the map."""
    (kop,) = kernels_to_module([parse_kernel((REPO / "examples/loop/embedding.loop").read_text())]).ops
    (e,) = [o for o in kop.walk() if isinstance(o, ReadOp) and o.tensor.data == "E"]
    assert (str(e.indices), e.dynamic_positions) == ("affine_map<(d0, d1) -> (0, d1)>", (0,))
    (ids,) = e.dyn_indices
    assert isinstance(ids.owner, ReadOp) and ids.owner.tensor.data == "ids"


def test_constants_keep_full_precision() -> None:
    text = ("kernel k(A: f32[4] input, C: f32[4] output):\n    for i in range(4):\n"
            "        C[i] = A[i] * 0.123456789 + 1e-300 + 3e+38 - inf\n")
    module = kernels_to_module([parse_kernel(text)])
    for generic in (False, True):
        back = Parser(_ctx(), _print(module, generic)).parse_module()
        consts = [o.value.value.data for o in back.walk() if isinstance(o, ConstOp)]
        assert consts == [0.123456789, 1e-300, 3e38, float("inf")]


# ---- verifiers ---------------------------------------------------------------------------------
def _kernel(*body, tensors=(("A", (4,), "f32", "input"), ("C", (4,), "f32", "output"))) -> ModuleOp:
    return ModuleOp([KernelOp("k", [TensorOp(*t) for t in tensors] + list(body))])


def _stmt(target: str, idx, value_ops, kind: str = "=", dims=("i",)) -> StmtOp:
    return StmtOp(target, idx, kind, [*value_ops, YieldOp(value_ops[-1].results[0])], dims=dims)


def _verify_error(module: ModuleOp) -> str:
    with pytest.raises(VerifyException) as e:
        module.verify()
    return str(e.value)


i = AffExpr.var("i")


def test_verify_accepts_a_good_kernel() -> None:
    _kernel(ForOp("i", AffExpr.lit(0), AffExpr.lit(4), ops=[
        _stmt("C", [i], [ReadOp("A", [i], {}, "f32", dims=("i",))])])).verify()


@pytest.mark.parametrize(("module", "message"), [
    (lambda: _kernel(ForOp("i", AffExpr.lit(0), AffExpr.lit(4), ops=[
        _stmt("C", [i], [ConstOp(1, "i64")])])), "type mismatch: 'C' is f32 but the value is i64"),
    (lambda: _kernel(ForOp("i", AffExpr.lit(0), AffExpr.lit(4), ops=[
        ForOp("i", AffExpr.lit(0), AffExpr.lit(4), dims=("i",), ops=[
            _stmt("C", [i], [ConstOp(0.0, "f32")], dims=("i", "i2"))])])),
     "loop variable 'i' shadows an enclosing loop variable"),
    (lambda: _kernel(ForOp("i", AffExpr.lit(0), AffExpr.lit(4), ops=[
        _stmt("C", [i, i], [ConstOp(0.0, "f32")])])), "'C' has rank 1 but is indexed with 2 indices"),
    (lambda: _kernel(ForOp("i", AffExpr.lit(0), AffExpr.lit(4), ops=[
        _stmt("C", [i], [ReadOp("A", [i, i], {}, "f32", dims=("i",))])])),
     "'A' has rank 1 but is indexed with 2 indices"),
    (lambda: _kernel(ForOp("i", AffExpr.lit(0), AffExpr.lit(4), ops=[
        _stmt("A", [i], [ConstOp(0.0, "f32")])])), "cannot write to input tensor 'A'"),
    (lambda: _kernel(ForOp("i", AffExpr.lit(0), AffExpr.lit(4), ops=[
        _stmt("Q", [i], [ConstOp(0.0, "f32")])])), "unknown tensor 'Q'"),
    (lambda: _kernel(ForOp("i", AffExpr.lit(0), AffExpr.lit(4), ops=[
        _stmt("C", [AffExpr.var("j")], [ConstOp(0.0, "f32")])])),
     "index of 'C' uses 'j', which is not an enclosing loop variable"),
    (lambda: _kernel(ForOp("i", AffExpr.lit(0), AffExpr.lit(4), ops=[
        _stmt("C", [i], [ConstOp(0.0, "f32")], dims=("i", "j"))])),
     "index of 'C' has 2 dimensions and 0 symbols, but 1 loops enclose it (and the loop IR has no symbols)"),
    (lambda: _kernel(ForOp("i", AffExpr.lit(0), AffExpr.lit(4), ops=[
        IfOp([AffCond(AffExpr.lit(1))], [_stmt("C", [i], [ConstOp(0.0, "f32")])])])),
     "guard has 0 dimensions and 0 symbols, but 1 loops enclose it (and the loop IR has no symbols)"),
    (lambda: _kernel(ForOp("i", AffExpr.lit(0), AffExpr.lit(4), ops=[
        _stmt("C", [i], [ConstOp(0.0, "f32")], kind="-=")])),
     "unknown statement kind '-=' (known: =, +=, *=, max=, min=)"),
    (lambda: _kernel(ForOp("i", AffExpr.lit(0), AffExpr.var("j"), ops=[
        _stmt("C", [i], [ConstOp(0.0, "f32")])])),
     "bound of loop 'i' uses 'j', which is not an enclosing loop variable"),
    (lambda: _kernel(ForOp("i", AffExpr.lit(0), AffExpr.lit(4), step=0, ops=[
        _stmt("C", [i], [ConstOp(0.0, "f32")])])), "loop 'i': step must be positive"),
    (lambda: _kernel(IfOp([AffCond(i)], [_stmt("C", [AffExpr.lit(0)], [ConstOp(0.0, "f32")], dims=())])),
     "guard uses 'i', which is not an enclosing loop variable"),
    (lambda: _kernel(_stmt("C", [AffExpr.lit(0)], [ConstOp(0.0, "f32")], dims=()),
                     TensorOp("B", (4,), "f32", "local")),
     "tensor declarations must precede the kernel body"),
    (lambda: _kernel(tensors=(("A", (4,), "f32", "input"), ("A", (4,), "f32", "output"))),
     "tensor 'A' declared twice"),
    (lambda: _kernel(tensors=(("A", (4,), "f32", "scratch"),)),
     "tensor 'A': role must be one of input, weight, output, local"),
])
def test_verifier_errors(module, message: str) -> None:
    """Built from the AST's named expressions, a variable that no loop binds is an error when the op
    is built (it has no dimension in the map); the rest when the module is verified."""
    with pytest.raises(VerifyException) as e:
        module().verify()
    assert str(e.value) == message


def test_affine_attributes_convert_both_ways() -> None:
    j = AffExpr.var("j")
    exprs = (2 * i + j // 3 - 1, (i + j) % 4, AffExpr.lit(0))
    m = map_attr(exprs, ("i", "j"), "index")
    assert str(m) == "affine_map<(d0, d1) -> ((((d0 * 2) + (d1 floordiv 3)) + -1), ((d0 + d1) mod 4), 0)>"
    assert map_exprs(m, ("i", "j")) == exprs
    conds = (AffCond.compare(i, "<", AffExpr.lit(4)), AffCond(i - j, "=="))
    s = set_attr(conds, ("i", "j"))
    assert str(s) == "affine_set<(d0, d1) : (((d0 * -1) + 3) >= 0, (d0 + (d1 * -1)) == 0)>"
    assert set_conds(s, ("i", "j")) == (AffCond(3 - i), AffCond(i - j, "=="))
    with pytest.raises(VerifyException, match="index uses 'k', which is not an enclosing loop variable"):
        map_attr([AffExpr.var("k")], ("i",), "index")


@pytest.mark.parametrize(("src", "message"), [
    ('%0 = loop.unary "frobnicate" %a : f32 -> f32', "unknown scalar operation 'frobnicate'"),
    ('%0 = loop.unary "exp" %n : i64 -> i64', "'exp' needs a floating-point operand, got i64"),
    ('%0 = loop.unary "isnan" %a : f32 -> f32', "'isnan' of f32 must give bool"),
    ('%0 = loop.binary "add" %a, %n : f32, i64 -> f32', "type mismatch in 'add': f32 vs i64"),
    ('%0 = loop.binary "hypot" %a, %a : f32, f32 -> f32', "unknown scalar operation 'hypot'"),
    ('%0 = loop.cmp "approx" %a, %a : f32, f32', "unknown comparison 'approx'"),
    ('%0 = loop.bitcast %a : f32 -> i16', "bit cast from f32 to i16: a bit cast needs two non-bool dtypes"),
    ('%0 = loop.bitcast %n : i64 -> i1', "bit cast from i64 to bool"),
    ('%0 = loop.read "A" affine_map<(d0) -> (d0)> dynamic array<i64> : f16',
     "read of 'A' must have type f32"),
    ('%0 = loop.read "A" affine_map<(d0) -> (0)> dynamic array<i64: 0>(%a : f32) : f32',
     "indirect index into 'A' must be an integer"),
    ('%0 = loop.read "A" affine_map<(d0) -> (0)> dynamic array<i64: 1>(%n : i64) : f32',
     "dynamic index positions do not match the dynamic operands"),
])
def test_scalar_op_verifiers(src: str, message: str) -> None:
    text = f"""
loop.kernel "k" {{
  loop.tensor "A" : f32 array<i64: 4> "input"
  loop.tensor "N" : i64 array<i64: 4> "input"
  loop.tensor "C" : f32 array<i64: 4> "output"
  loop.for "i" = affine_map<() -> (0)> to affine_map<() -> (4)> step 1 : i64 {{
    loop.stmt "C" affine_map<(d0) -> (d0)> "=" {{
      %a = loop.read "A" affine_map<(d0) -> (d0)> dynamic array<i64> : f32
      %n = loop.read "N" affine_map<(d0) -> (d0)> dynamic array<i64> : i64
      {src}
      loop.yield %a : f32
    }}
  }}
}}"""
    module = Parser(_ctx(), text).parse_module()
    assert message in _verify_error(module)


def test_statement_order_survives_conversion() -> None:
    k = parse_kernel((REPO / "examples/loop/causal_attention.loop").read_text())
    back = module_kernels(kernels_to_module([k]))[0]
    assert [s.stmt for s in statements(back)] == [s.stmt for s in statements(k)]
    assert [s.index for s in statements(back)] == list(range(11))
