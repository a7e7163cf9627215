"""Tests of the PyTorch frontend, phase 1: model files, capture, reference runs, sandbox."""

from __future__ import annotations

import resource
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from solar_compiler.frontends.model_file import ModelFileError, load_model_file  # noqa: E402
from solar_compiler.frontends.sandbox import SandboxError, run_in_child  # noqa: E402
from solar_compiler.frontends.torch.capture import (  # noqa: E402
    CapturedProgram,
    TensorRef,
    capture,
    fresh_inputs,
    run_reference,
    torch_dtype,
)
from solar_compiler.frontends.torch.capture.reference import eager_forward  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
EX = ROOT / "examples" / "torch"


def ex(name: str) -> str:
    return str(EX / f"{name}.py")


def line_of(path: str, text: str) -> int:
    for i, line in enumerate(Path(path).read_text().splitlines(), 1):
        if text in line:
            return i
    raise AssertionError(f"{text!r} not in {path}")


def ops(prog: CapturedProgram) -> list[str]:
    return [n.op for n in prog.nodes]


def interpret(prog: CapturedProgram, inputs, weights, random) -> dict[str, np.ndarray]:
    """Execute a captured program with ATen ops (views as reshapes: logical row-major)."""
    env = {k: torch.from_numpy(np.array(v)) for d in (inputs, weights) for k, v in d.items()}
    rnd = {k: torch.from_numpy(v) for k, v in random.items()}

    def conv(v, typ=None):
        if isinstance(v, TensorRef):
            return env[v.name]
        if isinstance(v, (list, tuple)):
            items = [conv(x) for x in v]
            return items if isinstance(v, list) else tuple(items)
        if isinstance(v, str) and typ is not None and "ScalarType" in typ:
            return torch_dtype(v)
        return v

    for node in prog.nodes:
        _, packet, overload = node.op.split(".")
        if packet == "view":
            packet, overload = "reshape", "default"
        op = getattr(getattr(torch.ops.aten, packet), overload)
        first = node.outputs[0] if node.outputs else None
        if first is not None and first.name in rnd:
            env[first.name] = rnd[first.name]
            continue
        types = [str(a.real_type) for a in op._schema.arguments]
        by_name = {a.name: str(a.real_type) for a in op._schema.arguments}
        args = [conv(a, types[i] if i < len(types) else None) for i, a in enumerate(node.args)]
        kwargs = {k: conv(v, by_name.get(k)) for k, v in node.kwargs.items()}
        out = op(*args, **kwargs)
        outs = list(out) if isinstance(out, (tuple, list)) else [out]
        for meta, value in zip(node.outputs, outs, strict=False):
            if meta is not None:
                assert tuple(value.shape) == meta.shape, (node.op, tuple(value.shape), meta.shape)
                env[meta.name] = value
    return {n: env[n].numpy() for n in prog.outputs}


def assert_close(ref: dict, got: dict) -> None:
    assert ref.keys() == got.keys()
    for k in ref:
        a, b = ref[k], got[k]
        assert a.shape == b.shape, k
        if a.dtype.kind in "biu":
            np.testing.assert_array_equal(a, b)
        else:
            np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)


# --------------------------------------------------------------------------------------------
# capture
# --------------------------------------------------------------------------------------------


def test_matmul_exports_one_mm_with_user_location():
    path = ex("matmul")
    prog = capture(path)
    assert prog.method == "export" and prog.mode == "eval" and prog.source == path
    assert [(m.name, m.shape, m.dtype) for m in prog.inputs] == [
        ("a", (256, 128), "f32"),
        ("b", (128, 192), "f32"),
    ]
    assert prog.weights == []
    assert ops(prog) == ["aten.mm.default"]
    node = prog.nodes[0]
    assert node.args == (TensorRef("a"), TensorRef("b"))
    assert [(o.shape, o.dtype) for o in node.outputs] == [((256, 192), "f32")]
    assert prog.outputs == [node.outputs[0].name]
    assert node.loc == f"{path}:{line_of(path, 'torch.matmul(a, b)')}"
    assert prog.random_tensors == [] and prog.value_dependent == []


@pytest.mark.parametrize("mode", ["eval", "train"])
def test_conv_bn_relu_keeps_convolution_and_batch_norm(mode):
    prog = capture(ex("conv_bn_relu"), mode=mode)
    assert prog.method == "export"
    bn = (
        "aten._native_batch_norm_legit_no_training.default"
        if mode == "eval"
        else ("aten._native_batch_norm_legit_functional.default")
    )
    assert ops(prog) == ["aten.convolution.default", bn, "aten.relu.default"]
    conv, norm, relu = prog.nodes
    assert conv.args[0] == TensorRef("x") and conv.args[1] == TensorRef("conv_weight")
    assert conv.module_path == "conv" and norm.module_path == "bn"
    assert {w.name for w in prog.weights} == {
        "conv_weight",
        "bn_weight",
        "bn_bias",
        "bn_running_mean",
        "bn_running_var",
    }
    # running-stat updates are side outputs: unused, not graph outputs
    assert norm.outputs[0] is not None and all(o is None for o in norm.outputs[1:])
    assert prog.outputs == [relu.outputs[0].name]
    assert all(n.loc and n.loc.startswith(ex("conv_bn_relu") + ":") for n in prog.nodes)


def test_stateful_forward_falls_back_to_dispatch():
    prog = capture(ex("stateful_forward"))
    assert prog.method == "dispatch"
    assert "mutates module state" in prog.fallback_reason and "self.h" in prog.fallback_reason
    assert ops(prog) == ["aten.linear.default", "aten.tanh.default", "aten.mul.Tensor"]
    assert [w.name for w in prog.weights] == ["fc_weight", "fc_bias"]
    path = ex("stateful_forward")
    assert prog.nodes[1].loc == f"{path}:{line_of(path, 'self.h = torch.tanh')}"
    assert prog.nodes[0].module_path == "fc"


def test_weight_transpose_references_the_single_weight():
    prog = capture(ex("weight_transpose"))
    assert [w.name for w in prog.weights] == ["weight"]
    assert prog.weight_sources == {"weight": "weight"}
    perm, mm = prog.nodes
    assert perm.op == "aten.permute.default" and perm.args == (TensorRef("weight"), [1, 0])
    assert mm.op == "aten.mm.default" and mm.args == (TensorRef("x"), TensorRef(perm.outputs[0].name))


def test_max_discarding_indices_has_one_output():
    prog = capture(ex("max_discard_indices"))
    assert len(prog.outputs) == 1
    (node,) = prog.nodes
    assert node.op == "aten.max.dim" and node.outputs[1] is None
    assert prog.outputs == [node.outputs[0].name]


def test_dropout_is_one_random_tensor_in_train_mode_only():
    train = capture(ex("dropout_train"), mode="train")
    assert len(train.random_tensors) == 1
    rnd = train.random_tensors[0]
    producer = next(
        n for n in train.nodes if n.outputs and n.outputs[0] is not None and n.outputs[0].name == rnd.name
    )
    assert producer.op == "aten.rand_like.default" and rnd.shape == (64, 256)
    assert capture(ex("dropout_train"), mode="eval").random_tensors == []


def test_big_input_captures_with_fake_tensors_without_allocating():
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    prog = capture(ex("big_elementwise_6gb"))
    grown_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before
    assert prog.inputs[0].shape == (4096, 393216)
    assert ops(prog) == ["aten.relu.default", "aten.mul.Tensor"]
    assert grown_kb < 2**20, f"RSS grew by {grown_kb / 1024:.0f} MB"


def test_value_dependent_programs_are_flagged():
    moe = capture(ex("moe_topk"))
    assert moe.method == "dispatch"
    assert any("aten.nonzero" in v for v in moe.value_dependent)
    assert any("aten.topk" in v for v in moe.value_dependent)
    branch = capture(ex("data_dependent_branch"))
    assert branch.method == "dispatch" and ops(branch) == ["aten.mul.Tensor"]
    assert any("_local_scalar_dense" in v for v in branch.value_dependent)


def test_names_are_sanitized_state_dict_names():
    prog = capture(ex("mlp2"))
    assert [w.name for w in prog.weights] == [
        "layers_0_weight",
        "layers_0_bias",
        "layers_2_weight",
        "layers_2_bias",
    ]
    assert prog.weight_sources["layers_2_bias"] == "layers.2.bias"
    names = [m.name for m in prog.inputs + prog.weights] + [
        o.name for n in prog.nodes for o in n.outputs if o is not None
    ]
    assert len(names) == len(set(names)) and all(n.isidentifier() for n in names)


@pytest.mark.parametrize(
    ("name", "mode"),
    [
        ("inplace_ops", "eval"),
        ("two_views", "eval"),
        ("causal_attention_manual", "eval"),
        ("conv_bn_relu", "train"),
        ("dropout_train", "train"),
        ("random_in_forward", "eval"),
        ("moe_topk", "eval"),
    ],
)
@pytest.mark.parametrize("method", ["auto", "dispatch"])
def test_captured_graph_reproduces_the_reference(name, mode, method):
    prog = capture(ex(name), mode=mode, method=method)
    seed = 0 if prog.value_dependent else 5  # value-dependent graphs hold for their own sample
    inputs, weights, outputs, random = run_reference(ex(name), mode, seed=seed, program=prog)
    assert set(random) == {r.name for r in prog.random_tensors}
    assert_close(outputs, interpret(prog, inputs, weights, random))


def test_capture_of_size_reduced_instance():
    spec = load_model_file(ex("matmul"))
    assert spec.size_constants == {"M": 256, "K": 128, "N": 192}
    prog = capture(ex("matmul"), size_overrides={"M": 8, "N": 4})
    assert prog.nodes[0].outputs[0].shape == (8, 4) and prog.size_constants["M"] == 8
    with pytest.raises(ModelFileError, match=r"no module-level size named Q \(known: M, K, N\)"):
        spec.with_sizes({"Q": 3})


# --------------------------------------------------------------------------------------------
# reference runs
# --------------------------------------------------------------------------------------------


def test_run_reference_matches_direct_eager_run():
    path = ex("mlp2")
    prog = capture(path)
    inputs, weights, outputs, random = run_reference(path, "eval", seed=3, program=prog)
    assert set(weights) == {w.name for w in prog.weights} and random == {}
    spec = load_model_file(path)
    torch.manual_seed(3)
    model = spec.build_model().eval()
    x = spec.sample_inputs()[0]
    with torch.no_grad():
        expected = model(x).numpy()
    np.testing.assert_array_equal(inputs["x"], x.numpy())
    np.testing.assert_array_equal(weights["layers_0_weight"], model.layers[0].weight.detach().numpy())
    np.testing.assert_array_equal(outputs[prog.outputs[0]], expected)
    # given inputs replace the sample
    new = fresh_inputs(spec, seed=11)
    _, _, out2, _ = run_reference(path, "eval", inputs=new, seed=3, program=prog)
    with torch.no_grad():
        expected2 = model(torch.from_numpy(new["x"])).numpy()
    np.testing.assert_allclose(out2[prog.outputs[0]], expected2, rtol=1e-6)


def test_fresh_inputs_keep_integer_ranges():
    spec = load_model_file(ex("embedding"))
    a, b = fresh_inputs(spec, seed=1)["ids"], fresh_inputs(spec, seed=2)["ids"]
    assert a.dtype == np.int64 and a.shape == (16, 64)
    assert a.min() >= 0 and a.max() <= 999 and not np.array_equal(a, b)
    gather = fresh_inputs(load_model_file(ex("gather")), seed=4)
    assert gather["x"].dtype == np.float32 and gather["index"].max() < 512 and gather["index"].min() >= 0
    mask = fresh_inputs(load_model_file(ex("bool_mask")), seed=4)["mask"]
    assert mask.dtype == np.bool_ and mask.shape == (32, 256)


# --------------------------------------------------------------------------------------------
# model files and the sandbox
# --------------------------------------------------------------------------------------------

_GOOD_TAIL = """
def get_inputs():
    return [torch.randn(4, 4)]


def get_init_inputs():
    return []
"""


def _write(tmp_path: Path, name: str, body: str, tail: str = "") -> str:
    path = tmp_path / name
    path.write_text(textwrap.dedent(body) + tail)
    return str(path)


def _child_error(path: str, **kw) -> str:
    with pytest.raises(SandboxError) as info:
        run_in_child(eager_forward, path, **kw)
    msg = str(info.value)
    assert "\n" not in msg and Path(path).name in msg, msg
    return msg


def test_sandbox_reports_one_line_errors(tmp_path):
    syntax = _write(
        tmp_path, "syntax_error.py", "import torch\nclass Model(torch.nn.Module):\n    def forward(self x):\n"
    )
    assert _child_error(syntax).startswith(f"{syntax}:3: syntax error")

    missing = _write(tmp_path, "no_get_inputs.py", "import torch\nclass Model(torch.nn.Module):\n    pass\n")
    assert "missing 'get_inputs'" in _child_error(missing)

    raising = _write(
        tmp_path,
        "raises.py",
        """\
        import torch
        class Model(torch.nn.Module):
            def forward(self, x):
                raise ValueError("bad shape")
        """,
        _GOOD_TAIL,
    )
    assert _child_error(raising) == f"{raising}:4: forward raised ValueError: bad shape"

    loop = _write(
        tmp_path,
        "forever.py",
        """\
        import torch
        class Model(torch.nn.Module):
            def forward(self, x):
                while True:
                    x = x + 1
        """,
        _GOOD_TAIL,
    )
    assert _child_error(loop, timeout_s=1) == f"{loop}: timed out after 1 s"

    huge = _write(
        tmp_path,
        "huge.py",
        """\
        import torch
        class Model(torch.nn.Module):
            def forward(self, x):
                return torch.ones(1 << 31) + 1
        """,
        _GOOD_TAIL,
    )
    assert _child_error(huge, memory_limit_gb=1) == f"{huge}: exceeded memory limit of 1 GB"


def test_load_errors_name_file_and_line(tmp_path):
    bad = _write(
        tmp_path,
        "not_a_list.py",
        "import torch\nclass Model(torch.nn.Module):\n    pass\n"
        "def get_inputs():\n    return torch.ones(2)\ndef get_init_inputs():\n    return []\n",
    )
    spec = load_model_file(bad)
    with pytest.raises(ModelFileError, match=r"not_a_list\.py:4: get_inputs\(\) must return a list or tuple"):
        spec.sample_inputs()


def test_importing_the_frontend_does_not_import_torch():
    code = (
        "import sys, solar_compiler, solar_compiler.frontends.torch, "
        "solar_compiler.frontends.model_file, solar_compiler.frontends.sandbox\n"
        "assert 'torch' not in sys.modules, 'torch imported'\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT)


def test_the_dispatch_capture_lets_freed_intermediates_go(tmp_path):
    """The dispatch recorder tracks tensors by identity without keeping them alive: an intermediate
    forward drops is freed at once (on real tensors, the fallback for data-dependent code, keeping
    every one held all of Reformer's activations at once), and a later tensor that reuses its
    memory is a new tensor, not the old name."""
    f = tmp_path / "m.py"
    f.write_text(textwrap.dedent("""
        import weakref
        import torch

        ALIVE = []

        class Model(torch.nn.Module):
            def forward(self, x):
                keep = int(x.abs().sum().item() >= 0)  # a value read: captured by dispatch
                refs, y = [], x
                for _ in range(4):
                    t = y * 2.0
                    refs.append(weakref.ref(t))
                    y = t + 1.0
                    del t
                ALIVE.append(sum(r() is not None for r in refs))
                return y * keep

        def get_inputs():
            return [torch.randn(64, 64)]

        def get_init_inputs():
            return []
        """))
    spec = load_model_file(f)
    prog = capture(spec)
    assert prog.method == "dispatch" and spec.module.ALIVE[-1] == 0
    assert ops(prog).count("aten.mul.Tensor") == 5 and ops(prog).count("aten.add.Tensor") == 4
    names = [o.name for n in prog.nodes for o in n.outputs if o is not None]
    assert len(names) == len(set(names))
