"""`solar-bench --step train` (docs/training.md): the options reach translation, and the timed call
is one real training step (forward, loss, backward, the optimizer's update), not only the forward."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
import torch

from solar_compiler.bench.cli import parse_args
from solar_compiler.bench.jobs import BoundsConfig, solar_opt_argv
from solar_compiler.bench.timing import TimingConfig
from solar_compiler.bench.timing_train import train_step_fn

TRAIN = Path(__file__).resolve().parent.parent / "examples/train"


def _load(name: str):
    spec = importlib.util.spec_from_file_location(f"bench_train_{name}", TRAIN / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_step_and_optimizer_reach_the_solar_opt_command_line():
    argv = solar_opt_argv("m.py", BoundsConfig(step="train", optimizer="adamw"), "o.json")
    assert "--step=train" in argv and "--optimizer=adamw" in argv
    plain = solar_opt_argv("m.py", BoundsConfig(), "o.json")
    assert not any(a.startswith(("--step", "--optimizer")) for a in plain)
    # stores of forward runs keep their fingerprints; a training step's differ from them
    assert "step" not in BoundsConfig().fingerprint_fields()
    assert "step" not in TimingConfig().fingerprint_fields()
    assert BoundsConfig(step="train").fingerprint_fields() != BoundsConfig().fingerprint_fields()
    a = parse_args(["examples/train", "--step", "train", "--optimizer", "sgd"])
    assert (a.step, a.optimizer) == ("train", "sgd")
    with pytest.raises(SystemExit):
        parse_args(["examples/train", "--optimizer", "sgd"])  # an update needs a training step


def test_timed_call_is_the_whole_step_with_sgd():
    # examples/train/mlp.py with SGD (lr 1e-3): one timed call leaves each parameter at p - lr * g,
    # g being autograd's gradient of the file's get_loss on the same inputs
    mod = _load("mlp")
    torch.manual_seed(0)
    model, inputs = mod.Model(), mod.get_inputs()
    before = {k: p.detach().clone() for k, p in model.named_parameters()}
    loss = mod.get_loss(model(*inputs), *inputs)
    grads = dict(zip(before, torch.autograd.grad(loss, list(model.parameters())), strict=True))
    step, kind = train_step_fn(torch, str(TRAIN / "mlp.py"), mod, model, "sgd")
    assert kind == "sgd"
    with torch.no_grad():  # as measure_job calls it: the step enables grad itself
        step(*inputs)
    for k, p in model.named_parameters():
        torch.testing.assert_close(p.grad, grads[k])
        torch.testing.assert_close(p.detach(), before[k] - 1e-3 * grads[k])


def test_self_training_forward_uses_its_own_optimizer():
    # examples/train/linear_mse.py calls loss.backward() and self.opt.step() (AdamW) in forward: the
    # timed step hands the loss over (nothing after backward() in forward runs: the model's own
    # optimizer object never steps) and runs an AdamW with the model's own hyperparameters
    mod = _load("linear_mse")
    torch.manual_seed(0)
    model, inputs = mod.Model(), mod.get_inputs()
    step, kind = train_step_fn(torch, str(TRAIN / "linear_mse.py"), mod, model, None)
    assert kind == "adamw"
    before = model.proj.weight.detach().clone()
    step(*inputs)
    assert not torch.equal(before, model.proj.weight.detach())
    assert len(model.opt.state) == 0
