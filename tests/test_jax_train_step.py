"""JAX training steps (docs/training.md, "JAX"): a jitted `jax.value_and_grad` step translates through
the JAX frontend with no `--step` flag and validates against the jitted step; the report's phases come
from the name stack's transforms (`frontends/jax/phases.py`). Counts derived by hand for
examples/jax/train_mlp.py and train_mlp_adamw.py: x[8, 32] -> x @ w1 + b1 [64] -> relu -> @ w2 + b2
[16], MSE against y[8, 16]; gradients of the four parameters only (x needs none)."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from solar_compiler.driver import main
from solar_compiler.frontends.captured_program import AtenNode
from solar_compiler.frontends.jax.phases import phase_of, tag_phases
from solar_compiler.frontends.jax.program import SubProgram

REPO = Path(__file__).resolve().parent.parent
B, D, H, O = 8, 32, 64, 16
PARAMS = D * H + H + H * O + O  # 3,152 f32 parameters
FWD1, FWD2 = 2 * B * D * H, 2 * B * H * O  # 32,768 and 16,384: the two layers' forward products


def translated_reports(tmp, runs: dict[str, list[str]]) -> dict[str, dict]:
    """Each run's `solar-opt ARGS --translate --lift-einsum --roofline=all --hw H100_SXM` JSON report,
    translated (validated, in the sandboxed child) into a fresh cache under `tmp`, by run name."""
    out = {}
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("XDG_CACHE_HOME", str(tmp))
        mp.chdir(REPO)
        for name, args in runs.items():
            target = tmp / f"{name}.json"
            assert main([*args, "--translate", "--lift-einsum", "--roofline=all", "--hw", "H100_SXM",
                         "--format=json", "-o", str(target)]) == 0, name
            out[name] = json.loads(target.read_text())
    return out


@pytest.fixture(scope="module")
def reports(tmp_path_factory) -> dict[str, dict]:
    """Both examples translated and reported."""
    pytest.importorskip("jax")
    return translated_reports(tmp_path_factory.mktemp("jaxtrain"),
                              {n: [f"examples/jax/{n}"] for n in ("train_mlp.py", "train_mlp_adamw.py")})


def line_of(name: str, text: str) -> int:
    """The line of examples/jax/`name` holding `text` (once)."""
    lines = [i for i, t in enumerate((REPO / "examples/jax" / name).read_text().splitlines(), 1) if text in t]
    assert len(lines) == 1, (name, text)
    return lines[0]


def matrix_by_line_and_phase(r: dict) -> Counter:
    c: Counter = Counter()
    for k in r["kernels_unfused"]:
        c[(int(k["loc"].rsplit(":", 1)[1]), k["phase"])] += k["flops_matrix"]
    return c


@pytest.mark.parametrize("name", ["train_mlp.py", "train_mlp_adamw.py"])
def test_the_step_validates_against_the_jitted_step(name, reports):
    r = reports[name]
    v = r["validation"]
    assert (v["frontend"], v["validated"], v["samples"], v["sizes"]) == ("jax-jaxpr", True, 3, "full")
    assert v["max_rel_err"] < 1e-4
    for row in [*r["kernels_unfused"], *r["ops"]]:  # optax's equations too take the user's line
        assert row["loc"].startswith(f"examples/jax/{name}:"), row
    assert [p["phase"] for p in r["phases"]] == ["forward", "backward", "optimizer"]


@pytest.mark.parametrize("name", ["train_mlp.py", "train_mlp_adamw.py"])
def test_backward_matrix_flops_are_2x_forward_and_1x_for_the_first_layer(name, reports):
    """Layer 2 computes its weight gradient h^T dY and the input gradient dY w2^T, each as large as its
    forward product; layer 1 only its weight gradient x^T dZ (x is not differentiated). Backward
    equations take the line of the forward equation they transpose."""
    c = matrix_by_line_and_phase(reports[name])
    LINE1, LINE2 = (line_of(name, text) for text in ("x @ w1", "h @ w2"))
    assert (c[LINE1, "forward"], c[LINE2, "forward"]) == (FWD1, FWD2)
    assert c[LINE2, "backward"] == 2 * FWD2
    assert c[LINE1, "backward"] == FWD1
    phases = {p["phase"]: p for p in reports[name]["phases"]}
    assert phases["forward"]["flops_matrix"] == FWD1 + FWD2
    assert phases["backward"]["flops_matrix"] == FWD1 + 2 * FWD2
    assert phases["optimizer"]["flops_matrix"] == 0


def test_sgd_update_by_hand(reports):
    # p - LR * g: one multiply and one subtract per parameter element
    phases = {p["phase"]: p for p in reports["train_mlp.py"]["phases"]}
    assert phases["optimizer"]["flops_vector"] == 2 * PARAMS


def test_adamw_update_and_traffic_by_hand(reports):
    r = reports["train_mlp_adamw.py"]
    # optax.adamw per element: mu' = (1-b1) g + b1 mu (3), nu' = (1-b2) g**2 + b2 nu (4), the two bias
    # corrections (2 divides), mu^ / (sqrt(nu^ + eps_root) + eps) (3: eps_root is 0.0, and adding a
    # literal 0 is no operation), + wd * p (2), * -lr (1), p + u (1)
    phases = {p["phase"]: p for p in r["phases"]}
    assert phases["optimizer"]["flops_vector"] == 16 * PARAMS
    # compulsory traffic, f32: x and y read; each parameter and both moments read; the loss, each
    # updated parameter and both updated moments written
    assert r["totals"]["bytes_fused"] == 4 * (B * D + B * O + 3 * PARAMS + 1 + 3 * PARAMS)


def _node(phase: str | None, bodies: dict | None = None) -> AtenNode:
    return AtenNode("jax.add", (), {"bodies": bodies} if bodies else {}, (), phase=phase)


def test_phases_from_transforms():
    assert phase_of(["jvp", "transpose"]) == "backward"
    assert phase_of(["jvp"]) == "forward"
    assert phase_of([]) is None
    # untransformed nodes: forward before the first backward node, optimizer after; a loop's
    # untagged body nodes take the loop's phase
    inner = _node(None)
    loop = _node(None, {"body": SubProgram([], [inner], [])})
    nodes = [_node(None), _node("forward"), _node("backward"), loop]
    tag_phases(nodes)
    assert [n.phase for n in nodes] == ["forward", "forward", "backward", "optimizer"]
    assert inner.phase == "optimizer"
    # no backward (a forward, or forward-mode jax.jvp alone): no phases at all
    fwd = [_node(None), _node("forward")]
    tag_phases(fwd)
    assert [n.phase for n in fwd] == [None, None]


def test_step_train_on_a_def_model_file_says_the_function_is_the_step(capsys, tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert main([str(REPO / "examples/jax/train_mlp.py"), "--translate", "--step", "train"]) != 0
    err = capsys.readouterr().err.strip()
    assert err.endswith("train_mlp.py: --step train builds a step around an NNX Model's parameters; a "
                        "`def model` file has none: write the step itself (jax.value_and_grad + the update, "
                        "examples/jax/train_mlp.py) and translate it without --step train"), err
    assert len(err.splitlines()) == 1


# ---- `--step train` on a Flax NNX model file (frontends/jax/train.py) -----------------------------------
# examples/jax/nnx_train_mlp.py is train_mlp.py's model as nnx.Linear layers with get_loss = the same MSE
NNX = {"nnx": [], "nnx_sgd": ["--optimizer", "sgd"], "nnx_adamw": ["--optimizer", "adamw"]}


@pytest.fixture(scope="module")
def nnx_reports(tmp_path_factory) -> dict[str, dict]:
    """The NNX model's training step, without and with each optimizer, translated and reported."""
    pytest.importorskip("flax")
    return translated_reports(tmp_path_factory.mktemp("nnxtrain"),
                              {n: ["examples/jax/nnx_train_mlp.py", "--step", "train", *extra]
                               for n, extra in NNX.items()})


@pytest.mark.parametrize("name", list(NNX))
def test_nnx_step_validates_and_its_products_by_module_and_phase(name, nnx_reports):
    """Validated against the jitted step built the same way; fc2 computes its weight and input
    gradients, fc1 its weight gradient only (the step differentiates the nnx.Param leaves, not x);
    backward work is the module's whose forward it transposes."""
    r = nnx_reports[name]
    v = r["validation"]
    assert (v["frontend"], v["validated"], v["sizes"], v["step"]) == ("jax-jaxpr", True, "full", "train")
    assert v["optimizer"] == (NNX[name][1] if NNX[name] else None)
    c: Counter = Counter()
    for k in r["kernels_unfused"]:
        c[(k["module"], k["phase"])] += k["flops_matrix"]
    assert (c["fc1", "forward"], c["fc1", "backward"]) == (FWD1, FWD1)
    assert (c["fc2", "forward"], c["fc2", "backward"]) == (FWD2, 2 * FWD2)
    assert sum(c.values()) == 2 * FWD1 + 3 * FWD2


def test_nnx_step_updates_and_traffic_by_hand(nnx_reports):
    phases = {n: {p["phase"]: p for p in r["phases"]} for n, r in nnx_reports.items()}
    # optax.sgd: u = -lr g, p + u; optax.adamw: 16 per element as for train_mlp_adamw.py above
    assert phases["nnx_sgd"]["optimizer"]["flops_vector"] == 2 * PARAMS
    assert phases["nnx_adamw"]["optimizer"]["flops_vector"] == 16 * PARAMS
    assert phases["nnx"]["optimizer"]["kernels"] == 0
    # f32 compulsory traffic: x, y and the parameters read, the loss and the gradients written; with
    # SGD the updated parameters instead of the gradients; AdamW reads and writes both moments too
    assert nnx_reports["nnx"]["totals"]["bytes_fused"] == 4 * (B * D + B * O + PARAMS + 1 + PARAMS)
    assert nnx_reports["nnx_sgd"]["totals"]["bytes_fused"] == 4 * (B * D + B * O + PARAMS + 1 + PARAMS)
    assert nnx_reports["nnx_adamw"]["totals"]["bytes_fused"] == \
        4 * (B * D + B * O + 3 * PARAMS + 1 + 3 * PARAMS)


def test_nnx_step_without_get_loss_sums_the_outputs(tmp_path, monkeypatch, capsys):
    """examples/jax/nnx_mlp.py (x[32, 64] -> Linear(64, 256) -> GELU -> Linear(256, 64)) has no
    get_loss: the loss is the outputs' sum, whose gradient is a constant, so `down`'s two backward
    products are reductions of it (vector work); `up`'s weight gradient is the one backward product."""
    pytest.importorskip("flax")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.chdir(REPO)
    assert main(["examples/jax/nnx_mlp.py", "--step", "train", "--translate", "--lift-einsum",
                 "--roofline=unfused", "--hw", "H100_SXM", "--format=json"]) == 0
    r = json.loads(capsys.readouterr().out)
    assert r["validation"]["validated"] and r["validation"]["step"] == "train"
    phases = {p["phase"]: p for p in r["phases"]}
    assert phases["forward"]["flops_matrix"] == 2 * (2 * 32 * 64 * 256)
    assert phases["backward"]["flops_matrix"] == 2 * 32 * 64 * 256


def test_the_timed_nnx_step_is_the_bounded_step(monkeypatch):
    """`solar-bench --step train --measure` times the step solar-opt bounds: jitted, the parameters
    and AdamW's moments as arguments; its loss is the file's get_loss of the model's own forward, and
    its outputs the loss, the updated parameters and both moments (leaves in NNX's state order)."""
    pytest.importorskip("flax")
    import numpy as np

    from solar_compiler.frontends.jax.capture import construct
    from solar_compiler.frontends.jax.timed import device, jitted_model
    from solar_compiler.frontends.model_file import JAX_FORMAT, load_model_file

    monkeypatch.chdir(REPO)
    path = "examples/jax/nnx_train_mlp.py"
    fn, args = jitted_model(path, "eval", device("cpu"), "train", "adamw")
    out = fn(*args)
    shapes = [(H,), (D, H), (O,), (H, O)]  # fc1.bias, fc1.kernel, fc2.bias, fc2.kernel
    assert [tuple(o.shape) for o in out] == [(), *shapes * 3]
    spec = load_model_file(path, JAX_FORMAT)
    x, y = spec.sample_inputs()
    want = spec.module.get_loss(construct(spec)(x, y), x, y)
    assert np.allclose(np.asarray(out[0]), np.asarray(want), rtol=1e-6)
    params = args[0][:4]
    assert all(not np.allclose(np.asarray(p), np.asarray(q)) for p, q in zip(params, out[1:5], strict=True))


def test_nnx_cnn_step_products_by_hand(tmp_path, monkeypatch, capsys):
    """examples/jax/nnx_cnn.py, x[4, 16, 16, 3] (NHWC) -> Conv 3->16 3x3 SAME -> relu -> 2x2 avg pool ->
    Conv 16->32 3x3 SAME -> relu -> pool -> Linear(512, 10), no get_loss (the outputs' sum). Classical
    products over the taps inside the input: 16 outputs x 3 taps less the 2 on padding = 46 (output,
    tap) pairs per dim at 16x16, 22 at 8x8. Backward: conv2 its input and weight gradients (2x), conv1
    its weight gradient only (the image needs none), the head's products with the loss's constant
    gradient are reductions (no product)."""
    pytest.importorskip("flax")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.chdir(REPO)
    assert main(["examples/jax/nnx_cnn.py", "--step", "train", "--translate", "--lift-einsum",
                 "--roofline=unfused", "--algorithms", "classical", "--hw", "H100_SXM", "--format=json"]) == 0
    r = json.loads(capsys.readouterr().out)
    assert r["validation"]["validated"] and r["validation"]["step"] == "train"
    c: Counter = Counter()
    for k in r["kernels_unfused"]:
        c[(k["module"], k["phase"])] += k["flops_matrix"]
    conv1, conv2, head = 2 * 4 * 16 * 3 * 46**2, 2 * 4 * 32 * 16 * 22**2, 2 * 4 * 512 * 10
    assert {k: v for k, v in c.items() if v} == {
        ("conv1", "forward"): conv1, ("conv2", "forward"): conv2, ("head", "forward"): head,
        ("conv1", "backward"): conv1, ("conv2", "backward"): 2 * conv2}


def test_nnx_transformer_block_step_with_adamw(tmp_path, monkeypatch, capsys):
    """examples/jax/nnx_transformer_block.py (B 2, T 32, D 64, 4 heads; causal attention, layer norms,
    GELU MLP) under --step train --optimizer adamw validates. Its nnx.Param elements by hand: two
    layer norms 2 x (64 + 64), q, k, v and out projections 4 x (64 x 64 + 64), fc1 64 x 256 + 256, fc2
    256 x 64 + 64: 49,984; AdamW's 16 FLOPs each; compulsory f32 traffic: x, the parameters and both
    moments read, the loss, the parameters and both moments written."""
    pytest.importorskip("flax")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.chdir(REPO)
    assert main(["examples/jax/nnx_transformer_block.py", "--step", "train", "--optimizer", "adamw",
                 "--translate", "--lift-einsum", "--roofline=fused", "--hw", "H100_SXM",
                 "--format=json"]) == 0
    r = json.loads(capsys.readouterr().out)
    assert r["validation"]["validated"] and r["validation"]["optimizer"] == "adamw"
    params = 2 * (64 + 64) + 4 * (64 * 64 + 64) + (64 * 256 + 256) + (256 * 64 + 64)
    assert params == 49_984
    phases = {p["phase"]: p for p in r["phases"]}
    assert phases["optimizer"]["flops_vector"] == 16 * params
    assert r["totals"]["bytes_fused"] == 4 * (2 * 32 * 64 + 3 * params + 1 + 3 * params)
