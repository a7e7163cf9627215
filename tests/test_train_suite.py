"""The bundled training steps (examples/train/, docs/training.md): each translates and validates
against torch.autograd under `--step train`, and the backward matrix FLOPs of its linear and
convolution layers are 2x their forward FLOPs, or 1x for a layer whose input needs no gradient (only
the weight gradient is computed). Every forward figure below is derived from the layer shapes in the
example file: 2 * batch rows * in * out for a Linear, and 2 * N * C_out * (C_in / groups) * the
valid (output, tap) pairs of each spatial dim for a convolution (padding taps are not counted).
Each step's matrix FLOPs also equal torch's FlopCounterMode on the real step (forward, loss,
backward) but for the differences derived in benchmarks/flop_counter_train.py (docs/training.md)."""

from __future__ import annotations

import functools
import importlib.util
import json
import sys
from collections import Counter
from pathlib import Path

import pytest

from solar_compiler.driver import main

REPO = Path(__file__).resolve().parent.parent
TRAIN = REPO / "examples/train"
# toggling oneDNN for the counter warns about Intel-GPU TF32 on every call
pytestmark = pytest.mark.filterwarnings("ignore:TF32 acceleration on top of oneDNN:UserWarning")


@functools.cache
def _flop_counter_train():  # noqa: ANN202 - a module
    """benchmarks/flop_counter_train.py: the counter's step and the derived differences."""
    path = REPO / "benchmarks/flop_counter_train.py"
    spec = importlib.util.spec_from_file_location("flop_counter_train", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclass looks its module up
    spec.loader.exec_module(module)
    return module


def _taps(size: int, k: int, pad: int, dil: int = 1) -> int:
    """Valid (output, tap) pairs along one dim of a stride-1 convolution whose output keeps `size`."""
    return sum(1 for o in range(size) for t in range(k) if 0 <= o - pad + t * dil < size)


# file -> (extra options, {module: (forward matrix FLOPs, backward factor)})
CASES = {
    # stem reads the image (1x); the block's two convs and the head see trained activations (2x);
    # 3x3 padding 1 over 8x8: 7 + 8 + 7 = 22 pairs per dim; eval-mode batch norm (running statistics)
    "resnet_block": ([], {
        "stem": (2 * 2 * 8 * 3 * _taps(8, 3, 1) ** 2, 1),
        "conv1": (2 * 2 * 8 * 8 * 22**2, 2), "conv2": (2 * 2 * 8 * 8 * 22**2, 2),
        "head": (2 * 2 * 8 * 10, 2)}),
    "embedding_pool": ([], {"head": (2 * 4 * 16 * 5, 2)}),
    # the layer norm's affine output needs a gradient, so fc1's input gradient is computed too
    "layernorm_mlp": ([], {"fc1": (2 * 8 * 24 * 48, 2), "fc2": (2 * 8 * 48 * 12, 2)}),
    # 12x12 then (after a 2x2 max pool) 6x6: 11 + 12 + 11 = 34 and 5 + 6 + 5 = 16 pairs per dim
    "bn_cnn": (["--mode", "train"], {  # batch statistics
        "conv1": (2 * 2 * 8 * 3 * 34**2, 1), "conv2": (2 * 2 * 16 * 8 * 16**2, 2),
        "head": (2 * 2 * 16 * 6, 2)}),
    "sdpa_attention": ([], {"qkv": (2 * 16 * 32 * 96, 1), "proj": (2 * 16 * 32 * 32, 2)}),
    "encoder_layer": ([], {"layer.linear1": (2 * 16 * 32 * 64, 2), "layer.linear2": (2 * 16 * 64 * 32, 2),
                           "head": (2 * 16 * 32 * 40, 2)}),
    "gru": ([], {"head": (2 * 4 * 24 * 6, 2)}),
    # 1x1 expansion reads the image (1x); the depthwise conv has one input channel per group
    "depthwise_block": ([], {
        "expand": (2 * 2 * 16 * 4 * 8 * 8, 1), "depthwise": (2 * 2 * 16 * 1 * _taps(8, 3, 1) ** 2, 2),
        "project": (2 * 2 * 4 * 16 * 8 * 8, 2), "head": (2 * 2 * 4 * 5, 2)}),
    "gelu_mlp": ([], {"fc1": (2 * 8 * 16 * 32, 1), "fc2": (2 * 8 * 32 * 32, 2), "fc3": (2 * 8 * 32 * 8, 2)}),
    # Conv1d over 20 steps: padding 1 -> 19 + 20 + 19 pairs; dilation 2, padding 2 -> 18 + 20 + 18
    "tcn": ([], {"conv1": (2 * 4 * 12 * 6 * 58, 1), "conv2": (2 * 4 * 12 * 12 * _taps(20, 3, 2, 2), 2),
                 "head": (2 * 4 * 12 * 3, 2)}),
    "mlp": ([], {"fc1": (2 * 8 * 32 * 64, 1), "fc2": (2 * 8 * 64 * 16, 2)}),
    "bn_mlp": ([], {"fc1": (2 * 16 * 32 * 64, 1), "fc2": (2 * 16 * 64 * 8, 2)}),
    "linear_mse": ([], {"proj": (2 * 16 * 64 * 32, 1)}),
    "cnn": ([], {"conv1": (2 * 4 * 8 * 3 * 46**2, 1), "conv2": (2 * 4 * 16 * 8 * 11**2, 2),
                 "head": (2 * 4 * 16 * 10, 2)}),
    "lstm": ([], {"head": (2 * 4 * 32 * 8, 2)}),
    "transformer_block": ([], {"qkv": (2 * 32 * 32 * 96, 2), "proj": (2 * 32 * 32 * 32, 2),
                               "head": (2 * 32 * 32 * 64, 2)}),
}


def test_every_bundled_training_example_is_covered():
    assert sorted(p.stem for p in TRAIN.glob("*.py")) == sorted(CASES)
    assert len(CASES) >= 15


@pytest.mark.parametrize("name", sorted(CASES))
def test_training_step_validates_and_backward_products_are_2x_or_1x(capsys, name):
    extra, layers = CASES[name]
    assert main([str(TRAIN / f"{name}.py"), "--translate", "--roofline=unfused", "--step", "train",
                 "--algorithms", "classical", *extra, "--hw", "H100_SXM", "--format=json", "--quiet"]) == 0
    r = json.loads(capsys.readouterr().out)
    v = r["validation"]
    assert v["validated"] and v["step"] == "train", v
    c: Counter = Counter()
    for k in r["kernels_unfused"]:
        c[(k["module"], k["phase"])] += k["flops_matrix"]
    for module, (fwd, factor) in layers.items():
        assert (c[module, "forward"], c[module, "backward"]) == (fwd, factor * fwd), module
    # the classical model's needed matrix FLOPs against FlopCounterMode's count of the real step
    counter = _flop_counter_train()
    mode = counter.MODES.get(f"{name}.py", "eval")
    assert ("--mode" in extra) == (mode == "train")
    counted = counter.counted(str(TRAIN / f"{name}.py"), mode, decomposed=True)
    assert r["totals"]["flops_matrix"] - counted == counter.EXPECTED.get(f"{name}.py", (0, ""))[0]
