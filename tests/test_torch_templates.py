"""The op-template registry: every template module imports alone (no import cycle), template modules
import only the builder and the registry, and the registry covers every op of the old hand-written
dispatch tables."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")

from solar_compiler.frontends.builder.registry import TemplateRegistry  # noqa: E402
from solar_compiler.frontends.builder.translator import Translator  # noqa: E402
from solar_compiler.frontends.builder.values import Loop  # noqa: E402
from solar_compiler.frontends.captured_program import CapturedProgram  # noqa: E402
from solar_compiler.frontends.torch import registry  # noqa: E402
from solar_compiler.loopir.affine import AffExpr  # noqa: E402
from solar_compiler.loopir.ast import Const, For  # noqa: E402

TORCH = Path(__file__).resolve().parent.parent / "solar_compiler" / "frontends" / "torch"
TEMPLATE_MODULES = sorted(p.stem for p in (TORCH / "templates").glob("*.py") if p.stem != "__init__")

# The ATen ops of the 16 hand-written TABLE dicts merged by templates/__init__.py before templates
# were registered with @template (327 names, derived from that code).
OLD_DISPATCH_OPS = """
    aten._adaptive_avg_pool2d.default aten._adaptive_avg_pool3d.default aten._convolution.default
    aten._log_softmax.default aten._native_batch_norm_legit.default aten._native_batch_norm_legit.no_stats
    aten._native_batch_norm_legit_functional.default aten._native_batch_norm_legit_no_training.default
    aten._reshape_alias.default aten._reshape_copy.default aten._safe_softmax.default aten._softmax.default
    aten._to_copy.default aten._to_dim_order_copy.default aten._unsafe_index.Tensor
    aten._unsafe_index_put.default aten._unsafe_view.default aten._upsample_nearest_exact1d.vec
    aten._upsample_nearest_exact2d.vec aten._upsample_nearest_exact3d.vec aten.abs.default
    aten.adaptive_avg_pool1d.default aten.adaptive_avg_pool2d.default aten.adaptive_avg_pool3d.default
    aten.adaptive_max_pool1d.default aten.adaptive_max_pool2d.default aten.add.Scalar aten.add.Tensor
    aten.addcdiv.default aten.addcmul.default aten.addmm.default aten.alias.default aten.alias_copy.default
    aten.all.default aten.all.dim aten.all.dims aten.amax.default aten.amin.default aten.any.default
    aten.any.dim aten.any.dims aten.arange.default aten.arange.start aten.arange.start_step
    aten.argmax.default aten.argmin.default aten.as_strided.default aten.as_strided_copy.default
    aten.avg_pool1d.default aten.avg_pool2d.default aten.avg_pool3d.default aten.baddbmm.default
    aten.batch_norm.default aten.bernoulli.Tensor aten.bernoulli.default aten.bernoulli.p
    aten.bitwise_and.Scalar aten.bitwise_and.Tensor aten.bitwise_not.default aten.bitwise_or.Scalar
    aten.bitwise_or.Tensor aten.bitwise_xor.Tensor aten.bmm.default aten.cat.default aten.ceil.default
    aten.celu.default aten.clamp.Tensor aten.clamp.default aten.clamp_max.Tensor aten.clamp_max.default
    aten.clamp_min.Tensor aten.clamp_min.default aten.clip.default aten.clone.default aten.concat.default
    aten.constant_pad_nd.default aten.contiguous.default aten.conv1d.default aten.conv1d.padding
    aten.conv2d.default aten.conv2d.padding aten.conv3d.default aten.conv3d.padding
    aten.conv_transpose1d.default aten.conv_transpose2d.input aten.conv_transpose3d.input
    aten.convolution.default aten.copy.default aten.cos.default aten.cumprod.default aten.cumsum.default
    aten.detach.default aten.detach_copy.default aten.diagonal.default aten.div.Scalar aten.div.Scalar_mode
    aten.div.Tensor aten.div.Tensor_mode aten.dot.default aten.einsum.default aten.elu.default
    aten.embedding.default aten.empty.memory_format aten.empty_like.default aten.empty_permuted.default
    aten.empty_strided.default aten.eq.Scalar aten.eq.Tensor aten.erf.default aten.erfc.default
    aten.exp.default aten.exp2.default aten.expand.default aten.expand_copy.default aten.expm1.default
    aten.fill.Scalar aten.flip.default aten.floor.default aten.floor_divide.Scalar aten.floor_divide.default
    aten.fmax.default aten.fmin.default aten.fmod.Scalar aten.fmod.Tensor aten.frac.default
    aten.full.default aten.full_like.default aten.gather.default aten.ge.Scalar aten.ge.Tensor
    aten.gelu.default aten.group_norm.default aten.gru.input aten.gru_cell.default aten.gt.Scalar
    aten.gt.Tensor aten.hardsigmoid.default aten.hardswish.default aten.hardtanh.default aten.im2col.default
    aten.index.Tensor aten.index_add.default aten.index_put.default aten.index_select.default
    aten.instance_norm.default aten.isnan.default aten.layer_norm.default aten.le.Scalar aten.le.Tensor
    aten.leaky_relu.default aten.lerp.Scalar aten.lerp.Tensor aten.lift_fresh.default
    aten.lift_fresh_copy.default aten.linalg_vector_norm.default aten.linear.default aten.log.default
    aten.log10.default aten.log1p.default aten.log2.default aten.log_softmax.int aten.logical_and.default
    aten.logical_not.default aten.logical_or.default aten.logical_xor.default aten.logit.default
    aten.logsumexp.default aten.lstm.input aten.lstm_cell.default aten.lt.Scalar aten.lt.Tensor
    aten.masked_fill.Scalar aten.masked_fill.Tensor aten.matmul.default aten.max.default aten.max.dim
    aten.max_pool1d.default aten.max_pool2d.default aten.max_pool2d_with_indices.default
    aten.max_pool3d.default aten.max_pool3d_with_indices.default aten.maximum.default aten.mean.default
    aten.mean.dim aten.min.default aten.min.dim aten.minimum.default aten.mish.default aten.mm.default
    aten.mul.Scalar aten.mul.Tensor aten.mv.default aten.narrow.default aten.native_batch_norm.default
    aten.native_group_norm.default aten.native_layer_norm.default aten.ne.Scalar aten.ne.Tensor
    aten.neg.default aten.new_empty.default aten.new_empty_strided.default aten.new_full.default
    aten.new_ones.default aten.new_zeros.default aten.nonzero.default aten.normal_functional.default
    aten.ones.default aten.ones_like.default aten.pad.default aten.permute.default aten.permute_copy.default
    aten.positive.default aten.pow.Scalar aten.pow.Tensor_Scalar aten.pow.Tensor_Tensor aten.prod.default
    aten.prod.dim_int aten.rand.default aten.rand_like.default aten.randint.default aten.randint.low
    aten.randint_like.default aten.randint_like.low_dtype aten.randn.default aten.randn_like.default
    aten.reciprocal.default aten.reflection_pad1d.default aten.reflection_pad2d.default
    aten.reflection_pad3d.default aten.relu.default aten.relu6.default aten.remainder.Scalar
    aten.remainder.Tensor aten.repeat.default aten.replication_pad1d.default aten.replication_pad2d.default
    aten.replication_pad3d.default aten.reshape.default aten.rms_norm.default aten.rnn_relu.input
    aten.rnn_relu_cell.default aten.rnn_tanh.input aten.rnn_tanh_cell.default aten.roll.default
    aten.round.default aten.rsqrt.default aten.rsub.Scalar aten.rsub.Tensor aten.scalar_tensor.default
    aten.scaled_dot_product_attention.default aten.scatter.reduce aten.scatter.src aten.scatter.value
    aten.scatter.value_reduce aten.scatter_add.default aten.scatter_reduce.two aten.select.int
    aten.select_copy.int aten.select_scatter.default aten.selu.default aten.sgn.default aten.sigmoid.default
    aten.sign.default aten.silu.default aten.sin.default aten.slice.Tensor aten.slice_copy.Tensor
    aten.slice_scatter.default aten.softmax.int aten.softplus.default aten.split.Tensor
    aten.split_with_sizes.default aten.split_with_sizes_copy.default aten.sqrt.default aten.square.default
    aten.squeeze.default aten.squeeze.dim aten.squeeze.dims aten.squeeze_copy.dim aten.squeeze_copy.dims
    aten.stack.default aten.std.correction aten.std.dim aten.std_mean.correction aten.sub.Scalar
    aten.sub.Tensor aten.sum.default aten.sum.dim_IntList aten.t.default aten.t_copy.default
    aten.tan.default aten.tanh.default aten.threshold.default aten.to.device aten.to.dtype
    aten.to.dtype_layout aten.topk.default aten.transpose.int aten.transpose_copy.int aten.tril.default
    aten.triu.default aten.true_divide.Tensor aten.trunc.default aten.unbind.int aten.unfold.default
    aten.unfold_copy.default aten.uniform.default aten.unsqueeze.default aten.unsqueeze_copy.default
    aten.upsample_bilinear2d.default aten.upsample_bilinear2d.vec aten.upsample_nearest1d.vec
    aten.upsample_nearest2d.default aten.upsample_nearest2d.vec aten.upsample_nearest3d.vec
    aten.var.correction aten.var.dim aten.var_mean.correction aten.vdot.default aten.view.default
    aten.view_copy.default aten.where.Scalar aten.where.ScalarOther aten.where.ScalarSelf aten.where.self
    aten.zeros.default aten.zeros_like.default
""".split()


def test_the_template_modules_are_the_ones_the_registry_finds():
    assert registry.template_modules() == [f"{registry.TEMPLATES_PACKAGE}.{m}" for m in TEMPLATE_MODULES]
    assert len(TEMPLATE_MODULES) == 28


@pytest.fixture(scope="module")
def imported_alone() -> dict[str, dict]:
    """For each template module: a fresh interpreter that imports only it, and reports which
    template modules got loaded and which ops got registered (all interpreters run at once)."""
    code = ("import importlib, json, sys; importlib.import_module(sys.argv[1]); "
            "from solar_compiler.frontends.torch import registry; "
            "print(json.dumps({'loaded': sorted(m for m in sys.modules if '.torch.templates.' in m), "
            "'ops': registry.REGISTRY.registered()}))")
    procs = {m: subprocess.Popen([sys.executable, "-c", code, f"{registry.TEMPLATES_PACKAGE}.{m}"],
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for m in TEMPLATE_MODULES}
    out = {}
    for m, p in procs.items():
        stdout, stderr = p.communicate(timeout=300)
        out[m] = {"rc": p.returncode, "stderr": stderr, **(json.loads(stdout) if p.returncode == 0 else {})}
    return out


# ops given templates after the registry replaced the dispatch tables (one line per addition)
ADDED_OPS = {"aten._embedding_bag.default", "aten._embedding_bag_forward_only.default"}
ADDED_OPS |= {"aten._trilinear.default"}  # nn.Bilinear (issue 21 audit)
ADDED_OPS |= {"aten._ctc_loss.Tensor", "aten._ctc_loss.default"}  # CTC loss (templates/ctc.py)
ADDED_OPS |= {"aten.grid_sampler_2d.default", "aten.upsample_bicubic2d.vec",  # sampling.py
              "aten.upsample_bicubic2d.default"}
ADDED_OPS |= {"aten.upsample_linear1d.vec", "aten.upsample_linear1d.default",  # pool.py: linear, trilinear
              "aten.upsample_trilinear3d.vec", "aten.upsample_trilinear3d.default",
              "aten.adaptive_max_pool3d.default"}
ADDED_OPS |= {"solar.dft"}  # one DFT along one dim: what complex_pairs.py makes of torch's FFTs
ADDED_OPS |= {"aten.sort.default", "aten.sort.stable", "aten.bincount.default",  # stand-in nests
              "aten._unique2.default", "aten.multinomial.default", "aten.exponential.default"}
ADDED_OPS |= {"aten.kthvalue.default", "aten.median.dim", "aten.median.default",  # order statistics
              "aten.nanmedian.dim", "aten.nanmedian.default", "aten.mode.default"}
ADDED_OPS |= {  # packed fp4 decoding and fp8 GEMMs (issue 22)
    "aten.__rshift__.Scalar", "aten.bitwise_right_shift.Tensor_Scalar", "aten.__lshift__.Scalar",
    "aten.bitwise_left_shift.Tensor_Scalar", "aten.view.dtype", "aten._scaled_mm.default",
    "aten._int_mm.default", "aten.logcumsumexp.default", "aten.cummax.default", "aten.cummin.default",
    "aten.diagonal_scatter.default", "aten.as_strided_scatter.default"}
ADDED_OPS |= {f"aten.{op}" for op in (  # float predicates and sign operations
    "isinf.default", "isfinite.default", "isposinf.default", "isneginf.default", "signbit.default",
    "copysign.Tensor", "copysign.Scalar", "xlogy.Tensor", "xlogy.Scalar_Other", "xlogy.Scalar_Self",
    "heaviside.default", "hypot.default", "logaddexp.default", "deg2rad.default", "rad2deg.default",
    "sinc.default", "bucketize.Tensor", "searchsorted.Tensor", "atan.default", "asin.default", "acos.default",
    "sinh.default", "cosh.default", "asinh.default", "acosh.default", "atanh.default", "arctan.default",
    "arcsin.default", "arccos.default", "atan2.default", "arctan2.default")}
ADDED_OPS |= {f"aten.{op}" for op in (  # pdist, histc, frexp, masked_scatter, ... (test_torch_misc_ops.py)
    "_pdist_forward.default", "histc.default", "frexp.Tensor", "masked_scatter.default",
    "unique_consecutive.default", "tril_indices.default", "triu_indices.default", "embedding_renorm.default")}
ADDED_OPS |= {"aten.rrelu_with_noise_functional.default", "aten.dist.default",  # test_torch_misc_ops2.py
              "aten.ldexp.Tensor", "aten._cdist_forward.default"}
ADDED_OPS |= {f"aten.{op}.default" for op in (  # backward ops (grad_*.py, issue 23)
    "threshold_backward", "gelu_backward", "sigmoid_backward", "tanh_backward", "silu_backward",
    "mse_loss_backward", "nll_loss_backward", "_softmax_backward_data", "_log_softmax_backward_data",
    "native_layer_norm_backward", "native_batch_norm_backward", "convolution_backward",
    "embedding_dense_backward", "max_pool2d_with_indices_backward", "max_pool3d_with_indices_backward",
    "_scaled_dot_product_flash_attention_for_cpu_backward", "_scaled_dot_product_flash_attention_backward",
    "_scaled_dot_product_efficient_attention_backward", "_scaled_dot_product_flash_attention_for_cpu",
    "avg_pool2d_backward", "avg_pool3d_backward", "_adaptive_avg_pool2d_backward",
    "_adaptive_avg_pool3d_backward", "mish_backward", "hardtanh_backward", "leaky_relu_backward",
    "elu_backward", "softplus_backward", "hardswish_backward", "hardsigmoid_backward",
    "smooth_l1_loss_backward", "huber_loss_backward", "binary_cross_entropy_backward",
    "upsample_nearest1d_backward", "upsample_nearest2d_backward", "upsample_nearest3d_backward",
    "_upsample_nearest_exact1d_backward", "_upsample_nearest_exact2d_backward",
    "_upsample_nearest_exact3d_backward", "native_group_norm_backward", "upsample_bilinear2d_backward")}


@pytest.mark.parametrize("module", TEMPLATE_MODULES)
def test_every_template_module_imports_alone_in_a_fresh_interpreter(imported_alone, module):
    got = imported_alone[module]
    assert got["rc"] == 0, got["stderr"][-2000:]
    assert got["loaded"] == [f"{registry.TEMPLATES_PACKAGE}.{module}"]  # no other template module
    assert got["ops"] and set(got["ops"]) <= set(OLD_DISPATCH_OPS) | ADDED_OPS


def _imports(path: Path) -> list[tuple[int, str, int]]:
    """(relative level, module, line) of every import in `path`."""
    tree = ast.parse(path.read_text())
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            out.append((node.level, node.module or "", node.lineno))
        elif isinstance(node, ast.Import):
            out += [(0, a.name, node.lineno) for a in node.names]
    return out


def _function_level_imports(path: Path) -> list[int]:
    tree = ast.parse(path.read_text())
    return [n.lineno for f in ast.walk(tree) if isinstance(f, ast.FunctionDef | ast.AsyncFunctionDef)
            for n in ast.walk(f) if isinstance(n, ast.Import | ast.ImportFrom)]


@pytest.mark.parametrize("module", TEMPLATE_MODULES)
def test_a_template_module_imports_the_builder_and_registry_never_another_template(module):
    path = TORCH / "templates" / f"{module}.py"
    for level, name, line in _imports(path):
        if level == 1:  # a sibling: another template module
            pytest.fail(f"{path.name}:{line} imports templates.{name}")
        if level == 2:
            assert name.split(".")[0] == "registry", f"{path.name}:{line}: ..{name}"
        if level == 0 and name.startswith("solar_compiler.frontends"):
            shared = ("solar_compiler.frontends.builder", "solar_compiler.frontends.captured_program")
            assert name.startswith(shared), f"{path.name}:{line}: {name}"
    assert _function_level_imports(path) == []


def test_the_builder_imports_no_frontend_no_template_and_nothing_inside_functions():
    """The builder (frontends/builder/) is shared by the framework frontends: it imports none of them."""
    for path in sorted((TORCH.parent / "builder").glob("*.py")):
        for level, name, line in _imports(path):
            assert level < 2 or name == "captured_program", f"{path.name}:{line}: ..{name}"
            assert "templates" not in name, f"{path.name}:{line}: {name}"
            assert not name.startswith(("solar_compiler.frontends.torch", "solar_compiler.frontends.jax")), \
                f"{path.name}:{line}: {name}"
        assert _function_level_imports(path) == [], path.name


def test_the_registry_has_a_template_for_every_op_of_the_old_dispatch():
    assert len(OLD_DISPATCH_OPS) == len(set(OLD_DISPATCH_OPS)) == 327
    table = registry.templates()
    missing = [op for op in OLD_DISPATCH_OPS if registry.lookup(op) is None]
    assert missing == []
    assert all(callable(table[op]) for op in OLD_DISPATCH_OPS)
    assert registry.lookup("aten.linalg_qr.default") is None


def test_template_binds_its_parameters_and_refuses_a_second_template_for_an_op():
    reg = TemplateRegistry("no.such.package")

    @reg.template("test.a.default", "test.b.default", k=2)
    @reg.template("test.c.default", k=3)
    def times(tr, node, k):
        return (tr, node, k)

    assert times(1, 2, k=5) == (1, 2, 5)  # the decorated function itself is unchanged
    assert reg.registered() == ["test.a.default", "test.b.default", "test.c.default"]
    assert [reg._table[op](1, 2) for op in ("test.a.default", "test.b.default", "test.c.default")] \
        == [(1, 2, 2), (1, 2, 2), (1, 2, 3)]
    with pytest.raises(RuntimeError, match="template for test.c.default defined twice"):
        reg.template("test.c.default")(times)
    with pytest.raises(ValueError):
        reg.template()


def test_loop_bounds_are_in_the_loop_ast_order():
    """Loop(iv, lb, ub) like For(iv, lb, ub); a single bound or a positional step is refused."""
    tr = Translator(CapturedProgram("m.py", "eval", "export"))
    out = tr.declare("out", (8,), "f32")
    tr.emit(out, [AffExpr.var("i")], "=", Const(1.0, "f32"), [Loop("i", 2, 8, step=3)])
    (f,) = tr.body
    assert isinstance(f, For) and (str(f.lb), str(f.ub), f.step, f.sequential) == ("2", "8", 3, False)
    with pytest.raises(TypeError):
        Loop("i", 8)  # type: ignore[call-arg]
    with pytest.raises(TypeError):
        Loop("i", 0, 8, 2)  # type: ignore[misc]
