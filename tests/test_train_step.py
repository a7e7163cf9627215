"""Training steps (`--step train`, docs/training.md): exact counts derived by hand for the bundled
2-layer MLP (examples/train/mlp.py: x[8, 32] -> Linear(32, 64) -> ReLU -> Linear(64, 16), MSE loss
against target[8, 16]), AdamW's traffic, and agreement with torch.autograd and torch.optim."""

from __future__ import annotations

import contextlib
import io
import json
from collections import Counter
from pathlib import Path

import pytest

from solar_compiler.driver import main

REPO = Path(__file__).resolve().parent.parent
MLP = str(REPO / "examples/train/mlp.py")
B, D_IN, H, D_OUT = 8, 32, 64, 16
PARAMS = D_IN * H + H + H * D_OUT + D_OUT  # 3,152 f32 parameters


def report(capsys, *argv: str) -> dict:
    assert main([*argv, "--hw", "H100_SXM", "--format=json", "--quiet"]) == 0
    return json.loads(capsys.readouterr().out)


@pytest.fixture(scope="module")
def adamw() -> dict:
    """The MLP's AdamW step under the classical model (products as written), translated once."""
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        assert main([MLP, "--translate", "--roofline=all", "--step", "train", "--optimizer", "adamw",
                     "--algorithms", "classical", "--hw", "H100_SXM", "--format=json", "--quiet"]) == 0
    return json.loads(buf.getvalue())


def matrix_flops(r: dict) -> Counter:
    c: Counter = Counter()
    for k in r["kernels_unfused"]:
        c[(k["module"], k["phase"])] += k["flops_matrix"]
    return c


def test_backward_matrix_flops_are_2x_forward_and_1x_for_the_first_layer(adamw):
    c = matrix_flops(adamw)
    fc1, fc2 = 2 * B * D_IN * H, 2 * B * H * D_OUT  # 32,768 and 16,384 forward
    assert (c["fc1", "forward"], c["fc2", "forward"]) == (fc1, fc2)
    # fc2: weight gradient dY^T h and input gradient dY W2, each as large as the forward product
    assert c["fc2", "backward"] == 2 * fc2
    # fc1: only the weight gradient dZ^T x; x needs no gradient
    assert c["fc1", "backward"] == fc1
    assert sum(v for (_, ph), v in c.items() if ph == "optimizer") == 0
    phases = {p["phase"]: p for p in adamw["phases"]}
    assert phases["forward"]["flops_matrix"] == fc1 + fc2
    assert phases["backward"]["flops_matrix"] == fc1 + 2 * fc2


def test_adamw_step_traffic_by_hand(adamw):
    # the whole step's compulsory bytes: x and target read; each parameter and both moments read
    # (f32); the loss, each gradient, each updated parameter and both updated moments written
    reads = B * D_IN + B * D_OUT + 3 * PARAMS
    writes = 1 + 4 * PARAMS
    assert adamw["totals"]["bytes_fused"] == 4 * (reads + writes) == 89_796
    # AdamW's first step as torch computes it, per element: 13 ops (one kernel each, unfused) of 14
    # FLOPs: p*(1-lr*wd); m + (1-b1)*(g-m) (sub, then add with alpha: 2 FLOPs); v*b2; g*g;
    # *(1-b2); +; sqrt; /sqrt(bc2); +eps; m/denom; *(-lr/bc1); p + that
    opt = next(p for p in adamw["phases"] if p["phase"] == "optimizer")
    assert opt["flops_vector"] == 14 * PARAMS
    assert opt["kernels"] == 13 * 4


def test_agrees_with_autograd_and_torch_optim(adamw):
    v = adamw["validation"]
    assert v["validated"] and v["method"] == "full" and v["step"] == "train" and v["optimizer"] == "adamw"
    # at least: the loss, every gradient, updated parameter and both updated moments (the views
    # returned as outputs are checked through their bases as well)
    assert v["elements_checked"] >= 1 + 4 * PARAMS
    assert v["max_rel_err"] < 1e-5


def test_self_training_forward_is_the_same_step(capsys):
    r = report(capsys, str(REPO / "examples/train/linear_mse.py"), "--translate", "--roofline=unfused",
               "--step", "train", "--algorithms", "classical")
    v = r["validation"]
    assert v["validated"] and v["optimizer"] == "adamw"  # the model's own AdamW, found
    c = matrix_flops(r)
    assert c["proj", "forward"] == 2 * 16 * 64 * 32
    assert c["proj", "backward"] == 2 * 16 * 64 * 32  # the weight gradient only


def test_optimizer_needs_a_training_step(capsys):
    assert main([MLP, "--translate", "--optimizer", "sgd", "--quiet"]) != 0
    assert "step=train" in capsys.readouterr().err


def test_batch_norm_and_an_in_place_relu_in_train_mode(capsys):
    r = report(capsys, str(REPO / "examples/train/bn_mlp.py"), "--translate", "--roofline=unfused",
               "--step", "train", "--mode", "train", "--optimizer", "sgd", "--algorithms", "classical")
    assert r["validation"]["validated"] and r["validation"]["optimizer"] == "sgd"
    c = matrix_flops(r)
    fc1, fc2 = 2 * 16 * 32 * 64, 2 * 16 * 64 * 8
    assert (c["fc1", "forward"], c["fc2", "forward"]) == (fc1, fc2)
    assert (c["fc1", "backward"], c["fc2", "backward"]) == (fc1, 2 * fc2)
    # SGD's update per parameter element: p + (-lr) * g, a mul and an add
    params = 32 * 64 + 64 + 64 * 2 + 64 * 8 + 8
    phases = {p["phase"]: p for p in r["phases"]}
    assert phases["optimizer"]["flops_vector"] == 2 * params


def test_adamw_traffic_at_the_parameters_dtype(capsys, tmp_path):
    # the same MLP built in bfloat16: weights, gradients and both moments are read and written at
    # 2 bytes each, so the step's compulsory traffic is exactly half the f32 one
    text = Path(MLP).read_text().replace(
        "        self.fc2 = nn.Linear(HIDDEN, D_OUT)\n",
        "        self.fc2 = nn.Linear(HIDDEN, D_OUT)\n        self.to(torch.bfloat16)\n").replace(
        "torch.randn(BATCH, D_IN), torch.randn(BATCH, D_OUT)",
        "torch.randn(BATCH, D_IN, dtype=torch.bfloat16), torch.randn(BATCH, D_OUT, dtype=torch.bfloat16)")
    path = tmp_path / "mlp_bf16.py"
    path.write_text(text)
    r = report(capsys, str(path), "--translate", "--roofline=fused", "--step", "train",
               "--optimizer", "adamw")
    assert r["validation"]["validated"]
    reads = B * D_IN + B * D_OUT + 3 * PARAMS
    writes = 1 + 4 * PARAMS
    assert r["totals"]["bytes_fused"] == 2 * (reads + writes) == 44_898


def test_cnn_backward_convolutions_are_2x_and_1x(capsys):
    # examples/train/cnn.py: x[4, 3, 16, 16] -> conv1 (8 channels, 3x3, padding 1) -> ReLU -> max pool 2
    # -> conv2 (16 channels, 3x3, stride 2, padding 1) -> ReLU -> mean -> head Linear(16, 10).
    # Padding taps are not counted: per spatial dim conv1 has 15 + 16 + 15 = 46 valid (output, tap)
    # pairs, conv2 (8 -> 4, stride 2) 3 + 4 + 4 = 11.
    r = report(capsys, str(REPO / "examples/train/cnn.py"), "--translate", "--roofline=unfused",
               "--step", "train", "--algorithms", "classical")
    assert r["validation"]["validated"]
    c = matrix_flops(r)
    conv1, conv2, head = 2 * 4 * 8 * 3 * 46**2, 2 * 4 * 16 * 8 * 11**2, 2 * 4 * 16 * 10
    assert (c["conv1", "forward"], c["conv2", "forward"], c["head", "forward"]) == (conv1, conv2, head)
    assert c["conv1", "backward"] == conv1  # the weight gradient only: x needs no gradient
    assert (c["conv2", "backward"], c["head", "backward"]) == (2 * conv2, 2 * head)


@pytest.mark.parametrize("name, products", [
    # the head Linear(32, 8) over 4 rows: 2*4*32*8 forward
    ("lstm", {"head": 2 * 4 * 32 * 8}),
    # qkv over 2*16 tokens (2*32*32*96), the MLP's two layers (2*32*32*128 each), the head
    # (2*32*32*64); their inputs all need gradients (the embedding is trained), so each is 2x
    ("transformer_block", {"qkv": 2 * 32 * 32 * 96, "mlp.0": 2 * 32 * 32 * 128,
                           "mlp.2": 2 * 32 * 128 * 32, "proj": 2 * 32 * 32 * 32, "head": 2 * 32 * 32 * 64}),
])
def test_recurrent_and_attention_steps(capsys, name, products):
    r = report(capsys, str(REPO / f"examples/train/{name}.py"), "--translate", "--roofline=unfused",
               "--step", "train", "--optimizer", "adamw", "--algorithms", "classical")
    assert r["validation"]["validated"]
    c = matrix_flops(r)
    for module, flops in products.items():
        assert (c[module, "forward"], c[module, "backward"]) == (flops, 2 * flops), module
    if name == "transformer_block":
        # causal attention at top level: QK^T and PV over the 16*17/2 needed (query, key) pairs of
        # each of 2*4 heads (dim 8); backward: dQ, dK from dS and dP, dV: twice the forward, plus
        # the softmax backward's row dot product sum_k dP * P (one contraction over the needed
        # pairs, 2 FLOPs each: _softmax_backward_data's template, a contraction at the matrix rate)
        fwd = 2 * (2 * 2 * 4 * 136 * 8)
        assert (c[None, "forward"], c[None, "backward"]) == (fwd, 2 * fwd + 2 * 2 * 4 * 136)


def test_dropout_in_train_mode_is_one_draw_fed_to_validation(capsys, tmp_path):
    # dropout after the ReLU: the step draws rand_like once (the mask multiplies in backward too);
    # validation feeds the eager step's draw, so gradients and the update agree only if the same
    # mask is applied in both passes
    path = tmp_path / "mlp_dropout.py"
    dropout = "        self.act = nn.Sequential(nn.ReLU(), nn.Dropout(0.25))"
    path.write_text(Path(MLP).read_text().replace("        self.act = nn.ReLU()", dropout))
    r = report(capsys, str(path), "--translate", "--roofline=unfused", "--step", "train", "--mode", "train",
               "--optimizer", "adamw", "--algorithms", "classical")
    assert r["validation"]["validated"]
    c = matrix_flops(r)
    assert (c["fc2", "backward"], c["fc1", "backward"]) == (2 * 2 * B * H * D_OUT, 2 * B * D_IN * H)
