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
    AffAttr,
    CondAttr,
    ConstOp,
    ForOp,
    IfOp,
    KernelOp,
    Loop,
    ReadOp,
    StmtOp,
    TensorOp,
    YieldOp,
)
from solar_compiler.loopir.affine import AffCond, AffExpr
from solar_compiler.loopir.ast import statements
from solar_compiler.text.parser import parse_kernel, parse_kernels

REPO = Path(__file__).resolve().parent.parent
EXAMPLES = sorted((REPO / "examples" / "loop").glob("*.loop"))
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
    return [(p.stem, p.read_text()) for p in EXAMPLES] + [("everything", EVERYTHING)]


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
    generically): right only for ops with no segment-size or same-variadic-size option. The round
    trips above show that the ops it builds print and compare equal to the parser's."""
    from xdsl.irdl import AttrSizedSegments, SameVariadicSize

    from solar_compiler.dialects.einsum import Einsum
    from solar_compiler.dialects.loop import LocatedOp

    ops = [op for d in (Loop, Einsum) for op in d.operations if issubclass(op, LocatedOp)]
    assert len(ops) >= 18
    for op in ops:
        assert not [o for o in op.get_irdl_definition().options
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
    assert [(r.tensor.data, [str(a.expr) for a in r.indices.data]) for r in reads] == [
        ("A", ["i", "k"]), ("B", ["k", "j"])]


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


def _stmt(target: str, idx, value_ops, kind: str = "=") -> StmtOp:
    return StmtOp(target, idx, kind, [*value_ops, YieldOp(value_ops[-1].results[0])])


def _verify_error(module: ModuleOp) -> str:
    with pytest.raises(VerifyException) as e:
        module.verify()
    return str(e.value)


i = AffExpr.var("i")


def test_verify_accepts_a_good_kernel() -> None:
    _kernel(ForOp("i", AffExpr.lit(0), AffExpr.lit(4), ops=[
        _stmt("C", [i], [ReadOp("A", [i], {}, "f32")])])).verify()


@pytest.mark.parametrize(("module", "message"), [
    (lambda: _kernel(ForOp("i", AffExpr.lit(0), AffExpr.lit(4), ops=[
        _stmt("C", [i], [ConstOp(1, "i64")])])), "type mismatch: 'C' is f32 but the value is i64"),
    (lambda: _kernel(ForOp("i", AffExpr.lit(0), AffExpr.lit(4), ops=[
        ForOp("i", AffExpr.lit(0), AffExpr.lit(4), ops=[_stmt("C", [i], [ConstOp(0.0, "f32")])])])),
     "loop variable 'i' shadows an enclosing loop variable"),
    (lambda: _kernel(ForOp("i", AffExpr.lit(0), AffExpr.lit(4), ops=[
        _stmt("C", [i, i], [ConstOp(0.0, "f32")])])), "'C' has rank 1 but is indexed with 2 indices"),
    (lambda: _kernel(ForOp("i", AffExpr.lit(0), AffExpr.lit(4), ops=[
        _stmt("C", [i], [ReadOp("A", [i, i], {}, "f32")])])), "'A' has rank 1 but is indexed with 2 indices"),
    (lambda: _kernel(ForOp("i", AffExpr.lit(0), AffExpr.lit(4), ops=[
        _stmt("A", [i], [ConstOp(0.0, "f32")])])), "cannot write to input tensor 'A'"),
    (lambda: _kernel(ForOp("i", AffExpr.lit(0), AffExpr.lit(4), ops=[
        _stmt("Q", [i], [ConstOp(0.0, "f32")])])), "unknown tensor 'Q'"),
    (lambda: _kernel(ForOp("i", AffExpr.lit(0), AffExpr.lit(4), ops=[
        _stmt("C", [AffExpr.var("j")], [ConstOp(0.0, "f32")])])),
     "index of 'C' uses 'j', which is not an enclosing loop variable"),
    (lambda: _kernel(ForOp("i", AffExpr.lit(0), AffExpr.lit(4), ops=[
        _stmt("C", [i], [ConstOp(0.0, "f32")], kind="-=")])),
     "unknown statement kind '-=' (known: =, +=, *=, max=, min=)"),
    (lambda: _kernel(ForOp("i", AffExpr.lit(0), AffExpr.var("j"), ops=[
        _stmt("C", [i], [ConstOp(0.0, "f32")])])),
     "bound of loop 'i' uses 'j', which is not an enclosing loop variable"),
    (lambda: _kernel(ForOp("i", AffExpr.lit(0), AffExpr.lit(4), step=0, ops=[
        _stmt("C", [i], [ConstOp(0.0, "f32")])])), "loop 'i': step must be positive"),
    (lambda: _kernel(IfOp([AffCond(i)], [_stmt("C", [AffExpr.lit(0)], [ConstOp(0.0, "f32")])])),
     "guard uses 'i', which is not an enclosing loop variable"),
    (lambda: _kernel(_stmt("C", [AffExpr.lit(0)], [ConstOp(0.0, "f32")]),
                     TensorOp("B", (4,), "f32", "local")),
     "tensor declarations must precede the kernel body"),
    (lambda: _kernel(tensors=(("A", (4,), "f32", "input"), ("A", (4,), "f32", "output"))),
     "tensor 'A' declared twice"),
    (lambda: _kernel(tensors=(("A", (4,), "f32", "scratch"),)),
     "tensor 'A': role must be one of input, weight, output, local"),
])
def test_verifier_errors(module, message: str) -> None:
    assert _verify_error(module()) == message


def test_attribute_verifiers() -> None:
    assert str(AffAttr(2 * i + 1).expr) == "2*i + 1"
    with pytest.raises(VerifyException, match=r"affine expression '0 \+ i' is not canonical \(write 'i'\)"):
        AffAttr("0 + i")
    with pytest.raises(VerifyException, match=r"bad affine expression 'i \* i'"):
        AffAttr("i * i")
    assert CondAttr(AffCond.compare(i, "<", AffExpr.lit(4))).cond == AffCond(3 - i)
    with pytest.raises(VerifyException, match=r"'i >= 0 and i <= 3' must be exactly one constraint"):
        CondAttr("i >= 0 and i <= 3")


@pytest.mark.parametrize(("src", "message"), [
    ('%0 = loop.unary "frobnicate" %a : f32 -> f32', "unknown scalar operation 'frobnicate'"),
    ('%0 = loop.unary "exp" %n : i64 -> i64', "'exp' needs a floating-point operand, got i64"),
    ('%0 = loop.unary "isnan" %a : f32 -> f32', "'isnan' of f32 must give bool"),
    ('%0 = loop.binary "add" %a, %n : f32, i64 -> f32', "type mismatch in 'add': f32 vs i64"),
    ('%0 = loop.binary "hypot" %a, %a : f32, f32 -> f32', "unknown scalar operation 'hypot'"),
    ('%0 = loop.cmp "approx" %a, %a : f32, f32', "unknown comparison 'approx'"),
    ('%0 = loop.read "A" [#loop.aff<"i">] dynamic array<i64> : f16', "read of 'A' must have type f32"),
    ('%0 = loop.read "A" [#loop.aff<"0">] dynamic array<i64: 0>(%a : f32) : f32',
     "indirect index into 'A' must be an integer"),
    ('%0 = loop.read "A" [#loop.aff<"0">] dynamic array<i64: 1>(%n : i64) : f32',
     "dynamic index positions do not match the dynamic operands"),
])
def test_scalar_op_verifiers(src: str, message: str) -> None:
    text = f"""
loop.kernel "k" {{
  loop.tensor "A" : f32 array<i64: 4> "input"
  loop.tensor "N" : i64 array<i64: 4> "input"
  loop.tensor "C" : f32 array<i64: 4> "output"
  loop.for "i" = <"0"> to <"4"> step 1 : i64 {{
    loop.stmt "C" [#loop.aff<"i">] "=" {{
      %a = loop.read "A" [#loop.aff<"i">] dynamic array<i64> : f32
      %n = loop.read "N" [#loop.aff<"i">] dynamic array<i64> : i64
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
